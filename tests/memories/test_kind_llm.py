"""The LLM's second opinion on an inferred kind: a real local chat-completions stub,
the task run in-process against the real database, publishing checked on Redis."""

from __future__ import annotations

import logging
import threading
from datetime import timedelta
from http.server import ThreadingHTTPServer

import pytest
import redis
from django.db import connection
from django.utils import timezone

from config.celery import app as celery_app
from memories import tasks
from memories.kind_inference import KIND_PROMPT, parse_kind_reply
from memories.models import Memory, MemoryKind, Sensitivity
from memories.services import ParticipantSpec, memory_create, memory_update
from people.models import ConsentStatus
from people.services import person_create, person_set_consent
from tests.agents import conftest as agent_fixtures
from tests.conftest import OWN_DB, broker_url_with_db, suite_redis_db
from tests.memories.test_tasks import queued_messages

# No rule matches this text, so the rules say `knowledge` (never expires).
ERRAND = "Pick up the framed print from the shop on Fifth Street"
# The chat helper's stub server (a real HTTP server on 127.0.0.1), reused as is.
llm_stub = agent_fixtures.llm_stub


@pytest.fixture(autouse=True)
def kind_llm_on(settings):
    """MEMORY_KIND_LLM is off by default; these tests are about what happens when the owner turns it on."""
    settings.MEMORY_KIND_LLM = True


@pytest.fixture
def kind_broker(settings):
    """Publishing goes to this test's own Redis database (its worker's spare one); yields a client on it."""
    url = broker_url_with_db(settings.REDIS_URL, suite_redis_db(OWN_DB))
    client = redis.Redis.from_url(url)
    client.flushdb()
    previous = celery_app.conf.broker_url
    celery_app.conf.broker_url = url
    yield client
    celery_app.conf.broker_url = previous
    client.flushdb()


def run_task(memory: Memory) -> str | None:
    """What a worker runs for the message the save queued (same arguments)."""
    return tasks.infer_kind_with_llm(str(memory.pk), memory.updated_at.isoformat())


def test_llm_kind_replaces_the_rules_kind_and_expiry_follows(alice, llm_stub):
    llm_stub.reply = "task"
    occurred = timezone.now() - timedelta(days=2)
    memory = memory_create(owner=alice, body=ERRAND, occurred_at=occurred)
    assert (memory.kind, memory.expires_at) == (MemoryKind.KNOWLEDGE, None)

    assert run_task(memory) == MemoryKind.TASK

    memory.refresh_from_db()
    assert memory.kind == MemoryKind.TASK
    assert memory.expires_at == occurred + timedelta(days=14)
    assert memory.expired_at is None
    [request] = llm_stub.requests
    assert request["model"] == "stub-model"
    assert request["messages"] == [
        {"role": "system", "content": KIND_PROMPT},
        {"role": "user", "content": ERRAND},
    ]


def test_llm_kind_that_is_already_over_marks_the_memory_expired(alice, llm_stub):
    llm_stub.reply = "Observation."
    memory = memory_create(owner=alice, body=ERRAND, occurred_at=timezone.now() - timedelta(days=10))

    assert run_task(memory) == MemoryKind.OBSERVATION

    memory.refresh_from_db()
    assert memory.expires_at == memory.occurred_at + timedelta(days=3)
    assert memory.expired_at is not None


def test_redelivered_task_changes_nothing_more(alice, llm_stub):
    llm_stub.reply = "task"
    memory = memory_create(owner=alice, body=ERRAND)
    assert run_task(memory) == MemoryKind.TASK
    expires_at = Memory.objects.get(pk=memory.pk).expires_at

    assert run_task(memory) is None

    memory.refresh_from_db()
    assert (memory.kind, memory.expires_at) == (MemoryKind.TASK, expires_at)


@pytest.mark.parametrize(
    "answer",
    [
        {"reply": "I think this is a task."},
        {"reply": "urgent"},
        {"status": 500},
        {"delay": 1.5},
    ],
    ids=["sentence", "unknown-word", "http-500", "timeout"],
)
def test_rules_kind_is_kept_when_the_llm_gives_no_usable_answer(alice, llm_stub, settings, caplog, answer):
    settings.LLM_TIMEOUT = 0.5
    for name, value in answer.items():
        setattr(llm_stub, name, value)
    memory = memory_create(owner=alice, body="Remind me to renew the library card")
    assert memory.kind == MemoryKind.TASK  # the rules' answer

    with caplog.at_level(logging.WARNING, logger="memories.kind_inference"):
        assert run_task(memory) is None

    assert len(llm_stub.requests) == 1  # it did ask
    stored = Memory.objects.get(pk=memory.pk)
    assert (stored.kind, stored.expires_at) == (MemoryKind.TASK, memory.expires_at)
    assert "the rules' kind stays" in caplog.text
    assert "library card" not in caplog.text  # the memory's text is not logged


def test_owner_saving_after_the_inferring_save_wins_and_the_llm_is_not_asked(alice, llm_stub):
    llm_stub.reply = "task"
    memory = memory_create(owner=alice, body=ERRAND)
    queued_by_create = memory.updated_at.isoformat()
    memory_update(memory=memory, body=ERRAND, kind=MemoryKind.PREFERENCE)

    assert tasks.infer_kind_with_llm(str(memory.pk), queued_by_create) is None

    assert Memory.objects.get(pk=memory.pk).kind == MemoryKind.PREFERENCE
    assert llm_stub.requests == []


class EditingStub(agent_fixtures.StubLLM):
    """Answers "task", but first lets the owner pick a kind, while the task waits on the LLM."""

    memory_id = None

    @property
    def reply(self) -> str:
        # Runs in the stub's server thread, on its own committed connection.
        memory = Memory.objects.get(pk=self.memory_id)
        memory_update(memory=memory, body=memory.body, kind=MemoryKind.EVENT)
        connection.close()
        return "task"

    @reply.setter
    def reply(self, value: str) -> None:
        pass


@pytest.mark.django_db(transaction=True)
def test_owner_choosing_a_kind_while_the_llm_thinks_is_not_overwritten(alice, settings):
    stub = EditingStub()
    server = ThreadingHTTPServer(("127.0.0.1", 0), agent_fixtures._handler(stub))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    settings.LLM_BASE_URL = f"http://127.0.0.1:{server.server_address[1]}/v1"
    settings.LLM_TIMEOUT = 10.0
    try:
        memory = memory_create(owner=alice, body=ERRAND)
        stub.memory_id = memory.pk

        assert run_task(memory) is None
    finally:
        server.shutdown()
        server.server_close()

    assert len(stub.requests) == 1
    stored = Memory.objects.get(pk=memory.pk)
    assert stored.kind == MemoryKind.EVENT
    assert stored.expires_at == stored.occurred_at + timedelta(days=30)


def inference_messages(client: redis.Redis) -> list[list]:
    return [args for name, args in queued_messages(client) if name == "memories.infer_kind_with_llm"]


def test_inferred_kind_queues_the_llm_task_by_id_after_commit(
    alice, llm_stub, kind_broker, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        memory = memory_create(owner=alice, body=ERRAND)
    created_at_save = memory.updated_at.isoformat()
    with django_capture_on_commit_callbacks(execute=True):
        memory_update(memory=memory, body=ERRAND + " before Friday", kind=None)

    assert inference_messages(kind_broker) == [
        [str(memory.pk), created_at_save],
        [str(memory.pk), memory.updated_at.isoformat()],
    ]
    assert llm_stub.requests == []  # queued, not run during the save


def test_explicit_kind_never_queues_the_llm_task(
    alice, llm_stub, kind_broker, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        memory = memory_create(owner=alice, body=ERRAND, kind=MemoryKind.EVENT)
    with django_capture_on_commit_callbacks(execute=True):
        memory_update(memory=memory, body=ERRAND + " today", kind=MemoryKind.CONTEXT)

    names = [name for name, _ in queued_messages(kind_broker)]
    assert names == ["memories.refresh_memories", "memories.refresh_memories"]  # the save did publish
    assert inference_messages(kind_broker) == []


@pytest.mark.parametrize("switch", ["no-llm", "kind-llm-off"])
def test_without_an_llm_for_kinds_no_task_is_queued(
    alice, settings, kind_broker, django_capture_on_commit_callbacks, switch
):
    settings.LLM_BASE_URL = "" if switch == "no-llm" else "http://127.0.0.1:9/v1"
    settings.MEMORY_KIND_LLM = switch != "kind-llm-off"
    with django_capture_on_commit_callbacks(execute=True):
        memory = memory_create(owner=alice, body=ERRAND)

    assert memory.kind == MemoryKind.KNOWLEDGE
    assert [name for name, _ in queued_messages(kind_broker)] == ["memories.refresh_memories"]


@pytest.mark.parametrize(
    ("reply", "kind"),
    [
        ("task", "task"),
        ("Task.", "task"),
        ("  `event`\n", "event"),
        ('"RELATIONSHIP"', "relationship"),
        ("tasks", None),
        ("task or event", None),
        ("The kind is: task", None),
        ("", None),
    ],
)
def test_only_a_single_known_kind_word_is_accepted(reply, kind):
    assert parse_kind_reply(reply) == kind


# --- What the LLM may read: never more than the agents ------------------------------------


def test_kind_llm_is_off_unless_turned_on():
    from config import settings as project_settings

    assert project_settings.MEMORY_KIND_LLM is False


def _bob(alice, status=ConsentStatus.GRANTED):
    bob = person_create(owner=alice, display_name="Bob")
    if status != ConsentStatus.PENDING:
        person_set_consent(person=bob, status=status, actor=alice)
    return bob


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(
            lambda alice: {"body": ERRAND, "sensitivity": Sensitivity.SENSITIVE}, id="chosen-sensitive"
        ),
        pytest.param(
            lambda alice: {"body": "Pick up Bob's prescription from the shop"}, id="inferred-sensitive"
        ),
        pytest.param(
            lambda alice: {
                "body": ERRAND,
                "participants": [ParticipantSpec(_bob(alice, ConsentStatus.PENDING))],
            },
            id="pending-person",
        ),
        pytest.param(
            lambda alice: {"body": ERRAND, "source_person": _bob(alice, ConsentStatus.REVOKED)},
            id="revoked-source",
        ),
    ],
)
def test_a_memory_agents_may_not_see_or_a_sensitive_one_never_reaches_the_llm(
    alice, llm_stub, kind_broker, django_capture_on_commit_callbacks, make
):
    llm_stub.reply = "task"
    with django_capture_on_commit_callbacks(execute=True):
        memory = memory_create(owner=alice, **make(alice))

    assert inference_messages(kind_broker) == []  # nothing queued
    assert run_task(memory) is None  # and a task queued anyway (an old message) does not send it
    assert llm_stub.requests == []
    assert Memory.objects.get(pk=memory.pk).kind == memory.kind


def test_consent_revoked_after_the_save_stops_the_queued_task_from_sending_the_text(
    alice, llm_stub, kind_broker, django_capture_on_commit_callbacks
):
    llm_stub.reply = "task"
    bob = _bob(alice)
    with django_capture_on_commit_callbacks(execute=True):
        memory = memory_create(owner=alice, body=ERRAND, participants=[ParticipantSpec(bob)])
    assert inference_messages(kind_broker) == [[str(memory.pk), memory.updated_at.isoformat()]]

    person_set_consent(person=bob, status=ConsentStatus.REVOKED, actor=alice)

    assert run_task(memory) is None
    assert llm_stub.requests == []
    assert Memory.objects.get(pk=memory.pk).kind == MemoryKind.KNOWLEDGE


def test_a_memory_agents_see_with_everyone_consenting_is_sent(alice, llm_stub):
    llm_stub.reply = "task"
    memory = memory_create(owner=alice, body=ERRAND, participants=[ParticipantSpec(_bob(alice))])

    assert run_task(memory) == MemoryKind.TASK
    assert len(llm_stub.requests) == 1
