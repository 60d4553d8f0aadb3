"""Linked people's pages (SPEC §4 "Linked people", §6), one URL per action.

The owner's side, on the person page: invite (the link is shown once), withdraw, unlink.
The person's side: the link page (`/links/<token>/`: who invites and what it means,
Accept) and My consents (`/me/consents/`), where a person linked to an entry in someone
else's journal decides, audience by audience, who may see memories about them there,
answers the requests of that journal's agents, revokes everything, or unlinks.

They see each journal's owner, each of its audiences (the owner's agents, each of the
owner's circles by name), the status, reason, who changed it and when, and how many
of the owner's memories they are in — counts only, never a memory. Every person and
request is found through a getter that 404s unless it is the caller's own (the owner's
side) or linked to the caller (My consents); every refused token is one 404 naming nobody.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from config.pages import go_to, render_page
from linked import selectors, services
from linked.templatetags.linked_tags import link_panel_context
from mail.forms import InvitationForm
from mail.services import invitation_recipient, link_invitation_deliver
from mail.views import MAIL_RATE_LIMITED, mail_rate_limited, site_url
from people.forms import ConsentForm
from people.models import ConsentActor, ConsentSurface, Person
from people.selectors import person_get
from people.services import person_is_linked, person_set_consent
from people.views import person_page_context

# --- linking a person to their own account (the owner's side) ------------------------------------


def _link_url(request: HttpRequest, token: str) -> str:
    return request.build_absolute_uri(reverse("person_link", args=[token]))


def _link_panel(request: HttpRequest, person: Person, **words) -> HttpResponse:
    """htmx: the person page's link panel in place. Without JavaScript: the whole person page."""
    if request.htmx:
        return render(request, "linked/_link_panel.html", link_panel_context(person=person, **words))
    return render(request, "people/person_detail.html", person_page_context(request, person, **words))


@never_cache  # the link is shown once; no cache may keep a copy of it
@login_required
@require_POST
def person_link_invite_create(request: HttpRequest, person_id) -> HttpResponse:
    """A link invitation for the person themself: the link is shown once, here."""
    person = person_get(owner=request.user, person_id=person_id)
    try:
        invite, token = services.person_link_invite_create(person=person, by=request.user)
    except ValidationError as refused:  # Self, or already linked
        return _link_panel(request, person, link_error=" ".join(refused.messages))
    # The new link replaced any open one (services.person_link_invite_create).
    return _link_panel(request, person, new_link_invite=invite, new_link_url=_link_url(request, token))


@login_required
@require_POST
def person_link_invite_send(request: HttpRequest, person_id) -> HttpResponse:
    """A link invitation sent by e-mail (by the worker) or to an account's inbox; it replaces
    any open one, as a copied link does. The message names the inviter, never the person."""
    person = person_get(owner=request.user, person_id=person_id)
    form = InvitationForm(request.POST)
    if not form.is_valid():
        return _link_panel(request, person, link_error=" ".join(form.errors.get("to", ["Give an address."])))
    if mail_rate_limited(request):
        return _link_panel(request, person, link_error=MAIL_RATE_LIMITED)
    try:
        with transaction.atomic():  # the invitation and its message commit together, or neither
            recipient = invitation_recipient(to=form.cleaned_data["to"], inviter=request.user)
            invite, token = services.person_link_invite_create(person=person, by=request.user)
            link_invitation_deliver(
                recipient=recipient,
                inviter=request.user,
                link=_link_url(request, token),
                expires_at=invite.expires_at,
                site_url=site_url(request),
            )
    except ValidationError as refused:  # no such account, Self, or already linked
        return _link_panel(request, person, link_error=" ".join(refused.messages))
    sent = f"Invitation sent {recipient.where}. It replaces any link you made before."
    return _link_panel(request, person, link_message=sent)


@login_required
@require_POST
def person_link_invite_revoke(request: HttpRequest, person_id, invite_id) -> HttpResponse:
    invite = selectors.person_link_invite_get(owner=request.user, person_id=person_id, invite_id=invite_id)
    services.person_link_invite_revoke(invite=invite, by=request.user)
    message = "Link invitation withdrawn: it no longer works."
    if request.htmx:
        return _link_panel(request, invite.person, link_message=message)
    messages.success(request, message)
    return redirect(reverse("person_detail", args=[invite.person_id]) + "#link-panel")


@login_required
@require_http_methods(["GET", "POST"])
def person_unlink(request: HttpRequest, person_id) -> HttpResponse:
    """The owner unlinks (GET asks first): the person's last choices stay, and the owner decides again."""
    person = person_get(owner=request.user, person_id=person_id)
    if not person_is_linked(person):
        messages.info(request, f"{person.display_name} is not linked to an account.")
        return redirect("person_detail", person_id=person.pk)
    if request.method == "POST":
        services.person_unlink(person=person, by=request.user)
        messages.success(
            request, f"Unlinked {person.display_name}. Their last choices stay; you decide from now on."
        )
        url = reverse("person_detail", args=[person.pk])
        return go_to(request, url)
    return render_page(request, "linked/person_confirm_unlink.html", "confirm-unlink", {"person": person})


# --- the link page (the person themself) ----------------------------------------------------------


def _link_refused(request: HttpRequest, refused: services.LinkInvalid) -> HttpResponse:
    """One answer for every refused token, a 404 naming nobody (SPEC §4), as the API's."""
    return render_page(
        request, "linked/link.html", "link-card", {"invalid": " ".join(refused.messages)}, status=404
    )


def _link_check(request: HttpRequest, token: str):
    """The invite, or the one response for a token that cannot be used here (and changes nothing):
    unknown, used, withdrawn, replaced, expired, for a person already linked, or the
    visitor's own journal all look alike, so a token tells its holder nothing about anyone."""
    try:
        if request.user.is_authenticated:
            invite = services.person_link_invite_check_for_user(token=token, user=request.user)
        else:
            invite = services.person_link_invite_check(token=token)
    except services.LinkInvalid as refused:
        return None, _link_refused(request, refused)
    return invite, None


@never_cache
@require_GET
def person_link(request: HttpRequest, token: str) -> HttpResponse:
    """Who invites you and what linking means, with Accept — or sign in / sign up first and come back."""
    invite, refused = _link_check(request, token)
    if refused is not None:
        return refused
    context = {
        "invite": invite,
        "inviter": invite.person.owner,
        "link_path": reverse("person_link", args=[token]),
        "accept_url": reverse("person_link_accept", args=[token]),
    }
    return render_page(request, "linked/link.html", "link-card", context)


@never_cache
@require_POST
def person_link_accept(request: HttpRequest, token: str) -> HttpResponse:
    if not request.user.is_authenticated:
        return redirect_to_login(reverse("person_link", args=[token]))
    _, refused = _link_check(request, token)
    if refused is not None:
        return refused
    try:
        person = services.person_link_accept(token=token, user=request.user)
    except services.LinkInvalid as refused:  # used, replaced or linked a moment ago
        return _link_refused(request, refused)
    messages.success(
        request,
        f"Linked. You now decide who may see memories about you in {person.owner.get_username()}'s journal.",
    )
    url = reverse("my_consents") + f"#linked-{person.pk}"
    return go_to(request, url)


# --- My consents (the person themself) -----------------------------------------------------------

REVOKE_ALL_REASON = "Revoked everything for this journal."
MAX_BULK_REASON_LENGTH = 500


def _entry_item(
    entry: selectors.LinkedPerson,
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
                "label": selectors.linked_audience_label(consent=consent, owner=owner),
                "is_circle": consent.circle is not None,
                "memory_count": linked.memory_count,
                "decided_by": "you" if consent.updated_by == ConsentActor.SELF else owner.get_username(),
                "form": form,
                "saved": consent.audience == saved_audience,
            }
        )
    return {"entry": entry, "owner": owner, "rows": rows, "message": message, "error": error}


def _journals(request: HttpRequest) -> list[selectors.LinkedJournal]:
    return selectors.linked_consents_for_user(user=request.user)


def _entry_for(request: HttpRequest, person: Person) -> selectors.LinkedPerson:
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
        return render(request, "linked/my_consents.html#linked-person", {"item": item})
    return render(request, "linked/my_consents.html", _page_context(request, replace=item))


@login_required
@require_GET
def my_consents(request: HttpRequest) -> HttpResponse:
    return render_page(request, "linked/my_consents.html", "my-consents", _page_context(request))


@login_required
@require_POST
def my_consent_set(request: HttpRequest, person_id) -> HttpResponse:
    """Grant, revoke or reset to pending one audience, as the person themself, with an optional reason."""
    person = selectors.linked_person_get(user=request.user, person_id=person_id)
    audience = request.POST.get("audience", "")
    form = ConsentForm(request.POST)
    error = ""
    if audience not in selectors.linked_person_audiences(person=person):
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
                selectors.linked_audience_label(consent=linked.consent, owner=person.owner)
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
    consent_request = selectors.consent_request_get_for_linked_user(
        user=request.user, consent_request_id=consent_request_id
    )
    person = consent_request.person
    error = message = ""
    try:
        services.consent_request_answer_by_person(
            consent_request=consent_request, user=request.user, grant=grant
        )
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
        changed = services.linked_user_consents_revoke_all(
            user=request.user, reason=reason or REVOKE_ALL_REASON, owner_id=journal.owner.pk
        )
        messages.success(
            request,
            f"Everything is revoked in {owner}'s journal ({changed} change{'s' if changed != 1 else ''}): "
            "memories about you are hidden from their agents and their circles.",
        )
        return go_to(request, reverse("my_consents"))
    return render_page(
        request, "linked/confirm_revoke_all.html", "confirm", {"journal": journal, "owner": owner}
    )


@login_required
@require_http_methods(["GET", "POST"])
def my_unlink(request: HttpRequest, person_id) -> HttpResponse:
    """Unlink me from an entry in someone's journal (GET asks first): my last choices stay."""
    person = selectors.linked_person_get(user=request.user, person_id=person_id)
    if request.method == "POST":
        services.person_unlink(person=person, by=request.user)
        messages.success(
            request,
            f"Unlinked from {person.owner.get_username()}'s journal. Your last choices stay; "
            "they decide from now on.",
        )
        return go_to(request, reverse("my_consents"))
    return render_page(
        request,
        "linked/confirm_unlink.html",
        "confirm",
        {"person": person, "owner": person.owner.get_username()},
    )
