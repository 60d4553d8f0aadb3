"""Throughput of the embedding path: claim, encode and store, batched and one by one; query latency.

    python manage.py bench_embed --n 2000 [--text words|vocabulary] [--backend onnx|torch]
        [--onnx PATH] [--threads N] [--quality 1000]

Prints the backend (ONNX Runtime or PyTorch, and which export), its threads and
the load average beside every figure: the machine is shared, and a figure without
its load means little. Then how far the encoder's vectors are from PyTorch's:
cosine on bench texts and queries, and how many of each query's ten nearest texts
stay the same. Runs in one transaction that is rolled back: nothing is left in the
database, and no worker or sweep can see (or race for) the synthetic memories.
"""

from __future__ import annotations

import statistics
import time
import uuid
from pathlib import Path

import numpy as np
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser
from django.db import transaction

from benchmarks.seeding import Text
from benchmarks.timing import load_average, machine, percentile
from memories import embeddings
from memories.models import Memory
from memories.services import _embedding_input, memory_edges_refresh_many, memory_embed_batch


class _Rollback(Exception):
    pass


class Command(BaseCommand):
    help = (
        "Print memories/s for computing and storing embeddings (batched and one by one) and the "
        "query-embedding latency, with the backend, threads and load average."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--n", type=int, default=2000, help="memories embedded in one batch")
        parser.add_argument(
            "--one-by-one", type=int, default=200, help="memories embedded one call each (slow path)"
        )
        parser.add_argument("--queries", type=int, default=200, help="short queries embedded one at a time")
        parser.add_argument("--edges", type=int, default=200, help="memories whose edges are recomputed")
        parser.add_argument(
            "--text",
            choices=("words", "vocabulary"),
            default="words",
            help="words: English by real frequency, 10-80 words (default); vocabulary: the old 120 words",
        )
        parser.add_argument(
            "--backend",
            choices=("auto", "onnx", "torch"),
            default="auto",
            help="auto: what the servers use (ONNX when exported, else PyTorch)",
        )
        parser.add_argument("--onnx", type=Path, help="another ONNX file to measure (with --backend onnx)")
        parser.add_argument("--threads", type=int, help="default: KEEPSAKE_EMBEDDING_THREADS")
        parser.add_argument(
            "--quality",
            type=int,
            default=1000,
            help="bench texts compared with PyTorch's vectors (cosine, neighbours' recall@10); 0: skip",
        )
        parser.add_argument("--seed", type=int, default=7)

    def handle(self, *args, n: int, one_by_one: int, queries: int, edges: int, **options) -> None:
        threads = options["threads"] or embeddings.embedding_threads()
        started = time.perf_counter()
        if options["onnx"]:
            encoder = embeddings.OnnxEncoder(options["onnx"], threads=threads)
        else:
            backend = None if options["backend"] == "auto" else options["backend"]
            encoder = embeddings.load_encoder(backend, threads=threads)
        # Every caller (memory_embed_batch included) now uses this encoder.
        embeddings._model = encoder
        encoder.encode(["warm-up"])  # the model load is not part of the path
        self.stdout.write(
            f"model {embeddings.MODEL_NAME}: {embeddings.describe(encoder)}, {encoder.threads} thread(s), "
            f"loaded in {time.perf_counter() - started:.1f}s; {machine()}; load {load_average()}"
        )
        text = Text(options["text"], np.random.default_rng(options["seed"]))
        try:
            with transaction.atomic():
                self._run(text=text, n=n, one_by_one=one_by_one, edges=edges)
                raise _Rollback
        except _Rollback:
            pass
        if queries:
            self._queries(text=text, count=queries)
        if options["quality"] and encoder.backend != "torch":
            self._quality(encoder, text=text, count=options["quality"], queries=max(queries, 100))

    def _run(self, *, text: Text, n: int, one_by_one: int, edges: int) -> None:
        owner = get_user_model().objects.create(username=f"bench-embed-{uuid.uuid4().hex[:8]}")
        drafts = [text.memory() for _ in range(n + one_by_one)]
        memories = Memory.objects.bulk_create(
            Memory(owner=owner, title=title, body=body) for title, body in drafts
        )
        batch_ids = [memory.pk for memory in memories[:n]]
        single_ids = [memory.pk for memory in memories[n:]]
        words = statistics.mean(len(f"{title} {body}".split()) for title, body in drafts)
        self.stdout.write(f"text: {text.mode}, {words:.0f} words per memory on average")

        started = time.perf_counter()
        stored = memory_embed_batch(memory_ids=batch_ids)
        batched = time.perf_counter() - started
        assert len(stored) == n
        self.stdout.write(
            f"batched:    {n} memories in {batched:.2f}s = {n / batched:.0f} memories/s; "
            f"load {load_average()}"
        )

        # The same texts again, encode only: what is left of the batched time is
        # the claim and the writes (rows, triggers, index inserts).
        texts = [_embedding_input(title=title, body=body) for title, body in drafts[:n]]
        started = time.perf_counter()
        embeddings.embed_texts(texts)
        encode_only = time.perf_counter() - started
        self.stdout.write(
            f"  encode alone: {n / encode_only:.0f} memories/s ({encode_only:.2f}s); "
            f"claim and write: {max(batched - encode_only, 0):.2f}s = "
            f"{max(batched - encode_only, 0) / n * 1000:.2f} ms per memory; load {load_average()}"
        )

        if single_ids:
            started = time.perf_counter()
            for memory_id in single_ids:
                memory_embed_batch(memory_ids=[memory_id])
            single = time.perf_counter() - started
            self.stdout.write(
                f"one by one: {len(single_ids)} memories in {single:.2f}s = "
                f"{len(single_ids) / single:.0f} memories/s; load {load_average()}"
            )

        if edges:
            sample = batch_ids[:edges]
            started = time.perf_counter()
            memory_edges_refresh_many(memory_ids=sample, invalidate_neighbours=False)
            elapsed = time.perf_counter() - started
            self.stdout.write(
                f"edges:      {len(sample)} memories (of {n + one_by_one}) in {elapsed:.2f}s = "
                f"{len(sample) / elapsed:.0f} memories/s; load {load_average()}"
            )

    def _queries(self, *, text: Text, count: int) -> None:
        questions = [text.query() for _ in range(count)]
        timings = []
        for question in questions:
            started = time.perf_counter()
            embeddings.embed_text(question)
            timings.append((time.perf_counter() - started) * 1000)
        self.stdout.write(
            f"query embedding: {count} queries of {statistics.mean(len(q.split()) for q in questions):.1f} "
            f"words, p50 {percentile(timings, 50):.1f} ms, p95 {percentile(timings, 95):.1f} ms; "
            f"load {load_average()}"
        )

    def _quality(self, encoder, *, text: Text, count: int, queries: int) -> None:
        """The encoder against PyTorch's vectors (what the export is checked against)."""
        texts = [
            _embedding_input(title=title, body=body) for title, body in (text.memory() for _ in range(count))
        ]
        questions = [text.query() for _ in range(queries)]
        reference = embeddings.load_encoder("torch", threads=encoder.threads)
        ours, theirs = encoder.encode(texts), reference.encode(texts)
        # Queries one at a time, as search embeds them.
        asked = np.array([encoder.encode([question])[0] for question in questions])
        expected = np.array([reference.encode([question])[0] for question in questions])
        on_texts, on_queries = (ours * theirs).sum(axis=1), (asked * expected).sum(axis=1)
        k = min(10, count)
        found = np.argsort(-(asked @ ours.T), axis=1)[:, :k]
        truth = np.argsort(-(expected @ theirs.T), axis=1)[:, :k]
        recall = np.mean([len(set(a) & set(b)) / k for a, b in zip(found, truth, strict=True)])
        self.stdout.write(
            f"quality against PyTorch: cosine mean / min {on_texts.mean():.4f} / {on_texts.min():.4f} on "
            f"{count} texts, {on_queries.mean():.4f} / {on_queries.min():.4f} on {queries} queries; "
            f"each query's {k} nearest texts: recall@{k} {recall:.3f}"
        )
