"""Memory lifecycle: how long each kind lives, what kind a memory is, and marking expiry.

Lifetimes come from settings.MEMORY_KIND_LIFETIMES (days after `occurred_at`;
None or "never" = long-lived). `expires_at` is derived whenever a memory is
saved through memories.services; the agent retrieval selector trusts
`expires_at` directly, so an expired memory leaves agent retrieval the very
second it expires even if the beat task is late. The beat task only stamps
`expired_at` (bookkeeping for the owner's journal and `doctor`); nothing here
ever deletes a memory.

A short lifetime counts from the memory's date, or from a later date its text
speaks of ("planned for next year", "on 14 June 2027": memories.classify_time),
so a plan stays in view until it has happened.

Kind inference is deliberately a short list of readable rules (KIND_RULES) so
the owner can predict it; an explicit kind always wins.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db.models import Q
from django.utils import timezone

from memories.classify import classify_sensitivity, refuse_credentials
from memories.classify_time import latest_future_date
from memories.models import Memory, MemoryKind

NEVER = "never"


def kind_lifetimes() -> dict[str, timedelta | None]:
    """Every kind's lifetime, validated. Kinds missing from the setting never expire."""
    configured = getattr(settings, "MEMORY_KIND_LIFETIMES", {}) or {}
    unknown = set(configured) - set(MemoryKind.values)
    if unknown:
        raise ImproperlyConfigured(
            f"MEMORY_KIND_LIFETIMES names unknown kinds: {', '.join(sorted(unknown))}."
        )
    lifetimes: dict[str, timedelta | None] = {}
    for kind in MemoryKind.values:
        raw = configured.get(kind)
        lifetimes[kind] = _parse_lifetime(kind, raw)
    return lifetimes


def _parse_lifetime(kind: str, raw: object) -> timedelta | None:
    if raw is None or (isinstance(raw, str) and raw.strip().lower() in {"", NEVER, "none"}):
        return None
    try:
        days = float(raw)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ImproperlyConfigured(
            f"MEMORY_KIND_LIFETIMES[{kind!r}] must be a number of days or 'never', not {raw!r}."
        ) from None
    if days <= 0:
        raise ImproperlyConfigured(f"MEMORY_KIND_LIFETIMES[{kind!r}] must be more than 0 days.")
    return timedelta(days=days)


def memory_expires_at(*, kind: str, occurred_at: datetime, text: str = "") -> datetime | None:
    """When a memory of `kind` that happened at `occurred_at` leaves agent retrieval.

    The lifetime counts from the latest future date `text` names, if later than
    `occurred_at`: "the wedding is next year" is still ahead a month from now.
    """
    lifetime = kind_lifetimes().get(kind)
    if lifetime is None:
        return None
    start = latest_future_date(text=text, after=occurred_at) if text else None
    return (start or occurred_at) + lifetime


def memory_apply_expiry(*, memory: Memory, now: datetime | None = None) -> None:
    """Derive `expires_at` (and the `expired_at` marker) on an unsaved/being-saved memory.

    Called by memory_create / memory_update before save, so both fields follow
    any change of kind or occurred_at. A memory saved already expired (an old
    event typed in today) is marked at once; one that becomes long-lived again
    loses its marker.
    """
    now = now or timezone.now()
    memory.expires_at = memory_expires_at(
        kind=memory.kind, occurred_at=memory.occurred_at, text=f"{memory.title}\n{memory.body}"
    )
    if memory.expires_at is not None and memory.expires_at <= now:
        memory.expired_at = memory.expired_at or now
    else:
        memory.expired_at = None


def memory_is_expired(memory: Memory, *, now: datetime | None = None) -> bool:
    return memory.expires_at is not None and memory.expires_at <= (now or timezone.now())


def expired_q(*, now: datetime | None = None) -> Q:
    """The same test the agent retrieval uses: expires_at <= now. NULL never expires."""
    return Q(expires_at__lte=now or timezone.now())


def memories_mark_expired(*, now: datetime | None = None) -> int:
    """Stamp `expired_at` on every memory whose time is up. Idempotent; deletes nothing.

    A single conditional UPDATE: a redelivered or concurrent beat run finds
    nothing left to mark.
    """
    now = now or timezone.now()
    return Memory.objects.filter(expired_q(now=now), expired_at__isnull=True).update(expired_at=now)


# --- Kind inference -----------------------------------------------------------------


@dataclass(frozen=True)
class KindRule:
    kind: str
    name: str
    pattern: re.Pattern[str]


def _words(*alternatives: str) -> re.Pattern[str]:
    return re.compile(r"\b(?:" + "|".join(alternatives) + r")\b", re.IGNORECASE)


_KIN = (
    r"(?:sister|brother|mother|mum|mom|father|dad|son|daughter|wife|husband|partner|girlfriend|boyfriend"
    r"|fianc[ée]e?|friend|best friend|cousin|aunt|uncle|niece|nephew|grandmother|grandfather|grandma"
    r"|grandpa|granddaughter|grandson|colleague|boss|neighbou?r|flatmate|roommate|godmother|godfather"
    r"|stepmother|stepfather|stepson|stepdaughter|in-law|ex)"
)

# A body of work that, once finished, is part of someone's story.
_WORK = (
    r"(?:(?:first |final )?drafts?|novel|book|manuscript|memoir|thesis|dissertation|phd|screenplay|album"
    r"|poetry collection|collection of (?:poems|stories)|short story|degree|apprenticeship|marathon)"
)

# First match wins, so the order matters: a reminder about a friend is a task,
# a friend's taste is a preference, and only then is "X is my sister" a relationship.
KIND_RULES: tuple[KindRule, ...] = (
    KindRule(
        MemoryKind.TASK,
        "a reminder or to-do",
        _words(
            r"remind me",
            r"to-?do",
            r"need to",
            r"needs to",
            r"have to",
            r"has to",
            r"don'?t forget",
            r"do not forget",
            r"remember to",
            r"deadline",
            r"due (?:on|by|before)",
        ),
    ),
    KindRule(
        MemoryKind.PREFERENCE,
        "a like or dislike",
        _words(
            r"likes?",
            r"loves?",
            r"prefers?",
            r"hates?",
            r"dislikes?",
            r"enjoys?",
            r"can'?t stand",
            r"favou?rite",
            r"is (?:a )?fan of",
            r"is into",
        ),
    ),
    KindRule(
        MemoryKind.RELATIONSHIP,
        "how two people are related",
        re.compile(
            r"\b(?:is|are|was|were) (?:my|our|his|her|their|\w+'s) " + _KIN + r"s?\b"
            r"|\b(?:married|engaged|dating|divorced|separated)\b"
            r"|\bbroke up\b|\bin a relationship\b",
            re.IGNORECASE,
        ),
    ),
    KindRule(
        MemoryKind.IDENTITY,
        "who someone is",
        _words(
            r"my name is",
            r"name is",
            r"was born",
            r"born (?:in|on)",
            r"birthday is",
            r"pronouns",
            r"works as",
            r"is (?:a )?(?:vegan|vegetarian)",
            r"nationality",
            r"grew up in",
        ),
    ),
    # Before the dated kinds: "finished the first draft of my novel today" is a
    # lasting fact about someone's life, not what is going on this week.
    KindRule(
        MemoryKind.KNOWLEDGE,
        "a milestone that stays true",
        re.compile(
            # Done, not planned: "finished", never "finish" ("want to finish my thesis").
            r"\b(?:finished|completed|wrote|written|published|submitted|defended|handed in|recorded"
            r"|released)\b(?: \w+){0,5}? " + _WORK + r"\b"
            r"|\b" + _WORK + r"\b(?: \w+){0,3}? (?:is|was|are|were|got|now) (?:\w+ )?"
            r"(?:finished|complete|completed|done|published|accepted|out)\b"
            r"|\b(?:got|earned|received|was awarded|were awarded|awarded) (?:my|his|her|their|our|a|an|the) "
            r"(?:degree|diploma|doctorate|phd|masters?|black belt|citizenship|(?:driving )?licen[cs]e)\b"
            r"|\bpassed (?:my|his|her|their|our|the) (?:driving test|driving exam|bar exam|bar|finals|viva)\b"
            r"|\b(?:bought|closed on) (?:our|my|his|her|their|a) (?:first )?(?:house|home|flat|apartment)\b"
            r"|\b(?:ran|finished|completed) (?:my|his|her|their|our|a|the) (?:first )?(?:\w+ )?marathon\b",
            re.IGNORECASE,
        ),
    ),
    KindRule(
        MemoryKind.OBSERVATION,
        "something noticed in passing",
        _words(
            r"noticed",
            r"seems?",
            r"seemed",
            r"looked",
            r"looks",
            r"sounded",
            r"sounds",
            r"appeared",
            r"appears",
        ),
    ),
    KindRule(
        MemoryKind.EVENT,
        "something that happens at a particular time",
        _words(
            r"yesterday",
            r"last (?:night|week|weekend|month|year)",
            r"last (?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)",
            r"went to",
            r"visited",
            r"attended",
            r"celebrated",
            r"wedding",
            r"funeral",
            r"party",
            r"concert",
            r"trip",
            r"graduat(?:ed|ion)",
        ),
    ),
    KindRule(
        MemoryKind.CONTEXT,
        "what is going on right now",
        _words(
            r"today",
            r"tonight",
            r"this (?:morning|afternoon|evening|week)",
            r"right now",
            r"at the moment",
            r"currently",
            r"these days",
        ),
    ),
)


@dataclass(frozen=True)
class KindGuess:
    kind: str
    reason: str


def infer_kind(*, body: str, title: str = "") -> KindGuess:
    """Pick a kind from the text by the first matching rule; `knowledge` when none match.

    Rules only, so a save never waits on a network call. With an LLM configured,
    the save also queues a second opinion (memories/kind_inference.py).
    """
    text = f"{title}\n{body}"
    for rule in KIND_RULES:
        match = rule.pattern.search(text)
        if match:
            return KindGuess(kind=rule.kind, reason=f"{rule.name} (“{match.group(0)}”)")
    return KindGuess(kind=MemoryKind.KNOWLEDGE, reason="no rule matched")


def memory_resolve_kind_and_sensitivity(
    *, title: str, body: str, kind: str | None, sensitivity: str | None
) -> tuple[str, str]:
    """What memory_create / memory_update save: refuse secrets, then fill in what the owner left blank.

    Secrets are refused whatever the owner chose (a `public` label does not make
    a password storable). An explicit kind or sensitivity is kept as given and
    validated by the caller; only None or "" is inferred.
    """
    refuse_credentials(title=title, body=body)
    if not kind:
        kind = infer_kind(title=title, body=body).kind
    if not sensitivity:
        sensitivity = classify_sensitivity(title=title, body=body).sensitivity
    return str(kind), str(sensitivity)
