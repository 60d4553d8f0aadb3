from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from agents.models import Agent
from memories.services import ParticipantSpec, memory_create
from people.models import ConsentStatus, Person
from people.services import person_create, person_set_consent


@dataclass
class StubLLM:
    """A local OpenAI-compatible chat-completions server (real HTTP on 127.0.0.1).

    Records every request body it receives. `reply`, `delay` and `status` set how
    it answers the next requests.
    """

    url: str = ""
    requests: list[dict] = field(default_factory=list)
    headers: list[dict] = field(default_factory=list)
    reply: str = "A stub answer [1]."
    delay: float = 0.0
    status: int = 200
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def prompts(self) -> list[str]:
        """Every message text of every request, in order."""
        with self.lock:
            return [message["content"] for body in self.requests for message in body["messages"]]


def _handler(stub: StubLLM) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            body = json.loads(self.rfile.read(length))
            with stub.lock:
                stub.requests.append(body)
                stub.headers.append({"path": self.path, "authorization": self.headers.get("Authorization")})
            if stub.delay:
                time.sleep(stub.delay)
            if stub.status != 200:
                payload = json.dumps({"error": {"message": "stub failure"}}).encode()
            else:
                payload = json.dumps(
                    {
                        "id": "chatcmpl-stub",
                        "object": "chat.completion",
                        "model": body.get("model"),
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": stub.reply},
                                "finish_reason": "stop",
                            }
                        ],
                    }
                ).encode()
            try:
                self.send_response(stub.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up waiting (the timeout test): nothing to answer

        def log_message(self, format: str, *args: object) -> None:
            pass

    return Handler


@pytest.fixture
def llm_stub(settings):
    """The stub, started on a free port, with settings pointing the chat at it."""
    stub = StubLLM()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(stub))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    stub.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    settings.LLM_BASE_URL = stub.url
    settings.LLM_API_KEY = "sk-test-key"
    settings.LLM_MODEL = "stub-model"
    settings.LLM_TIMEOUT = 5.0
    try:
        yield stub
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def offline(settings) -> None:
    settings.LLM_BASE_URL = ""


@dataclass
class Journal:
    """Alice's journal: Bob (alias Bobby) has not consented, Carol has."""

    bob: Person
    carol: Person
    caregiver: Agent
    chess: object
    tulips: object
    walk: object


@pytest.fixture
def journal(alice) -> Journal:
    bob = person_create(owner=alice, display_name="Bob", aliases=["Bobby"])
    carol = person_create(owner=alice, display_name="Carol")
    person_set_consent(person=carol, status=ConsentStatus.GRANTED, actor=alice)
    chess = memory_create(
        owner=alice,
        title="Chess lesson",
        body="Bob taught me chess in the park; he hides his queen early.",
        participants=[ParticipantSpec(person=bob)],
    )
    tulips = memory_create(
        owner=alice,
        title="Tulips",
        body="Carol planted red tulips in the garden by the park.",
        participants=[ParticipantSpec(person=carol, role="present")],
    )
    walk = memory_create(owner=alice, body="I walked alone through the park at dawn.")
    return Journal(
        bob=bob,
        carol=carol,
        caregiver=Agent.objects.get(owner=alice, name="Caregiver"),
        chess=chess,
        tulips=tulips,
        walk=walk,
    )
