"""Generalise without revealing: check an insight's text against its sources, then save it.

`insight_check` is Kernle's three safety checks, made concrete:

- **Names block.** Any name or alias of anyone in the source memories (participants
  and whoever told them; the owner's Self aside), and each part of a longer name
  ("Sean" of "Sean Murphy"), found as a whole word in any case, blocks the text.
- **Names inside words warn.** A name found only inside another word ("Anna" in
  "Annabelle") may be a coincidence or a nickname: a warning that says so.
- **Specifics warn.** Dates (ISO, "12 March", "March 12", 12/03/2024, weekdays,
  years, "yesterday", "last week"), places (capitalised words after at / in / near /
  from) and unique details (numbers, email addresses, phone numbers), and a run of
  six or more words copied from a source (it could be traced back).

`insight_create` refuses blocked text (naming the names), needs the owner's explicit
confirmation of every warning the current text raises, and saves a `knowledge`
memory with no participants plus one InsightSource row per source, in one transaction.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.db import transaction

from insights.models import InsightSource
from insights.selectors import insight_people
from memories.models import Memory, MemoryKind
from memories.services import memory_create
from people.models import Person

MAX_INSIGHT_LENGTH = 2000
MAX_SOURCES = 50
# A name shorter than this inside another word is noise ("Al" in "also"), not a hint.
MIN_NAME_IN_WORD = 3
# A run of this many words copied from a source memory could lead back to it.
COPIED_RUN_WORDS = 6
# Parts of a name that name no one on their own.
NAME_TITLES = {
    "mr",
    "mrs",
    "ms",
    "miss",
    "mx",
    "dr",
    "prof",
    "sir",
    "dame",
    "st",
    "aunt",
    "auntie",
    "uncle",
    "grandma",
    "grandpa",
    "granny",
    "nan",
    "the",
    "and",
    "von",
    "van",
    "der",
    "de",
    "la",
    "le",
}

MONTHS = (
    "January|February|March|April|May|June|July|August|September|October|November|December"
    "|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept|Sep|Oct|Nov|Dec"
)
WEEKDAYS = r"(?:Mon|Tues|Wednes|Thurs|Fri|Satur|Sun)days?"
_ORDINAL = r"\d{1,2}(?:st|nd|rd|th)?"

# (label, pattern), in priority order: a span found by an earlier one is not reported again.
_DETAIL_PATTERNS: tuple[tuple[str, str, re.Pattern[str]], ...] = (
    ("detail", "email address", re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")),
    ("date", "date", re.compile(r"\b\d{4}-\d{1,2}-\d{1,2}\b")),
    ("date", "date", re.compile(r"\b\d{1,2}[/.]\d{1,2}[/.]\d{2,4}\b")),
    ("detail", "phone number", re.compile(r"(?<![\w+])\+?\d[\d ().-]{5,}\d(?!\w)")),
    (
        "date",
        "date",
        re.compile(rf"\b{_ORDINAL}(?:\s+of)?\s+(?:{MONTHS})\b(?:\s+\d{{4}})?", re.IGNORECASE),
    ),
    ("date", "date", re.compile(rf"\b(?:{MONTHS})\.?\s+{_ORDINAL}\b(?:,?\s+\d{{4}})?", re.IGNORECASE)),
    ("date", "weekday", re.compile(rf"\b(?:{WEEKDAYS})\b", re.IGNORECASE)),
    (
        "date",
        "date",
        re.compile(
            r"\b(?:yesterday|tomorrow|tonight"
            r"|last (?:night|week|weekend|month|year|summer|winter|spring|autumn)"
            r"|next (?:week|weekend|month|year))\b",
            re.IGNORECASE,
        ),
    ),
    # Month names alone, capitalised only ("may" is a verb; "May" alone is too common to flag).
    (
        "date",
        "month",
        re.compile(
            r"\b(?:January|February|March|April|June|July|August|September|October|November|December)\b"
        ),
    ),
    # "May" alone is a verb as often as a month: only after a word that makes it a time.
    ("date", "month", re.compile(r"\b(?i:in|since|until|till|by|during|early|late|mid)[\s-]+May\b")),
    ("date", "year", re.compile(r"\b(?:1[5-9]|20)\d{2}s?\b")),
)
# A capitalised word (or several) right after at / in / near / from, in any case: "in Leeds", "At St Mary's".
_PLACE = re.compile(
    r"\b(?i:at|in|near|from)\s+(?:the\s+)?"
    r"((?:[A-Z][\w'’-]*)(?:\s+(?:of\s+|upon\s+|on\s+)?[A-Z][\w'’-]*)*)"
)
_NUMBER = re.compile(r"\b\d+(?:[.,]\d+)*(?:st|nd|rd|th|s)?\b")
_NOT_A_PLACE = re.compile(
    rf"^(?:{MONTHS}|{WEEKDAYS}|I|I'm|I've|Spring|Summer|Autumn|Fall|Winter|Christmas|Easter)$", re.IGNORECASE
)
_WORD = re.compile(r"[\w'’]+")


@dataclass(frozen=True)
class InsightFinding:
    """One thing the check found. `key` identifies it for the owner's confirmation."""

    kind: str  # name | name_in_word | date | place | detail | copied
    text: str
    message: str

    @property
    def key(self) -> str:
        return f"{self.kind}:{self.text.lower()}"


@dataclass(frozen=True)
class InsightCheck:
    blocks: list[InsightFinding] = field(default_factory=list)
    warnings: list[InsightFinding] = field(default_factory=list)

    @property
    def blocked(self) -> bool:
        return bool(self.blocks)

    @property
    def warning_keys(self) -> list[str]:
        return [warning.key for warning in self.warnings]

    def unconfirmed(self, confirmed: Collection[str]) -> list[InsightFinding]:
        return [warning for warning in self.warnings if warning.key not in set(confirmed)]

    @property
    def block_message(self) -> str:
        if not self.blocks:
            return ""
        names = ", ".join(f"“{block.text}”" for block in self.blocks)
        return (
            f"This names someone from the memories it comes from: {names}. "
            "A name found as a whole word blocks an insight: remove it and describe the situation instead."
        )


def _names_of(person: Person) -> list[tuple[str, bool]]:
    """Every way the text could name `person`, longest first: (name, is_part).

    Display name and aliases are names. Each part of a longer one ("Sean" of "Sean
    Murphy") is a part: it names them when written capitalised, but may be an
    everyday word otherwise ("Will", "Rose"), which only warns.
    """
    names: dict[str, tuple[str, bool]] = {}
    for full in [person.display_name, *person.aliases]:
        full = " ".join(full.split())
        if full:
            names[full.lower()] = (full, False)
    for full, _ in list(names.values()):
        parts = _WORD.findall(full)
        if len(parts) > 1:
            for part in parts:
                if len(part) >= 2 and part.lower() not in NAME_TITLES:
                    names.setdefault(part.lower(), (part, True))
    return sorted(names.values(), key=lambda item: (-len(item[0]), item[0].lower()))


def _whole_words(name: str, text: str) -> list[re.Match[str]]:
    return list(re.finditer(rf"(?<!\w){re.escape(name)}(?!\w)", text, flags=re.IGNORECASE))


def _word_around(text: str, start: int, end: int) -> tuple[int, int]:
    while start > 0 and (text[start - 1].isalnum() or text[start - 1] == "_"):
        start -= 1
    while end < len(text) and (text[end].isalnum() or text[end] == "_"):
        end += 1
    return start, end


def _name_findings(text: str, people: list[Person]) -> tuple[list[InsightFinding], list[InsightFinding]]:
    """Names as whole words block; everyday-word parts and names inside words warn.

    Longest names first, and text already reported is not reported again: "Sean
    Murphy" is one finding, not three.
    """
    blocks: dict[str, InsightFinding] = {}
    warnings: dict[str, InsightFinding] = {}
    taken: list[tuple[int, int]] = []

    def report(into: dict[str, InsightFinding], span: tuple[int, int], finding: InsightFinding) -> None:
        taken.append(span)
        into.setdefault(finding.key, finding)

    for person in people:
        for name, is_part in _names_of(person):
            for match in _whole_words(name, text):
                if _overlaps(match.span(), taken):
                    continue
                found = match.group(0)
                # A part counts as a name when capitalised as one ("Sean", not "will").
                if not is_part or found[0].isupper():
                    report(
                        blocks,
                        match.span(),
                        InsightFinding("name", found, f"“{found}” names {person.display_name}."),
                    )
                else:
                    report(
                        warnings,
                        match.span(),
                        InsightFinding(
                            "name_in_word",
                            found,
                            f"“{found}” is also part of {person.display_name}'s name: "
                            "check it does not point to them.",
                        ),
                    )
            if len(name) < MIN_NAME_IN_WORD:
                continue
            for inside in re.finditer(re.escape(name), text, flags=re.IGNORECASE):
                span = _word_around(text, *inside.span())
                if _overlaps(span, taken):
                    continue
                word = text[span[0] : span[1]]
                report(
                    warnings,
                    span,
                    InsightFinding(
                        "name_in_word",
                        word,
                        f"“{name}” ({person.display_name}) is inside the word “{word}”. A name inside "
                        "another word is only a warning, not a block: check it does not point to them.",
                    ),
                )
    return list(blocks.values()), list(warnings.values())


def _overlaps(span: tuple[int, int], taken: list[tuple[int, int]]) -> bool:
    return any(span[0] < end and start < span[1] for start, end in taken)


def _specific_findings(text: str) -> list[InsightFinding]:
    found: list[tuple[int, InsightFinding]] = []
    taken: list[tuple[int, int]] = []

    def add(span: tuple[int, int], finding: InsightFinding) -> None:
        if not _overlaps(span, taken):
            taken.append(span)
            found.append((span[0], finding))

    for kind, label, pattern in _DETAIL_PATTERNS:
        for match in pattern.finditer(text):
            value = match.group(0).strip()
            if label == "phone number" and sum(character.isdigit() for character in value) < 7:
                continue
            if kind == "date":
                message = f"Date: “{value}” could tell when it happened."
            else:
                message = f"Unique detail: the {label} “{value}” could identify who this is about."
            add(match.span(), InsightFinding(kind, value, message))
    for match in _PLACE.finditer(text):
        place = match.group(1).rstrip(".")
        if _NOT_A_PLACE.match(place):
            continue
        add(match.span(1), InsightFinding("place", place, f"Place: “{place}” could tell where it happened."))
    for match in _NUMBER.finditer(text):
        add(
            match.span(),
            InsightFinding(
                "detail",
                match.group(0),
                f"Unique detail: the number “{match.group(0)}” could identify who this is about.",
            ),
        )
    found.sort(key=lambda item: item[0])
    unique: dict[str, InsightFinding] = {}
    for _, finding in found:
        unique.setdefault(finding.key, finding)
    return list(unique.values())


def _copied_findings(text: str, memories: Iterable[Memory]) -> list[InsightFinding]:
    words = [word.lower() for word in _WORD.findall(text)]
    findings: dict[str, InsightFinding] = {}
    for memory in memories:
        source_words = [word.lower() for word in _WORD.findall(f"{memory.title}\n{memory.body}")]
        runs = {
            tuple(source_words[i : i + COPIED_RUN_WORDS])
            for i in range(len(source_words) - COPIED_RUN_WORDS + 1)
        }
        for i in range(len(words) - COPIED_RUN_WORDS + 1):
            if tuple(words[i : i + COPIED_RUN_WORDS]) in runs:
                copied = " ".join(words[i : i + COPIED_RUN_WORDS])
                finding = InsightFinding(
                    "copied",
                    copied,
                    f"“{copied}…” is copied word for word from a source memory: someone who knows it "
                    "could trace the insight back.",
                )
                findings.setdefault(finding.key, finding)
                break
    return list(findings.values())


def insight_check(*, text: str, source_memories: Iterable[Memory]) -> InsightCheck:
    """What in `text` could reveal the source memories: names block, specifics warn."""
    memories = list(source_memories)
    blocks, name_warnings = _name_findings(text, insight_people(memories))
    return InsightCheck(
        blocks=blocks,
        warnings=[*name_warnings, *_specific_findings(text), *_copied_findings(text, memories)],
    )


def _validate_sources(*, owner: AbstractBaseUser, sources: Iterable[Memory]) -> list[Memory]:
    unique = list({memory.pk: memory for memory in sources}.values())
    if not unique:
        raise ValidationError({"sources": "Pick at least one memory to generalise from."})
    if len(unique) > MAX_SOURCES:
        raise ValidationError({"sources": f"An insight comes from at most {MAX_SOURCES} memories."})
    if any(memory.owner_id != owner.pk for memory in unique):
        # Never reveal that the id exists in someone else's journal.
        raise ValidationError({"sources": "Unknown memory."})
    return unique


@transaction.atomic
def insight_create(
    *,
    owner: AbstractBaseUser,
    text: str,
    sources: Iterable[Memory],
    confirmed_warnings: Collection[str] = (),
    sensitivity: str | None = None,
) -> Memory:
    """Save `text` as a `knowledge` memory with no participants, remembering its sources.

    Refused while it names anyone from the sources; every warning the text raises now
    must be among `confirmed_warnings` (the keys the owner saw and accepted), so an
    edit that adds a new detail needs a new confirmation.
    """
    text = (text or "").strip()
    if not text:
        raise ValidationError({"text": "Write the insight first."})
    if len(text) > MAX_INSIGHT_LENGTH:
        raise ValidationError({"text": f"Insights are at most {MAX_INSIGHT_LENGTH} characters."})
    memories = _validate_sources(owner=owner, sources=sources)
    check = insight_check(text=text, source_memories=memories)
    if check.blocked:
        raise ValidationError({"text": check.block_message})
    unconfirmed = check.unconfirmed(confirmed_warnings)
    if unconfirmed:
        raise ValidationError(
            {
                "confirm": "Check these details and confirm they do not reveal the source: "
                + " ".join(warning.message for warning in unconfirmed)
            }
        )
    insight = memory_create(
        owner=owner, body=text, kind=MemoryKind.KNOWLEDGE, sensitivity=sensitivity, participants=()
    )
    InsightSource.objects.bulk_create(InsightSource(insight=insight, source=memory) for memory in memories)
    return insight
