from __future__ import annotations

import calendar as pycalendar
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import QuerySet, prefetch_related_objects
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest, QueryDict
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.formats import get_format
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from attachments.forms import MemoryPhotosForm
from attachments.services import attachments_add
from config.form_inputs import add_service_errors
from config.limits import LATEST_YEAR
from config.pages import render_page
from memories import selectors, services, supersession
from memories.forms import (
    ADD_ROW,
    PARTICIPANT_MAX_ROWS,
    PARTICIPANT_PREFIX,
    SEARCH_MAX_LENGTH,
    MemoryForm,
    SupersedeForm,
    TimelineFilterForm,
    UnsupersedeForm,
    participant_formset,
    participant_formset_plus_row,
    participant_row_form,
)
from memories.mentions import mentions_find
from memories.models import Memory, ParticipantRole, SupersessionProposal
from memories.related import related_once
from memories.retrieval import memory_related
from people.selectors import person_list

PAGE_SIZE = 25
MAX_PAGE = 1_000_000
FILTER_FIELDS = ("person", "kind", "date_from", "date_to", "expired")
ON_THIS_DAY_SIDEBAR = 3
# Names an owner may be asked about (and add) in one save: a memory is not a guest list.
MAX_NEW_MENTIONS = 10


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


def _page(memories: QuerySet[Memory], page: int) -> tuple[list[Memory], bool, Memory | None]:
    """One page of cards, whether an older page exists, and the card just before this page."""
    # Far past any real journal; also keeps OFFSET inside PostgreSQL's bigint.
    if page > MAX_PAGE:
        return [], False, None
    # One extra row tells whether an older page exists without a COUNT query; one row
    # before the page tells whether its first card continues the previous page's month.
    start = (page - 1) * PAGE_SIZE
    first = max(start - 1, 0)
    rows = list(memories[first : start + PAGE_SIZE + 1])
    previous = rows.pop(0) if start > 0 and rows else None
    cards = rows[:PAGE_SIZE]
    # The cards' photos in one query (attachments' photo_strip reads them), not one per card.
    prefetch_related_objects(cards, "attachments")
    return cards, len(rows) > PAGE_SIZE, previous


def _with_month_headings(memories: list[Memory], previous: Memory | None) -> list[dict]:
    """Each card, with the month heading to show above it when its month starts there."""
    entries = []
    last_month = _month_of(previous) if previous is not None else None
    for memory in memories:
        month = _month_of(memory)
        entries.append({"memory": memory, "month": month if month != last_month else None})
        last_month = month
    return entries


def _month_of(memory: Memory) -> date:
    return timezone.localtime(memory.occurred_at).date().replace(day=1)


def _single_day(filter_form: TimelineFilterForm) -> date | None:
    """The day the timeline shows when it is filtered to exactly one (a calendar click)."""
    if not filter_form.is_valid():
        return None
    data = filter_form.cleaned_data
    if data["date_from"] and data["date_from"] == data["date_to"]:
        return data["date_from"]
    return None


# A month's grid shows the days around it: year 1's January would need year 0.
FIRST_CALENDAR_MONTH = date(2, 1, 1)


def _month_param(value: str | None) -> date | None:
    try:
        month = datetime.strptime(value or "", "%Y-%m").date()
    except ValueError:
        return None
    return month if FIRST_CALENDAR_MONTH <= month and month.year <= LATEST_YEAR else None


def _calendar_context(request: HttpRequest, month: date, *, highlight: date | None = None) -> dict:
    """A month grid of the owner's memory counts, weeks starting on the locale's first day."""
    month = min(max(month, FIRST_CALENDAR_MONTH), date(LATEST_YEAR, 12, 1))
    weeks = pycalendar.Calendar(firstweekday=(get_format("FIRST_DAY_OF_WEEK") - 1) % 7).monthdatescalendar(
        month.year, month.month
    )
    counts = selectors.memory_day_counts(owner=request.user, first=weeks[0][0], last=weeks[-1][-1])
    today = timezone.localdate()
    previous_month = None if month <= FIRST_CALENDAR_MONTH else (month - timedelta(days=1)).replace(day=1)
    next_month = (month + timedelta(days=32)).replace(day=1)
    return {
        "month": month,
        "weekdays": weeks[0],
        "weeks": [
            [
                {
                    "day": day,
                    "count": counts.get(day, 0),
                    "in_month": day.month == month.month,
                    "today": day == today,
                    "chosen": day == highlight,
                }
                for day in week
            ]
            for week in weeks
        ],
        "month_total": sum(count for day, count in counts.items() if day.month == month.month),
        "previous_month": previous_month,
        "next_month": next_month if next_month.year <= LATEST_YEAR else None,
        "this_month": today.replace(day=1),
    }


def _kept_filters(data) -> dict[str, str]:
    return {name: data[name] for name in FILTER_FIELDS if data.get(name)}


def _memory_list_context(request: HttpRequest, query, page: int = 1) -> dict:
    """The cards for a timeline page, with its filters (query: the timeline's GET parameters)."""
    filter_form = TimelineFilterForm(query or None, owner=request.user)
    memories, has_more, previous = _page(
        selectors.memory_list(owner=request.user, filters=_filters(filter_form)), page
    )
    kept_filters = _kept_filters(query)
    next_page_url = ""
    if has_more:
        next_page_url = reverse("timeline") + "?" + urlencode({**kept_filters, "page": page + 1})
    return {
        "filter_form": filter_form,
        "filtering": bool(kept_filters),
        "memories": memories,
        "entries": _with_month_headings(memories, previous),
        "page": page,
        "next_page_url": next_page_url,
        "return_query": urlencode(kept_filters),
    }


def _quick_add_context(
    request: HttpRequest,
    *,
    form: MemoryForm | None = None,
    participants=None,
    day: date | None = None,
    **extra,
) -> dict:
    if form is None:
        # On a day's page, a new memory belongs to that day unless told otherwise.
        form = MemoryForm(owner=request.user, initial={"occurred_at": day} if day else None)
    return {
        "form": form,
        "participants": participants if participants is not None else participant_formset(owner=request.user),
        **extra,
    }


def _timeline_context(request: HttpRequest, **quick_add) -> dict:
    context = _memory_list_context(request, request.GET, _page_number(request))
    day = _single_day(context["filter_form"])
    month = _month_param(request.GET.get("month")) or (day or timezone.localdate()).replace(day=1)
    today = timezone.localdate()
    on_this_day = selectors.memory_on_this_day(owner=request.user, day=today)
    context.update(
        {
            "day": day,
            "previous_day": day - timedelta(days=1) if day and day > date.min else None,
            "next_day": day + timedelta(days=1) if day and day.year <= LATEST_YEAR else None,
            "calendar": _calendar_context(request, month, highlight=day),
            "today": today,
            "on_this_day": on_this_day[:ON_THIS_DAY_SIDEBAR],
            "on_this_day_count": on_this_day.count(),
            **_quick_add_context(request, day=day, **quick_add),
        }
    )
    return context


@login_required
def timeline(request: HttpRequest) -> HttpResponse:
    """The owner's journal, newest first, by month; htmx asks for the next page of cards."""
    if request.htmx:
        context = _memory_list_context(request, request.GET, _page_number(request))
        return render(request, "memories/timeline.html#memory-page", context)
    return render(request, "memories/timeline.html", _timeline_context(request))


@dataclass
class _Saved:
    """What a save attempt came to: the memory, or the forms to show again (and a question)."""

    memory: Memory | None
    form: MemoryForm
    participants: object
    # Unknown @names waiting for the owner's answer: [{"name": ..., "checked": ...}].
    mention_question: list[dict] = field(default_factory=list)


def _answered_names(data, key: str) -> dict[str, str]:
    """casefold → name, for the names the form sent back (bounded: it comes from the client)."""
    names = {}
    for name in data.getlist(key)[: MAX_NEW_MENTIONS * 2]:
        name = " ".join(name.split())[:200]
        if name:
            names[name.casefold()] = name
    return names


def _mention_question(unknown: list[str], data) -> list[dict]:
    asked, added = _answered_names(data, "mention_asked"), _answered_names(data, "mention_add")
    return [
        # First time asked: ticked, since the owner wrote the @ on purpose.
        {"name": name, "checked": name.casefold() in added or name.casefold() not in asked}
        for name in unknown
    ]


def _save_memory(request: HttpRequest, *, memory: Memory | None) -> _Saved:
    """Validate the memory form, its people rows and @mentions; save all of it or nothing.

    Existing people mentioned with @ join the memory like a picked row (as subjects; a
    row's own role wins). An @name that is no one yet is never turned into a person
    silently: the form asks first, each name ticked, and only a second Save creates
    the ticked ones — pending, like any new person. Unticked names stay plain text.
    """
    form = MemoryForm(request.POST, owner=request.user)
    participants = participant_formset(owner=request.user, data=request.POST)
    # Photos are checked (type, size, pixels, whole decode) before anything is written.
    photos = MemoryPhotosForm(request.POST, request.FILES)
    valid = [form.is_valid(), participants.is_valid(), photos.is_valid()]
    if not photos.is_valid():
        for error in photos.non_field_errors():
            form.add_error(None, error)
        for error in photos.errors.get("photos", []):
            form.add_error(None, f"{error} Nothing was saved: choose the photos again.")
    if not all(valid):
        return _Saved(None, form, participants, _mention_question(_asked_only(request.POST), request.POST))
    existing, new = participants.chosen()
    mentions = mentions_find(text=form.cleaned_data["body"], people=person_list(owner=request.user))
    asked = _answered_names(request.POST, "mention_asked")
    typed_in_rows = {name.casefold() for name, _ in new}
    unknown = [name for name in mentions.unknown if name.casefold() not in typed_in_rows]
    if len(unknown) > MAX_NEW_MENTIONS:
        form.add_error("body", f"At most {MAX_NEW_MENTIONS} new names at once: add some people first.")
        return _Saved(None, form, participants)
    if any(name.casefold() not in asked for name in unknown):
        return _Saved(None, form, participants, _mention_question(unknown, request.POST))
    added = _answered_names(request.POST, "mention_add")
    in_rows = {person.pk for person, _ in existing}
    existing += [(person, ParticipantRole.SUBJECT) for person in mentions.known if person.pk not in in_rows]
    new += [(name, ParticipantRole.SUBJECT) for name in unknown if name.casefold() in added]
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
        # The memory and its new photos together: a refused photo (too many) saves neither.
        with transaction.atomic():
            if memory is None:
                saved = services.memory_create_with_new_people(owner=request.user, **fields)
            else:
                saved = services.memory_update_with_new_people(memory=memory, **fields)
            attachments_add(memory=saved, images=photos.cleaned_data["photos"])
    except ValidationError as error:
        # e.g. a password in the text: refused before anything is written; the
        # bound form keeps what was typed so it can be fixed in place.
        add_service_errors(form, error)
        return _Saved(None, form, participants, _mention_question(unknown, request.POST))
    return _Saved(saved, form, participants)


def _asked_only(data) -> list[str]:
    """On a form error, the names already asked about stay asked (with their ticks)."""
    return list(_answered_names(data, "mention_asked").values())


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


def _form_with_one_more_row(request: HttpRequest) -> tuple[MemoryForm, object]:
    """ "+ Add another person" without JavaScript: the same form back, one people row longer."""
    form = MemoryForm(
        initial={name: request.POST.get(name, "") for name in MemoryForm.base_fields},
        owner=request.user,
    )
    return form, participant_formset_plus_row(owner=request.user, data=request.POST)


def _return_query(request: HttpRequest) -> QueryDict:
    """The timeline's filters the quick-add form was sent from (to redraw that same list)."""
    return QueryDict(request.POST.get("return_query", "")[:2000])


@login_required
@require_POST
def memory_create(request: HttpRequest) -> HttpResponse:
    if ADD_ROW in request.POST:
        form, participants = _form_with_one_more_row(request)
        context = _timeline_context(
            request, form=form, participants=participants, more_open=True, capture_open=True
        )
        return render(request, "memories/timeline.html", context)
    saved = _save_memory(request, memory=None)
    if saved.memory is None:
        quick_add = {
            "form": saved.form,
            "participants": saved.participants,
            "mention_question": saved.mention_question,
            "more_open": _more_needed(saved.form, saved.participants),
            "capture_open": True,
        }
        if request.htmx:
            quick_add["return_query"] = request.POST.get("return_query", "")
            return render(request, "memories/timeline.html#quick-add", quick_add)
        return render(request, "memories/timeline.html", _timeline_context(request, **quick_add))
    if request.htmx:
        return _created_over_htmx(request, saved)
    messages.success(request, _saved_message(saved.form, saved.memory))
    return redirect("timeline")


def _more_needed(form: MemoryForm, participants) -> bool:
    """Whether the "More" part of a refused form holds an error or people: then it opens."""
    if any(name != "body" for name in form.errors) or participants.non_form_errors():
        return True
    return any(
        row.errors or row.data.get(row.add_prefix("person")) or row.data.get(row.add_prefix("new_name"))
        for row in participants.forms
    )


def _created_over_htmx(request: HttpRequest, saved: _Saved) -> HttpResponse:
    """A fresh form; the list redrawn (the new card where its date puts it); the calendar too."""
    query = _return_query(request)
    memory = selectors.memory_get(owner=request.user, memory_id=saved.memory.pk)
    listing = _memory_list_context(request, query)
    on_page = any(entry["memory"].pk == memory.pk for entry in listing["entries"])
    occurred = timezone.localtime(memory.occurred_at).date()
    day = _single_day(listing["filter_form"])
    context = {
        **listing,
        **_quick_add_context(request, day=day),
        "day": day,
        "return_query": listing["return_query"],
        "new_memory_id": memory.pk,
        "saved_message": _saved_message(saved.form, memory),
        "saved_elsewhere": None if on_page else occurred,
        "calendar": _calendar_context(request, occurred.replace(day=1), highlight=occurred),
        "oob": True,
    }
    return render(request, "memories/timeline.html#quick-add", context)


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


@login_required
@require_GET
def memory_calendar(request: HttpRequest) -> HttpResponse:
    """A month of the owner's journal, memories counted per day; htmx swaps the month in place."""
    month = _month_param(request.GET.get("month")) or timezone.localdate().replace(day=1)
    # ?in=timeline: the small calendar beside the timeline, whose links stay on the timeline.
    context = {
        "calendar": _calendar_context(request, month),
        "in_timeline": request.GET.get("in") == "timeline",
    }
    return render_page(request, "memories/calendar.html", "calendar", context)


@login_required
@require_GET
def memory_on_this_day(request: HttpRequest) -> HttpResponse:
    """The owner's memories from this day in earlier years (`?date=` for another day)."""
    try:
        day = date.fromisoformat(request.GET.get("date", ""))
    except ValueError:
        day = timezone.localdate()
    memories = list(selectors.memory_on_this_day(owner=request.user, day=day)[:200])
    years = []
    for memory in memories:
        year = timezone.localtime(memory.occurred_at).year
        if not years or years[-1]["year"] != year:
            years.append({"year": year, "ago": day.year - year, "memories": []})
        years[-1]["memories"].append(memory)
    context = {
        "day": day,
        "is_today": day == timezone.localdate(),
        "years": years,
        "previous_day": day - timedelta(days=1) if day > date.min else None,
        "next_day": day + timedelta(days=1) if day.year <= LATEST_YEAR else None,
    }
    return render(request, "memories/on_this_day.html", context)


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
    return render_page(
        request, "memories/memory_detail.html", "memory-main", _memory_page_context(request, memory)
    )


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
            add_service_errors(form, error)
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
    mention_question: list[dict] = []
    if request.method == "POST" and ADD_ROW in request.POST:
        form, participants = _form_with_one_more_row(request)
    elif request.method == "POST":
        saved = _save_memory(request, memory=memory)
        if saved.memory is not None:
            messages.success(request, _saved_message(saved.form, saved.memory))
            return redirect("memory_detail", memory_id=memory.pk)
        form, participants, mention_question = saved.form, saved.participants, saved.mention_question
    else:
        form = MemoryForm(initial=MemoryForm.initial_for(memory), owner=request.user)
        participants = participant_formset(owner=request.user, memory=memory)
    context = {
        "memory": memory,
        "form": form,
        "participants": participants,
        "mention_question": mention_question,
    }
    return render_page(request, "memories/memory_form.html", "memory-form", context)


@login_required
@require_http_methods(["GET", "POST"])
def memory_delete(request: HttpRequest, memory_id) -> HttpResponse:
    """GET asks for confirmation; only POST deletes."""
    memory = selectors.memory_get(owner=request.user, memory_id=memory_id)
    if request.method == "POST":
        services.memory_delete(memory=memory)
        messages.success(request, "Memory deleted.")
        return redirect("timeline")
    return render_page(request, "memories/memory_confirm_delete.html", "confirm-delete", {"memory": memory})
