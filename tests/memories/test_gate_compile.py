"""The gate's EXISTS is resolved once and compiled once (memories.gate._Exists): its SQL must be
exactly what Django compiles with its own Exists, however the statement is used.

Every variant of the gate (the owner's agents, cleared or not, a page or the whole journal;
a circle for one, two and three viewers, as a person or through an agent, read alone or by
several, cleared or not, and the Share panel's assumed share) is compiled in the ways the
product and Django use it — whole, as ids, narrowed to one memory, ordered and sliced, as a
subquery (twice nested: the aliases are relabelled), inside another EXISTS, OR-ed and AND-ed
with another statement — twice each (the second from the kept SQL), and compared with the
same statement built with Django's Exists.
"""

from __future__ import annotations

import uuid

import pytest
from django.db.models import Exists, OuterRef

from memories import gate
from memories.models import Memory

pytestmark = pytest.mark.django_db

CIRCLE = uuid.UUID("00000000-0000-4000-8000-0000000000aa")


class _DjangosPerRow(Exists):
    template = gate._ExistsPerRow.template


def _variants() -> list:
    scopes = []
    for owner in (5, 7):
        for cleared in (False, True):
            for whole in (False, True):
                scopes.append(
                    gate.agent_visible_memories(owner, may_read_sensitive=cleared, whole_journal=whole)
                )
    for viewers in ([3], [3, 4], [4, 9, 11]):
        for for_agent in (False, True):
            for several in (False, True):
                for cleared in (False, True):
                    scopes.append(
                        gate.circle_visible_memories(
                            CIRCLE,
                            viewers,
                            for_agent=for_agent,
                            read_by_several=several,
                            may_read_sensitive=cleared,
                        )
                    )
    scopes.append(gate.circle_visible_memories(CIRCLE, [3], assume_shared=True))
    return scopes


def _uses(scope) -> list:
    one = uuid.UUID(int=1)
    return [
        scope,
        scope.values_list("pk", flat=True),
        scope.filter(pk=one),
        scope.order_by("-occurred_at")[:25],
        Memory.objects.filter(pk__in=scope.values("pk")),
        Memory.objects.filter(pk__in=Memory.objects.filter(pk__in=scope.values("pk")).values("pk")),
        Memory.objects.filter(Exists(scope.filter(pk=OuterRef("superseded_by")))),
        scope | Memory.objects.filter(owner_id=3),
        scope & gate.agent_visible_memories(9),
    ]


def _compiled() -> list[str]:
    return [str(use.query) for scope in _variants() for use in _uses(scope) for _ in range(2)]


def _forget_built() -> None:
    gate.forget_built()


def test_kept_exists_compile_exactly_as_djangos(monkeypatch):
    _forget_built()
    kept_first, kept_again = _compiled(), _compiled()
    _forget_built()
    monkeypatch.setattr(gate, "_Exists", Exists)
    monkeypatch.setattr(gate, "_ExistsPerRow", _DjangosPerRow)
    djangos = _compiled()
    _forget_built()
    assert len(djangos) == 2 * 9 * (8 + 24 + 1)
    assert kept_first == djangos
    assert kept_again == djangos


def test_a_kept_exists_is_compiled_once():
    _forget_built()
    scope = gate.circle_visible_memories(CIRCLE, [3, 4], for_agent=True)
    str(scope.query)
    kept = [
        child.lhs
        for child in scope.query.where.children
        if isinstance(getattr(child, "lhs", None), gate._Exists)
    ]
    assert kept, "the circle gate has EXISTS conditions of its own"
    assert all(exists._sql for exists in kept)
    # A relabelled copy (the statement used inside another) compiles afresh.
    assert not any(exists.copy()._sql for exists in kept)
    _forget_built()


def _exists_in(node) -> list:
    """Every _Exists object in a statement's WHERE tree, in order (not inside subqueries)."""
    found = []
    for child in getattr(node, "children", []):
        target = getattr(child, "lhs", child)
        if isinstance(target, gate._Exists):
            found.append(target)
        found += _exists_in(child)
    return found


def test_statements_share_their_kept_parts_and_their_compiled_sql():
    """A new viewer, a new circle or a new owner builds only what is theirs: the parts that
    are the same (a circle's share and consent checks, a viewer's membership, the agents'
    consent checks) are the very same resolved EXISTS in every statement, compiled once."""
    _forget_built()
    other = uuid.UUID("00000000-0000-4000-8000-0000000000bb")
    first = gate.circle_visible_memories(CIRCLE, [3], for_agent=True, read_by_several=True)
    str(first.query)
    second = gate.circle_visible_memories(CIRCLE, [3, 4], for_agent=True, read_by_several=True)
    elsewhere = gate.circle_visible_memories(other, [3], for_agent=True, read_by_several=True)
    first_ids = {id(exists) for exists in _exists_in(first.query.where)}
    second_kept = [exists for exists in _exists_in(second.query.where) if id(exists) in first_ids]
    # The circle's share and consent (2), viewer 3's membership, the agents' checks (2).
    assert len(second_kept) >= 5, "a second viewer set rebuilt the circle's and viewer 3's parts"
    assert all(exists._sql for exists in second_kept), "compiled again"
    shared_elsewhere = {id(exists) for exists in _exists_in(elsewhere.query.where)} & first_ids
    # In another circle only the agents' consent checks are the same objects.
    assert len(shared_elsewhere) == 2
    owner_a, owner_b = gate.agent_visible_memories(5), gate.agent_visible_memories(7)
    shared_by_owners = {id(e) for e in _exists_in(owner_a.query.where)} & {
        id(e) for e in _exists_in(owner_b.query.where)
    }
    assert len(shared_by_owners) == 2  # participants' and the memory's anyone-in-it
    _forget_built()
