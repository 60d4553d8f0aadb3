from __future__ import annotations

import functools
import hashlib
import hmac
import re
import secrets
from datetime import timedelta

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from accounts.models import AccessToken, TokenKind
from agents.models import Agent
from agents.services import agent_create_builtins
from config.rows import columns, instance
from people.services import person_create_self


@transaction.atomic
def user_signup(*, username: str, password: str, email: str = "") -> AbstractBaseUser:
    """Create an account with its Self person (consent granted) and built-in agents."""
    user = get_user_model().objects.create_user(username=username, password=password, email=email)
    person_create_self(owner=user)
    agent_create_builtins(owner=user)
    return user


# --- Access tokens --------------------------------------------------------------
# A token reads "ks_<prefix>_<secret>": the 8-hex-digit prefix is stored in clear to
# find the row (and to let the owner tell tokens apart); only a hash of the whole
# token is stored, so a database leak does not leak usable tokens.
_TOKEN_PATTERN = re.compile(r"^ks_(?P<prefix>[0-9a-f]{8})_(?P<secret>[A-Za-z0-9_-]{20,200})$")
# last_used_at is bookkeeping, not an audit log: writing it on every request would
# turn each read into a write, so it is refreshed at most once a minute.
_LAST_USED_RESOLUTION = timedelta(minutes=1)


def _token_hash(raw_token: str) -> str:
    return hashlib.sha256(raw_token.encode()).hexdigest()


# Compared against when no token has the prefix; no token hashes to it (it is not hex).
_UNKNOWN_PREFIX_HASH = "-" * 64


def access_token_create(
    *, owner: AbstractBaseUser, kind: str, agent: Agent | None = None, name: str = ""
) -> tuple[AccessToken, str]:
    """Create a token and return it with its full secret, which is never shown again."""
    errors: dict[str, str] = {}
    if kind not in TokenKind.values:
        errors["kind"] = f"Kind must be one of: {', '.join(TokenKind.values)}."
    elif kind == TokenKind.AGENT and agent is None:
        errors["agent"] = "An agent token must name one of your agents."
    elif kind == TokenKind.OWNER and agent is not None:
        errors["agent"] = "Only agent tokens are bound to an agent."
    if agent is not None and agent.owner_id != owner.pk:
        # Never reveal that the agent exists for someone else.
        errors["agent"] = "Unknown agent."
    name = name.strip()
    if len(name) > 100:
        errors["name"] = "Keep the name under 100 characters."
    if errors:
        raise ValidationError(errors)
    # A prefix collision is astronomically rare but the column is unique: retry.
    for _attempt in range(5):
        prefix = secrets.token_hex(4)
        raw_token = f"ks_{prefix}_{secrets.token_urlsafe(32)}"
        try:
            with transaction.atomic():
                token = AccessToken.objects.create(
                    owner=owner,
                    kind=kind,
                    agent=agent,
                    name=name,
                    prefix=prefix,
                    secret_hash=_token_hash(raw_token),
                )
        except IntegrityError:
            continue
        return token, raw_token
    raise RuntimeError("Could not allocate a unique token prefix.")


def access_token_revoke(*, token: AccessToken) -> AccessToken:
    """Revoke a token; revoking twice keeps the first revocation time."""
    AccessToken.objects.filter(pk=token.pk, revoked_at=None).update(revoked_at=timezone.now())
    token.refresh_from_db(fields=["revoked_at"])
    return token


@functools.cache
def _token_lookup() -> tuple[str, tuple, tuple, tuple]:
    """The token lookup's statement and the fields of its three parts (token, owner, agent)."""
    user_model = get_user_model()
    token_fields = tuple(AccessToken._meta.concrete_fields)
    owner_fields = tuple(user_model._meta.concrete_fields)
    agent_fields = tuple(Agent._meta.concrete_fields)
    sql = (
        f"SELECT {columns('token', token_fields)}, {columns('owner', owner_fields)}, "
        f"{columns('agent', agent_fields)} "
        f"FROM {AccessToken._meta.db_table} token "
        f'JOIN {user_model._meta.db_table} owner ON owner."{user_model._meta.pk.column}" = token.owner_id '
        f'LEFT JOIN {Agent._meta.db_table} agent ON agent."{Agent._meta.pk.column}" = token.agent_id '
        "WHERE token.prefix = %s"
    )
    return sql, token_fields, owner_fields, agent_fields


def _token_with_prefix(prefix: str) -> AccessToken | None:
    """The token with this prefix (unique), its owner and agent loaded as select_related loads them.

    Plain SQL (config.rows): the ORM's statement cost ~0.7 ms of Python to build,
    on every API and MCP request, twice what running it took.
    """
    sql, token_fields, owner_fields, agent_fields = _token_lookup()
    with connection.cursor() as cursor:
        cursor.execute(sql, [prefix])
        row = cursor.fetchone()
    if row is None:
        return None
    owner_at, agent_at = len(token_fields), len(token_fields) + len(owner_fields)
    token = instance(AccessToken, token_fields, row[:owner_at])
    owner = instance(get_user_model(), owner_fields, row[owner_at:agent_at])
    agent_pk = row[agent_at + agent_fields.index(Agent._meta.pk)]
    agent = instance(Agent, agent_fields, row[agent_at:]) if agent_pk is not None else None
    AccessToken.owner.field.set_cached_value(token, owner)
    AccessToken.agent.field.set_cached_value(token, agent)
    if agent is not None and agent.owner_id == owner.pk:
        # The agent's owner is the token's: loaded once (agent.owner was a query per request).
        Agent.owner.field.set_cached_value(agent, owner)
    return token


def access_token_authenticate(*, raw_token: str) -> AccessToken | None:
    """The active token matching `raw_token` (recording its use), or None."""
    raw_token = raw_token.strip()
    match = _TOKEN_PATTERN.match(raw_token)
    if match is None:
        return None
    token = _token_with_prefix(match["prefix"])
    # Hash and compare even for an unknown prefix, in constant time: how long a wrong
    # token takes to refuse says nothing about whether its prefix exists.
    stored_hash = token.secret_hash if token is not None else _UNKNOWN_PREFIX_HASH
    if not hmac.compare_digest(stored_hash, _token_hash(raw_token)) or token is None:
        return None
    if token.revoked_at is not None or not token.owner.is_active:
        return None
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at >= _LAST_USED_RESOLUTION:
        AccessToken.objects.filter(pk=token.pk).update(last_used_at=now)
        token.last_used_at = now
    return token
