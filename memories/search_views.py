"""The owner's search page: everything they wrote, each result marked when agents cannot see it."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.views.decorators.http import require_GET

from config.pages import render_page
from memories.gate import agent_visible_memories
from memories.models import Memory
from memories.retrieval import SearchHit, memory_search, memory_search_highlights
from people.models import ConsentStatus

MAX_QUERY_LENGTH = 500
RESULT_LIMIT = 30


def _hidden_reasons(memory: Memory, now) -> list[str]:
    """Why agents cannot see it, beyond the participants the card already names."""
    reasons = []
    source = memory.source_person
    if source is not None and source.consent_status != ConsentStatus.GRANTED:
        reasons.append(f"told by {source.display_name} ({source.consent_status})")
    if memory.expires_at is not None and memory.expires_at <= now:
        reasons.append("expired")
    if memory.superseded_by_id is not None:
        reasons.append("superseded by a newer memory")
    return reasons


def _results(request: HttpRequest, query: str, hits: list[SearchHit]) -> list[dict]:
    # Whether an agent could see each result is asked of the gate itself, so the
    # mark can never disagree with what agents are actually given.
    visible = set(
        agent_visible_memories(request.user)
        .filter(pk__in=[hit.memory.pk for hit in hits])
        .values_list("pk", flat=True)
    )
    highlights = memory_search_highlights(request.user, query, [hit.memory.pk for hit in hits])
    now = timezone.now()
    return [
        {
            "memory": hit.memory,
            "agent_visible": hit.memory.pk in visible,
            "hidden_reasons": _hidden_reasons(hit.memory, now),
            "highlight": highlights.get(hit.memory.pk, ""),
        }
        for hit in hits
    ]


@login_required
@require_GET
def search(request: HttpRequest) -> HttpResponse:
    """`/search/?q=…`: plain page, or only the results fragment for htmx."""
    query = request.GET.get("q", "").strip()
    error = ""
    status = 200
    hits: list[SearchHit] = []
    if len(query) > MAX_QUERY_LENGTH:
        error = f"Search text is too long: {MAX_QUERY_LENGTH} characters at most."
        status = 400
    elif "\x00" in query:
        # PostgreSQL cannot compare text holding NUL; no memory could match it anyway.
        error = "Search text cannot contain a NUL character."
        status = 400
    elif query:
        hits = memory_search(request.user, query, respect_consent=False, limit=RESULT_LIMIT)
    context = {"query": query, "error": error, "results": _results(request, query, hits)}
    return render_page(request, "memories/search.html", "search-results", context, status=status)
