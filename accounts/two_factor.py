"""Two-factor sign-in: the authenticator app (TOTP, django-otp), recovery codes, the second step.

The rules:

- Two-factor is on when the account has a *confirmed* authenticator app. Enrolment makes an
  unconfirmed device, shows its QR code and secret, and confirms it only with a code the
  app made from it — a mistyped secret can never lock anyone out.
- Confirming it makes ten recovery codes, shown once; only their SHA-256 is stored. Each
  works once (a conditional UPDATE marks it used, so two requests cannot both use one);
  making new ones voids the old.
- A code is accepted once: django-otp keeps the last time step used (`last_t`) and refuses
  that step and older ones. The device row is locked while a code is checked, so two requests
  carrying the same code cannot both pass. Wrong codes slow further tries on that device
  (django-otp's throttle: 1, 2, 4, ... seconds); recovery codes and passkeys are not
  slowed by it, so someone who knows the password cannot keep the owner out.
- Signing in with a password, when two-factor is on, does not sign in: the account waits in
  the session (`PENDING`) for the second step — a code, a recovery code, or a passkey — for
  five minutes and at most five wrong codes, then the password is asked again. Only then is
  `login()` called, so every page that needs a signed-in person needs both factors.
- Turning it off needs the password or a current code.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import time
from base64 import b32encode

import segno
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.db import transaction
from django.http import HttpRequest
from django.utils import timezone
from django_otp.plugins.otp_totp.models import TOTPDevice

from accounts.models import RecoveryCode

RECOVERY_CODE_COUNT = 10
# 31 letters and digits without look-alikes (0/o, 1/l/i): ten of them are ~50 random bits.
_RECOVERY_ALPHABET = "abcdefghjkmnpqrstuvwxyz23456789"
_TOTP_CODE = re.compile(r"^\d{6}$")

PENDING = "_ks_pending_sign_in"
PENDING_SECONDS = 300
PENDING_MAX_FAILURES = 5

METHOD_TOTP = "password and authenticator code"
METHOD_RECOVERY = "password and recovery code"


# --- State -------------------------------------------------------------------------


def two_factor_enabled(*, user: AbstractBaseUser) -> bool:
    return TOTPDevice.objects.filter(user=user, confirmed=True).exists()


def recovery_codes_remaining(*, user: AbstractBaseUser) -> int:
    return RecoveryCode.objects.filter(owner=user, used_at=None).count()


# --- Enrolment -----------------------------------------------------------------------


def totp_enrolment_start(*, user: AbstractBaseUser) -> TOTPDevice:
    """The unconfirmed device whose QR code is on the page (the same one on a reload)."""
    device = TOTPDevice.objects.filter(user=user, confirmed=False).order_by("-id").first()
    if device is None:
        device = TOTPDevice.objects.create(user=user, name="Authenticator app", confirmed=False)
    return device


def totp_secret_text(*, device: TOTPDevice) -> str:
    """The secret as people type it into an app: base32 in groups of four."""
    secret = b32encode(device.bin_key).decode().rstrip("=")
    return " ".join(secret[i : i + 4] for i in range(0, len(secret), 4))


def totp_qr_svg(*, device: TOTPDevice) -> str:
    """The otpauth:// URL as an inline SVG QR code (no style attributes: the CSP allows none)."""
    qr = segno.make(device.config_url, error="m")
    return qr.svg_inline(
        scale=5, border=4, dark="#000", light="#fff", svgclass="totp-qr", title="QR code for your app"
    )


@transaction.atomic
def totp_enrolment_confirm(*, user: AbstractBaseUser, code: str) -> list[str]:
    """Confirm the pending device with a code it made; returns the new recovery codes (shown once)."""
    device = TOTPDevice.objects.select_for_update().filter(user=user, confirmed=False).order_by("-id").first()
    if device is None:
        raise ValidationError("Start again: the set-up page was open too long.", code="no_device")
    if not _TOTP_CODE.match(_digits(code)) or not device.verify_token(_digits(code)):
        raise ValidationError(
            "That code does not match. Check that the app shows Keepsake and try the newest code.",
            code="wrong_code",
        )
    TOTPDevice.objects.filter(user=user).exclude(pk=device.pk).delete()
    device.confirmed = True
    device.save(update_fields=["confirmed"])
    return recovery_codes_generate(user=user)


def two_factor_disable(*, user: AbstractBaseUser) -> None:
    with transaction.atomic():
        TOTPDevice.objects.filter(user=user).delete()
        RecoveryCode.objects.filter(owner=user).delete()


# --- Codes -------------------------------------------------------------------------


def _digits(code: str) -> str:
    return re.sub(r"\s", "", code or "")


def _recovery_normalise(code: str) -> str:
    return re.sub(r"[^a-z0-9]", "", (code or "").lower())[:40]


def _recovery_hash(code: str) -> str:
    return hashlib.sha256(_recovery_normalise(code).encode()).hexdigest()


@transaction.atomic
def recovery_codes_generate(*, user: AbstractBaseUser) -> list[str]:
    """Ten new codes, replacing every earlier one; the only time they are readable."""
    codes = []
    for _ in range(RECOVERY_CODE_COUNT):
        raw = "".join(secrets.choice(_RECOVERY_ALPHABET) for _ in range(10))
        codes.append(f"{raw[:5]}-{raw[5:]}")
    RecoveryCode.objects.filter(owner=user).delete()
    RecoveryCode.objects.bulk_create(RecoveryCode(owner=user, code_hash=_recovery_hash(c)) for c in codes)
    return codes


def recovery_code_use(*, user: AbstractBaseUser, code: str) -> bool:
    """Spend one recovery code; False if it is wrong or was used already."""
    if len(_recovery_normalise(code)) != 10:
        return False
    used = RecoveryCode.objects.filter(owner=user, code_hash=_recovery_hash(code), used_at=None).update(
        used_at=timezone.now()
    )
    return used == 1


def totp_verify(*, user: AbstractBaseUser, code: str) -> bool:
    """A current code from the confirmed authenticator app, never accepted twice."""
    code = _digits(code)
    if not _TOTP_CODE.match(code):
        return False
    with transaction.atomic():
        # Locked: two requests with the same code are checked one after the other, and the
        # second sees the first's last_t.
        device = TOTPDevice.objects.select_for_update().filter(user=user, confirmed=True).first()
        return device is not None and device.verify_token(code)


def second_factor_verify(*, user: AbstractBaseUser, code: str) -> str | None:
    """Check a code of either kind; the sign-in method it makes, or None if it is refused."""
    if _TOTP_CODE.match(_digits(code)):
        return METHOD_TOTP if totp_verify(user=user, code=code) else None
    if recovery_code_use(user=user, code=code):
        # A recovery code proves the account is the owner's: let the app be tried again at once.
        TOTPDevice.objects.filter(user=user, confirmed=True).update(
            throttling_failure_count=0, throttling_failure_timestamp=None
        )
        return METHOD_RECOVERY
    return None


def two_factor_disable_allowed(*, user: AbstractBaseUser, password: str, code: str) -> bool:
    """Turning two-factor off needs the password or a current (or recovery) code."""
    if password and user.check_password(password):
        return True
    return bool(code) and second_factor_verify(user=user, code=code) is not None


# --- The pending sign-in (between the password and the second step) --------------------


def pending_sign_in_start(*, request: HttpRequest, user: AbstractBaseUser, backend: str) -> None:
    request.session[PENDING] = {"user": user.pk, "backend": backend, "at": time.time(), "failures": 0}


def pending_sign_in_user(*, request: HttpRequest) -> tuple[AbstractBaseUser, str] | None:
    """The account waiting for its second step in this browser, and its backend; None if none or stale."""
    pending = request.session.get(PENDING)
    if not isinstance(pending, dict):
        return None
    if time.time() - pending.get("at", 0) > PENDING_SECONDS:
        pending_sign_in_clear(request=request)
        return None
    user = get_user_model().objects.filter(pk=pending.get("user"), is_active=True).first()
    if user is None:
        pending_sign_in_clear(request=request)
        return None
    return user, pending.get("backend") or "django.contrib.auth.backends.ModelBackend"


def pending_sign_in_failure(*, request: HttpRequest) -> bool:
    """Count a wrong second step; True if the password must now be given again."""
    pending = request.session.get(PENDING) or {}
    pending["failures"] = pending.get("failures", 0) + 1
    if pending["failures"] >= PENDING_MAX_FAILURES:
        pending_sign_in_clear(request=request)
        return True
    request.session[PENDING] = pending
    return False


def pending_sign_in_clear(*, request: HttpRequest) -> None:
    request.session.pop(PENDING, None)
