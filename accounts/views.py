from __future__ import annotations

from django.contrib import messages
from django.contrib.auth import REDIRECT_FIELD_NAME, login
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_http_methods

from accounts.forms import SignupForm
from accounts.services import user_signup


def _safe_next(request: HttpRequest) -> str:
    """Where to go after signing up (an invite link, say), if it is on this site; else ""."""
    target = request.POST.get(REDIRECT_FIELD_NAME) or request.GET.get(REDIRECT_FIELD_NAME) or ""
    if url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return target
    return ""


@require_http_methods(["GET", "POST"])
def signup(request: HttpRequest) -> HttpResponse:
    next_url = _safe_next(request)
    if request.user.is_authenticated:
        return redirect(next_url or reverse("timeline"))
    form = SignupForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        user = user_signup(
            username=form.cleaned_data["username"],
            password=form.cleaned_data["password1"],
            email=form.cleaned_data.get("email") or "",
        )
        login(request, user, backend="django.contrib.auth.backends.ModelBackend")
        messages.success(request, f"Welcome, {user.get_username()}. Your journal is ready.")
        return redirect(next_url or reverse("timeline"))
    return render(request, "accounts/signup.html", {"form": form, "next": next_url})
