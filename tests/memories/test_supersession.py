from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

from memories import retrieval, tasks
from memories.embeddings import MODEL_NAME, embed_texts
from memories.models import (
    EdgeKind,
    Memory,
    MemoryEdge,
    MemoryKind,
    ProposalStatus,
    Sensitivity,
    SupersessionProposal,
)
from memories.selectors import memory_list
from memories.services import ParticipantSpec, memory_create, memory_update
from memories.supersession import (
    memory_supersede,
    memory_supersession_chain,
    memory_unsupersede,
    supersession_candidates,
    supersession_memories_to_check,
    supersession_proposal_confirm,
    supersession_proposal_dismiss,
    supersession_propose,
)
from people.models import ConsentStatus
from people.services import person_create, person_set_consent
from tests.memories.test_tasks import private_broker, queued_messages  # noqa: F401 (fixture used by name)

JANUARY = datetime(2026, 1, 10, 12, 0, tzinfo=UTC)
MARCH = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
MAY = datetime(2026, 5, 10, 12, 0, tzinfo=UTC)


def _granted(owner, name):
    person = person_create(owner=owner, display_name=name)
    person_set_consent(person=person, status=ConsentStatus.GRANTED, actor=owner)
    return person


def _note(owner, body, *, when, about=(), kind=MemoryKind.KNOWLEDGE, sensitivity=Sensitivity.PERSONAL):
    return memory_create(
        owner=owner,
        body=body,
        occurred_at=when,
        kind=kind,
        sensitivity=sensitivity,
        participants=[ParticipantSpec(person) for person in about],
    )


def _embed(*memories: Memory) -> None:
    """Store real all-MiniLM-L6-v2 vectors, as the embedding worker would."""
    vectors = embed_texts([memory.body for memory in memories])
    for memory, vector in zip(memories, vectors, strict=True):
        Memory.objects.filter(pk=memory.pk).update(
            embedding=vector, embedding_model=MODEL_NAME, embedded_at=timezone.now()
        )


def _agent_ids(owner) -> set:
    return set(retrieval.agent_visible_memories(owner).values_list("pk", flat=True))


# --- The owner marks a replacement -----------------------------------------------------------


def test_newer_memory_replaces_older_with_a_supersedes_edge(alice):
    anna = _granted(alice, "Anna")
    paris = _note(alice, "Anna lives in Paris", when=JANUARY, about=[anna])
    berlin = _note(alice, "Anna moved to Berlin", when=MARCH, about=[anna])

    memory_supersede(owner=alice, older=paris, newer=berlin)

    paris.refresh_from_db()
    assert paris.superseded_by_id == berlin.pk
    edge = MemoryEdge.objects.get(kind=EdgeKind.SUPERSEDES)
    assert (edge.source_id, edge.target_id, edge.owner_id) == (berlin.pk, paris.pk, alice.pk)


def test_owner_sees_both_and_agents_see_only_the_newest(alice):
    anna = _granted(alice, "Anna")
    paris = _note(alice, "Anna lives in Paris", when=JANUARY, about=[anna])
    berlin = _note(alice, "Anna moved to Berlin", when=MARCH, about=[anna])
    assert _agent_ids(alice) >= {paris.pk, berlin.pk}

    memory_supersede(owner=alice, older=paris, newer=berlin)

    assert {paris, berlin} <= set(memory_list(owner=alice))
    visible = _agent_ids(alice)
    assert berlin.pk in visible
    assert paris.pk not in visible


def test_agent_search_finds_only_the_newest_while_the_owner_finds_both(alice):
    anna = _granted(alice, "Anna")
    paris = _note(alice, "Anna lives in Paris", when=JANUARY, about=[anna])
    berlin = _note(alice, "Anna moved from Paris to Berlin", when=MARCH, about=[anna])
    memory_supersede(owner=alice, older=paris, newer=berlin)

    agent_hits = retrieval.memory_search(alice, "Paris", respect_consent=True)
    owner_hits = retrieval.memory_search(alice, "Paris", respect_consent=False)

    assert [hit.memory for hit in agent_hits] == [berlin]
    assert {hit.memory for hit in owner_hits} == {paris, berlin}


def test_owner_sees_the_whole_chain_from_any_link(alice):
    anna = _granted(alice, "Anna")
    paris = _note(alice, "Anna lives in Paris", when=JANUARY, about=[anna])
    berlin = _note(alice, "Anna moved to Berlin", when=MARCH, about=[anna])
    rome = _note(alice, "Anna moved on to Rome", when=MAY, about=[anna])
    unrelated = _note(alice, "Anna plays the cello", when=MARCH, about=[anna])
    memory_supersede(owner=alice, older=paris, newer=berlin)
    memory_supersede(owner=alice, older=berlin, newer=rome)

    for memory in (paris, berlin, rome):
        assert memory_supersession_chain(memory) == [paris, berlin, rome]
    assert memory_supersession_chain(unrelated) == [unrelated]
    assert _agent_ids(alice) & {paris.pk, berlin.pk, rome.pk} == {rome.pk}


def test_superseding_twice_is_a_no_op(alice):
    old = _note(alice, "Bob works at the bakery", when=JANUARY)
    new = _note(alice, "Bob works at the hospital now", when=MARCH)
    memory_supersede(owner=alice, older=old, newer=new)
    memory_supersede(owner=alice, older=old, newer=new)
    assert MemoryEdge.objects.filter(kind=EdgeKind.SUPERSEDES).count() == 1


def test_undoing_a_replacement_makes_the_older_visible_again(alice):
    old = _note(alice, "Bob works at the bakery", when=JANUARY)
    new = _note(alice, "Bob works at the hospital now", when=MARCH)
    memory_supersede(owner=alice, older=old, newer=new)
    old.refresh_from_db()

    memory_unsupersede(owner=alice, memory=old)

    old.refresh_from_db()
    assert old.superseded_by_id is None
    assert not MemoryEdge.objects.filter(kind=EdgeKind.SUPERSEDES).exists()
    assert old.pk in _agent_ids(alice)


def test_a_memory_cannot_replace_itself(alice):
    memory = _note(alice, "Bob works at the bakery", when=JANUARY)
    with pytest.raises(ValidationError, match="itself"):
        memory_supersede(owner=alice, older=memory, newer=memory)


def test_replacement_across_owners_is_refused_without_revealing_the_memory(alice, mallory):
    mine = _note(alice, "Bob works at the bakery", when=JANUARY)
    theirs = _note(mallory, "Bob works at the hospital", when=MARCH)
    for older, newer in ((mine, theirs), (theirs, mine)):
        with pytest.raises(ValidationError, match="Unknown memory"):
            memory_supersede(owner=alice, older=older, newer=newer)
    with pytest.raises(ValidationError, match="Unknown memory"):
        memory_supersede(owner=mallory, older=mine, newer=_note(alice, "x", when=MARCH))
    assert not Memory.objects.filter(superseded_by__isnull=False).exists()
    assert not MemoryEdge.objects.exists()


def test_replacement_needs_the_same_sensitivity(alice):
    old = _note(alice, "Bob is training for a marathon", when=JANUARY, sensitivity=Sensitivity.PERSONAL)
    new = _note(alice, "Bob stopped running after surgery", when=MARCH, sensitivity=Sensitivity.SENSITIVE)
    with pytest.raises(ValidationError, match="same sensitivity"):
        memory_supersede(owner=alice, older=old, newer=new)
    old.refresh_from_db()
    assert old.superseded_by_id is None
    assert not MemoryEdge.objects.exists()


def test_replacement_loops_are_refused(alice):
    first = _note(alice, "one", when=JANUARY)
    second = _note(alice, "two", when=MARCH)
    third = _note(alice, "three", when=MAY)
    memory_supersede(owner=alice, older=first, newer=second)
    memory_supersede(owner=alice, older=second, newer=third)
    with pytest.raises(ValidationError, match="loop"):
        memory_supersede(owner=alice, older=third, newer=first)
    third.refresh_from_db()
    assert third.superseded_by_id is None


def test_an_already_replaced_memory_is_not_silently_relinked(alice):
    old = _note(alice, "one", when=JANUARY)
    newer = _note(alice, "two", when=MARCH)
    other = _note(alice, "three", when=MAY)
    memory_supersede(owner=alice, older=old, newer=newer)
    with pytest.raises(ValidationError, match="already replaced"):
        memory_supersede(owner=alice, older=old, newer=other)
    old.refresh_from_db()
    assert old.superseded_by_id == newer.pk


# --- Worker proposals, owner decides ---------------------------------------------------------


@pytest.fixture
def moved(alice):
    """Anna's move, plus near-misses that must not be proposed."""
    anna = _granted(alice, "Anna")
    bob = _granted(alice, "Bob")
    memories = {
        "paris": _note(alice, "Anna lives in Paris", when=JANUARY, about=[anna]),
        "bob_paris": _note(alice, "Bob lives in Paris", when=JANUARY, about=[bob]),
        "paris_sensitive": _note(
            alice, "Anna lives in Paris", when=JANUARY, about=[anna], sensitivity=Sensitivity.SENSITIVE
        ),
        "paris_event": _note(alice, "Anna lives in Paris", when=JANUARY, about=[anna], kind=MemoryKind.EVENT),
        "cello": _note(alice, "Anna plays the cello in an orchestra", when=JANUARY, about=[anna]),
        "berlin": _note(alice, "Anna moved to Berlin", when=MARCH, about=[anna]),
        "later": _note(alice, "Anna lives in Paris again", when=MAY, about=[anna]),
    }
    _embed(*memories.values())
    return memories


def test_worker_proposes_only_similar_older_memories_about_the_same_people(alice, moved):
    proposals = supersession_propose(memory_id=moved["berlin"].pk)
    assert [(p.older_id, p.newer_id) for p in proposals] == [(moved["paris"].pk, moved["berlin"].pk)]
    assert proposals[0].status == ProposalStatus.PENDING
    assert proposals[0].similarity >= 0.6
    # Nothing is linked until the owner confirms.
    moved["paris"].refresh_from_db()
    assert moved["paris"].superseded_by_id is None


def test_proposing_twice_keeps_one_proposal(alice, moved):
    supersession_propose(memory_id=moved["berlin"].pk)
    supersession_propose(memory_id=moved["berlin"].pk)
    assert SupersessionProposal.objects.filter(newer=moved["berlin"]).count() == 1


def test_owner_sees_pending_suggestions_on_both_memories(alice, moved):
    supersession_propose(memory_id=moved["berlin"].pk)
    [on_newer] = supersession_candidates(moved["berlin"])
    [on_older] = supersession_candidates(moved["paris"])
    assert on_newer.this_is_newer and on_newer.other == moved["paris"]
    assert not on_older.this_is_newer and on_older.other == moved["berlin"]
    assert supersession_candidates(moved["cello"]) == []


def test_confirming_a_suggestion_links_the_pair_and_hides_the_old_one_from_agents(alice, moved):
    [proposal] = supersession_propose(memory_id=moved["berlin"].pk)
    supersession_proposal_confirm(owner=alice, proposal=proposal)

    proposal.refresh_from_db()
    assert proposal.status == ProposalStatus.CONFIRMED
    assert proposal.decided_at is not None
    visible = _agent_ids(alice)
    assert moved["berlin"].pk in visible
    assert moved["paris"].pk not in visible
    assert supersession_candidates(moved["berlin"]) == []


def test_dismissed_suggestion_is_never_proposed_again(alice, moved):
    [proposal] = supersession_propose(memory_id=moved["berlin"].pk)
    supersession_proposal_dismiss(owner=alice, proposal=proposal)

    assert supersession_propose(memory_id=moved["berlin"].pk) == []
    proposal.refresh_from_db()
    assert proposal.status == ProposalStatus.DISMISSED
    assert supersession_candidates(moved["berlin"]) == []
    moved["paris"].refresh_from_db()
    assert moved["paris"].superseded_by_id is None


def test_only_the_owner_decides_on_a_suggestion(alice, mallory, moved):
    [proposal] = supersession_propose(memory_id=moved["berlin"].pk)
    for decide in (supersession_proposal_confirm, supersession_proposal_dismiss):
        with pytest.raises(ValidationError):
            decide(owner=mallory, proposal=proposal)
    proposal.refresh_from_db()
    assert proposal.status == ProposalStatus.PENDING


def test_confirming_a_suggestion_that_no_longer_fits_is_refused(alice, moved):
    [proposal] = supersession_propose(memory_id=moved["berlin"].pk)
    memory_update(
        memory=moved["berlin"],
        body=moved["berlin"].body,
        occurred_at=MARCH,
        kind=MemoryKind.KNOWLEDGE,
        sensitivity=Sensitivity.SENSITIVE,
    )
    assert supersession_candidates(moved["paris"]) == []
    with pytest.raises(ValidationError, match="same sensitivity"):
        supersession_proposal_confirm(owner=alice, proposal=proposal)
    moved["paris"].refresh_from_db()
    assert moved["paris"].superseded_by_id is None


def test_memory_without_embedding_waits_for_one(alice):
    memory = _note(alice, "Anna moved to Berlin", when=MARCH)
    assert supersession_propose(memory_id=memory.pk) == []
    memory.refresh_from_db()
    assert memory.supersession_checked_at is None


def test_sweep_lists_memories_embedded_since_their_last_check(alice, moved):
    waiting = set(supersession_memories_to_check())
    assert {memory.pk for memory in moved.values()} <= waiting
    supersession_propose(memory_id=moved["berlin"].pk)
    assert moved["berlin"].pk not in set(supersession_memories_to_check())
    # A re-embedding (text edited) makes it due again.
    Memory.objects.filter(pk=moved["berlin"].pk).update(embedded_at=timezone.now() + timedelta(seconds=1))
    assert moved["berlin"].pk in set(supersession_memories_to_check())


def test_worker_task_proposes_and_the_sweep_queues_unchecked_memories(alice, moved, request, settings):
    broker = request.getfixturevalue("private_broker")
    assert (
        settings.CELERY_BEAT_SCHEDULE["memories-supersession-sweep"]["task"] == tasks.supersession_sweep.name
    )

    assert tasks.propose_supersessions([str(moved["berlin"].pk)]) == 1
    assert SupersessionProposal.objects.filter(newer=moved["berlin"], older=moved["paris"]).exists()

    assert tasks.supersession_sweep() == len(moved) - 1
    [(name, [memory_ids])] = queued_messages(broker)
    assert name == tasks.propose_supersessions.name
    assert str(moved["berlin"].pk) not in memory_ids
    assert set(memory_ids) == {str(memory.pk) for key, memory in moved.items() if key != "berlin"}
