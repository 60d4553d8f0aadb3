from __future__ import annotations

from django.contrib import messages
from django.contrib.auth import REDIRECT_FIELD_NAME, login
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.contrib.auth.forms import PasswordChangeForm
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse, reverse_lazy
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods

from accounts import ratelimits, sessions
from accounts.forms import SignupForm, TokenCreateForm
from accounts.selectors import access_token_get, access_token_list
from accounts.services import access_token_create, access_token_revoke, user_signup
from agents.selectors import agent_list
from config.pages import go_to, render_page


def _safe_next(request: HttpRequest) -> str:
    """Where to go after signing up (an invite link, say), if it is on this site; else ""."""
    target = request.POST.get(REDIRECT_FIELD_NAME) or request.GET.get(REDIRECT_FIELD_NAME) or ""
    # A path on this site only: redirect() takes a bare word for a URL name ("?next=foo"
    # was a NoReverseMatch, a 500), and "//host" or a scheme is another site.
    if target.startswith("/") and url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return target
    return ""


def _rate_limited(
    request: HttpRequest, limited: ratelimits.Limited, *, title: str, reason: str
) -> HttpResponse:
    """The 429 page for a web form: what is paused, why, and for how long."""
    context = {"title": title, "reason": reason, "retry_after_text": limited.retry_after_text}
    response = render(request, "accounts/rate_limited.html", context, status=429)
    response["Retry-After"] = str(limited.retry_after)
    return response


@require_http_methods(["GET", "POST"])
def signup(request: HttpRequest) -> HttpResponse:
    next_url = _safe_next(request)
    if request.user.is_authenticated:
        return redirect(next_url or reverse("timeline"))
    if request.method == "POST" and (limited := ratelimits.signup_attempt(request)) is not None:
        return _rate_limited(
            request,
            limited,
            title="Too many sign-ups",
            reason="There have been too many sign-up attempts from your address, so signing up is paused.",
        )
    form = SignupForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        user = user_signup(
            username=form.cleaned_data["username"],
            password=form.cleaned_data["password1"],
            email=form.cleaned_data.get("email") or "",
        )
        setattr(request, sessions.REQUEST_METHOD_ATTRIBUTE, "sign-up")
        login(request, user, backend="django.contrib.auth.backends.ModelBackend")
        messages.success(request, f"Welcome, {user.get_username()}. Your journal is ready.")
        response = redirect(next_url or reverse("timeline"))
        # The browser that made the account is not "new" at its next sign-in.
        sessions.browser_remember(request=request, response=response, user=user)
        return response
    return render(request, "accounts/signup.html", {"form": form, "next": next_url})


class PasswordChangeView(auth_views.PasswordChangeView):
    """Django's password change, with wrong current passwords counted and limited.

    Someone at an unlocked, signed-in computer must not be able to guess the current
    password and take the account over; after a few wrong ones, password changes
    (only) pause for the rest of the window.
    """

    template_name = "accounts/password_change.html"
    success_url = reverse_lazy("password_change_done")

    def post(self, request: HttpRequest, *args: object, **kwargs: object) -> HttpResponse:
        if (limited := ratelimits.password_change_check(request)) is not None:
            return _rate_limited(
                request,
                limited,
                title="Password change paused",
                reason="The current password was given wrongly too many times, so changing the password "
                "is paused. You stay logged in; everything else works as usual.",
            )
        return super().post(request, *args, **kwargs)

    def form_valid(self, form: PasswordChangeForm) -> HttpResponse:
        # Django keeps this browser signed in (a new session key) and the new password hash
        # turns every other session away; the Sessions page is made to say so at once.
        old_key = self.request.session.session_key
        response = super().form_valid(form)
        sessions.signed_in_session_rekey(request=self.request, old_key=old_key)
        sessions.signed_in_sessions_end_others(
            owner=self.request.user, keep_session_key=self.request.session.session_key
        )
        return response

    def form_invalid(self, form: PasswordChangeForm) -> HttpResponse:
        if form.has_error("old_password", code="password_incorrect"):
            ratelimits.password_change_failure_record(self.request)
        return super().form_invalid(form)


# --- Access tokens (Settings → Tokens) ----------------------------------------------


def _token_page(request: HttpRequest, *, form: TokenCreateForm, created: dict | None = None) -> HttpResponse:
    tokens = list(access_token_list(owner=request.user))
    context = {
        "form": form,
        "created": created,
        "active_tokens": [token for token in tokens if token.is_active],
        "revoked_tokens": [token for token in tokens if not token.is_active],
        # The documented form; the endpoint answers without the slash too.
        "mcp_url": request.build_absolute_uri(reverse("mcp").rstrip("/") + "/"),
    }
    return render_page(request, "portability/tokens.html", "tokens-panel", context)


@never_cache  # a new token's secret is on the page once; no cache may keep a copy
@login_required
@require_http_methods(["GET", "POST"])
def token_list(request: HttpRequest) -> HttpResponse:
    """The owner's tokens; POST creates one and shows its secret this once."""
    agents = agent_list(owner=request.user).order_by("name")
    form = TokenCreateForm(request.POST or None, agents=agents)
    if request.method == "POST" and form.is_valid():
        try:
            token, raw_token = access_token_create(
                owner=request.user, kind=form.kind, agent=form.agent, name=form.cleaned_data["name"]
            )
        except ValidationError as refused:
            form.add_error(None, refused)
        else:
            created = {"token": token, "raw_token": raw_token}
            return _token_page(request, form=TokenCreateForm(agents=agents), created=created)
    return _token_page(request, form=form)


@login_required
@require_http_methods(["GET", "POST"])
def token_revoke(request: HttpRequest, token_id) -> HttpResponse:
    """GET asks first; POST revokes. Another owner's token is a 404, like one that does not exist."""
    token = access_token_get(owner=request.user, token_id=token_id)
    done = reverse("token_list")
    if not token.is_active:
        messages.info(request, f"{token.name or 'That token'} was already revoked.")
        return go_to(request, done)
    if request.method == "POST":
        access_token_revoke(token=token)
        messages.success(
            request, f"Revoked {token.name or 'the token'} (ks_{token.prefix}_…). It no longer works."
        )
        return go_to(request, done)
    return render_page(request, "portability/tokens_confirm_revoke.html", "confirm", {"token": token})
