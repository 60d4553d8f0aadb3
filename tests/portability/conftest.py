from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import pytest

from accounts.services import access_token_create
from agents.models import Agent
from memories.models import EdgeKind, Memory, MemoryEdge
from memories.services import ParticipantSpec, memory_create
from memories.supersession import memory_supersede
from people.models import Person
from people.services import person_create, person_set_consent
from portability.models import ImportJob
from portability.services import import_run, import_start
from tests.browser.conftest import artifacts_dir, browser_page  # noqa: F401 — fixtures for test_browser


@dataclass
class Journal:
    bob: Person
    carol: Person
    dora: Person
    picnic: Memory
    lives_paris: Memory
    lives_berlin: Memory
    solo: Memory
    agent: Agent


def seed_journal(owner) -> Journal:
    """A small but complete journal: every kind of row the export must carry."""
    bob = person_create(owner=owner, display_name="Bob", aliases=["Bobby"], notes="Brother; loves chess.")
    carol = person_create(owner=owner, display_name="Carol")
    dora = person_create(owner=owner, display_name="Dora", kind="pet")
    person_set_consent(person=bob, status="granted", actor=owner, reason="Asked at dinner")
    person_set_consent(person=dora, status="granted", actor=owner)
    person_set_consent(person=dora, status="revoked", actor=owner, surface="api", reason="Changed her mind")
    picnic = memory_create(
        owner=owner,
        title="Picnic by the lake",
        body="Bob brought the chess set; Carol told us about her new job.",
        occurred_at=datetime(2024, 5, 1, 12, 30, tzinfo=UTC),
        kind="event",
        sensitivity="personal",
        source_person=carol,
        participants=[ParticipantSpec(bob, "present"), ParticipantSpec(carol, "source")],
    )
    lives_paris = memory_create(
        owner=owner,
        body="Carol lives in Paris.",
        occurred_at=datetime(2023, 1, 1, 9, 0, tzinfo=UTC),
        kind="knowledge",
        sensitivity="public",
        participants=[ParticipantSpec(carol)],
    )
    lives_berlin = memory_create(
        owner=owner,
        body="Carol moved to Berlin.",
        occurred_at=datetime(2024, 2, 1, 9, 0, tzinfo=UTC),
        kind="knowledge",
        sensitivity="public",
        participants=[ParticipantSpec(carol)],
    )
    memory_supersede(owner=owner, older=lives_paris, newer=lives_berlin)
    solo = memory_create(
        owner=owner,
        title="Thoughts",
        body="I want to learn the cello — «vraiment».",
        occurred_at=datetime(2022, 8, 9, 20, 0, tzinfo=UTC),
        kind="preference",
        sensitivity="sensitive",
    )
    MemoryEdge.objects.create(
        owner=owner, source=picnic, target=lives_berlin, kind=EdgeKind.SIMILAR, weight=0.42
    )
    agent = Agent.objects.create(
        owner=owner, name="Gardener", role="custom", instructions="Help with plants."
    )
    access_token_create(owner=owner, kind="owner", name="laptop")
    access_token_create(owner=owner, kind="agent", agent=agent, name="garden bot")
    return Journal(bob, carol, dora, picnic, Memory.objects.get(pk=lives_paris.pk), lives_berlin, solo, agent)


@pytest.fixture
def journal(alice) -> Journal:
    return seed_journal(alice)


@pytest.fixture
def bea(db):
    """A fresh account to import into."""
    from accounts.services import user_signup

    return user_signup(username="bea", password="correct horse battery")


def run_import(owner, *, filename: str, content: bytes) -> ImportJob:
    """Start an import and run it to the end in this process (no broker)."""
    job = import_start(owner=owner, filename=filename, content=content)
    import_run(job_id=job.pk)
    job.refresh_from_db()
    return job
