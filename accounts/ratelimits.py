"""Rate limits for sign-up, password change and token authentication (login is django-axes').

Each limit slows or refuses the *failed* or costly attempts it counts, and none can
lock anyone out: see SECURITY.md ("Limits") for the threat model and each one's purpose.

Counts are django-ratelimit's fixed windows in the shared cache (Valkey, the
`ratelimit` alias in settings.CACHES), so every web worker and thread sees the
same numbers. Each limit is `count/period` (settings.KEEPSAKE_RATELIMITS): once a
key has used its count, the next attempt in the same window is refused with 429,
and the window always ends on its own — a lock-out lasts one period at most.

Who is counted, and why (an attacker must never be able to lock the owner out):

- Tokens: *failed* attempts per address, and only failed attempts are refused. The
  token is always read first: a valid token works whatever the address has tried
  (a family behind one router, an office or a proxy shares an address, and one
  stale token on one machine must not cut the others' agents off). Past the limit,
  a wrong token from that address answers 429 with Retry-After instead of 401,
  which slows a guesser and tells a misconfigured client to stop. Failures
  are not counted per account: a token is 256 random bits, so guessing it is
  hopeless with or without such a count, and a per-account lock would only hand a
  stranger a switch that cuts the owner's agents off. Per account, the *successful*
  requests of all the owner's tokens are counted instead — a ceiling on what a
  runaway (or stolen) token can do, which only a token holder can reach.
- Sign-up: every attempt per address (there is no account yet). It also bounds
  how fast the form can be used to find out which usernames exist.
- Password change: wrong current passwords per account and per address. Whoever
  fills the form is already signed in, so the pause is for password changes only:
  logging in, the timeline and the API go on.

When the cache cannot be reached the limits step aside ("fail open") and a
warning is logged: Valkey being down must not stop anyone from using their
journal, and it stops the background work first anyway.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from dataclasses import dataclass

from django.conf import settings
from django.http import HttpRequest
from django_ratelimit.core import get_usage
from redis.exceptions import RedisError

log = logging.getLogger(__name__)

TOKEN_FAILURES = "keepsake.token-failures"
TOKEN_REQUESTS = "keepsake.token-requests"
SIGNUP = "keepsake.signup"
PASSWORD_CHANGE_ACCOUNT = "keepsake.password-change.account"
PASSWORD_CHANGE_ADDRESS = "keepsake.password-change.address"

# After the cache fails, skip it for a while instead of paying a failed connection per request.
_CACHE_RETRY_SECONDS = 30.0
_cache_down_until = 0.0
_cache_lock = threading.Lock()


@dataclass(frozen=True)
class Limited:
    """A refusal: which limit (its settings key), and in how many seconds it lifts."""

    limit: str
    retry_after: int

    @property
    def retry_after_text(self) -> str:
        """ "about 12 minutes", "40 seconds": for messages people read."""
        if self.retry_after < 90:
            return f"{self.retry_after} second{'s' if self.retry_after != 1 else ''}"
        minutes = math.ceil(self.retry_after / 60)
        return f"about {minutes} minutes"


class TokenAttemptsLimited(Exception):
    """A bearer token may not be tried now (API and MCP answer 429 with Retry-After)."""

    def __init__(self, limited: Limited, message: str) -> None:
        super().__init__(message)
        self.limited = limited
        self.message = message


def client_address(request: HttpRequest) -> str:
    """The caller's address, resolved as django-axes does for logins (one rule for both).

    settings.RATELIMIT_IP_META_KEY names this function; django-ratelimit then groups
    IPv6 addresses by /64, since anyone with one IPv6 address has a whole /64.
    """
    from axes.helpers import get_client_ip_address

    return get_client_ip_address(request) or request.META.get("REMOTE_ADDR") or "0.0.0.0"


def _rate(name: str) -> str | None:
    """The configured `count/period` for a limit; None (or "") switches it off."""
    return settings.KEEPSAKE_RATELIMITS.get(name) or None


def _usage(request: HttpRequest, *, name: str, group: str, key: object, increment: bool) -> dict | None:
    """django-ratelimit's usage for one key, or None when the limit is off or the cache is down."""
    global _cache_down_until
    rate = _rate(name)
    if rate is None or time.monotonic() < _cache_down_until:
        return None
    try:
        return get_usage(request, group=group, key=key, rate=rate, increment=increment)
    except (RedisError, OSError) as exc:
        with _cache_lock:
            _cache_down_until = time.monotonic() + _CACHE_RETRY_SECONDS
        log.warning(
            "Rate limits are off for %.0f s: the cache is unreachable (%s)", _CACHE_RETRY_SECONDS, exc
        )
        return None


def _limited(name: str, usage: dict | None, *, at_most: str) -> Limited | None:
    """Refuse when the count is over the limit ("count") or has reached it ("peek" before an attempt)."""
    if usage is None:
        return None
    over = usage["count"] > usage["limit"] if at_most == "count" else usage["count"] >= usage["limit"]
    if not over:
        return None
    return Limited(limit=name, retry_after=max(1, int(usage["time_left"])))


def _count_or_refuse(request: HttpRequest, *, name: str, group: str, key: object, refusal: str) -> None:
    """Count one more against a limit; past it, refuse with `refusal` ({retry_after} says when it lifts)."""
    usage = _usage(request, name=name, group=group, key=key, increment=True)
    limited = _limited(name, usage, at_most="count")
    if limited is not None:
        raise TokenAttemptsLimited(limited, refusal.format(retry_after=limited.retry_after_text))


def _account_key(user_id: object):
    return lambda _group, _request: f"user:{user_id}"


# --- Tokens (API and /mcp/) ------------------------------------------------------


def token_failure_record(request: HttpRequest) -> None:
    """A wrong, malformed or revoked token was tried from this address: count it, refuse past the limit.

    Called only once the token has been read and found wanting, so the count and the
    refusal never touch a valid token (issue #40: checking the address first refused
    the right token for a quarter of an hour after someone else's wrong ones).
    """
    _count_or_refuse(
        request,
        name="token_failures_per_address",
        group=TOKEN_FAILURES,
        key="ip",
        refusal="Too many failed token attempts from your address: wrong tokens from it are refused "
        "(a valid token still works). Try again in {retry_after}.",
    )


def token_request_record(request: HttpRequest, *, owner_id: object) -> None:
    """Count an authenticated token request against its owner's ceiling; refuse past it."""
    _count_or_refuse(
        request,
        name="token_requests_per_account",
        group=TOKEN_REQUESTS,
        key=_account_key(owner_id),
        refusal="Too many requests with this account's tokens: slow down. Try again in {retry_after}.",
    )


# --- Logins (django-axes) -------------------------------------------------------------

# django-axes' AccessAttempt.username column.
LOGIN_USERNAME_RECORD_LENGTH = 255


def login_username(request: HttpRequest, credentials: dict | None) -> str | None:
    """The username django-axes counts a login attempt under (settings.AXES_USERNAME_CALLABLE).

    Django's login form does not enforce the username's length, so axes used to try to
    store whatever was typed and failed (a 500) past its 255-character column. NUL is
    removed (PostgreSQL cannot store it); a longer name keeps its first 255 characters,
    which can name no real account (usernames are at most 150).
    """
    if credentials:
        username = credentials.get("username")
    else:
        username = getattr(request, "data", request.POST).get("username")
    if username is None:
        return None
    return str(username).replace("\x00", "")[:LOGIN_USERNAME_RECORD_LENGTH]


# --- Web forms -------------------------------------------------------------------


def signup_attempt(request: HttpRequest) -> Limited | None:
    """Count a sign-up attempt from this address; a Limited once the address has used its share."""
    name = "signup_per_address"
    return _limited(name, _usage(request, name=name, group=SIGNUP, key="ip", increment=True), at_most="count")


def password_change_check(request: HttpRequest) -> Limited | None:
    """Before the current password is checked: has this account, or this address, used its tries?"""
    checks = (
        ("password_change_failures_per_account", PASSWORD_CHANGE_ACCOUNT, _account_key(request.user.pk)),
        ("password_change_failures_per_address", PASSWORD_CHANGE_ADDRESS, "ip"),
    )
    for name, group, key in checks:
        usage = _usage(request, name=name, group=group, key=key, increment=False)
        limited = _limited(name, usage, at_most="peek")
        if limited is not None:
            return limited
    return None


def password_change_failure_record(request: HttpRequest) -> None:
    """A wrong current password was given on the password-change form."""
    _usage(
        request,
        name="password_change_failures_per_account",
        group=PASSWORD_CHANGE_ACCOUNT,
        key=_account_key(request.user.pk),
        increment=True,
    )
    _usage(
        request,
        name="password_change_failures_per_address",
        group=PASSWORD_CHANGE_ADDRESS,
        key="ip",
        increment=True,
    )
