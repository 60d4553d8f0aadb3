"""Throughput of the embedding path: batched encode + conditional DB write, vs one by one.

    python manage.py bench_embed --n 2000

Runs in one transaction that is rolled back: nothing is left in the database,
and no worker or sweep can see (or race for) the synthetic memories.
"""

from __future__ import annotations

import random
import time
import uuid

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser
from django.db import transaction

from memories import embeddings
from memories.models import Memory
from memories.services import memory_edges_refresh_many, memory_embed_batch

WORDS = (
    "morning walk river dog park grandmother kitchen bread garden rain holiday train school "
    "birthday cake friend music concert beach sand shells doctor appointment medicine tea "
    "letter phone call brother sister market apples winter snow fire book library chess "
    "football match bicycle hill picnic lake boat sunset dinner recipe laugh story"
).split()


class _Rollback(Exception):
    pass


class Command(BaseCommand):
    help = "Print memories/s for computing and storing embeddings, batched and one by one."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--n", type=int, default=2000, help="memories embedded in one batch")
        parser.add_argument(
            "--one-by-one", type=int, default=200, help="memories embedded one call each (slow path)"
        )
        parser.add_argument("--edges", type=int, default=200, help="memories whose edges are recomputed")
        parser.add_argument("--seed", type=int, default=7)

    def handle(self, *args, n: int, one_by_one: int, edges: int, seed: int, **options) -> None:
        rng = random.Random(seed)
        started = time.perf_counter()
        embeddings.embed_texts(["warm-up"])  # the model load is not part of the path
        self.stdout.write(f"model loaded in {time.perf_counter() - started:.1f}s ({embeddings.MODEL_NAME})")
        try:
            with transaction.atomic():
                self._run(rng=rng, n=n, one_by_one=one_by_one, edges=edges)
                raise _Rollback
        except _Rollback:
            pass

    def _run(self, *, rng: random.Random, n: int, one_by_one: int, edges: int) -> None:
        owner = get_user_model().objects.create(username=f"bench-embed-{uuid.uuid4().hex[:8]}")
        memories = Memory.objects.bulk_create(
            Memory(owner=owner, title=" ".join(rng.sample(WORDS, 3)), body=" ".join(rng.choices(WORDS, k=40)))
            for _ in range(n + one_by_one)
        )
        batch_ids = [memory.pk for memory in memories[:n]]
        single_ids = [memory.pk for memory in memories[n:]]

        started = time.perf_counter()
        stored = memory_embed_batch(memory_ids=batch_ids)
        batched = time.perf_counter() - started
        assert len(stored) == n
        self.stdout.write(f"batched:    {n} memories in {batched:.2f}s = {n / batched:.0f} memories/s")

        texts = list(Memory.objects.filter(pk__in=batch_ids[:one_by_one]).values_list("body", flat=True))
        started = time.perf_counter()
        embeddings.embed_texts(texts)
        encode_only = time.perf_counter() - started
        self.stdout.write(
            f"  (encode alone, {len(texts)} texts batched: {len(texts) / encode_only:.0f} memories/s)"
        )

        if single_ids:
            started = time.perf_counter()
            for memory_id in single_ids:
                memory_embed_batch(memory_ids=[memory_id])
            single = time.perf_counter() - started
            self.stdout.write(
                f"one by one: {len(single_ids)} memories in {single:.2f}s = "
                f"{len(single_ids) / single:.0f} memories/s"
            )

        if edges:
            sample = batch_ids[:edges]
            started = time.perf_counter()
            memory_edges_refresh_many(memory_ids=sample, invalidate_neighbours=False)
            elapsed = time.perf_counter() - started
            self.stdout.write(
                f"edges:      {len(sample)} memories (of {n + one_by_one}) in {elapsed:.2f}s = "
                f"{len(sample) / elapsed:.0f} memories/s"
            )
