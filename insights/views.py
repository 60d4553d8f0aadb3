from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from config.form_inputs import add_service_errors
from insights import services
from insights.forms import InsightForm
from insights.selectors import insight_people, insight_source_memories


@login_required
@require_http_methods(["GET", "POST"])
def insight_new(request: HttpRequest) -> HttpResponse:
    """Write an insight from `?from=<id>&from=<id>` (the owner's memories only; any other id is 404).

    "Check" (and typing, with htmx) re-runs the check and swaps the panel; "Save"
    saves through insight_create, which refuses names and wants warnings confirmed.
    """
    data = request.POST if request.method == "POST" else request.GET
    sources = insight_source_memories(owner=request.user, memory_ids=data.getlist("from"))
    form = InsightForm(request.POST or None)
    check = None
    if request.method == "POST" and form.is_valid():
        text = form.cleaned_data["text"]
        check = services.insight_check(text=text, source_memories=sources)
        if "save" in request.POST:
            try:
                insight = services.insight_create(
                    owner=request.user,
                    text=text,
                    sources=sources,
                    confirmed_warnings=form.confirmed_warnings,
                    sensitivity=form.cleaned_data["sensitivity"],
                )
            except ValidationError as error:
                add_service_errors(form, error)
            else:
                messages.success(
                    request,
                    "Saved your insight. It names no one, so it is gated by your own consent (Self) like any "
                    "memory with nobody in it. Which memories it came from is shown to you only.",
                )
                return redirect("memory_detail", memory_id=insight.pk)
    context = {"form": form, "sources": sources, "check": check, "people": insight_people(sources)}
    template = "insights/insight_form.html"
    if request.htmx and request.method == "POST" and "save" not in request.POST:
        template += "#insight-check"
    return render(request, template, context)
