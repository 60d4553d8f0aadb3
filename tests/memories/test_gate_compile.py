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
    gate._agent_visible_built.cache_clear()
    gate._circle_visible_built.cache_clear()


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
