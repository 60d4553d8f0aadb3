"""My consents (SPEC §4 "Linked people", §6): where a person linked to an entry in someone
else's journal decides, audience by audience, who may see memories about them there.

They see each journal's owner, each of its audiences (the owner's agents, each of the
owner's circles by name), the status, reason, who changed it and when, and how many
of the owner's memories they are in — counts only, never a memory. Every person and
request is found through a getter that 404s unless it is linked to the caller.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect

from agents.selectors import consent_request_get_for_linked_user
from agents.services import consent_request_answer_by_person
from circles.selectors import (
    LinkedJournal,
    LinkedPerson,
    linked_audience_label,
    linked_consents_for_user,
    linked_person_audiences,
    linked_person_get,
)
from people.forms import ConsentForm
from people.models import ConsentActor, ConsentSurface, Person
from people.services import linked_user_consents_revoke_all, person_set_consent, person_unlink

REVOKE_ALL_REASON = "Revoked everything for this journal."
MAX_BULK_REASON_LENGTH = 500


def _entry_item(
    entry: LinkedPerson,
    *,
    bound: ConsentForm | None = None,
    bound_audience: str = "",
    saved_audience: str = "",
    message: str = "",
    error: str = "",
) -> dict:
    """One linked person's block: each audience with its switch (a refused one comes back bound)."""
    owner = entry.person.owner
    rows = []
    for index, linked in enumerate(entry.audiences):
        consent = linked.consent
        form = bound if bound is not None and consent.audience == bound_audience else None
        if form is None:
            form = ConsentForm(initial={"status": consent.status}, auto_id=f"id_{entry.person.pk}_{index}_%s")
        rows.append(
            {
                "consent": consent,
                "label": linked_audience_label(consent=consent, owner=owner),
                "is_circle": consent.circle is not None,
                "memory_count": linked.memory_count,
                "decided_by": "you" if consent.updated_by == ConsentActor.SELF else owner.get_username(),
                "form": form,
                "saved": consent.audience == saved_audience,
            }
        )
    return {"entry": entry, "owner": owner, "rows": rows, "message": message, "error": error}


def _journals(request: HttpRequest) -> list[LinkedJournal]:
    return linked_consents_for_user(user=request.user)


def _entry_for(request: HttpRequest, person: Person) -> LinkedPerson:
    for journal in _journals(request):
        for entry in journal.people:
            if entry.person.pk == person.pk:
                return entry
    raise Http404("No such person.")


def _page_context(request: HttpRequest, replace: dict | None = None) -> dict:
    """Every journal that links the caller; `replace` is one person's block as a view just built it."""
    journals = []
    for journal in _journals(request):
        items = []
        for entry in journal.people:
            if replace is not None and replace["entry"].person.pk == entry.person.pk:
                items.append(replace)
            else:
                items.append(_entry_item(entry))
        journals.append({"owner": journal.owner, "items": items})
    return {"journals": journals}


def _person_response(request: HttpRequest, item: dict) -> HttpResponse:
    """htmx: the person's block in place. Without JavaScript: the page, at that person."""
    if request.htmx:
        return render(request, "consents/my_consents.html#linked-person", {"item": item})
    return render(request, "consents/my_consents.html", _page_context(request, replace=item))


@login_required
@require_GET
def my_consents(request: HttpRequest) -> HttpResponse:
    template = "consents/my_consents.html" + ("#my-consents" if request.htmx else "")
    return render(request, template, _page_context(request))


@login_required
@require_POST
def my_consent_set(request: HttpRequest, person_id) -> HttpResponse:
    """Grant, revoke or reset to pending one audience, as the person themself, with an optional reason."""
    person = linked_person_get(user=request.user, person_id=person_id)
    audience = request.POST.get("audience", "")
    form = ConsentForm(request.POST)
    error = ""
    if audience not in linked_person_audiences(person=person):
        error = (
            f"{person.owner.get_username()}'s journal has no such audience (a circle may have been deleted)."
        )
    elif form.is_valid():
        try:
            event = person_set_consent(
                person=person,
                status=form.cleaned_data["status"],
                reason=form.cleaned_data["reason"],
                actor=request.user,
                audience=audience,
                surface=ConsentSurface.UI,
                actor_kind=ConsentActor.SELF,
            )
        except ValidationError as refused:
            error = " ".join(refused.messages)
        except PermissionDenied as refused:
            error = str(refused)
        else:
            entry = _entry_for(request, person)
            label = next(
                linked_audience_label(consent=linked.consent, owner=person.owner)
                for linked in entry.audiences
                if linked.consent.audience == audience
            )
            status = form.cleaned_data["status"]
            message = f"{label}: {status}." if event is not None else f"{label} was already {status}."
            if request.htmx:
                return _person_response(request, _entry_item(entry, saved_audience=audience, message=message))
            messages.success(request, message)
            return redirect(reverse("my_consents") + f"#linked-{person.pk}")
    item = _entry_item(
        _entry_for(request, person),
        bound=form,
        bound_audience=audience,
        error=error or "Please correct the errors below.",
    )
    return _person_response(request, item)


# --- consent requests from the owner's agents ---------------------------------------------------


def _answer(request: HttpRequest, consent_request_id, *, grant: bool) -> HttpResponse:
    consent_request = consent_request_get_for_linked_user(
        user=request.user, consent_request_id=consent_request_id
    )
    person = consent_request.person
    error = message = ""
    try:
        consent_request_answer_by_person(consent_request=consent_request, user=request.user, grant=grant)
    except ValidationError as refused:  # already answered
        error = " ".join(refused.messages)
    else:
        owner = person.owner.get_username()
        message = f"Granted: {owner}'s agents may use memories about you." if grant else "Request dismissed."
    if request.htmx:
        return _person_response(
            request, _entry_item(_entry_for(request, person), message=message, error=error)
        )
    if error:
        messages.info(request, error)
    else:
        messages.success(request, message)
    return redirect(reverse("my_consents") + f"#linked-{person.pk}")


@login_required
@require_POST
def my_consent_request_grant(request: HttpRequest, consent_request_id) -> HttpResponse:
    return _answer(request, consent_request_id, grant=True)


@login_required
@require_POST
def my_consent_request_dismiss(request: HttpRequest, consent_request_id) -> HttpResponse:
    return _answer(request, consent_request_id, grant=False)


# --- revoke everything for a journal, unlink me ------------------------------------------------------


def _done(request: HttpRequest, url: str) -> HttpResponse:
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)


@login_required
@require_http_methods(["GET", "POST"])
def my_consents_revoke_all(request: HttpRequest, owner_id: int) -> HttpResponse:
    """Revoke every audience of every entry about me in one journal (GET asks first)."""
    journal = next((j for j in _journals(request) if j.owner.pk == owner_id), None)
    if journal is None:
        raise Http404("No journal links you there.")
    owner = journal.owner.get_username()
    reason = " ".join(request.POST.get("reason", "").split())[:MAX_BULK_REASON_LENGTH]
    if request.method == "POST":
        changed = linked_user_consents_revoke_all(
            user=request.user, reason=reason or REVOKE_ALL_REASON, owner_id=journal.owner.pk
        )
        messages.success(
            request,
            f"Everything is revoked in {owner}'s journal ({changed} change{'s' if changed != 1 else ''}): "
            "memories about you are hidden from their agents and their circles.",
        )
        return _done(request, reverse("my_consents"))
    template = "consents/confirm_revoke_all.html" + ("#confirm" if request.htmx else "")
    return render(request, template, {"journal": journal, "owner": owner})


@login_required
@require_http_methods(["GET", "POST"])
def my_unlink(request: HttpRequest, person_id) -> HttpResponse:
    """Unlink me from an entry in someone's journal (GET asks first): my last choices stay."""
    person = linked_person_get(user=request.user, person_id=person_id)
    if request.method == "POST":
        person_unlink(person=person, by=request.user)
        messages.success(
            request,
            f"Unlinked from {person.owner.get_username()}'s journal. Your last choices stay; "
            "they decide from now on.",
        )
        return _done(request, reverse("my_consents"))
    template = "consents/confirm_unlink.html" + ("#confirm" if request.htmx else "")
    return render(request, template, {"person": person, "owner": person.owner.get_username()})
