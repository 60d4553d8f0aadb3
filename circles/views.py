"""The circles pages (SPEC §4, §6): my circles, a circle's page, invite links,
sharing from a memory's page, and consent per circle from a person's page.

Every circle is read fresh on every request through a getter that 404s unless
the caller is a member (or, for managing it, its owner): leaving or removal
takes effect on the next request. What a member sees comes from the gate
(circles.selectors.circle_timeline / circle_memory_search); every memory shown
to someone who is not its owner is written to its owner's access log.
"""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import AbstractBaseUser
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import prefetch_related_objects
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.defaultfilters import pluralize
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from attachments.forms import MemoryPhotosForm
from attachments.services import attachments_add
from circles import selectors, services
from circles.forms import CircleForm, CircleMemoryForm, InviteForm
from circles.models import Circle, MembershipRole
from config.form_inputs import add_service_errors
from config.limits import MAX_PAGE
from config.pages import go_to, render_page
from mail.forms import InvitationForm
from mail.services import circle_invitation_deliver, invitation_recipient
from mail.views import MAIL_RATE_LIMITED, mail_rate_limited, site_url
from memories.gate_explain import memory_privacy_audit
from memories.models import Memory
from memories.retrieval import circle_memory_search
from memories.selectors import memory_get
from people.forms import ConsentForm
from people.selectors import person_get
from people.services import person_set_consent

# The person page's own context builder: a refused circle consent re-renders that
# page exactly as people.views does, rather than a second copy that could drift.
from people.views import person_page_context

PAGE_SIZE = 25
SEARCH_LIMIT = 30
MAX_QUERY_LENGTH = 500
INVITES_SHOWN = 20


def _page_number(request: HttpRequest) -> int:
    try:
        return min(max(1, int(request.GET.get("page", "1"))), MAX_PAGE + 1)
    except ValueError:
        return 1


def _record_shown(memories: list[Memory], viewer: AbstractBaseUser) -> None:
    # The owner's own reads are skipped by the service: the log answers "who else saw this".
    services.circle_access_log_record(memories=memories, viewer=viewer)


def _timeline_page(request: HttpRequest, circle: Circle) -> tuple[list[Memory], int, str]:
    """One page of what the viewer may see in the circle (shown, so logged), and the next page's URL."""
    page = _page_number(request)
    if page > MAX_PAGE:  # keeps OFFSET inside PostgreSQL's bigint
        return [], page, ""
    start = (page - 1) * PAGE_SIZE
    # One extra row tells whether an older page exists without a COUNT query.
    rows = list(selectors.circle_timeline(circle=circle, viewer=request.user)[start : start + PAGE_SIZE + 1])
    memories = rows[:PAGE_SIZE]
    _record_shown(memories, request.user)
    # "Seen by N of M" on the viewer's own memories only: how many others see someone
    # else's memory would tell which members are linked to the people in it.
    own = [memory.pk for memory in memories if memory.owner_id == request.user.pk]
    seen, member_count = selectors.circle_seen_counts(circle=circle, memory_ids=own)
    for memory in memories:
        if memory.pk in seen:
            memory.seen_by, memory.member_count = seen[memory.pk], member_count
    next_url = ""
    if len(rows) > PAGE_SIZE:
        next_url = reverse("circle_detail", args=[circle.pk]) + "?" + urlencode({"page": page + 1})
    return memories, page, next_url


def _circle_context(request: HttpRequest, circle: Circle, *, timeline: bool = True, **extra) -> dict:
    """Everything the circle's page may show. Querysets stay lazy: a fragment evaluates only its own."""
    is_owner = circle.owner_id == request.user.pk
    memories, page, next_url = _timeline_page(request, circle) if timeline else ([], 1, "")
    context = {
        "circle": circle,
        "is_owner": is_owner,
        "members": selectors.circle_members(circle=circle),
        "memories": memories,
        "page": page,
        "next_page_url": next_url,
        "query": "",
        "add_form": CircleMemoryForm(owner=request.user),
    }
    if is_owner:
        context.update(
            invites=selectors.circle_invites(circle=circle)[:INVITES_SHOWN],
            invite_form=InviteForm(),
            send_form=InvitationForm(),
            join_requests=selectors.circle_join_requests(circle=circle),
        )
    context.update(extra)
    return context


# --- my circles -------------------------------------------------------------------------------


def _list_context(request: HttpRequest, **extra) -> dict:
    waiting_for_me = selectors.circle_pending_request_counts(user=request.user)
    return {
        "rows": [
            {"circle": circle, "requests": waiting_for_me.get(circle.pk, 0)}
            for circle in selectors.circle_list_for_user(user=request.user)
        ],
        "waiting": selectors.join_requests_waiting_for_user(user=request.user),
        "form": CircleForm(),
        **extra,
    }


@login_required
@require_GET
def circle_list(request: HttpRequest) -> HttpResponse:
    return render_page(request, "circles/circle_list.html", "circle-table", _list_context(request))


@login_required
@require_POST
def circle_create(request: HttpRequest) -> HttpResponse:
    form = CircleForm(request.POST)
    if form.is_valid():
        try:
            circle = services.circle_create(owner=request.user, **form.cleaned_data)
        except ValidationError as error:
            add_service_errors(form, error)
        else:
            messages.success(request, f"Created {circle.name}. Make an invite link to ask people in.")
            return go_to(request, reverse("circle_detail", args=[circle.pk]))
    return render_page(
        request, "circles/circle_list.html", "circle-create", _list_context(request, form=form)
    )


# --- a circle's page --------------------------------------------------------------------------


@login_required
@require_GET
def circle_detail(request: HttpRequest, circle_id) -> HttpResponse:
    """The circle's timeline, members and (for its owner) invites and requests.

    htmx asks for the next page of the timeline (infinite scroll).
    """
    circle = selectors.circle_get_for_member(user=request.user, circle_id=circle_id)
    return render_page(request, "circles/circle_detail.html", "memory-page", _circle_context(request, circle))


@login_required
@require_GET
def circle_search(request: HttpRequest, circle_id) -> HttpResponse:
    """`?q=` over what the viewer may see in the circle: the page, or the results list for htmx."""
    circle = selectors.circle_get_for_member(user=request.user, circle_id=circle_id)
    query = " ".join(request.GET.get("q", "").split())
    if not query:
        return render_page(
            request, "circles/circle_detail.html", "circle-memories", _circle_context(request, circle)
        )
    search_error = ""
    if len(query) > MAX_QUERY_LENGTH:
        search_error = f"Search text is too long: {MAX_QUERY_LENGTH} characters at most."
    elif "\x00" in query:
        # PostgreSQL cannot compare text holding NUL; no memory could match it anyway.
        search_error = "Search text cannot contain a NUL character."
    if search_error:
        context = _circle_context(request, circle, timeline=False, query=query, search_error=search_error)
        return render_page(request, "circles/circle_detail.html", "circle-memories", context, status=400)
    hits = circle_memory_search(circle.pk, [request.user.pk], query, limit=SEARCH_LIMIT)
    memories = [hit.memory for hit in hits]
    prefetch_related_objects(memories, "owner")
    _record_shown(memories, request.user)
    context = _circle_context(request, circle, timeline=False, query=query, memories=memories)
    return render_page(request, "circles/circle_detail.html", "circle-memories", context)


def _share_refused_message(refused: services.ShareRefused, *, memory: Memory, saved: bool) -> SafeString:
    """Who has not consented, each linking to their person page (the owner's own people)."""
    names = format_html_join(
        ", ",
        '<a href="{}">{}</a> ({})',
        (
            (reverse("person_detail", args=[item.person.pk]), item.person.display_name, item.status)
            for item in refused.not_consented
        ),
    )
    if saved:
        return format_html(
            "Saved in your journal, but not shared into {}: not everyone in it has consented to this "
            'circle — {}. <a href="{}">Open the memory</a> to share it once they have.',
            refused.circle.name,
            names,
            reverse("memory_detail", args=[memory.pk]),
        )
    return format_html(
        "Not shared into {}: not everyone in it has consented to this circle — {}. Nothing was shared.",
        refused.circle.name,
        names,
    )


@login_required
@require_POST
def circle_memory_create(request: HttpRequest, circle_id) -> HttpResponse:
    """Write a memory in my journal from the circle's page and share it into the circle."""
    circle = selectors.circle_get_for_member(user=request.user, circle_id=circle_id)
    form = CircleMemoryForm(request.POST, owner=request.user)
    # Photos are checked before anything is written (attachments.forms).
    photos = MemoryPhotosForm(request.POST, request.FILES)
    result = None
    if form.is_valid() and photos.is_valid():
        try:
            # The memory, its share and its photos together: a refused photo saves none of them.
            with transaction.atomic():
                result = services.circle_memory_create(
                    circle=circle,
                    owner=request.user,
                    body=form.cleaned_data["body"],
                    title=form.cleaned_data["title"],
                    sensitivity=form.cleaned_data["sensitivity"],
                    people=form.cleaned_data["people"],
                )
                attachments_add(memory=result.memory, images=photos.cleaned_data["photos"])
        except ValidationError as error:  # e.g. a password in the text: nothing was written
            result = None
            add_service_errors(form, error)
    elif not photos.is_valid():
        for error in [*photos.non_field_errors(), *photos.errors.get("photos", [])]:
            form.add_error(None, error)
    if result is None:
        if request.htmx:
            return render(
                request, "circles/circle_detail.html#circle-add", {"circle": circle, "add_form": form}
            )
        return render(request, "circles/circle_detail.html", _circle_context(request, circle, add_form=form))
    if result.refused is not None:
        level, message = (
            messages.WARNING,
            _share_refused_message(result.refused, memory=result.memory, saved=True),
        )
    else:
        level, message = messages.SUCCESS, format_html("Memory saved and shared into {}.", circle.name)
    if request.htmx:
        new_memory = None
        if result.refused is None:
            new_memory = (
                selectors.circle_timeline(circle=circle, viewer=request.user)
                .filter(pk=result.memory.pk)
                .first()
            )
        context = {
            "circle": circle,
            "add_form": CircleMemoryForm(owner=request.user),
            "new_memory": new_memory,
            "saved_message": message,
            "saved_level": "success" if level == messages.SUCCESS else "warning",
        }
        return render(request, "circles/circle_detail.html#circle-add", context)
    messages.add_message(request, level, message)
    return redirect("circle_detail", circle_id=circle.pk)


@login_required
@require_GET
def circle_memory_detail(request: HttpRequest, circle_id, memory_id) -> HttpResponse:
    """A memory someone shared into the circle, read-only — or 404 if the gate says no."""
    circle = selectors.circle_get_for_member(user=request.user, circle_id=circle_id)
    memory = selectors.circle_memory_get(circle=circle, viewer=request.user, memory_id=memory_id)
    if memory.owner_id == request.user.pk:
        return redirect("memory_detail", memory_id=memory.pk)
    _record_shown([memory], request.user)
    return render_page(
        request, "circles/circle_memory_detail.html", "circle-memory", {"circle": circle, "memory": memory}
    )


# --- the owner: edit, delete, members ---------------------------------------------------------


@login_required
@require_http_methods(["GET", "POST"])
def circle_edit(request: HttpRequest, circle_id) -> HttpResponse:
    circle = selectors.circle_get_for_owner(user=request.user, circle_id=circle_id)
    if request.method == "POST":
        form = CircleForm(request.POST)
        if form.is_valid():
            try:
                services.circle_update(circle=circle, by=request.user, **form.cleaned_data)
            except ValidationError as error:
                add_service_errors(form, error)
            else:
                messages.success(request, f"Saved {circle.name}.")
                return go_to(request, reverse("circle_detail", args=[circle.pk]))
    else:
        form = CircleForm(initial=CircleForm.initial_for(circle))
    return render_page(request, "circles/circle_form.html", "circle-form", {"circle": circle, "form": form})


@login_required
@require_http_methods(["GET", "POST"])
def circle_delete(request: HttpRequest, circle_id) -> HttpResponse:
    """GET asks for confirmation; only POST deletes (the shares go, never a memory)."""
    circle = selectors.circle_get_for_owner(user=request.user, circle_id=circle_id)
    if request.method == "POST":
        name = circle.name
        services.circle_delete(circle=circle, by=request.user)
        messages.success(request, f"Deleted {name}. Every memory shared in it stays in its owner's journal.")
        return go_to(request, reverse("circle_list"))
    context = {
        "circle": circle,
        "member_count": circle.memberships.count(),
        "share_count": circle.shares.count(),
    }
    return render_page(request, "circles/circle_confirm_delete.html", "confirm", context)


@login_required
@require_http_methods(["GET", "POST"])
def circle_leave(request: HttpRequest, circle_id) -> HttpResponse:
    """A member leaves (GET asks first). What they shared there is unshared; their memories stay theirs."""
    circle = selectors.circle_get_for_member(user=request.user, circle_id=circle_id)
    error = ""
    if request.method == "POST":
        try:
            services.membership_remove(circle=circle, user_id=request.user.pk, by=request.user)
        except ValidationError as refused:
            error = " ".join(refused.messages)
        else:
            messages.success(request, f"You left {circle.name}.")
            return go_to(request, reverse("circle_list"))
    context = {"circle": circle, "error": error, "is_owner": circle.owner_id == request.user.pk}
    return render_page(request, "circles/circle_confirm_leave.html", "confirm", context)


@login_required
@require_http_methods(["GET", "POST"])
def circle_member_remove(request: HttpRequest, circle_id, user_id: int) -> HttpResponse:
    """The owner removes a member (GET asks first); it takes effect on their next request."""
    circle = selectors.circle_get_for_owner(user=request.user, circle_id=circle_id)
    membership = get_object_or_404(
        circle.memberships.select_related("user").exclude(role=MembershipRole.OWNER), user_id=user_id
    )
    if request.method == "POST":
        services.membership_remove(circle=circle, user_id=membership.user_id, by=request.user)
        messages.success(request, f"Removed {membership.user.get_username()} from {circle.name}.")
        return go_to(request, reverse("circle_detail", args=[circle.pk]))
    return render_page(
        request, "circles/circle_confirm_remove.html", "confirm", {"circle": circle, "membership": membership}
    )


# --- the owner: invite links and join requests ------------------------------------------------


def _invite_url(request: HttpRequest, token: str) -> str:
    return request.build_absolute_uri(reverse("circle_invite", args=[token]))


@never_cache  # the link is shown once; no cache may keep a copy of it
@login_required
@require_POST
def circle_invite_create(request: HttpRequest, circle_id) -> HttpResponse:
    circle = selectors.circle_get_for_owner(user=request.user, circle_id=circle_id)
    form = InviteForm(request.POST)
    extra: dict = {"invite_form": form}
    if form.is_valid():
        try:
            new = services.invite_create(circle=circle, by=request.user, days=form.cleaned_data["days"])
        except ValidationError as error:
            add_service_errors(form, error)
        else:
            extra = {"new_invite": new.invite, "new_invite_url": _invite_url(request, new.token)}
    if request.htmx:
        context = _circle_context(request, circle, timeline=False, **extra)
        return render(request, "circles/circle_detail.html#circle-invites", context)
    return render(request, "circles/circle_detail.html", _circle_context(request, circle, **extra))


@login_required
@require_POST
def circle_invite_send(request: HttpRequest, circle_id) -> HttpResponse:
    """An invite link of its own for one person, sent by e-mail (by the worker) or to their inbox."""
    circle = selectors.circle_get_for_owner(user=request.user, circle_id=circle_id)
    form = InvitationForm(request.POST)
    extra: dict = {"send_form": form}
    if form.is_valid() and mail_rate_limited(request):
        form.add_error("to", MAIL_RATE_LIMITED)
    elif form.is_valid():
        try:
            with transaction.atomic():  # the invite and its message commit together, or neither
                recipient = invitation_recipient(to=form.cleaned_data["to"], inviter=request.user)
                new = services.invite_create(circle=circle, by=request.user)
                circle_invitation_deliver(
                    recipient=recipient,
                    inviter=request.user,
                    circle_name=circle.name,
                    link=_invite_url(request, new.token),
                    expires_at=new.invite.expires_at,
                    site_url=site_url(request),
                )
        except ValidationError as error:
            form.add_error("to", error.messages)
        else:
            sent = f"Invitation sent {recipient.where}. You approve the request when they ask to join."
            extra = {"invites_message": sent}
    if request.htmx:
        context = _circle_context(request, circle, timeline=False, **extra)
        return render(request, "circles/circle_detail.html#circle-invites", context)
    if "invites_message" in extra:
        messages.success(request, extra["invites_message"])
        return redirect("circle_detail", circle_id=circle.pk)
    context = _circle_context(request, circle, **extra)
    return render(request, "circles/circle_detail.html", context, status=400)


@login_required
@require_POST
def circle_invite_revoke(request: HttpRequest, circle_id, invite_id) -> HttpResponse:
    invite = selectors.circle_invite_get_for_owner(
        user=request.user, circle_id=circle_id, invite_id=invite_id
    )
    services.invite_revoke(invite=invite, by=request.user)
    message = "Invite link withdrawn: it no longer works."
    if request.htmx:
        context = _circle_context(request, invite.circle, timeline=False, invites_message=message)
        return render(request, "circles/circle_detail.html#circle-invites", context)
    messages.success(request, message)
    return redirect("circle_detail", circle_id=invite.circle_id)


def _decide(request: HttpRequest, circle_id, request_id, *, approve: bool) -> HttpResponse:
    circle = selectors.circle_get_for_owner(user=request.user, circle_id=circle_id)
    join_request = selectors.circle_join_request_get(circle=circle, request_id=request_id)
    name = join_request.user.get_username()
    try:
        if approve:
            services.join_request_approve(request=join_request, by=request.user)
            message, level = f"{name} is now a member of {circle.name}.", messages.SUCCESS
        else:
            services.join_request_decline(request=join_request, by=request.user)
            message, level = f"Declined {name}'s request.", messages.SUCCESS
    except ValidationError as error:
        message, level = " ".join(error.messages), messages.ERROR
    if request.htmx:
        context = _circle_context(
            request,
            circle,
            timeline=False,
            requests_message=message,
            requests_error=level == messages.ERROR,
            oob=True,
        )
        return render(request, "circles/circle_detail.html#circle-requests", context)
    messages.add_message(request, level, message)
    return redirect("circle_detail", circle_id=circle.pk)


@login_required
@require_POST
def circle_request_approve(request: HttpRequest, circle_id, request_id) -> HttpResponse:
    return _decide(request, circle_id, request_id, approve=True)


@login_required
@require_POST
def circle_request_decline(request: HttpRequest, circle_id, request_id) -> HttpResponse:
    return _decide(request, circle_id, request_id, approve=False)


# --- the invite link ------------------------------------------------------------------------


def _invite_context(request: HttpRequest, invite, token: str, **extra) -> dict:
    circle = invite.circle
    context = {
        "invite": invite,
        "circle": circle,
        "inviter": circle.owner,
        "invite_path": reverse("circle_invite", args=[token]),
        "ask_url": reverse("circle_invite_ask", args=[token]),
    }
    if request.user.is_authenticated:
        context["is_member"] = selectors.circle_is_member(circle=circle, user_id=request.user.pk)
        context["join_request"] = selectors.join_request_for_user(circle=circle, user=request.user)
    context.update(extra)
    return context


def _invite_invalid(request: HttpRequest, invalid: services.InviteInvalid) -> HttpResponse:
    return render_page(
        request, "circles/invite.html", "invite-card", {"invalid": " ".join(invalid.messages)}, status=404
    )


@never_cache
@require_GET
def circle_invite(request: HttpRequest, token: str) -> HttpResponse:
    """Which circle, who invites, and "Ask to join" — or sign in / sign up first and come back here."""
    try:
        invite = services.invite_check(token=token)
    except services.InviteInvalid as invalid:
        return _invite_invalid(request, invalid)
    return render_page(request, "circles/invite.html", "invite-card", _invite_context(request, invite, token))


@never_cache
@require_POST
def circle_invite_ask(request: HttpRequest, token: str) -> HttpResponse:
    """Ask to join; the circle's owner approves or declines. Asking twice is one request."""
    invite_path = reverse("circle_invite", args=[token])
    if not request.user.is_authenticated:
        return redirect_to_login(invite_path)
    try:
        invite = services.invite_check(token=token)
        services.invite_accept(token=token, user=request.user)
    except services.InviteInvalid as invalid:
        return _invite_invalid(request, invalid)
    except ValidationError as refused:  # already a member, or the circle is full
        context = _invite_context(request, invite, token, ask_error=" ".join(refused.messages))
        return render_page(request, "circles/invite.html", "invite-card", context)
    if request.htmx:
        return render(request, "circles/invite.html#invite-card", _invite_context(request, invite, token))
    return redirect(invite_path)


# --- sharing, from the memory's page ---------------------------------------------------------


def _share_panel_response(request: HttpRequest, memory: Memory, **extra) -> HttpResponse:
    """The Share panel in place, and "Who can see this" out of band (a share changes it)."""
    context = {
        "memory": memory,
        "rows": selectors.memory_share_panel(memory=memory, owner=request.user),
        "audit": memory_privacy_audit(memory=memory),
        "oob_audit": True,
        **extra,
    }
    return render(request, "circles/_share_panel.html", context)


@login_required
@require_POST
def memory_share(request: HttpRequest, memory_id, circle_id) -> HttpResponse:
    memory = memory_get(owner=request.user, memory_id=memory_id)
    circle = selectors.circle_get_for_member(user=request.user, circle_id=circle_id)
    try:
        services.memory_share(memory=memory, circle=circle, by=request.user)
    except services.ShareRefused as refused:
        message = _share_refused_message(refused, memory=memory, saved=False)
        if request.htmx:
            return _share_panel_response(request, memory, refused=refused, refused_circle=circle)
        messages.error(request, message)
    else:
        members = selectors.memory_share_preview(memory=memory, circle=circle)
        seen = sum(1 for member in members if member.sees)
        count = len(members)
        message = f"Shared into {circle.name}: seen by {seen} of {count} member{pluralize(count)}."
        if request.htmx:
            return _share_panel_response(request, memory, share_message=message)
        messages.success(request, message)
    return redirect(reverse("memory_detail", args=[memory.pk]) + "#share-panel")


@login_required
@require_POST
def memory_unshare(request: HttpRequest, memory_id, circle_id) -> HttpResponse:
    memory = memory_get(owner=request.user, memory_id=memory_id)
    circle = selectors.circle_get_for_member(user=request.user, circle_id=circle_id)
    services.memory_unshare(memory=memory, circle=circle, by=request.user)
    message = f"No longer shared into {circle.name}. It stays in your journal."
    if request.htmx:
        return _share_panel_response(request, memory, share_message=message)
    messages.success(request, message)
    return redirect(reverse("memory_detail", args=[memory.pk]) + "#share-panel")


# --- consent per circle, from the person's page -----------------------------------------------


@login_required
@require_POST
def person_circle_consent(request: HttpRequest, person_id, circle_id) -> HttpResponse:
    """Set one person's consent for one of my circles (My agents keeps its own switch)."""
    person = person_get(owner=request.user, person_id=person_id)
    circle = selectors.circle_get_for_member(user=request.user, circle_id=circle_id)
    form = ConsentForm(request.POST, auto_id=f"id_circle-{circle.pk}-%s")
    if form.is_valid():
        try:
            event = person_set_consent(
                person=person,
                status=form.cleaned_data["status"],
                reason=form.cleaned_data["reason"],
                actor=request.user,
                audience=circle.audience,
                surface="ui",
            )
        except ValidationError as error:
            add_service_errors(form, error)
        except PermissionDenied as refused:  # a linked person grants for themself, never the owner
            form.add_error(None, str(refused))
        else:
            if request.htmx:
                context = person_page_context(request, person, circle_saved=circle.pk if event else None)
                return render(request, "people/person_detail.html#consent-panel", context)
            status = form.cleaned_data["status"]
            if event is None:
                messages.info(
                    request, f"{person.display_name}'s consent for {circle.name} was already {status}."
                )
            else:
                messages.success(
                    request, f"{person.display_name}'s consent for {circle.name} is now {status}."
                )
            return redirect("person_detail", person_id=person.pk)
    context = person_page_context(request, person, circle_consent_form=form, circle_consent_for=circle.pk)
    return render_page(request, "people/person_detail.html", "consent-panel", context)
