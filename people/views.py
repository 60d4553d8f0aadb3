from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.http import FileResponse, Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from config.form_inputs import add_service_errors
from config.pages import render_page
from memories.selectors import MemoryFilters, memory_list
from people import selectors, services
from people.forms import RELATIONSHIP_SUGGESTIONS, ConsentForm, PersonForm, PersonPhotoForm
from people.models import Person

PERSON_MEMORIES_SHOWN = 50
UPCOMING_BIRTHDAY_DAYS = 30
MENTION_QUERY_MAX_LENGTH = 100


def person_page_context(request: HttpRequest, person: Person, **extra) -> dict:
    """The person page's context; linked.views renders the whole page with its link panel's words."""
    memories = memory_list(owner=request.user, filters=MemoryFilters(person=person))
    birthday = person.birthday
    today = timezone.localdate()
    next_birthday = birthday.next_on_or_after(today) if birthday else None
    return {
        "person": person,
        "birthday": birthday,
        "next_birthday": next_birthday,
        "next_birthday_days": (next_birthday - today).days if next_birthday else None,
        "next_birthday_turns": birthday.age_on(next_birthday) if birthday else None,
        "is_linked": services.person_is_linked(person),
        "consent_form": ConsentForm(initial={"status": person.consent_status}),
        "consent_events": selectors.person_consent_events(person=person),
        "memories": memories[:PERSON_MEMORIES_SHOWN],
        "memory_count": memories.count(),
        **extra,
    }


def _people_page(request: HttpRequest, form: PersonForm) -> dict:
    return {
        "people": selectors.person_list(owner=request.user),
        "upcoming_birthdays": selectors.person_upcoming_birthdays(
            owner=request.user, today=timezone.localdate(), within_days=UPCOMING_BIRTHDAY_DAYS
        ),
        "upcoming_days": UPCOMING_BIRTHDAY_DAYS,
        "form": form,
        "relationship_suggestions": RELATIONSHIP_SUGGESTIONS,
    }


@login_required
def person_list(request: HttpRequest) -> HttpResponse:
    """Everyone, by name, with their memory counts; birthdays coming up in the next month."""
    return render_page(
        request, "people/person_list.html", "people-table", _people_page(request, PersonForm())
    )


@login_required
@require_POST
def person_create(request: HttpRequest) -> HttpResponse:
    form = PersonForm(request.POST)
    if form.is_valid():
        try:
            person = services.person_create(owner=request.user, **form.details())
        except ValidationError as error:
            add_service_errors(form, error)
        else:
            messages.success(request, f"Added {person.display_name}. Their consent starts as pending.")
            return redirect("person_detail", person_id=person.pk)
    return render(request, "people/person_list.html", _people_page(request, form))


@login_required
def person_detail(request: HttpRequest, person_id) -> HttpResponse:
    person = selectors.person_get(owner=request.user, person_id=person_id)
    return render_page(
        request, "people/person_detail.html", "consent-panel", person_page_context(request, person)
    )


@login_required
@require_POST
def person_consent(request: HttpRequest, person_id) -> HttpResponse:
    person = selectors.person_get(owner=request.user, person_id=person_id)
    form = ConsentForm(request.POST)
    if form.is_valid():
        try:
            event = services.person_set_consent(
                person=person,
                status=form.cleaned_data["status"],
                reason=form.cleaned_data["reason"],
                actor=request.user,
                surface="ui",
            )
        except ValidationError as error:
            add_service_errors(form, error)
        except PermissionDenied as refused:  # a linked person grants for themself, never the owner
            form.add_error(None, str(refused))
        else:
            if request.htmx:
                # The panel swaps in place; the person's memories come along
                # out of band so their hidden-from-agents badges stay true.
                context = person_page_context(request, person, consent_saved=event is not None, oob=True)
                return render(request, "people/person_detail.html#consent-panel", context)
            if event is None:
                messages.info(
                    request, f"{person.display_name}'s consent was already {person.consent_status}."
                )
            else:
                messages.success(request, f"{person.display_name}'s consent is now {person.consent_status}.")
            return redirect("person_detail", person_id=person.pk)
    return render_page(
        request,
        "people/person_detail.html",
        "consent-panel",
        person_page_context(request, person, consent_form=form),
    )


def _save_photo(request: HttpRequest, person: Person, photo_form: PersonPhotoForm) -> bool:
    """Apply the photo part of the edit form; False (with the error on the form) when refused."""
    try:
        if photo_form.cleaned_data.get("photo"):
            services.person_set_photo(person=person, upload=photo_form.cleaned_data["photo"])
        elif photo_form.cleaned_data.get("remove_photo"):
            services.person_remove_photo(person=person)
    except ValidationError as error:
        add_service_errors(photo_form, error)
        return False
    return True


@login_required
@require_http_methods(["GET", "POST"])
def person_edit(request: HttpRequest, person_id) -> HttpResponse:
    person = selectors.person_get(owner=request.user, person_id=person_id)
    if request.method == "POST":
        form = PersonForm(request.POST)
        photo_form = PersonPhotoForm(request.POST, request.FILES)
        if form.is_valid() and photo_form.is_valid():
            try:
                # All or nothing: a refused photo leaves the details unsaved too. The photo
                # goes last, so a refused detail never leaves a new photo file behind.
                with transaction.atomic():
                    services.person_update(person=person, **form.details())
                    if not _save_photo(request, person, photo_form):
                        raise _PhotoRefused
            except _PhotoRefused:
                person = selectors.person_get(owner=request.user, person_id=person_id)  # as stored
            except ValidationError as error:
                add_service_errors(form, error)
                person = selectors.person_get(owner=request.user, person_id=person_id)
            else:
                messages.success(request, f"Saved {person.display_name}.")
                return redirect("person_detail", person_id=person.pk)
    else:
        form = PersonForm(initial=PersonForm.initial_for(person))
        photo_form = PersonPhotoForm()
    context = {
        "person": person,
        "form": form,
        "photo_form": photo_form,
        "relationship_suggestions": RELATIONSHIP_SUGGESTIONS,
    }
    return render_page(request, "people/person_form.html", "person-form", context)


class _PhotoRefused(Exception):
    pass


@login_required
@require_GET
def person_photo(request: HttpRequest, person_id) -> HttpResponse:
    """The person's photo, for their owner only (another account's person is a 404, like no photo)."""
    person = selectors.person_get(owner=request.user, person_id=person_id)
    if not person.photo:
        raise Http404("No photo.")
    try:
        photo = person.photo.open("rb")
    except FileNotFoundError as missing:
        raise Http404("No photo.") from missing
    response = FileResponse(photo, content_type="image/jpeg")
    # The URL carries a version, so a changed photo is a new URL; shared caches keep nothing.
    response["Cache-Control"] = "private, max-age=86400"
    return response


@login_required
@require_GET
def person_mention_options(request: HttpRequest) -> JsonResponse:
    """The owner's people matching an @mention being typed (the memory form's autocomplete)."""
    query = request.GET.get("q", "").replace("\x00", "")[:MENTION_QUERY_MAX_LENGTH]
    people = selectors.person_mention_options(owner=request.user, query=query)
    return JsonResponse(
        {
            "people": [
                {
                    "id": str(person.pk),
                    "name": person.display_name,
                    "aliases": person.aliases,
                    "relationship": person.relationship,
                }
                for person in people
            ]
        }
    )


@login_required
@require_http_methods(["GET", "POST"])
def person_delete(request: HttpRequest, person_id) -> HttpResponse:
    """GET asks for confirmation; only POST deletes."""
    person = selectors.person_get(owner=request.user, person_id=person_id)
    error = ""
    if request.method == "POST":
        try:
            services.person_delete(person=person)
        except services.PersonInUse as in_use:
            error = str(in_use)
        except ValidationError as refused:
            error = " ".join(refused.messages)
        else:
            messages.success(request, f"Deleted {person.display_name}.")
            return redirect("person_list")
    memory_count = memory_list(owner=request.user, filters=MemoryFilters(person=person)).count()
    return render_page(
        request,
        "people/person_confirm_delete.html",
        "confirm-delete",
        {"person": person, "memory_count": memory_count, "error": error},
    )
