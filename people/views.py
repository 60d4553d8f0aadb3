from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods, require_POST

from memories.selectors import MemoryFilters, memory_list
from people import selectors, services
from people.forms import ConsentForm, PersonForm
from people.models import Person

PERSON_MEMORIES_SHOWN = 50


def _add_service_errors(form, error: ValidationError) -> None:
    # Services speak in model field names; anything the form lacks is shown at the top.
    if hasattr(error, "error_dict"):
        for field, messages_ in error.message_dict.items():
            form.add_error(field if field in form.fields else None, messages_)
    else:
        form.add_error(None, error.messages)


def _person_context(request: HttpRequest, person: Person, **extra) -> dict:
    memories = memory_list(owner=request.user, filters=MemoryFilters(person=person))
    return {
        "person": person,
        "consent_form": ConsentForm(initial={"status": person.consent_status}),
        "consent_events": selectors.person_consent_events(person=person),
        "memories": memories[:PERSON_MEMORIES_SHOWN],
        "memory_count": memories.count(),
        **extra,
    }


@login_required
def person_list(request: HttpRequest) -> HttpResponse:
    template = "people/person_list.html" + ("#people-table" if request.htmx else "")
    return render(
        request, template, {"people": selectors.person_list(owner=request.user), "form": PersonForm()}
    )


@login_required
@require_POST
def person_create(request: HttpRequest) -> HttpResponse:
    form = PersonForm(request.POST)
    if form.is_valid():
        try:
            person = services.person_create(owner=request.user, **form.cleaned_data)
        except ValidationError as error:
            _add_service_errors(form, error)
        else:
            messages.success(request, f"Added {person.display_name}. Their consent starts as pending.")
            return redirect("person_detail", person_id=person.pk)
    return render(
        request,
        "people/person_list.html",
        {"people": selectors.person_list(owner=request.user), "form": form},
    )


@login_required
def person_detail(request: HttpRequest, person_id) -> HttpResponse:
    person = selectors.person_get(owner=request.user, person_id=person_id)
    template = "people/person_detail.html" + ("#consent-panel" if request.htmx else "")
    return render(request, template, _person_context(request, person))


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
            _add_service_errors(form, error)
        else:
            if request.htmx:
                # The panel swaps in place; the person's memories come along
                # out of band so their hidden-from-agents badges stay true.
                context = _person_context(request, person, consent_saved=event is not None, oob=True)
                return render(request, "people/person_detail.html#consent-panel", context)
            if event is None:
                messages.info(
                    request, f"{person.display_name}'s consent was already {person.consent_status}."
                )
            else:
                messages.success(request, f"{person.display_name}'s consent is now {person.consent_status}.")
            return redirect("person_detail", person_id=person.pk)
    template = "people/person_detail.html" + ("#consent-panel" if request.htmx else "")
    return render(request, template, _person_context(request, person, consent_form=form))


@login_required
@require_http_methods(["GET", "POST"])
def person_edit(request: HttpRequest, person_id) -> HttpResponse:
    person = selectors.person_get(owner=request.user, person_id=person_id)
    if request.method == "POST":
        form = PersonForm(request.POST)
        if form.is_valid():
            try:
                services.person_update(person=person, **form.cleaned_data)
            except ValidationError as error:
                _add_service_errors(form, error)
            else:
                messages.success(request, f"Saved {person.display_name}.")
                return redirect("person_detail", person_id=person.pk)
    else:
        form = PersonForm(initial=PersonForm.initial_for(person))
    template = "people/person_form.html" + ("#person-form" if request.htmx else "")
    return render(request, template, {"person": person, "form": form})


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
    template = "people/person_confirm_delete.html" + ("#confirm-delete" if request.htmx else "")
    return render(request, template, {"person": person, "memory_count": memory_count, "error": error})
