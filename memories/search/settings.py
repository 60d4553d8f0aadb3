"""The search engine's tuning: every constant its strategies read, in one module.

Each is read at call time as `django_settings.NAME` by the module that uses it, so a test or a
benchmark changes one here (`monkeypatch.setattr(memories.search.settings, "NAME", ...)`)
and every path sees the change. None of them decides visibility: they choose which path
runs, how wide a scan is and how many candidates are ranked; the gate's SQL
(memories/gate.py) decides every row. Measured by `python manage.py bench_retrieval`
(and bench_circles, bench_consent, bench_isolation).
"""

from __future__ import annotations

MAX_LIMIT = 100
# Reciprocal rank fusion constant (Cormack et al. use 60): damps the head of each
# list so one list's first place does not drown the other list's agreement.
RRF_K = 60
# Each side of the hybrid search contributes at least this many candidates, so a
# memory ranked modestly by both lists can still win the fusion.
FUSION_DEPTH_MIN = 20

# --- vector search tuning (see _nearest_neighbours; measured by bench_retrieval) ---
# Owners with at most this many memories get exact search: it costs ~1 µs per
# memory (about 2 ms here), is exactly right, and makes a small owner's latency
# independent of how much other owners keep in the shared HNSW index.
EXACT_SEARCH_MAX_MEMORIES = 2_000
# When the bounded index scan comes back short (few memories pass the gate and
# filters), owners up to this size get an exact search to fill LIMIT k. Above it
# the exact pass would cost more than ~20 ms, so the index's answer stands.
EXACT_FALLBACK_MAX_MEMORIES = 20_000
# The owner's index (all memories, full precision). Measured at 100k memories
# (clustered vectors): ef_search 40 gives recall@10 of ~0.85, 100 gives ~1.0.
ANN_EF_SEARCH = 100
# relaxed_order returns rows only roughly by distance: fetch twice k, re-sort.
ANN_OVERFETCH = 2
# ef_search grows with what is fetched: hybrid search asks each side for 20
# (FUSION_DEPTH_MIN), fetching 40. Measured on 100k memories (realistic text, idle
# machine, 60 queries): the owner's 20 nearest came back with recall 1.000 at
# ef_search 100, 120, 160 and 200, costing 2.6 / 2.8 / 3.7 / 4.6 ms p50; under
# load an earlier run saw ~0.99 at 100. Three per row fetched (120) keeps a margin.
ANN_EF_PER_FETCHED = 3
# pgvector's ceiling for hnsw.ef_search; an owner who is a thin share of the table
# gets up to this much (_approximate_neighbours).
ANN_EF_SEARCH_MAX = 1_000
# Bounded on purpose: past this many visited tuples pgvector stops exploring and
# only drains the candidates it already holds, so a query nothing can satisfy
# ends instead of walking the whole graph (default 20,000).
ANN_MAX_SCAN_TUPLES = 2_000
# pgvector also ends an iterative scan when its memory passes hnsw.scan_mem_multiplier
# x work_mem (4 MB by default): with full-precision 384-dimension vectors, a few
# thousand visited entries. Entries of deleted rows that VACUUM has not removed yet
# count against both bounds. pgvector's default, set with the others so that it is
# this module's choice (tests that check the gate rather than the budget raise it:
# their database keeps every rolled-back row's entries).
ANN_SCAN_MEM_MULTIPLIER = 1
# The agents' index (memories nothing blocks, half precision; m=24,
# ef_construction=128). When few of an owner's memories are open, an agent's ten
# nearest include memories barely related to the query: near-ties that only a
# near-exhaustive scan finds (measured at 100k memories, 90% gated, 10k open:
# recall@10 ~0.97 at ef_search 100, 0.982-0.99 at 150-160, 0.987-0.997 at 200,
# 0.993-0.998 at 300, the graph differing from build to build; 300 cost 7-9.5 ms
# p50, reading ~9,000 index pages). Those owners are searched exactly instead
# (_sparse_in_own_journal, _open_candidates_neighbours): their open rows' copies
# ranked from memory_gate_open_vectors, an index-only scan of the owner's entries
# side by side (~1,100 pages for 10k; 2026-11-26, 100 queries: p50 / p95 4.4 / 5.0
# ms against 13.9 / 15.2 reading the same rows from the table), recall 1.000.
# With many open a narrow search is as
# good (2026-11-25, 60 queries against exact gated truth): recall@10 and @20
# 1.000 at ef_search 60 with 10% and 50% gated (0.998 at 40), and at 80% gated
# (20k open) @10 1.000 and @20 0.98 whatever the width (40 to 200); each step
# of 20 costs ~0.7 ms. Fetching more than a hybrid's 40 widens it in step.
# 2026-11-26 (sixth session, 200 queries against exact gated truth, in one run
# beside pgvector's defaults): at 50% gated ef_search 40 kept recall@10 1.000 at
# p50 / p95 3.8-4.0 / 5.0-6.5 ms against 4.5-5.0 / 6.0-7.0 at 60; at 10% 0.9945
# (60: 1.000) at 3.9-4.9 / 5.2-6.6 against 4.8-5.5 / 6.3-8.1. The goal is recall
# >= 0.99 at the fastest peer's p95 (that run: 3.7-5.4 / 5.2-6.6, recall 0.90),
# so a 10-result search now reads 40. 2026-11-26 (seventh session, 200 queries
# against the exact fused reference, alternating twice): a hybrid's 40 candidates
# read at 40 instead of 60 kept fused recall@10 1.000 at 10% and 50% gated, p50 /
# p95 -1.4 / -1.6 ms at 10% and -0.7 / -0.1 at 50%: one entry read per row fetched.
OPEN_ANN_EF_SEARCH = 40
OPEN_ANN_EF_PER_FETCHED = 1.0
# "Few open": at most this many (counted on the open-gate index, ~1.2 ms; see _open_hint),
# and more than OPEN_ANN_SPARSE_GATED of the owner's memories per open one (over 80%
# gated): searched exactly (~0.4 us per open memory, 6 ms at this bound). Not for a
# small owner, whose nearest open memories are near ones: 2026-11-26, an owner of
# 10,000 memories with 9,000 open among 109,000 entries (100 queries against exact
# gated truth) had recall@20 1.000 at ef_search 60, 100, 150 and 300, costing 4.3 /
# 5.4 / 7.4 / 14.7 ms p50.
OPEN_ANN_SPARSE_MAX = 15_000
OPEN_ANN_SPARSE_GATED = 5
OPEN_ANN_MAX_SCAN_TUPLES = 6_000
# Without filters (the gate alone, _compiled_scope) nearly every open row passes, so the
# agents' index statement first takes this many more than it needs from the index and
# probes them through the gate by id, a statement planned once per connection
# (_open_index_neighbours); when fewer than it needs pass, the scan that goes on until
# enough pass runs after it. OPEN_ANN_PLANNED_ONCE = False: that scan alone, as before
# (for measuring). Measured 2026-11-27 (10% gated, 200 queries alternating, k=10): p50
# 2.54 / 2.57 ms taking 20 / 28 candidates against 3.13 / 3.11 for the scan planned on
# every search, the same ten in every query; 40 candidates for 20 cost as much as that scan.
OPEN_ANN_SPARE_CANDIDATES = 4
OPEN_ANN_PLANNED_ONCE = True
# Agent searches first ask the maintained gate count (MemoryGate, a hint) how many
# of the owner's memories nothing blocks. None: answer at once. Up to this many:
# exact search over just those, ranked on the gate table's half-precision copies
# (a narrow table, ~0.7 µs per memory) and re-ranked at full precision. More:
# the agents' HNSW index.
EXACT_CANDIDATES_MAX = 2_000
# How many of the nearest open memories (by the half-precision copy) the exact
# path re-ranks at full precision and passes through the gate, per result asked.
EXACT_CANDIDATES_OVERFETCH = 4
# A copy of the open memories' full-precision vectors kept in the process ranks them as the
# gated statement does (_kept_open_neighbours): it hands over this many more than asked,
# for near-ties the two compute apart in the last bits.
KEPT_SPARE_CANDIDATES = 4
# The full-text side ranks at most this many of the memories a query matches
# (see _text_matches): queries that match more are too broad for ts_rank to
# tell them apart usefully, and reading that many text vectors is what costs.
TEXT_CANDIDATES_MAX = 3_000


# --- the hints (memories/search/hints.py) ----------------------------------------------
# The per-process hints (owner shares, relation sizes, open counts) are read again after
# this many seconds: hints for the strategy, never for what is shown.
HINT_TTL_SECONDS = 60.0
# A per-owner (or per-circle) hint is emptied when it holds this many.
OPEN_COUNTS_KEPT = 10_000
# Owners counted with more open memories than this (twice the exact path's bound)
# are not counted again on every search while their count is recent (_open_hint).
OPEN_HINT_TRUSTED_ABOVE = 2 * EXACT_CANDIDATES_MAX
# The bounded scan is expected to meet at least this many times the rows it must
# fetch, or the owner counts as thin in the index (_thin_in_the_index).
THIN_SHARE_MARGIN = 2

# --- circles (memories/search/circles.py) ---------------------------------------------
# A circle's search first counts the shares that can pass for its viewers
# (MemoryShare.blocked_count = 0, or the viewer's own), a hint kept by triggers
# like the agents' count: up to this many, exact search among them, ranked on the
# shares' half-precision copies and re-ranked at full precision through the gate;
# more: the HNSW index of open shares (memory_share_open_hnsw).
CIRCLE_EXACT_CANDIDATES_MAX = 2_000
CIRCLE_COUNT_CAP = 20_000
CIRCLE_ANN_EF_SEARCH = 60
CIRCLE_ANN_SPARSE_EF_SEARCH = 200
CIRCLE_ANN_MAX_SCAN_TUPLES = 6_000
