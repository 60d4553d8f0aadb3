"""One gate: no module but memories/gate.py filters what is read by a visibility rule.

Read as the Python of every application module (not migrations, not tests): a query
condition (a keyword of filter / exclude / get / Q) on consent (`consent_status`, a
PersonConsent's `status`), on sensitivity, on expiry, on circle shares or on the
maintained counts is a visibility decision, and those belong in the gate. The few
other places that name them are listed below, each with why it decides nothing about
who sees a memory. A new one fails this test until it moves into the gate or earns an
entry here with its reason.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

GATE = "memories/gate.py"

# A query keyword that decides visibility: consent, sensitivity, expiry, shares, the counts.
VISIBILITY_KEYWORD = re.compile(
    r"(^|__)(consent_status|sensitivity|blocked_count|agents_open|agents_may_read)(__|$)"
    r"|(^|__)expires_at__(gt|gte|lt|lte)$"
    r"|^(memory__)?shares__circle"
)
QUERY_CALLS = {"filter", "exclude", "get", "Q", "get_object_or_404"}

# (module, keyword pattern) -> why it is not a visibility decision.
ALLOWED: dict[tuple[str, str], str] = {
    ("memories/search/circles.py", r"shares__"): "the engine narrows circle candidates by the shares' "
    "maintained counts (hints that may only narrow); the gate's SQL decides every row it returns",
    ("memories/models.py", r"blocked_count|agents_open"): "partial indexes' conditions, not reads",
    ("circles/models.py", r"blocked_count"): "partial indexes' conditions, not reads",
    ("people/models.py", r"consent_status"): "a check constraint on the column, not a read",
    ("agents/selectors.py", r"consent_status"): "the people the owner's own question named who have "
    "not consented: a notice for the owner, never shown to an agent",
    ("inbox/selectors.py", r"consent_status"): "consent requests still waiting for an answer, in the "
    "owner's inbox: people, not memories",
    ("memories/doctor.py", r"sensitivity|expires_at"): "maintenance: finds rows to repair and shows "
    "nothing to anyone",
    ("memories/lifecycle.py", r"expires_at"): "marks the owner's own memories expired (the owner sees "
    "every one; agents' expiry is in the gate)",
    ("memories/selectors.py", r"sensitivity"): "which of the owner's own memories one may replace "
    "(supersession needs the same sensitivity): the owner's page",
    ("memories/supersession.py", r"sensitivity"): "which of the owner's own memories may be replaced "
    "(the same sensitivity): a write rule",
    ("linked/selectors.py", r"expires_at"): "a link invitation's own expiry, not a memory's",
    ("people/selectors.py", r"consent_status"): "the owner's People page narrowed by status: the "
    "owner sees everyone",
}

# Whole folders that only measure: the benchmarks compare the gate with their own truths.
ALLOWED_FOLDERS = {"benchmarks/": "benchmarks count what the gate lets through to check it"}


def _application_modules() -> list[Path]:
    skipped = (".venv/", "tests/", "node_modules/", "static/", "staticfiles/", ".data/")
    return [
        path
        for path in sorted(ROOT.rglob("*.py"))
        if not path.relative_to(ROOT).as_posix().startswith(skipped) and "/migrations/" not in path.as_posix()
    ]


def _call_name(node: ast.Call) -> str:
    if isinstance(node.func, ast.Attribute):
        return node.func.attr
    return getattr(node.func, "id", "")


def visibility_conditions(source: str) -> list[tuple[int, str]]:
    """(line, keyword) of every query condition in `source` that decides visibility."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call) or _call_name(node) not in QUERY_CALLS:
            continue
        for keyword in node.keywords:
            if keyword.arg and VISIBILITY_KEYWORD.search(keyword.arg):
                found.append((node.lineno, keyword.arg))
        # PersonConsent.objects.filter(..., status=...): consent per audience.
        text = ast.unparse(node.func)
        if "PersonConsent" in text and any(keyword.arg == "status" for keyword in node.keywords):
            found.append((node.lineno, "PersonConsent.status"))
    return found


def _allowed(module: str, keyword: str) -> bool:
    if any(module.startswith(folder) for folder in ALLOWED_FOLDERS):
        return True
    return any(module == path and re.search(pattern, keyword) for path, pattern in ALLOWED)


def test_no_module_but_the_gate_filters_reads_by_a_visibility_rule():
    outside = []
    for path in _application_modules():
        module = path.relative_to(ROOT).as_posix()
        if module == GATE:
            continue
        for line, keyword in visibility_conditions(path.read_text()):
            if not _allowed(module, keyword):
                outside.append(f"{module}:{line} {keyword}")
    assert outside == [], "visibility decided outside memories/gate.py:\n" + "\n".join(outside)


def test_the_gate_itself_is_seen_deciding():
    """The check finds the gate's own conditions: it cannot pass by finding nothing anywhere."""
    found = {keyword for _, keyword in visibility_conditions((ROOT / GATE).read_text())}
    assert {"consent_status", "sensitivity", "expires_at__gt", "PersonConsent.status"} <= found


def test_the_check_catches_a_new_decision():
    source = (
        "Memory.objects.filter(owner=o).exclude(sensitivity='sensitive')\n"
        "Q(expires_at__lte=now)\n"
        "PersonConsent.objects.filter(person=p, status='granted')\n"
        "Memory.objects.filter(shares__circle=c)\n"
    )
    assert [keyword for _, keyword in visibility_conditions(source)] == [
        "sensitivity",
        "expires_at__lte",
        "PersonConsent.status",
        "shares__circle",
    ]


def test_every_allowed_entry_is_still_needed():
    """An entry whose module no longer decides anything of the kind is dropped, not kept as a hole."""
    used = set()
    for path in _application_modules():
        module = path.relative_to(ROOT).as_posix()
        for _, keyword in visibility_conditions(path.read_text()):
            for allowed_module, pattern in ALLOWED:
                if module == allowed_module and re.search(pattern, keyword):
                    used.add((allowed_module, pattern))
    assert set(ALLOWED) - used == set()
