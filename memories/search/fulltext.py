"""The full-text side: the best PostgreSQL full-text matches that pass the gate, and highlights.

_text_matches ranks a bounded set of candidates (the owner's MemoryText rows, a filtered
queryset's, a circle's shares: _owner_candidates_sql, _candidates_sql,
circles._circle_candidates_sql) by ts_rank and probes each against `visible`, the gate's
compiled scope, in rank order. memory_search_highlights marks the matching words of the
owner's own results.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence

from django.contrib.auth.models import AbstractBaseUser
from django.contrib.postgres.search import SearchHeadline, SearchQuery
from django.db.models import QuerySet
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from memories.gate import _owner_id
from memories.models import Memory, MemoryText
from memories.search import knn, settings, statements


def _candidates_sql(candidates: QuerySet[Memory]) -> tuple[str, list]:
    sql, params = (
        candidates.order_by().values_list("pk", "search_vector", "occurred_at").query.sql_with_params()
    )
    return sql, list(params)


def _owner_candidates_sql(owner_id: int, *, agents: bool, small_owner: bool = False) -> tuple[str, list]:
    """The owner's memories (no filters) as _text_matches candidates; `agents`: only those that may pass.

    Read from MemoryText, the narrow copy of what the full-text side needs
    (~400-byte rows instead of ~2 KB memory rows that carry the embedding).

    `agents`: the rows whose count lets them pass (agents_open, the hint the
    gate's count keeps), through memory_text_open_gin, an index of (owner,
    words) over those rows only: a common word's candidates are then all
    rankable, whatever share of the owner's memories is gated.

    `small_owner` (at most EXACT_SEARCH_MAX_MEMORIES memories, the owner's or
    agents' searches): the owner's rows are read through the owner_id index and
    the query checked on each (OFFSET 0 keeps the match condition outside, so
    no full-text index is used). Left to itself the planner intersects the
    owner's rows with a full-text index's matches over every owner (a GIN
    index's entries for a word list every owner's memories that hold it): a
    common word matches tens of thousands of other people's memories (3-5 ms in
    a table of a million for an owner of 1,000, against ~1 ms for reading the
    owner's own rows), so a small owner's search would cost what the whole
    table holds.
    """
    table = MemoryText._meta.db_table
    sql = (
        f"SELECT {table}.memory_id, {table}.search_vector, {table}.occurred_at "
        f"FROM {table} WHERE {table}.owner_id = %s"
    )
    if agents:
        sql = f"{sql} AND {table}.agents_open"
    return (f"{sql} OFFSET 0" if small_owner else sql), [owner_id]


def _text_matches(
    visible: tuple[str, list],
    query: str,
    fetch: int,
    *,
    candidates: tuple[str, list],
    embedding: Sequence[float] | None = None,
    prepared: bool = False,
    one_word_exact: bool = False,
) -> list[tuple[uuid.UUID, float, float | None]]:
    """The `fetch` best full-text matches that pass `visible`: [(id, ts_rank, cosine distance or None)].

    One statement, bounded whatever the query matches:
    1. `candidates` (SQL selecting id, search_vector, occurred_at: a cheap
       superset of `visible` without the gate, the owner's memories and the
       filters, or a circle's shares that may pass: _owner_candidates_sql reads
       MemoryText's narrow rows (for agents the open ones), _circle_candidates_sql
       the shares' copies,
       _candidates_sql a filtered queryset's) matching the query, read from a GIN index, at most
       TEXT_CANDIDATES_MAX of them: a query so broad that it matches more (one
       common word) ranks only that many, because reading and ranking tens of
       thousands of text vectors is what made the full-text side slow (70 ms
       p95 at 100k);
    2. ranked by ts_rank, best first (then newest, then id);
    3. each probed against `visible` (the gate: the compiled scope, a LATERAL
       subquery per candidate) in rank order, stopping at `fetch` that pass, so
       the gate runs for the few that win rather than for every match.

    `one_word_exact` (candidates from _owner_candidates_sql, whose table has the
    indexes of migration 0013): a query of one word is ranked exactly instead,
    however many memories hold it. ts_rank (no weights, no normalisation) ranks
    a one-word query by how often the word occurs and by nothing else, so the
    order is: the memories holding the word at least twice (memory_text_repeated_gin),
    ranked; then the ones holding it once, all ranked the same, newest first
    (memory_text_recent, read until enough are found; for agents memory_text_open_recent,
    the rows that can pass, so a word few open memories hold is not looked for among
    every gated row). A query of several words
    is ranked as above. Which branch runs is decided when the statement is planned
    (numnode of the parsed query: a constant once the words are known).

    The distance to `embedding` (for the relevance cut-off and the fusion) is
    read for the passing rows only. websearch syntax: plain words are ANDed,
    "quoted phrases" and -exclusions work, and no input makes the parser raise.
    """
    candidate_sql, candidate_params = candidates
    visible_sql, visible_params = visible
    distance = "passing.distance" if embedding is not None else "NULL::float8"
    candidate_from = f"({candidate_sql}) AS candidate (id, search_vector, occurred_at), q"

    def ranked_branch(condition: str) -> tuple[str, list]:
        return (
            "SELECT matched.id, matched.rank, row_number() OVER ("
            "  ORDER BY matched.rank DESC, matched.occurred_at DESC, matched.id) AS position "
            "FROM ("
            "  SELECT candidate.id, candidate.occurred_at,"
            "    ts_rank(candidate.search_vector, q.query) AS rank"
            f"  FROM {candidate_from}"
            f"  WHERE {condition} LIMIT %s"
            ") matched",
            [*candidate_params, settings.TEXT_CANDIDATES_MAX],
        )

    if one_word_exact:
        several, several_params = ranked_branch(
            "numnode(q.query) <> 1 AND candidate.search_vector @@ q.query"
        )
        repeated, repeated_params = ranked_branch(
            "numnode(q.query) = 1 AND memories_repeated_lexemes(candidate.search_vector) @@ q.query"
        )
        # Holding the word once: all ranked the same, so newest first, after every
        # ranked one (positions from TEXT_CANDIDATES_MAX + 1). That rank is a word's
        # without positions ('x'::tsvector): the same for every word, below any memory
        # holding it twice (one ts_rank a row, cheaper than the index's function).
        # `fetch` four times over: a candidate the gate refuses (for agents, one
        # superseded or expired, or a stale agents_open; an owner sees all of theirs)
        # is skipped and the next taken. Only if more than three in four of a
        # word's newest matches were refused would the text side come back short.
        once_rank = "ts_rank('x'::tsvector, 'x'::tsquery)"
        once = (
            "SELECT once.id, once.rank, %s + row_number() OVER ("
            "  ORDER BY once.occurred_at DESC, once.id) AS position "
            "FROM ("
            f"  SELECT candidate.id, candidate.occurred_at, {once_rank} AS rank"
            f"  FROM {candidate_from}"
            "  WHERE numnode(q.query) = 1 AND candidate.search_vector @@ q.query"
            f"    AND ts_rank(candidate.search_vector, q.query) <= {once_rank}"
            "  ORDER BY candidate.occurred_at DESC, candidate.id LIMIT %s"
            ") once"
        )
        # UNION ALL runs its branches in order and each comes out in its own order
        # (no parallel workers in a search): the probes below see the exact ranking.
        ranked_sql = f"{several} UNION ALL {repeated} UNION ALL {once}"
        ranked_params = [
            *several_params,
            *repeated_params,
            settings.TEXT_CANDIDATES_MAX,
            *candidate_params,
            4 * fetch,
        ]
    else:
        branch, branch_params = ranked_branch("candidate.search_vector @@ q.query")
        ranked_sql, ranked_params = f"{branch} ORDER BY position", branch_params
    # No ORDER BY outside: the LATERAL probes run in the order `ranked` comes in and
    # the LIMIT stops them (`position` keeps that order here).
    sql, params = (
        # NOT MATERIALIZED: referenced by every branch, and still folded into each as a
        # constant when planned (the index conditions, numnode, the word's statistics).
        "WITH q AS NOT MATERIALIZED (SELECT websearch_to_tsquery('english'::regconfig, %s) AS query) "
        f"SELECT ranked.id, ranked.rank, {distance}, ranked.position "
        f"FROM ({ranked_sql}) ranked "
        "CROSS JOIN LATERAL ("
        "  SELECT visible.embedding <=> %s::vector AS distance"
        f"  FROM ({visible_sql}) AS visible (id, embedding) WHERE visible.id = ranked.id LIMIT 1"
        ") passing "
        "LIMIT %s",
        [
            query,
            *ranked_params,
            knn._vector_text(embedding) if embedding is not None else None,
            *visible_params,
            fetch,
        ],
    )
    # `prepared`: a circle's, always read through the shares' partial GIN indexes, so a
    # generic plan fits every query (owners' and agents' are left to custom plans: a
    # common word's best plan differs from a rare one's).
    rows = sorted(statements._fetch_prepared(sql, params, prepared=prepared), key=lambda row: row[3])
    return [(memory_id, rank, distance) for memory_id, rank, distance, _ in rows]


# --- highlighting the words that matched ------------------------------------------

# ts_headline marks the matches with these (Unicode private-use characters, which
# journal text has no reason to hold); the marked text is then escaped piece by
# piece and only our own <mark> tags are added, so no memory text is ever HTML.
# A stray marker in a body can at worst highlight the wrong words.
_MATCH_START, _MATCH_STOP = "\ue000", "\ue001"


def _marked_html(headline: str) -> str:
    pieces: list[str] = []
    inside = False
    for token in re.split(f"([{_MATCH_START}{_MATCH_STOP}])", headline):
        if token == _MATCH_START and not inside:
            pieces.append("<mark>")
            inside = True
        elif token == _MATCH_STOP and inside:
            pieces.append("</mark>")
            inside = False
        elif token not in (_MATCH_START, _MATCH_STOP):
            pieces.append(escape(token))
    if inside:
        pieces.append("</mark>")
    return "".join(pieces)


def memory_search_highlights(
    owner: AbstractBaseUser | int, query: str, memory_ids: Sequence[uuid.UUID]
) -> dict[uuid.UUID, SafeString]:
    """For the owner's own results: an excerpt of each body with the query's matching words in <mark>.

    Only memories whose words matched get one (a memory found by meaning alone has
    nothing to mark). Escaped HTML, safe to render. Owner-only: it reads the owner's
    memories that a search already returned, and decides no visibility.
    """
    query = (query or "").strip()
    if not query or not memory_ids:
        return {}
    tsquery = SearchQuery(query, config="english", search_type="websearch")
    rows = (
        Memory.objects.filter(owner_id=_owner_id(owner), pk__in=list(memory_ids), search_vector=tsquery)
        .annotate(
            headline=SearchHeadline(
                "body",
                tsquery,
                config="english",
                start_sel=_MATCH_START,
                stop_sel=_MATCH_STOP,
                max_words=30,
                min_words=12,
            )
        )
        .values_list("pk", "headline")
    )
    return {
        memory_id: mark_safe(_marked_html(headline))  # every piece of memory text escaped above
        for memory_id, headline in rows
        if _MATCH_START in headline
    }
