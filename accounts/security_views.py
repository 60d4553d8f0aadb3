"""Signing in (password, second step, passkey) and Security → two-factor, passkeys, sessions.

Views stay thin: the rules are in accounts/two_factor.py, accounts/passkeys.py and
accounts/sessions.py.
"""

from __future__ import annotations

import json
from urllib.parse import urlencode

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import REDIRECT_FIELD_NAME, login
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render, resolve_url
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_POST

from accounts import passkeys, sessions, two_factor
from accounts.forms import SecondFactorForm, TotpConfirmForm, TwoFactorDisableForm

MODEL_BACKEND = "django.contrib.auth.backends.ModelBackend"
# A passkey answer is a few kilobytes; anything much bigger is not one.
_MAX_JSON_BODY = 64 * 1024


def _safe_path(request: HttpRequest, target: str) -> str:
    """`target` if it is a path on this site, else "" (a bare word would be taken for a URL name)."""
    if target.startswith("/") and url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return target
    return ""


def _next_url(request: HttpRequest) -> str:
    target = request.POST.get(REDIRECT_FIELD_NAME) or request.GET.get(REDIRECT_FIELD_NAME) or ""
    return _safe_path(request, target)


def _sign_in(request: HttpRequest, *, user: AbstractBaseUser, method: str, backend: str) -> bool:
    """Both factors are in: log in, and leave a notice if this browser is new. True if it was."""
    new_browser = not sessions.browser_is_known(request=request, user=user)
    two_factor.pending_sign_in_clear(request=request)
    setattr(request, sessions.REQUEST_METHOD_ATTRIBUTE, method)
    login(request, user, backend=backend)
    if new_browser:
        sessions.new_sign_in_notify(request=request, user=user)
    return new_browser


class LoginView(auth_views.LoginView):
    """Django's login form; with two-factor on, a right password leads to the second step instead."""

    template_name = "accounts/login.html"
    redirect_authenticated_user = True

    def form_valid(self, form: AuthenticationForm) -> HttpResponse:
        user = form.get_user()
        backend = getattr(user, "backend", MODEL_BACKEND)
        if two_factor.two_factor_enabled(user=user):
            two_factor.pending_sign_in_start(request=self.request, user=user, backend=backend)
            url = reverse("login_verify")
            if next_url := _next_url(self.request):
                url += "?" + urlencode({REDIRECT_FIELD_NAME: next_url})
            return redirect(url)
        _sign_in(self.request, user=user, method="password", backend=backend)
        response = redirect(_next_url(self.request) or resolve_url(settings.LOGIN_REDIRECT_URL))
        sessions.browser_remember(request=self.request, response=response, user=user)
        return response


def admin_login(request: HttpRequest, extra_context: dict | None = None) -> HttpResponse:
    """The admin site's log-in, replaced (accounts/apps.py): Django's would sign a staff member
    in with the password alone. Everyone signs in here, with both factors, and comes back."""
    if request.user.is_authenticated and request.user.is_active and request.user.is_staff:
        return redirect(_next_url(request) or reverse("admin:index"))
    target = _next_url(request) or reverse("admin:index")
    return redirect(reverse("login") + "?" + urlencode({REDIRECT_FIELD_NAME: target}))


@never_cache
@require_http_methods(["GET", "POST"])
def login_verify(request: HttpRequest) -> HttpResponse:
    """The second step: a code from the app, a recovery code, or a passkey (passkeys.js)."""
    pending = two_factor.pending_sign_in_user(request=request)
    if pending is None:
        messages.info(request, "Enter your username and password to sign in.")
        return redirect("login")
    user, backend = pending
    form = SecondFactorForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        method = two_factor.second_factor_verify(user=user, code=form.cleaned_data["code"])
        if method is not None:
            _sign_in(request, user=user, method=method, backend=backend)
            if method == two_factor.METHOD_RECOVERY:
                left = two_factor.recovery_codes_remaining(user=user)
                messages.warning(
                    request,
                    f"You used a recovery code; {left} left. Make new ones on the Security page "
                    "if you are running low.",
                )
            response = redirect(_next_url(request) or reverse("timeline"))
            sessions.browser_remember(request=request, response=response, user=user)
            return response
        if two_factor.pending_sign_in_failure(request=request):
            sessions.second_step_failed_notify(request=request, user=user)
            messages.error(request, "Too many wrong codes. Enter your password again to start over.")
            return redirect("login")
        form.add_error("code", "That code is not right, or it was used already. Try the newest code.")
    return render(request, "accounts/login_verify.html", {"form": form, "next": _next_url(request)})


def _json_body(request: HttpRequest) -> dict:
    if len(request.body) > _MAX_JSON_BODY:
        raise ValueError("too large")
    body = json.loads(request.body or b"{}")
    if not isinstance(body, dict):
        raise ValueError("not an object")
    return body


def _refused(message: str, status: int = 400) -> JsonResponse:
    return JsonResponse({"error": message}, status=status)


@never_cache
@require_POST
def passkey_login_options(request: HttpRequest) -> HttpResponse:
    return HttpResponse(
        passkeys.passkey_authentication_options(request=request), content_type="application/json"
    )


@never_cache
@require_POST
def passkey_login(request: HttpRequest) -> JsonResponse:
    """Sign in with a passkey (no username): a whole sign-in, or a pending one's second step."""
    try:
        body = _json_body(request)
        passkey = passkeys.passkey_authenticate(request=request, credential=body.get("credential"))
    except passkeys.PasskeyRefused as refused:
        return _refused(str(refused))
    except ValueError:
        return _refused("The passkey could not be checked. Try again.")
    _sign_in(request, user=passkey.owner, method=passkeys.METHOD_PASSKEY, backend=MODEL_BACKEND)
    target = _safe_path(request, str(body.get("next") or ""))
    response = JsonResponse({"redirect": target or reverse("timeline")})
    sessions.browser_remember(request=request, response=response, user=passkey.owner)
    return response


# --- Security page -------------------------------------------------------------------


@never_cache
@login_required
def account_security(request: HttpRequest) -> HttpResponse:
    user = request.user
    context = {
        "two_factor_on": two_factor.two_factor_enabled(user=user),
        "recovery_left": two_factor.recovery_codes_remaining(user=user),
        "passkeys": list(passkeys.passkey_list(owner=user)),
        "session_count": len(sessions.signed_in_session_list(owner=user)),
    }
    return render(request, "accounts/security.html", context)


def _show_recovery_codes(request: HttpRequest, codes: list[str], *, first_time: bool) -> HttpResponse:
    return render(request, "accounts/recovery_codes.html", {"codes": codes, "first_time": first_time})


@never_cache  # the secret and then the recovery codes are on these pages: no cache may keep them
@login_required
@require_http_methods(["GET", "POST"])
def two_factor_setup(request: HttpRequest) -> HttpResponse:
    if two_factor.two_factor_enabled(user=request.user):
        messages.info(request, "Two-factor sign-in is already on.")
        return redirect("account_security")
    form = TotpConfirmForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            codes = two_factor.totp_enrolment_confirm(user=request.user, code=form.cleaned_data["code"])
        except ValidationError as refused:
            form.add_error("code", refused)
        else:
            ended = sessions.signed_in_sessions_end_others(
                owner=request.user, keep_session_key=request.session.session_key
            )
            note = f" {ended} other browser{'s were' if ended != 1 else ' was'} signed out." if ended else ""
            messages.success(request, "Two-factor sign-in is on." + note)
            return _show_recovery_codes(request, codes, first_time=True)
    device = two_factor.totp_enrolment_start(user=request.user)
    context = {
        "form": form,
        "qr_svg": two_factor.totp_qr_svg(device=device),
        "secret": two_factor.totp_secret_text(device=device),
    }
    return render(request, "accounts/two_factor_setup.html", context)


@never_cache
@login_required
@require_POST
def recovery_codes_regenerate(request: HttpRequest) -> HttpResponse:
    if not two_factor.two_factor_enabled(user=request.user):
        return redirect("account_security")
    codes = two_factor.recovery_codes_generate(user=request.user)
    messages.success(request, "New recovery codes made. The old ones no longer work.")
    return _show_recovery_codes(request, codes, first_time=False)


@never_cache
@login_required
@require_http_methods(["GET", "POST"])
def two_factor_disable(request: HttpRequest) -> HttpResponse:
    if not two_factor.two_factor_enabled(user=request.user):
        return redirect("account_security")
    form = TwoFactorDisableForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        allowed = two_factor.two_factor_disable_allowed(
            user=request.user, password=form.cleaned_data["password"], code=form.cleaned_data["code"]
        )
        if allowed:
            two_factor.two_factor_disable(user=request.user)
            messages.success(request, "Two-factor sign-in is off. Your password alone signs you in now.")
            return redirect("account_security")
        form.add_error(None, "That password or code is not right.")
    return render(request, "accounts/two_factor_disable.html", {"form": form})


@never_cache
@login_required
@require_POST
def passkey_register_options(request: HttpRequest) -> HttpResponse:
    options = passkeys.passkey_registration_options(request=request, user=request.user)
    return HttpResponse(options, content_type="application/json")


@never_cache
@login_required
@require_POST
def passkey_register(request: HttpRequest) -> JsonResponse:
    try:
        body = _json_body(request)
        passkey = passkeys.passkey_register(
            request=request,
            user=request.user,
            name=str(body.get("name") or ""),
            credential=body.get("credential"),
        )
    except ValidationError as refused:
        return _refused(" ".join(refused.messages))
    except passkeys.PasskeyRefused as refused:
        return _refused(str(refused))
    except ValueError:
        return _refused("The passkey could not be checked. Try again.")
    messages.success(request, f"Passkey “{passkey.name}” added. You can sign in with it now.")
    return JsonResponse({"redirect": reverse("account_security")})


@login_required
@require_http_methods(["GET", "POST"])
def passkey_delete(request: HttpRequest, passkey_id: int) -> HttpResponse:
    """GET asks first; POST deletes. Another person's passkey is a 404."""
    passkey = passkeys.passkey_get(owner=request.user, passkey_id=passkey_id)
    if request.method == "POST":
        passkeys.passkey_delete(passkey=passkey)
        messages.success(request, f"Passkey “{passkey.name}” deleted. It no longer signs you in.")
        return redirect("account_security")
    return render(request, "accounts/passkey_delete.html", {"passkey": passkey})


# --- Sessions ------------------------------------------------------------------------


@never_cache
@login_required
def session_list(request: HttpRequest) -> HttpResponse:
    records = sessions.signed_in_session_list(owner=request.user)
    current_key = request.session.session_key
    context = {
        "current": next((r for r in records if r.session_key == current_key), None),
        "others": [r for r in records if r.session_key != current_key],
    }
    return render(request, "accounts/sessions.html", context)


@login_required
@require_POST
def session_end(request: HttpRequest, session_id) -> HttpResponse:
    record = sessions.signed_in_session_get(owner=request.user, session_id=session_id)
    if record.session_key == request.session.session_key:
        messages.info(request, "That is this browser: use Log out to sign it out.")
        return redirect("session_list")
    sessions.signed_in_session_end(record=record)
    messages.success(request, f"Signed out {record.device}.")
    return redirect("session_list")


@login_required
@require_POST
def sessions_end_others(request: HttpRequest) -> HttpResponse:
    ended = sessions.signed_in_sessions_end_others(
        owner=request.user, keep_session_key=request.session.session_key
    )
    if ended:
        messages.success(request, f"Signed out {ended} other browser{'s' if ended != 1 else ''}.")
    else:
        messages.info(request, "No other browser was signed in.")
    return redirect("session_list")
