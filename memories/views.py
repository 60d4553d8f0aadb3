from __future__ import annotations

from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from memories import selectors, services, supersession
from memories.forms import (
    PARTICIPANT_MAX_ROWS,
    PARTICIPANT_PREFIX,
    SEARCH_MAX_LENGTH,
    MemoryForm,
    SupersedeForm,
    TimelineFilterForm,
    UnsupersedeForm,
    participant_formset,
    participant_row_form,
)
from memories.models import Memory, SupersessionProposal
from memories.related import related_once
from memories.retrieval import memory_related

PAGE_SIZE = 25
MAX_PAGE = 1_000_000
FILTER_FIELDS = ("person", "kind", "date_from", "date_to", "expired")


def _add_service_errors(form, error: ValidationError) -> None:
    # Services speak in model field names; anything the form lacks is shown at the top.
    if hasattr(error, "error_dict"):
        for field, field_messages in error.message_dict.items():
            form.add_error(field if field in form.fields else None, field_messages)
    else:
        form.add_error(None, error.messages)


def _page_number(request: HttpRequest) -> int:
    try:
        return max(1, int(request.GET.get("page", "1")))
    except ValueError:
        return 1


def _filters(filter_form: TimelineFilterForm) -> selectors.MemoryFilters | None:
    # Invalid filters are shown as errors and ignored rather than guessed at.
    if not filter_form.is_valid():
        return None
    data = filter_form.cleaned_data
    return selectors.MemoryFilters(
        person=data["person"],
        kind=data["kind"] or None,
        date_from=data["date_from"],
        date_to=data["date_to"],
        expired=data["expired"],
    )


def _page(memories: QuerySet[Memory], page: int) -> tuple[list[Memory], bool]:
    # Far past any real journal; also keeps OFFSET inside PostgreSQL's bigint.
    if page > MAX_PAGE:
        return [], False
    # One extra row tells whether an older page exists without a COUNT query.
    start = (page - 1) * PAGE_SIZE
    rows = list(memories[start : start + PAGE_SIZE + 1])
    return rows[:PAGE_SIZE], len(rows) > PAGE_SIZE


def _timeline_context(request: HttpRequest, **extra) -> dict:
    filter_form = TimelineFilterForm(request.GET or None, owner=request.user)
    page = _page_number(request)
    memories, has_more = _page(selectors.memory_list(owner=request.user, filters=_filters(filter_form)), page)
    kept_filters = {name: request.GET[name] for name in FILTER_FIELDS if request.GET.get(name)}
    next_page_url = ""
    if has_more:
        next_page_url = reverse("timeline") + "?" + urlencode({**kept_filters, "page": page + 1})
    context = {
        "filter_form": filter_form,
        "filtering": bool(kept_filters),
        "memories": memories,
        "page": page,
        "next_page_url": next_page_url,
        "form": MemoryForm(owner=request.user),
        "participants": participant_formset(owner=request.user),
    }
    context.update(extra)
    return context


@login_required
def timeline(request: HttpRequest) -> HttpResponse:
    """The owner's journal, newest first; htmx asks for the next page of cards."""
    template = "memories/timeline.html" + ("#memory-page" if request.htmx else "")
    return render(request, template, _timeline_context(request))


def _save_memory(request: HttpRequest, *, memory: Memory | None) -> tuple[Memory | None, MemoryForm, object]:
    """Validate the memory form and its people rows; save all of it or nothing."""
    form = MemoryForm(request.POST, owner=request.user)
    participants = participant_formset(owner=request.user, data=request.POST)
    if not (form.is_valid() and participants.is_valid()):
        return None, form, participants
    existing, new = participants.chosen()
    fields = {
        "body": form.cleaned_data["body"],
        "title": form.cleaned_data["title"],
        "occurred_at": form.cleaned_data["occurred_at"],
        "kind": form.cleaned_data["kind"],
        "sensitivity": form.cleaned_data["sensitivity"],
        "source_person": form.cleaned_data["source_person"],
        "participants": [services.ParticipantSpec(person=person, role=role) for person, role in existing],
        "new_people": [services.NewPersonSpec(display_name=name, role=role) for name, role in new],
    }
    try:
        if memory is None:
            saved = services.memory_create_with_new_people(owner=request.user, **fields)
        else:
            saved = services.memory_update_with_new_people(memory=memory, **fields)
    except ValidationError as error:
        # e.g. a password in the text: refused before anything is written; the
        # bound form keeps what was typed so it can be fixed in place.
        _add_service_errors(form, error)
        return None, form, participants
    return saved, form, participants


def _saved_message(form: MemoryForm, memory: Memory) -> str:
    """ "Memory saved", saying what was worked out from the text so a wrong guess is noticed."""
    worked_out = []
    if form.cleaned_data["kind"] is None:
        worked_out.append(f"kind: {memory.get_kind_display().lower()}")
    if form.cleaned_data["sensitivity"] is None:
        worked_out.append(f"sensitivity: {memory.get_sensitivity_display().lower()}")
    if not worked_out:
        return "Memory saved."
    return f"Memory saved. Worked out from the text — {', '.join(worked_out)}. Edit it to change that."


@login_required
@require_POST
def memory_create(request: HttpRequest) -> HttpResponse:
    memory, form, participants = _save_memory(request, memory=None)
    if request.htmx:
        if memory is None:
            context = {"form": form, "participants": participants}
        else:
            # A fresh form (its people list now has anyone just typed in) and
            # the new card prepended to the timeline out of band.
            new_memory = selectors.memory_get(owner=request.user, memory_id=memory.pk)
            context = {
                "form": MemoryForm(owner=request.user),
                "participants": participant_formset(owner=request.user),
                "new_memory": new_memory,
                "saved_message": _saved_message(form, new_memory),
            }
        return render(request, "memories/timeline.html#quick-add", context)
    if memory is None:
        return render(
            request,
            "memories/timeline.html",
            _timeline_context(request, form=form, participants=participants),
        )
    messages.success(request, _saved_message(form, memory))
    return redirect("timeline")


@login_required
@require_GET
def memory_participant_row(request: HttpRequest) -> HttpResponse:
    """One more people row for the memory form (htmx), and the formset's new total out of band."""
    total_forms_name = f"{PARTICIPANT_PREFIX}-TOTAL_FORMS"
    try:
        index = int(request.GET.get(total_forms_name, ""))
    except ValueError:
        return HttpResponseBadRequest("Missing or bad row count.")
    if index < 0:
        return HttpResponseBadRequest("Missing or bad row count.")
    if index >= PARTICIPANT_MAX_ROWS:
        return HttpResponse(status=204)  # htmx swaps nothing: the form is full
    context = {
        "row": participant_row_form(owner=request.user, index=index),
        "total_forms_name": total_forms_name,
        "total_forms": index + 1,
    }
    return render(request, "memories/participant_row.html", context)


def _supersede_query(data) -> str:
    # PostgreSQL refuses NUL in text: a NUL typed into the picker is simply not searched for.
    return " ".join(data.get("q", "").replace("\x00", "").split())[:SEARCH_MAX_LENGTH]


def _supersede_form(request: HttpRequest, memory: Memory, *, query: str, data=None) -> SupersedeForm:
    options = selectors.memory_supersede_options(memory=memory, query=query)
    return SupersedeForm(data, initial={"q": query}, owner=request.user, options=options)


def _memory_page_context(
    request: HttpRequest,
    memory: Memory,
    *,
    supersede_form: SupersedeForm | None = None,
    query: str = "",
    supersession_error: list[str] | None = None,
    supersession_message: str = "",
) -> dict:
    chain = supersession.memory_supersession_chain(memory)
    by_id = {linked.pk: linked for linked in chain}
    return {
        "memory": memory,
        "related": related_once(memory_related(memory, respect_consent=False)),
        # Oldest first; each row says what replaced it (None: it is the current one).
        "chain": [{"memory": linked, "replaced_by": by_id.get(linked.superseded_by_id)} for linked in chain],
        "replaced_by": by_id.get(memory.superseded_by_id),
        "candidates": supersession.supersession_candidates(memory),
        "supersede_form": supersede_form or _supersede_form(request, memory, query=query),
        "supersede_query": query,
        "supersession_error": supersession_error or [],
        "supersession_message": supersession_message,
    }


@login_required
def memory_detail(request: HttpRequest, memory_id) -> HttpResponse:
    memory = selectors.memory_get(owner=request.user, memory_id=memory_id)
    template = "memories/memory_detail.html" + ("#memory-main" if request.htmx else "")
    return render(request, template, _memory_page_context(request, memory))


def _supersession_updated(
    request: HttpRequest, memory_id, *, message: str = "", error: ValidationError | None = None, **extra
) -> HttpResponse:
    """After a supersession action: the section in place (htmx), else back to the page.

    Reloaded, because the action may have changed this memory's own link; htmx
    also gets the agent-visibility notice out of band, since a memory that is
    now replaced (or no longer) is hidden from agents (or no longer).
    """
    memory = selectors.memory_get(owner=request.user, memory_id=memory_id)
    errors = error.messages if error is not None else None
    context = _memory_page_context(
        request, memory, supersession_error=errors, supersession_message=message, **extra
    )
    if request.htmx:
        return render(request, "memories/_supersession.html", {**context, "oob_visibility": True})
    if errors or "supersede_form" in extra:
        # A refusal is shown on the page itself, with what was picked, like any form error.
        return render(request, "memories/memory_detail.html", context)
    messages.success(request, message)
    return redirect("memory_detail", memory_id=memory.pk)


@login_required
@require_GET
def memory_supersede_options(request: HttpRequest, memory_id) -> HttpResponse:
    """Narrow the "replaces an older memory" list by words: the picker (htmx) or the whole page."""
    memory = selectors.memory_get(owner=request.user, memory_id=memory_id)
    query = _supersede_query(request.GET)
    if request.htmx:
        context = {"memory": memory, "supersede_form": _supersede_form(request, memory, query=query)}
        context["supersede_query"] = query
        return render(request, "memories/_supersede_pick.html", context)
    return render(request, "memories/memory_detail.html", _memory_page_context(request, memory, query=query))


@login_required
@require_POST
def memory_supersede(request: HttpRequest, memory_id) -> HttpResponse:
    """This memory replaces an older one of the owner's (agents then see only this one)."""
    memory = selectors.memory_get(owner=request.user, memory_id=memory_id)
    query = _supersede_query(request.POST)
    form = _supersede_form(request, memory, query=query, data=request.POST)
    if form.is_valid():
        older = form.cleaned_data["older"]
        try:
            supersession.memory_supersede(owner=request.user, older=older, newer=memory)
        except ValidationError as error:
            _add_service_errors(form, error)
        else:
            return _supersession_updated(
                request, memory.pk, message=f"Linked: this memory replaces “{older.headline}”."
            )
    return _supersession_updated(request, memory.pk, supersede_form=form, query=query)


@login_required
@require_POST
def memory_unsupersede(request: HttpRequest, memory_id) -> HttpResponse:
    """Undo one "replaced by" link in this memory's chain."""
    memory = selectors.memory_get(owner=request.user, memory_id=memory_id)
    form = UnsupersedeForm(request.POST)
    if not form.is_valid():
        return HttpResponseBadRequest("Say which memory is no longer replaced.")
    replaced = selectors.memory_get(owner=request.user, memory_id=form.cleaned_data["replaced"])
    try:
        supersession.memory_unsupersede(owner=request.user, memory=replaced)
    except ValidationError as error:
        return _supersession_updated(request, memory.pk, error=error)
    return _supersession_updated(
        request, memory.pk, message=f"Undone: “{replaced.headline}” is no longer replaced."
    )


def _memory_proposal(request: HttpRequest, memory_id, proposal_id) -> tuple[Memory, SupersessionProposal]:
    memory = selectors.memory_get(owner=request.user, memory_id=memory_id)
    proposal = supersession.supersession_proposal_get(owner=request.user, proposal_id=proposal_id)
    if memory.pk not in (proposal.older_id, proposal.newer_id):
        raise Http404("No such suggestion for this memory.")
    return memory, proposal


@login_required
@require_POST
def supersession_proposal_confirm(request: HttpRequest, memory_id, proposal_id) -> HttpResponse:
    memory, proposal = _memory_proposal(request, memory_id, proposal_id)
    try:
        supersession.supersession_proposal_confirm(owner=request.user, proposal=proposal)
    except ValidationError as error:
        return _supersession_updated(request, memory.pk, error=error)
    return _supersession_updated(
        request,
        memory.pk,
        message=f"Confirmed: “{proposal.newer.headline}” replaces “{proposal.older.headline}”.",
    )


@login_required
@require_POST
def supersession_proposal_dismiss(request: HttpRequest, memory_id, proposal_id) -> HttpResponse:
    memory, proposal = _memory_proposal(request, memory_id, proposal_id)
    try:
        supersession.supersession_proposal_dismiss(owner=request.user, proposal=proposal)
    except ValidationError as error:
        return _supersession_updated(request, memory.pk, error=error)
    return _supersession_updated(request, memory.pk, message="Dismissed: that pair won't be suggested again.")


@login_required
@require_http_methods(["GET", "POST"])
def memory_edit(request: HttpRequest, memory_id) -> HttpResponse:
    memory = selectors.memory_get(owner=request.user, memory_id=memory_id)
    if request.method == "POST":
        saved, form, participants = _save_memory(request, memory=memory)
        if saved is not None:
            messages.success(request, _saved_message(form, saved))
            return redirect("memory_detail", memory_id=memory.pk)
    else:
        form = MemoryForm(initial=MemoryForm.initial_for(memory), owner=request.user)
        participants = participant_formset(owner=request.user, memory=memory)
    template = "memories/memory_form.html" + ("#memory-form" if request.htmx else "")
    return render(request, template, {"memory": memory, "form": form, "participants": participants})


@login_required
@require_http_methods(["GET", "POST"])
def memory_delete(request: HttpRequest, memory_id) -> HttpResponse:
    """GET asks for confirmation; only POST deletes."""
    memory = selectors.memory_get(owner=request.user, memory_id=memory_id)
    if request.method == "POST":
        services.memory_delete(memory=memory)
        messages.success(request, "Memory deleted.")
        return redirect("timeline")
    template = "memories/memory_confirm_delete.html" + ("#confirm-delete" if request.htmx else "")
    return render(request, template, {"memory": memory})
