"""The Universe page and its JSON: the owner's graph of memories and people (memories/universe.py)."""

from __future__ import annotations

from django import forms
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET

from config.form_inputs import BoundedDateField
from memories.universe import DEFAULT_LIMIT, MAX_LIMIT, UniverseFilter, universe_graph, universe_people
from people.models import Person


class UniverseFilterForm(forms.Form):
    person = forms.ModelChoiceField(queryset=Person.objects.none(), required=False, empty_label="Everyone")
    # Bounded: the day after `until` is computed (9999-12-31 overflowed into a 500).
    since = BoundedDateField(required=False, label="From", widget=forms.DateInput(attrs={"type": "date"}))
    until = BoundedDateField(required=False, label="To", widget=forms.DateInput(attrs={"type": "date"}))
    limit = forms.IntegerField(required=False, min_value=1, max_value=MAX_LIMIT)

    def __init__(self, *args, owner, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # Only the owner's people: another owner's person id is simply not a choice.
        self.fields["person"].queryset = Person.objects.filter(owner=owner, is_self=False).order_by(
            "display_name", "pk"
        )

    def clean(self) -> dict:
        data = super().clean()
        since, until = data.get("since"), data.get("until")
        if since and until and since > until:
            self.add_error("until", "“To” comes before “From”.")
        return data

    def to_filter(self) -> UniverseFilter:
        data = self.cleaned_data
        return UniverseFilter(
            person=data.get("person"),
            since=data.get("since"),
            until=data.get("until"),
            limit=data.get("limit") or DEFAULT_LIMIT,
        )


@login_required
@require_GET
def universe(request: HttpRequest) -> HttpResponse:
    """The page: filters, the graph (drawn by static/js/universe.js from the JSON), a list without JS."""
    form = UniverseFilterForm(request.GET or None, owner=request.user)
    valid = form.is_valid() if request.GET else True
    query = request.GET.urlencode() if valid else ""
    context = {
        "form": form,
        "people": universe_people(owner=request.user),
        "graph_url": reverse("universe_graph") + (f"?{query}" if query else ""),
        "max_limit": MAX_LIMIT,
    }
    if valid:
        graph = universe_graph(
            owner=request.user, universe_filter=form.to_filter() if request.GET else UniverseFilter()
        )
        context["graph"] = graph
        context["listed"] = [node for node in graph["nodes"] if node["type"] == "memory"][:50]
        context["listed_people"] = [node for node in graph["nodes"] if node["type"] == "person"]
    return render(request, "memories/universe.html", context, status=200 if valid else 400)


@login_required
@require_GET
def universe_graph_json(request: HttpRequest) -> JsonResponse:
    """The graph as JSON for the page's script: at most `limit` memories (MAX_LIMIT), newest first."""
    form = UniverseFilterForm(request.GET, owner=request.user)
    if not form.is_valid():
        return JsonResponse({"errors": form.errors.get_json_data()}, status=400)
    return JsonResponse(universe_graph(owner=request.user, universe_filter=form.to_filter()))
