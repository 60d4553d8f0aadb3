"""Signed-in browsers: the Sessions page's records, signing browsers out, and new-browser notices.

Every `django.contrib.auth.login()` (the password, the second step, a passkey, sign-up,
and tests' `force_login`) ends in `signed_in_session_record`, through the `user_logged_in`
signal (accounts/apps.py): one path, so no way of signing in is left off the page.

A record is keyed by the session it describes. Signing a browser out deletes that session
from the session store (so its next request is anonymous) and its record. An authenticated
session with no record is signed out by the middleware: it was signed out elsewhere, or it
predates the records (migration 0003 ends those once, so every browser is on the page).

A "new browser" is one without our long-lived signed cookie naming this account: the cookie
holds the ids of the accounts that signed in from that browser (signed with SECRET_KEY, so it
cannot be forged; at most a handful). The first sign-in from a browser without it leaves a
notice in the inbox.
"""

from __future__ import annotations

import ipaddress
import re
import time
from datetime import timedelta
from importlib import import_module

from django.conf import settings
from django.contrib.auth import HASH_SESSION_KEY, SESSION_KEY, logout
from django.contrib.auth.models import AbstractBaseUser
from django.core import signing
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.urls import reverse
from django.utils import timezone
from django.utils.crypto import constant_time_compare

from accounts.models import SignedInSession
from inbox.models import NotificationKind
from inbox.services import notify

# Session keys (in the session's own data).
SIGNED_IN_AT = "_ks_signed_in_at"
METHOD = "_ks_method"
RECORD_KEY = "_ks_record_key"
SEEN_AT = "_ks_seen_at"
# How a sign-in went, set on the request by the view that calls login().
REQUEST_METHOD_ATTRIBUTE = "keepsake_sign_in_method"

# last_seen_at is bookkeeping, not an audit log: written at most once a minute per session.
SEEN_RESOLUTION = timedelta(minutes=1)

KNOWN_BROWSER_COOKIE = "keepsake_browser"
KNOWN_BROWSER_SALT = "accounts.sessions.known-browser"
KNOWN_BROWSER_MAX_AGE = 400 * 24 * 3600  # browsers cap cookies at 400 days
KNOWN_BROWSER_MAX_ACCOUNTS = 5
NEW_SIGN_IN_KIND = NotificationKind.NEW_SIGN_IN
SECOND_STEP_FAILED_KIND = NotificationKind.SECOND_STEP_FAILED


# --- The device, in plain words -----------------------------------------------------

_BROWSERS = (
    ("Edge", re.compile(r"\bEdg(?:e|A|iOS)?/")),
    ("Opera", re.compile(r"\b(?:OPR|Opera)/")),
    ("Samsung Internet", re.compile(r"\bSamsungBrowser/")),
    ("Firefox", re.compile(r"\b(?:Firefox|FxiOS)/")),
    ("Chrome", re.compile(r"\b(?:Chrome|CriOS|HeadlessChrome|Chromium)/")),
    ("Safari", re.compile(r"\bVersion/[\d.]+.*\bSafari/")),
)
_SYSTEMS = (
    ("iPhone", re.compile(r"\biPhone\b")),
    ("iPad", re.compile(r"\biPad\b")),
    ("Android", re.compile(r"\bAndroid\b")),
    ("ChromeOS", re.compile(r"\bCrOS\b")),
    ("Windows", re.compile(r"\bWindows\b")),
    ("Mac", re.compile(r"\bMac OS X\b|\bMacintosh\b")),
    ("Linux", re.compile(r"\bLinux\b")),
)
_PROGRAM = re.compile(r"^([A-Za-z][A-Za-z0-9._-]{0,30})/")


def device_describe(user_agent: str) -> str:
    """ "Firefox on Windows", "Safari on iPhone", "Chrome": a few words a person recognises."""
    browser = next((name for name, pattern in _BROWSERS if pattern.search(user_agent)), None)
    system = next((name for name, pattern in _SYSTEMS if pattern.search(user_agent)), None)
    if browser and system:
        return f"{browser} on {system}"
    if browser or system:
        return f"A browser on {system}" if system else browser
    program = _PROGRAM.match(user_agent)
    if program and program[1] != "Mozilla":
        return f"A program ({program[1]})"
    return "An unknown browser"


def _address(request: HttpRequest) -> str | None:
    from accounts.ratelimits import client_address

    try:
        return str(ipaddress.ip_address(client_address(request)))
    except ValueError:
        return None


# --- Records ----------------------------------------------------------------------


def signed_in_session_record(*, request: HttpRequest, user: AbstractBaseUser) -> SignedInSession | None:
    """Called by every login(): the row for this browser, and the marks its session carries."""
    session = getattr(request, "session", None)
    if session is None:
        return None
    if session.session_key is None:
        session.save()
    now = timezone.now()
    method = getattr(request, REQUEST_METHOD_ATTRIBUTE, "") or "password"
    record, _created = SignedInSession.objects.update_or_create(
        session_key=session.session_key,
        defaults={
            "owner": user,
            "device": device_describe(request.META.get("HTTP_USER_AGENT", ""))[:100],
            "address": _address(request),
            "method": method[:60],
            "signed_in_at": now,
            "last_seen_at": now,
        },
    )
    session[SIGNED_IN_AT] = now.isoformat()
    session[METHOD] = method
    session[RECORD_KEY] = session.session_key
    session[SEEN_AT] = time.time()
    return record


def signed_in_session_forget(*, request: HttpRequest) -> None:
    """Called on logout: the browser is no longer signed in."""
    session = getattr(request, "session", None)
    if session is not None and session.session_key:
        SignedInSession.objects.filter(session_key=session.session_key).delete()


def signed_in_session_touch(*, request: HttpRequest) -> bool:
    """An authenticated request: keep its record's `last_seen_at` (once a minute). False = signed out.

    A session without a record was signed out from elsewhere or predates the records:
    it is logged out here. A session whose key was cycled (a password change does that)
    carries the key its record was made under, and the record follows it.
    """
    session = request.session
    seen_at = session.get(SEEN_AT)
    if seen_at is not None and time.time() - seen_at < SEEN_RESOLUTION.total_seconds():
        return True
    key = session.session_key
    owner_id = request.user.pk
    now = timezone.now()
    updated = SignedInSession.objects.filter(session_key=key, owner_id=owner_id).update(last_seen_at=now)
    if not updated:
        old_key = session.get(RECORD_KEY)
        moved = bool(old_key) and old_key != key
        if moved:
            moved = bool(
                SignedInSession.objects.filter(session_key=old_key, owner_id=owner_id).update(
                    session_key=key, last_seen_at=now
                )
            )
        if not moved:
            logout(request)
            return False
        session[RECORD_KEY] = key
    session[SEEN_AT] = time.time()
    return True


def signed_in_session_rekey(*, request: HttpRequest, old_key: str | None) -> None:
    """The session's key was cycled (a password change does that): its record follows it now."""
    key = request.session.session_key
    if old_key and key and old_key != key:
        SignedInSession.objects.filter(session_key=old_key, owner_id=request.user.pk).update(session_key=key)
        request.session[RECORD_KEY] = key


def _session_store():
    return import_module(settings.SESSION_ENGINE).SessionStore


def _still_signed_in(record: SignedInSession, *, owner: AbstractBaseUser) -> bool:
    """Is the session there, and still for this owner's current password? A password change or
    reset turns older sessions away at their next request; the page says so before that."""
    data = _session_store()(session_key=record.session_key).load()
    stored_hash = data.get(HASH_SESSION_KEY) or ""
    return str(data.get(SESSION_KEY)) == str(owner.pk) and constant_time_compare(
        stored_hash, owner.get_session_auth_hash()
    )


def signed_in_session_list(*, owner: AbstractBaseUser) -> list[SignedInSession]:
    """The owner's signed-in browsers, most recently seen first; records of ended sessions go."""
    records = list(SignedInSession.objects.filter(owner=owner))
    ended = [record for record in records if not _still_signed_in(record, owner=owner)]
    for record in ended:
        # Gone or turned away already: its session (if any is left) and its record go now.
        signed_in_session_end(record=record)
    return [record for record in records if record not in ended]


def signed_in_session_get(*, owner: AbstractBaseUser, session_id: object) -> SignedInSession:
    """One of the owner's browsers, or 404 — another person's session does not exist for you."""
    return get_object_or_404(SignedInSession.objects.filter(owner=owner), pk=session_id)


def signed_in_session_end(*, record: SignedInSession) -> None:
    """Sign one browser out: its session leaves the store, so its next request is anonymous."""
    _session_store()().delete(record.session_key)
    SignedInSession.objects.filter(session_key=record.session_key).delete()


def signed_in_sessions_end_others(*, owner: AbstractBaseUser, keep_session_key: str | None) -> int:
    """Sign out every browser of `owner` but the one with `keep_session_key`; how many were."""
    others: QuerySet[SignedInSession] = SignedInSession.objects.filter(owner=owner)
    if keep_session_key:
        others = others.exclude(session_key=keep_session_key)
    ended = 0
    for record in others:
        signed_in_session_end(record=record)
        ended += 1
    return ended


# --- New browsers ------------------------------------------------------------------


def _known_accounts(request: HttpRequest) -> list[int]:
    try:
        value = request.get_signed_cookie(
            KNOWN_BROWSER_COOKIE, salt=KNOWN_BROWSER_SALT, max_age=KNOWN_BROWSER_MAX_AGE
        )
        return [int(part) for part in value.split(",") if part][:KNOWN_BROWSER_MAX_ACCOUNTS]
    except (KeyError, signing.BadSignature, ValueError):
        return []


def browser_is_known(*, request: HttpRequest, user: AbstractBaseUser) -> bool:
    return user.pk in _known_accounts(request)


def browser_remember(*, request: HttpRequest, response: HttpResponse, user: AbstractBaseUser) -> None:
    """Mark this browser as one `user` has signed in from (the most recent accounts kept)."""
    accounts = [user.pk] + [pk for pk in _known_accounts(request) if pk != user.pk]
    response.set_signed_cookie(
        KNOWN_BROWSER_COOKIE,
        ",".join(str(pk) for pk in accounts[:KNOWN_BROWSER_MAX_ACCOUNTS]),
        salt=KNOWN_BROWSER_SALT,
        max_age=KNOWN_BROWSER_MAX_AGE,
        secure=settings.SESSION_COOKIE_SECURE,
        httponly=True,
        samesite="Lax",
    )


def second_step_failed_notify(*, request: HttpRequest, user: AbstractBaseUser) -> None:
    """Someone gave the right password and then too many wrong codes: the owner should know."""
    device = device_describe(request.META.get("HTTP_USER_AGENT", ""))
    address = _address(request) or "an unknown address"
    notify(
        recipient=user,
        kind=SECOND_STEP_FAILED_KIND,
        text=f"Someone entered your password correctly from {device} at {address}, then gave wrong "
        "codes, and was not signed in. If it was not you, change your password now.",
        url=reverse("password_change"),
    )


def new_sign_in_notify(*, request: HttpRequest, user: AbstractBaseUser) -> None:
    """The inbox notice for a sign-in from a browser this account has not used before."""
    device = device_describe(request.META.get("HTTP_USER_AGENT", ""))
    address = _address(request) or "an unknown address"
    when = timezone.localtime().strftime("%-d %b %Y, %H:%M %Z")
    notify(
        recipient=user,
        kind=NEW_SIGN_IN_KIND,
        text=f"New sign-in from {device} at {address} on {when}. If it was not you, change your "
        "password and sign that browser out on the Sessions page.",
        url=reverse("session_list"),
    )
