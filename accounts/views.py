from __future__ import annotations

from django.contrib import messages
from django.contrib.auth import login
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from accounts.forms import SignupForm
from accounts.services import user_signup


@require_http_methods(["GET", "POST"])
def signup(request: HttpRequest) -> HttpResponse:
    if request.user.is_authenticated:
        return redirect("timeline")
    form = SignupForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        user = user_signup(
            username=form.cleaned_data["username"],
            password=form.cleaned_data["password1"],
            email=form.cleaned_data.get("email") or "",
        )
        login(request, user, backend="django.contrib.auth.backends.ModelBackend")
        messages.success(request, f"Welcome, {user.get_username()}. Your journal is ready.")
        return redirect("timeline")
    return render(request, "accounts/signup.html", {"form": form})
