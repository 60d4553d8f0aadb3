"""The server's time for an agent's chat turn at 100,000 memories, the language model excluded.

    python manage.py bench_chat [--memories 100000] [--gated 0.1] [--turns 200] [--text words]

Reuses (or seeds) bench_retrieval's owner, gates `--gated` of its memories (whole 1%
buckets), makes one of the owner's built-in agents a token, and sends `--turns` chat
turns through the API in this process (POST /api/v1/agents/<id>/chat/, Django's test
client: the whole request — authentication, the rate limit, the message's embedding,
the gated search, the prompt, storing both messages — without a network). The model is a
local stub (an OpenAI-compatible HTTP server in this process that answers at once):
its own time per call is printed beside, so the turn's server time is what is left.
Each turn asks something new in one conversation, as a person does, ten turns to a
conversation. Prints p50/p95/p99 of a turn, the first turn apart (what a server pays
once after it starts), and the load average before and after.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import ThreadingHTTPServer

from django.core.management.base import BaseCommand, CommandError
from django.test import Client
from django.test.utils import override_settings
from django.utils import timezone

from accounts.models import AccessToken, TokenKind
from accounts.services import access_token_create
from agents.models import Agent
from agents.services import agent_create_builtins
from benchmarks.management.commands.bench_load import _StubLLM
from benchmarks.options import require_positive
from benchmarks.seeding import RETRIEVAL_OWNER, bench_user, prewarm, seed_one_owner, set_gated_fraction
from benchmarks.timing import load_average, machine, percentile

TURNS_PER_CONVERSATION = 10


class _TimedStub(_StubLLM):
    """The stub model, timing itself: from the request read to the answer written."""

    spent_ms: list[float] = []

    def do_POST(self) -> None:
        started = time.perf_counter()
        super().do_POST()
        _TimedStub.spent_ms.append((time.perf_counter() - started) * 1000)


class Command(BaseCommand):
    help = "Time an agent's chat turn through the API at bench_retrieval's owner, the model a stub."

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--memories", type=int, default=100_000, help="bench_retrieval's owner's memories"
        )
        parser.add_argument(
            "--gated", type=float, default=0.1, help="fraction of memories agents may not see"
        )
        parser.add_argument("--turns", type=int, default=200)
        parser.add_argument("--seed", type=int, default=7)
        parser.add_argument("--text", choices=["words", "vocabulary"], default="words")

    def handle(self, *args, **options) -> None:
        require_positive(options, "memories", "turns")
        if not 0 <= options["gated"] < 1:
            raise CommandError("--gated is a fraction from 0 up to (not including) 1.")
        _, text, seeded = seed_one_owner(options, username=RETRIEVAL_OWNER, out=self.stdout)
        set_gated_fraction(seeded, options["gated"])
        owner = bench_user(RETRIEVAL_OWNER)
        agent = (
            Agent.objects.filter(owner=owner).order_by("name").first()
            or agent_create_builtins(owner=owner)[0]
        )
        AccessToken.objects.filter(owner=owner, agent=agent, revoked_at=None, name="bench_chat").update(
            revoked_at=timezone.now()
        )
        _, token = access_token_create(owner=owner, kind=TokenKind.AGENT, agent=agent, name="bench_chat")
        prewarm()
        stub = ThreadingHTTPServer(("127.0.0.1", 0), _TimedStub)
        threading.Thread(target=stub.serve_forever, daemon=True).start()
        messages = [text.query() for _ in range(options["turns"] + 1)]
        client = Client(HTTP_AUTHORIZATION=f"Bearer {token}", SERVER_NAME="127.0.0.1")
        path = f"/api/v1/agents/{agent.pk}/chat/"
        self.stdout.write(
            f"bench_chat: {seeded.memory_count} memories, {options['gated']:.0%} gated for agents; agent "
            f"{agent.name}; {options['turns']} turns, {TURNS_PER_CONVERSATION} to a conversation; "
            f"{machine()}; load {load_average()}"
        )
        turns: list[float] = []
        conversation = None
        try:
            with override_settings(
                LLM_BASE_URL=f"http://127.0.0.1:{stub.server_address[1]}/v1", LLM_API_KEY="bench"
            ):
                for index, message in enumerate(messages):
                    body = {"message": message}
                    if conversation and index % TURNS_PER_CONVERSATION:
                        body["conversation"] = conversation
                    started = time.perf_counter()
                    response = client.post(path, json.dumps(body), content_type="application/json")
                    turns.append((time.perf_counter() - started) * 1000)
                    if response.status_code != 200:
                        raise CommandError(
                            f"Turn {index}: HTTP {response.status_code} {response.content[:300]!r}"
                        )
                    conversation = response.json().get("conversation")
        finally:
            stub.shutdown()
        first, steady = turns[0], turns[1:]
        model = _TimedStub.spent_ms[1:]
        self.stdout.write(
            f"  first turn in this process: {first:.1f} ms (the model's {_TimedStub.spent_ms[0]:.1f})"
        )
        self.stdout.write(
            f"  a turn, steady state: p50 {percentile(steady, 50):.1f} / p95 {percentile(steady, 95):.1f} / "
            f"p99 {percentile(steady, 99):.1f} ms; of which the stub model p50 {percentile(model, 50):.2f} / "
            f"p95 {percentile(model, 95):.2f} ms"
        )
        verdict = "met" if percentile(steady, 95) <= 50 else "NOT met"
        self.stdout.write(f"  goal: p95 <= 50 ms without the model: {verdict}")
        self.stdout.write(f"load after: {load_average()}")
