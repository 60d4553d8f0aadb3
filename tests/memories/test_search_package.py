"""The search engine's layout: memories/search/ beside the gate, memories/retrieval.py its public face.

Tests and benchmarks change the engine's constants and replace its functions in the module
that defines them (each module reads the others' names through the module, at call time);
the facade only re-exports, so a patch there would change nothing and is refused.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from django.core.exceptions import ValidationError

from memories import retrieval
from memories.search import settings as search_settings

PACKAGE = Path(__file__).resolve().parents[2] / "memories" / "search"
# Each module imports only modules above it.
ORDER = [
    "settings",
    "hints",
    "statements",
    "knn",
    "knn_open",
    "vector",
    "fulltext",
    "fusion",
    "hybrid",
    "circles",
    "related",
]


def test_every_module_of_the_engine_is_at_most_600_lines():
    sizes = {path.name: len(path.read_text().splitlines()) for path in PACKAGE.glob("*.py")}
    assert {f"{name}.py" for name in ORDER} <= set(sizes)
    assert {name: size for name, size in sizes.items() if size > 600} == {}


def test_each_module_imports_only_the_modules_above_it_and_never_the_facade():
    for position, name in enumerate(ORDER):
        tree = ast.parse((PACKAGE / f"{name}.py").read_text())
        imported = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "memories.search":
                imported |= {alias.name for alias in node.names}
            if isinstance(node, ast.ImportFrom) and node.module == "memories":
                assert "retrieval" not in {alias.name for alias in node.names}, name
            assert not (isinstance(node, ast.ImportFrom) and node.module == "memories.retrieval"), name
        assert imported <= set(ORDER[:position]), (name, imported - set(ORDER[:position]))


@pytest.mark.parametrize(
    ("name", "defined_in"),
    [
        ("EXACT_CANDIDATES_MAX", "memories.search.settings"),
        ("MAX_LIMIT", "memories.search.settings"),
        ("_text_matches", "memories.search.fulltext"),
        ("memory_search", "memories.search.hybrid"),
        ("_compiled_scope", "memories.gate"),
    ],
)
def test_a_patch_of_the_facade_is_refused_and_names_the_module_to_patch(monkeypatch, name, defined_in):
    with pytest.raises(AttributeError, match=defined_in):
        setattr(retrieval, name, None)
    with pytest.raises(AttributeError):
        monkeypatch.setattr(retrieval, name, None, raising=False)


def test_a_constant_patched_where_it_is_defined_reaches_the_search(monkeypatch):
    # No database: the limit is checked before anything is read.
    monkeypatch.setattr(search_settings, "MAX_LIMIT", 5)
    with pytest.raises(ValidationError, match="from 1 to 5"):
        retrieval.memory_search(1, "lantern", limit=6)
    with pytest.raises(ValidationError, match="from 1 to 5"):
        retrieval.circle_memory_search("00000000-0000-0000-0000-000000000000", [1], "lantern", limit=6)
