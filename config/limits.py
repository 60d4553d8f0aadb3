"""Input limits shared by every surface (web forms, API, MCP, imports).

One set of numbers so a text the API refuses is refused by the web form too,
and the other way round.
"""

from __future__ import annotations

from datetime import datetime

MEMORY_TITLE_MAX_LENGTH = 200
# PostgreSQL's tsvector holds at most 1 MB; 50 000 characters stays well inside it.
MEMORY_BODY_MAX_LENGTH = 50_000
PERSON_NOTES_MAX_LENGTH = 10_000
# Hashing a huge password costs the server, not the caller; nobody types 1 000 characters.
PASSWORD_MAX_LENGTH = 1_000
# Deep offsets are refused with a 400 rather than handed to PostgreSQL (which
# fails past bigint, and crawls long before).
API_MAX_OFFSET = 1_000_000
# The web pages' `?page=` (25 rows a page): past this a page is empty, whatever the
# journal holds, which also keeps OFFSET inside PostgreSQL's bigint.
MAX_PAGE = 1_000_000
# JSON request bodies nested deeper than this are refused before Python's
# recursion limit is anywhere near; no API input needs more than a few levels.
JSON_MAX_DEPTH = 32

# A memory's date may be at most this year. Short-lived kinds add their lifetime
# to the date to get `expires_at`; near year 9999 that overflows Python's datetime.
# Clamping the expiry would store a date nobody meant, so a date past 9000 (far
# beyond any real memory, and centuries clear of any configured lifetime) is refused.
LATEST_YEAR = 9000
TOO_FAR_IN_THE_FUTURE = f"That date is too far in the future: the year must be {LATEST_YEAR} or earlier."


def date_too_far(value: datetime | None) -> bool:
    return value is not None and value.year > LATEST_YEAR


NUL_REFUSED = "must not contain a NUL character (\\u0000)."
SURROGATE_REFUSED = "must not contain an unpaired surrogate (\\ud800–\\udfff)."


def text_problem(value: str) -> str | None:
    """Why PostgreSQL could not store `value` as text, or None when it can."""
    if "\x00" in value:
        return NUL_REFUSED
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return SURROGATE_REFUSED
    return None
