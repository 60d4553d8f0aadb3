"""linked/ builds on people, memories, circles and agents; none of them imports it.

A page of theirs may show a panel of linked's by name (`{% load linked_tags %}`), as the
person page does, but no Python module of theirs imports `linked`: if one needed to, the
thing it needs belongs below, not in linked/.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
BELOW = ("people", "memories", "circles", "agents")


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):  # function-level imports count too
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_no_app_below_linked_imports_it():
    offenders = sorted(
        f"{path.relative_to(ROOT)}: {name}"
        for app in BELOW
        for path in (ROOT / app).rglob("*.py")
        for name in _imports(path)
        if name == "linked" or name.startswith("linked.")
    )
    assert offenders == []


def test_linked_is_one_room_with_its_templates_and_urls():
    room = ROOT / "linked"
    for name in ("services.py", "selectors.py", "views.py", "apis.py", "urls.py", "api_urls.py"):
        assert (room / name).is_file(), name
    assert (room / "templates" / "linked" / "my_consents.html").is_file()
    assert not (ROOT / "templates" / "consents").exists()
