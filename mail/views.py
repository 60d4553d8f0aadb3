"""E-mail pages: the account's address and digest, the verification link, password reset.

Every message these pages ask for is queued (mail.services.email_queue) and sent by the
worker; the page answers at once, whatever the mail server is doing.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse, reverse_lazy
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_POST
from django_ratelimit.core import is_ratelimited

from mail import services
from mail.forms import DigestForm, EmailAddressForm, PasswordResetRequestForm, SetNewPasswordForm


def mail_rate_limited(request: HttpRequest) -> bool:
    """Messages one account asks us to send to addresses it gives (invitations, verification
    links) within the window: past it, a page says so and nothing is sent. Keeps an account
    from making this server a sender of mail to strangers."""
    rate = settings.KEEPSAKE_RATELIMITS.get("mail_per_account")
    return bool(rate) and is_ratelimited(
        request, group="keepsake.mail_per_account", key="user", rate=rate, method="POST", increment=True
    )


MAIL_RATE_LIMITED = "You have asked for many messages today; try again tomorrow."


def site_url(request: HttpRequest) -> str:
    """This site's address as the visitor reached it: links in a message point back here."""
    return request.build_absolute_uri("/").rstrip("/")


# --- the account's address and digest -------------------------------------------------------


def _settings_page(request: HttpRequest, **extra) -> HttpResponse:
    row = services.email_address_for(user=request.user)
    context = {
        "row": row,
        # A verified address is shown above the form; the field is for a new one.
        "address_form": EmailAddressForm(
            initial={"address": row.pending or ("" if row.is_verified else request.user.email)}
        ),
        "digest_form": DigestForm(initial={"daily_digest": row.daily_digest}),
        **extra,
    }
    return render(request, "mail/settings.html", context, status=400 if extra.get("invalid") else 200)


@login_required
@require_http_methods(["GET"])
def mail_settings(request: HttpRequest) -> HttpResponse:
    return _settings_page(request)


@login_required
@require_POST
def mail_address_set(request: HttpRequest) -> HttpResponse:
    form = EmailAddressForm(request.POST)
    if form.is_valid() and mail_rate_limited(request):
        form.add_error("address", MAIL_RATE_LIMITED)
    elif form.is_valid():
        try:
            row = services.email_address_request(
                user=request.user, address=form.cleaned_data["address"], site_url=site_url(request)
            )
        except ValidationError as error:
            form.add_error("address", error)
        else:
            if row.pending:
                messages.success(request, f"We sent a link to {row.pending}. Follow it to use this address.")
            else:
                messages.info(request, f"{row.address} is already your verified address.")
            return redirect("mail_settings")
    return _settings_page(request, address_form=form, invalid=True)


@login_required
@require_POST
def mail_address_remove(request: HttpRequest) -> HttpResponse:
    services.email_address_remove(user=request.user)
    messages.success(request, "Your e-mail address is removed: no password reset by e-mail, no digest.")
    return redirect("mail_settings")


@login_required
@require_POST
def mail_digest_set(request: HttpRequest) -> HttpResponse:
    form = DigestForm(request.POST)
    form.is_valid()  # a checkbox: always valid
    try:
        row = services.email_digest_set(user=request.user, daily_digest=form.cleaned_data["daily_digest"])
    except ValidationError as error:
        form.add_error(None, error)
        return _settings_page(request, digest_form=form, invalid=True)
    messages.success(
        request,
        f"Daily digest on: it goes to {row.address}." if row.daily_digest else "Daily digest off.",
    )
    return redirect("mail_settings")


@never_cache
@require_http_methods(["GET", "POST"])
def mail_verify(request: HttpRequest, token: str) -> HttpResponse:
    """GET asks (a mail scanner that opens links changes nothing); POST verifies."""
    try:
        services.verify_token_check(token=token)
        if request.method == "POST":
            row = services.email_address_verify(token=token)
        else:
            return render(request, "mail/verify.html", {"token": token})
    except services.VerificationInvalid as invalid:
        return render(request, "mail/verify.html", {"invalid": " ".join(invalid.messages)}, status=404)
    messages.success(request, f"{row.address} is verified.")
    if request.user.is_authenticated and request.user.pk == row.owner_id:
        return redirect("mail_settings")
    return render(request, "mail/verify.html", {"verified": row.address})


# --- password reset -------------------------------------------------------------------------


@never_cache
@require_http_methods(["GET", "POST"])
def password_reset(request: HttpRequest) -> HttpResponse:
    """Ask for a reset link. The answer is the same whether or not an account has the address."""
    form = PasswordResetRequestForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        rate = settings.KEEPSAKE_RATELIMITS.get("password_reset_per_address")
        if rate and is_ratelimited(
            request, group="keepsake.password_reset", key="ip", rate=rate, method="POST", increment=True
        ):
            return render(
                request,
                "accounts/rate_limited.html",
                {
                    "title": "Too many reset requests",
                    "reason": "Too many password reset requests came from your network.",
                    "retry_after_text": "a while",
                },
                status=429,
            )
        services.password_reset_request(address=form.cleaned_data["address"], site_url=site_url(request))
        return redirect("mail_password_reset_sent")
    return render(request, "mail/password_reset.html", {"form": form}, status=400 if form.errors else 200)


@require_http_methods(["GET"])
def password_reset_sent(request: HttpRequest) -> HttpResponse:
    return render(request, "mail/password_reset_sent.html")


class PasswordResetConfirmView(auth_views.PasswordResetConfirmView):
    """Django's: checks the token (default_token_generator), takes it out of the address bar,
    and sets the password with the same validators as sign-up."""

    template_name = "mail/password_reset_confirm.html"
    form_class = SetNewPasswordForm
    success_url = reverse_lazy("mail_password_reset_done")
    post_reset_login = False


def password_reset_done(request: HttpRequest) -> HttpResponse:
    return render(request, "mail/password_reset_done.html", {"login_url": reverse("login")})
