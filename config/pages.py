"""What the product's pages answer, whole or to htmx: one place each.

An htmx request swaps one part of a page, so it gets that part (a template partial,
`template#name`) where a full load gets the whole page; a form finished through htmx
asks the browser to go on (HX-Redirect) where a plain POST is redirected.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django_htmx.http import HttpResponseClientRedirect


def render_page(
    request: HttpRequest, template: str, part: str, context: dict | None = None, *, status: int = 200
) -> HttpResponse:
    """The page `template`, or only its partial `part` when htmx asks (it swaps that part in)."""
    return render(request, f"{template}#{part}" if request.htmx else template, context, status=status)


def go_to(request: HttpRequest, url: str) -> HttpResponse:
    """After a form: htmx is told to load `url` (HX-Redirect), a plain request is redirected there."""
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)
