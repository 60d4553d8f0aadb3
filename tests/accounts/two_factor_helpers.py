"""Codes computed the way an authenticator app computes them (RFC 6238, django-otp's oath module)."""

from __future__ import annotations

import time

from django_otp.oath import TOTP
from django_otp.plugins.otp_totp.models import TOTPDevice


def totp_code(device: TOTPDevice, *, steps_ahead: int = 0) -> str:
    """The 6-digit code the app shows now (or `steps_ahead` 30-second steps later)."""
    device.refresh_from_db()
    totp = TOTP(device.bin_key, device.step, device.t0, device.digits, device.drift)
    totp.time = time.time() + steps_ahead * device.step
    return f"{totp.token():06d}"


def wrong_code(device: TOTPDevice) -> str:
    """A 6-digit code no step near now makes (so it is certainly wrong)."""
    valid = {totp_code(device, steps_ahead=offset) for offset in range(-3, 4)}
    return next(f"{n:06d}" for n in range(1_000_000) if f"{n:06d}" not in valid)


def enrol(user) -> tuple[TOTPDevice, list[str]]:
    """Alice turns two-factor on as the page does: scan, then confirm with the app's code."""
    from accounts.two_factor import totp_enrolment_confirm, totp_enrolment_start

    device = totp_enrolment_start(user=user)
    codes = totp_enrolment_confirm(user=user, code=totp_code(device))
    device.refresh_from_db()
    return device, codes
