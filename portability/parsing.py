"""Reading an uploaded import file into a flat, validated list of items.

Everything that can be checked without touching the database is checked here,
before a job exists: a file that is not JSON, has the wrong shape, an unknown
schema version, dangling references or is too large is refused as a whole, so
a malformed file imports nothing. What only the services can judge (an empty
body, a credential the lifecycle rules refuse) is decided per item at run time
and reported as skipped.

Items come out in dependency order (circles, people with their consents and
history, the history of people since deleted, agents, memories, supersessions,
edges, shares) so a worker processing them front to back always finds what an
item refers to already done.
"""

from __future__ import annotations

import base64
import io
import json
import re
import zipfile
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError

from agents.models import AgentRole
from config.limits import MEMORY_BODY_MAX_LENGTH, TOO_FAR_IN_THE_FUTURE, date_too_far, text_problem
from memories.models import EdgeKind, MemoryKind, ParticipantRole, Sensitivity
from people.models import (
    AGENTS_AUDIENCE,
    AUDIENCE_PATTERN,
    CIRCLE_AUDIENCE_PREFIX,
    ConsentActor,
    ConsentStatus,
    ConsentSurface,
    PersonKind,
)
from portability.models import ImportFormat

EXPORT_FORMAT_NAME = "keepsake-export"
SCHEMA_VERSION = 1
# Uploads bigger than this are refused before they are read (override with
# KEEPSAKE_IMPORT_MAX_BYTES). 50 MB holds well over 100 000 text-only entries.
DEFAULT_IMPORT_MAX_BYTES = 50 * 1024 * 1024
# Stop collecting problems after this many: the first few say what is wrong.
MAX_REPORTED_PROBLEMS = 10
TITLE_MAX_LENGTH = 200


def import_max_bytes() -> int:
    return int(getattr(settings, "KEEPSAKE_IMPORT_MAX_BYTES", DEFAULT_IMPORT_MAX_BYTES))


def human_size(size: int) -> str:
    if size >= 1024 * 1024:
        return f"{size / (1024 * 1024):.0f} MB"
    if size >= 1024:
        return f"{size / 1024:.0f} KB"
    return f"{size} bytes"


@dataclass(frozen=True)
class ParsedImport:
    format: str
    items: list[dict[str, Any]]


class _Problems:
    """Collects “where: what” messages; raises them together as one ValidationError."""

    def __init__(self) -> None:
        self.messages: list[str] = []

    def add(self, where: str, what: str) -> None:
        if len(self.messages) < MAX_REPORTED_PROBLEMS:
            self.messages.append(f"{where}: {what}" if where else what)
        elif len(self.messages) == MAX_REPORTED_PROBLEMS:
            self.messages.append("… and more problems; fix these first.")

    def raise_if_any(self) -> None:
        if self.messages:
            raise ValidationError(["Nothing was imported. " + self.messages[0], *self.messages[1:]])


def _fail(message: str) -> ValidationError:
    return ValidationError(f"Nothing was imported. {message}")


def parse_datetime_value(value: Any) -> datetime | None:
    """ISO 8601 → aware datetime (naive values are taken as UTC); None when unparseable."""
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        parsed = datetime.fromisoformat(value.strip())
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed


# --- reading the bytes --------------------------------------------------------


def _load_json(content: bytes, *, label: str) -> Any:
    try:
        text = content.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise _fail(f"{label} is not UTF-8 text, so it cannot be a JSON export.") from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise _fail(
            f"{label} is not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})."
        ) from exc
    except RecursionError as exc:
        raise _fail(f"{label} is nested too deeply to be an export.") from exc


def _json_documents(*, filename: str, content: bytes) -> list[tuple[str, Any]]:
    """The JSON documents in the upload: the file itself, or the .json files of a ZIP.

    Day One exports come as a ZIP holding one JSON file per journal; uncompressed
    sizes are checked against the limit before anything is inflated.
    """
    if not content.startswith(b"PK\x03\x04"):
        return [(filename or "The file", _load_json(content, label="The file"))]
    try:
        archive = zipfile.ZipFile(io.BytesIO(content))
        members = [
            info
            for info in archive.infolist()
            if info.filename.lower().endswith(".json")
            and not info.is_dir()
            and not info.filename.startswith("__MACOSX/")
            and "/" not in info.filename.strip("/")
        ]
    except zipfile.BadZipFile as exc:
        raise _fail("The file looks like a ZIP archive but cannot be opened.") from exc
    if not members:
        raise _fail("The ZIP archive has no .json file at its top level.")
    limit = import_max_bytes()
    if sum(info.file_size for info in members) > limit:
        raise _fail(f"The JSON inside the ZIP is larger than the {human_size(limit)} limit.")
    documents = []
    for info in members:
        try:
            data = archive.read(info)
        except (zipfile.BadZipFile, OSError, RuntimeError) as exc:
            raise _fail(f"{info.filename} in the ZIP archive cannot be read.") from exc
        documents.append((info.filename, _load_json(data, label=info.filename)))
    return documents


def parse_import(*, filename: str, content: bytes) -> ParsedImport:
    """Validate an upload completely and return its items, or raise ValidationError."""
    limit = import_max_bytes()
    if len(content) > limit:
        raise _fail(f"The file is {human_size(len(content))}; the limit is {human_size(limit)}.")
    if not content.strip():
        raise _fail("The file is empty.")
    documents = _json_documents(filename=filename, content=content)
    _refuse_unstorable_text(documents)
    kinds = {_detect_format(document) for _name, document in documents}
    if len(documents) > 1 and kinds != {ImportFormat.DAYONE}:
        raise _fail("A ZIP archive may only hold Day One journals; upload a Keepsake export as a .json file.")
    if kinds == {ImportFormat.KEEPSAKE}:
        items = _keepsake_items(documents[0][1])
        _keepsake_photos(content, documents[0][1], items)
        return ParsedImport(format=ImportFormat.KEEPSAKE, items=items)
    return ParsedImport(format=ImportFormat.DAYONE, items=_dayone_items(documents, _dayone_photos(content)))


def _unstorable_text(value: Any, where: str, problems: _Problems) -> None:
    """Every string in the document (keys too) that PostgreSQL could not store, by its path."""
    if isinstance(value, str):
        problem = text_problem(value)
        if problem is not None:
            problems.add(where, f"the text {problem}")
    elif isinstance(value, dict):
        for key, item in value.items():
            path = f"{where}.{key}" if where and not where.endswith(": ") else f"{where}{key}"
            _unstorable_text(key, f"{path} (a key)", problems)
            _unstorable_text(item, path, problems)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _unstorable_text(item, f"{where}[{index}]", problems)


def _refuse_unstorable_text(documents: list[tuple[str, Any]]) -> None:
    # NUL and unpaired surrogates are valid JSON escapes PostgreSQL cannot store: checked
    # up front so such a file imports nothing and names the entry, never a 500 midway.
    problems = _Problems()
    for name, document in documents:
        _unstorable_text(document, f"{name}: " if len(documents) > 1 else "", problems)
    problems.raise_if_any()


def _detect_format(document: Any) -> str:
    if isinstance(document, dict):
        if document.get("format") == EXPORT_FORMAT_NAME or "schema_version" in document:
            return ImportFormat.KEEPSAKE
        if "entries" in document:
            return ImportFormat.DAYONE
    raise _fail(
        "This is not a Keepsake export (a JSON object with “format”: “keepsake-export” and "
        "“schema_version”) nor a Day One export (a JSON object with an “entries” list)."
    )


# --- shape checks -------------------------------------------------------------


def _list_of_objects(document: dict, key: str, problems: _Problems, *, required: bool = True) -> list[dict]:
    value = document.get(key, None if required else [])
    if not isinstance(value, list):
        problems.add(key, "must be a list" if key in document else "is missing")
        return []
    rows = []
    for index, row in enumerate(value):
        if isinstance(row, dict):
            rows.append(row)
        else:
            problems.add(f"{key}[{index}]", "must be an object")
    return rows


def _text(row: dict, key: str, where: str, problems: _Problems, *, default: str | None = None) -> str:
    value = row.get(key, default)
    if not isinstance(value, str):
        problems.add(f"{where}.{key}", "must be text" if key in row else "is missing")
        return ""
    return value


def _choice(row: dict, key: str, where: str, problems: _Problems, choices: list[str]) -> str:
    value = row.get(key)
    if value not in choices:
        problems.add(f"{where}.{key}", f"must be one of {', '.join(choices)} (got {value!r})")
        return choices[0]
    return value


def _when(row: dict, key: str, where: str, problems: _Problems, *, nullable: bool = False) -> str | None:
    value = row.get(key)
    if value is None and nullable:
        return None
    parsed = parse_datetime_value(value)
    if parsed is None:
        problems.add(f"{where}.{key}", f"must be an ISO 8601 date and time (got {value!r})")
        return None
    if date_too_far(parsed):
        problems.add(f"{where}.{key}", f"{TOO_FAR_IN_THE_FUTURE} (got {value!r})")
        return None
    return parsed.isoformat()


def _reference(value: Any, where: str, known: set[str], what: str, problems: _Problems) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or value not in known:
        problems.add(where, f"refers to a {what} that is not in the file ({value!r})")
        return None
    return value


def _unique_ids(rows: list[dict], section: str, problems: _Problems) -> set[str]:
    ids: set[str] = set()
    for index, row in enumerate(rows):
        row_id = row.get("id")
        if not isinstance(row_id, str) or not row_id:
            problems.add(f"{section}[{index}].id", "must be a non-empty text id")
        elif row_id in ids:
            problems.add(f"{section}[{index}].id", f"{row_id!r} appears twice")
        else:
            ids.add(row_id)
    return ids


# --- Keepsake export ------------------------------------------------------------


def _keepsake_items(document: dict) -> list[dict[str, Any]]:
    version = document.get("schema_version")
    if document.get("format") != EXPORT_FORMAT_NAME:
        raise _fail(f"“format” must be “{EXPORT_FORMAT_NAME}”.")
    if version != SCHEMA_VERSION or isinstance(version, bool):
        raise _fail(
            f"Unknown schema version {version!r}: this Keepsake reads version {SCHEMA_VERSION}. "
            "Export again from a matching Keepsake."
        )
    problems = _Problems()
    account = document.get("account")
    exporting_username = account.get("username") if isinstance(account, dict) else None

    people = _list_of_objects(document, "people", problems)
    events = _list_of_objects(document, "consent_events", problems)
    memories = _list_of_objects(document, "memories", problems)
    edges = _list_of_objects(document, "edges", problems, required=False)
    agents = _list_of_objects(document, "agents", problems, required=False)
    # Sharing (absent from exports made before circles existed).
    circles = _list_of_objects(document, "circles", problems, required=False)
    shares = _list_of_objects(document, "shares", problems, required=False)
    consents = _list_of_objects(document, "person_consents", problems, required=False)
    problems.raise_if_any()

    person_ids = _unique_ids(people, "people", problems)
    memory_ids = _unique_ids(memories, "memories", problems)
    _unique_ids(agents, "agents", problems)
    circle_items = _circle_items(circles, exporting_username, problems)
    consents_by_person = _consents_by_person(consents, person_ids, problems)
    orphan_events: list[dict] = []

    events_by_person: dict[str, list[dict]] = {}
    for index, row in enumerate(events):
        where = f"consent_events[{index}]"
        person = _reference(row.get("person"), f"{where}.person", person_ids, "person", problems)
        actor = row.get("actor")
        if actor is not None and not isinstance(actor, str):
            problems.add(f"{where}.actor", "must be a username or null")
        event = {
            "old_status": _choice(row, "old_status", where, problems, ConsentStatus.values),
            "new_status": _choice(row, "new_status", where, problems, ConsentStatus.values),
            "surface": _choice(row, "surface", where, problems, ConsentSurface.values),
            "reason": _text(row, "reason", where, problems, default=""),
            "created_at": _when(row, "created_at", where, problems),
            "actor_is_owner": actor is not None and actor == exporting_username,
            "audience": _audience(row, where, problems),
            "actor_kind": _optional_choice(row, "actor_kind", where, problems, ConsentActor.values),
            "person_name": _text(row, "person_name", where, problems, default=""),
            "order": (row.get("created_at") or "", str(row.get("id", ""))),
        }
        if person is not None:
            events_by_person.setdefault(person, []).append(event)
        elif row.get("person") is None:
            # The person was deleted; their history outlives them, under their name.
            orphan_events.append(event)

    items: list[dict[str, Any]] = list(circle_items)
    self_count = 0
    for index, row in enumerate(people):
        where = f"people[{index}]"
        aliases = _list_of(row, "aliases", where, problems, str)
        is_self = _flag(row, "is_self", where, problems)
        self_count += is_self
        history = sorted(events_by_person.get(str(row.get("id")), []), key=lambda event: event["order"])
        for event in history:
            del event["order"]
        items.append(
            {
                "type": "person",
                "key": f"person:{row.get('id')}",
                "display_name": _text(row, "display_name", where, problems),
                "aliases": aliases,
                "kind": _choice(row, "kind", where, problems, PersonKind.values),
                "notes": _text(row, "notes", where, problems, default=""),
                "is_self": is_self,
                "consent_status": _choice(row, "consent_status", where, problems, ConsentStatus.values),
                "consent_updated_at": _when(row, "consent_updated_at", where, problems, nullable=True),
                "consent_events": history,
                "consents": consents_by_person.get(str(row.get("id")), []),
            }
        )
    if self_count > 1:
        problems.add("people", "more than one person is marked is_self")
    if orphan_events:
        orphan_events.sort(key=lambda event: event["order"])
        for event in orphan_events:
            del event["order"]
        items.append(
            {"type": "consent_history", "key": "consent_history:deleted_people", "events": orphan_events}
        )

    for index, row in enumerate(agents):
        where = f"agents[{index}]"
        items.append(
            {
                "type": "agent",
                "key": f"agent:{row.get('id')}",
                "name": _text(row, "name", where, problems),
                "role": _choice(row, "role", where, problems, AgentRole.values),
                "instructions": _text(row, "instructions", where, problems, default=""),
            }
        )

    links: list[dict[str, Any]] = []
    for index, row in enumerate(memories):
        where = f"memories[{index}]"
        participants = row.get("participants", [])
        if not isinstance(participants, list):
            problems.add(f"{where}.participants", "must be a list")
            participants = []
        specs = []
        for p_index, participant in enumerate(participants):
            p_where = f"{where}.participants[{p_index}]"
            if not isinstance(participant, dict):
                problems.add(p_where, "must be an object")
                continue
            specs.append(
                {
                    "person": _reference(
                        participant.get("person"), f"{p_where}.person", person_ids, "person", problems
                    ),
                    "role": _choice(participant, "role", p_where, problems, ParticipantRole.values),
                }
            )
        title = row.get("title", "")
        if not isinstance(title, str) or len(title) > TITLE_MAX_LENGTH:
            problems.add(f"{where}.title", f"must be text of at most {TITLE_MAX_LENGTH} characters")
        items.append(
            {
                "type": "memory",
                "key": f"memory:{row.get('id')}",
                "title": title if isinstance(title, str) else "",
                "body": _text(row, "body", where, problems),
                "occurred_at": _when(row, "occurred_at", where, problems),
                "kind": _choice(row, "kind", where, problems, MemoryKind.values),
                "sensitivity": _choice(row, "sensitivity", where, problems, Sensitivity.values),
                "source_person": _reference(
                    row.get("source_person"), f"{where}.source_person", person_ids, "person", problems
                ),
                "participants": specs,
            }
        )
        newer = _reference(row.get("superseded_by"), f"{where}.superseded_by", memory_ids, "memory", problems)
        if newer is not None:
            links.append(
                {
                    "type": "supersede",
                    "key": f"supersede:{row['id']}",
                    "memory": row["id"],
                    "superseded_by": newer,
                }
            )
    items.extend(links)

    seen_edges: set[tuple[str, str, str]] = set()
    for index, row in enumerate(edges):
        where = f"edges[{index}]"
        source = _reference(row.get("source"), f"{where}.source", memory_ids, "memory", problems)
        target = _reference(row.get("target"), f"{where}.target", memory_ids, "memory", problems)
        kind = _choice(row, "kind", where, problems, EdgeKind.values)
        weight = row.get("weight", 0.0)
        if not isinstance(weight, int | float) or isinstance(weight, bool):
            problems.add(f"{where}.weight", "must be a number")
            weight = 0.0
        if source is None or target is None or (source, target, kind) in seen_edges:
            continue
        seen_edges.add((source, target, kind))
        items.append(
            {
                "type": "edge",
                "key": f"edge:{source}:{target}:{kind}",
                "source": source,
                "target": target,
                "kind": kind,
                "weight": float(weight),
            }
        )
    items.extend(_share_items(shares, memory_ids, problems))
    problems.raise_if_any()
    return items


# --- Keepsake export: sharing ---------------------------------------------------------


def _optional_choice(row: dict, key: str, where: str, problems: _Problems, choices: list[str]) -> str:
    """Like _choice, for a field older exports do not have: missing means the first choice."""
    if key not in row:
        return choices[0]
    return _choice(row, key, where, problems, choices)


def _audience(row: dict, where: str, problems: _Problems) -> str:
    """`agents` or `circle:<uuid>`; missing (an export from before audiences) means `agents`."""
    audience = row.get("audience", AGENTS_AUDIENCE)
    if not isinstance(audience, str) or not re.match(AUDIENCE_PATTERN, audience):
        problems.add(f"{where}.audience", f"must be “agents” or “circle:<circle id>” (got {audience!r})")
        return AGENTS_AUDIENCE
    return audience


def _flag(row: dict, key: str, where: str, problems: _Problems) -> bool:
    value = row.get(key, False)
    if not isinstance(value, bool):
        problems.add(f"{where}.{key}", "must be true or false")
        return False
    return value


_LIST_ITEMS = {str: "text", dict: "objects"}


def _list_of(row: dict, key: str, where: str, problems: _Problems, item_type: type[str] | type[dict]) -> list:
    """row[key] as a list of item_type; empty (and a problem) when it is anything else, empty when absent."""
    value = row.get(key, [])
    if not isinstance(value, list) or not all(isinstance(item, item_type) for item in value):
        problems.add(f"{where}.{key}", f"must be a list of {_LIST_ITEMS[item_type]}")
        return []
    return value


def _circle_items(
    circles: list[dict], exporting_username: str | None, problems: _Problems
) -> list[dict[str, Any]]:
    """The circles the exporting account owned. Only their settings travel: members
    are other people's accounts, named so the report can say who to invite again."""
    _unique_ids(circles, "circles", problems)
    items = []
    for index, row in enumerate(circles):
        where = f"circles[{index}]"
        members = _list_of(row, "members", where, problems, dict)
        others = sorted(
            {
                member["user"]
                for member in members
                if isinstance(member.get("user"), str) and member["user"] != exporting_username
            }
        )
        items.append(
            {
                "type": "circle",
                "key": f"circle:{row.get('id')}",
                "name": _text(row, "name", where, problems),
                "description": _text(row, "description", where, problems, default=""),
                "agents_may_read": _flag(row, "agents_may_read", where, problems),
                "agent_role": _text(row, "agent_role", where, problems, default=""),
                "agent_instructions": _text(row, "agent_instructions", where, problems, default=""),
                "other_members": others,
            }
        )
    return items


def _consents_by_person(
    consents: list[dict], person_ids: set[str], problems: _Problems
) -> dict[str, list[dict[str, Any]]]:
    by_person: dict[str, list[dict[str, Any]]] = {}
    seen: set[tuple[str, str]] = set()
    for index, row in enumerate(consents):
        where = f"person_consents[{index}]"
        person = row.get("person")
        if person is None or _reference(person, f"{where}.person", person_ids, "person", problems) is None:
            if person is None:
                problems.add(f"{where}.person", "is missing")
            continue
        audience = _audience({"audience": row.get("audience")}, where, problems)
        if (person, audience) in seen:
            problems.add(where, f"a second consent of the same person for {audience}")
            continue
        seen.add((person, audience))
        by_person.setdefault(person, []).append(
            {
                "audience": audience,
                "status": _choice(row, "status", where, problems, ConsentStatus.values),
                "reason": _text(row, "reason", where, problems, default=""),
                "updated_by": _optional_choice(row, "updated_by", where, problems, ConsentActor.values),
                "updated_at": _when(row, "updated_at", where, problems, nullable=True),
            }
        )
    return by_person


def _share_items(shares: list[dict], memory_ids: set[str], problems: _Problems) -> list[dict[str, Any]]:
    """Where the exporting account's memories were shared. A share into a circle
    the file does not describe (someone else's) is kept as an item so the import
    report can say it was not restored."""
    items = []
    seen: set[tuple[str, str]] = set()
    for index, row in enumerate(shares):
        where = f"shares[{index}]"
        memory = _reference(row.get("memory"), f"{where}.memory", memory_ids, "memory", problems)
        circle = row.get("circle")
        if not isinstance(circle, str) or not circle:
            problems.add(f"{where}.circle", "must be a circle id")
            continue
        if memory is None or (memory, circle) in seen:
            continue
        seen.add((memory, circle))
        items.append(
            {
                "type": "share",
                "key": f"share:{memory}:{circle}",
                "memory": memory,
                "circle": circle,
                "circle_name": _text(row, "circle_name", where, problems, default=""),
            }
        )
    return items


def circle_audience_id(audience: str) -> str | None:
    """The circle id in a `circle:<id>` audience; None for `agents`."""
    if audience.startswith(CIRCLE_AUDIENCE_PREFIX):
        return audience.removeprefix(CIRCLE_AUDIENCE_PREFIX)
    return None


# --- Day One --------------------------------------------------------------------

# Day One escapes Markdown punctuation in its plain-text export ("3\. Done").
_DAYONE_ESCAPE = re.compile(r"\\([\\`*_{}\[\]()#+\-.!>|~])")
_KIND_BY_TAG = {kind.lower(): kind for kind in MemoryKind.values}


# Day One keeps an entry's photos in the ZIP's `photos/` folder as `<md5>.<type>`, and
# marks where each stood in the text with `![](dayone-moment://<identifier>)`.
_DAYONE_MOMENT = re.compile(r"!\[[^\]]*\]\(dayone-moment:/+[^)]*\)\n?")
_DAYONE_PHOTO_NAME = re.compile(r"^photos/([0-9a-fA-F]{32})\.([A-Za-z0-9]{2,5})$")


# Where Keepsake's own export ZIP (portability.selectors.export_markdown_zip) keeps photos.
KEEPSAKE_PHOTO_FOLDER = "keepsake-memories/photos/"
ATTACHMENT_RECORDS = "attachments.attachment"


def _keepsake_photos(content: bytes, document: dict, items: list[dict[str, Any]]) -> None:
    """Give each memory item of a Keepsake export ZIP its photos (the originals, with their
    captions and names); a bare JSON export has none. Checked like uploads when imported."""
    if not content.startswith(b"PK\x03\x04"):
        return
    records = document.get("records")
    rows = records.get(ATTACHMENT_RECORDS) if isinstance(records, dict) else None
    if not isinstance(rows, list):
        return
    archive = zipfile.ZipFile(io.BytesIO(content))
    members = {
        info.filename[len(KEEPSAKE_PHOTO_FOLDER) :].split(".", 1)[0]: info
        for info in archive.infolist()
        if info.filename.startswith(KEEPSAKE_PHOTO_FOLDER) and not info.is_dir()
    }
    limit = import_max_bytes()
    if sum(info.file_size for info in members.values()) > limit:
        raise _fail(f"The photos inside the ZIP are larger than the {human_size(limit)} limit.")
    by_memory: dict[str, list[dict[str, Any]]] = {}
    ordered = sorted(
        (row for row in rows if isinstance(row, dict)),
        key=lambda row: row.get("position") if isinstance(row.get("position"), int) else 0,
    )
    for row in ordered:
        info = members.get(str(row.get("id")))
        try:
            data = archive.read(info) if info is not None else b""
        except (zipfile.BadZipFile, OSError, RuntimeError) as exc:
            raise _fail(f"{info.filename} in the ZIP archive cannot be read.") from exc
        caption, name = row.get("caption"), row.get("original_name")
        by_memory.setdefault(str(row.get("memory")), []).append(
            {
                "name": info.filename.rsplit("/", 1)[-1] if info is not None else f"{row.get('id')}",
                "original_name": name[:200] if isinstance(name, str) else "",
                "caption": caption[:500] if isinstance(caption, str) else "",
                "data": base64.b64encode(data).decode("ascii"),
            }
        )
    for item in items:
        if item["type"] == "memory":
            item["photos"] = by_memory.get(item["key"].removeprefix("memory:"), [])


def _dayone_photos(content: bytes) -> dict[str, tuple[str, bytes]]:
    """md5 → (file name, bytes) of the photos in a Day One ZIP; none for a bare JSON file.

    Their uncompressed sizes count against the import limit before any is inflated (a
    ZIP bomb is refused); each photo is checked like any upload when its entry is imported.
    """
    if not content.startswith(b"PK\x03\x04"):
        return {}
    archive = zipfile.ZipFile(io.BytesIO(content))
    members = {}
    for info in archive.infolist():
        match = _DAYONE_PHOTO_NAME.match(info.filename)
        if match and not info.is_dir():
            members[match.group(1).lower()] = info
    limit = import_max_bytes()
    if sum(info.file_size for info in members.values()) > limit:
        raise _fail(f"The photos inside the ZIP are larger than the {human_size(limit)} limit.")
    photos = {}
    for md5, info in members.items():
        try:
            photos[md5] = (info.filename.rsplit("/", 1)[-1], archive.read(info))
        except (zipfile.BadZipFile, OSError, RuntimeError) as exc:
            raise _fail(f"{info.filename} in the ZIP archive cannot be read.") from exc
    return photos


def _dayone_entry_photos(entry: dict, photos: dict[str, tuple[str, bytes]]) -> list[dict[str, str]]:
    """The entry's photos in their order, as {name, data (base64)} for the import job; one
    the ZIP does not hold is named with no data (the import says it was missing)."""
    listed = entry.get("photos")
    if not isinstance(listed, list):
        return []
    ordered = sorted(
        (photo for photo in listed if isinstance(photo, dict)),
        key=lambda photo: photo.get("orderInEntry", 0) if isinstance(photo.get("orderInEntry"), int) else 0,
    )
    found = []
    for photo in ordered:
        md5 = str(photo.get("md5") or "").lower()
        name, data = photos.get(md5, (f"{md5 or 'photo'}.{photo.get('type') or 'jpeg'}", b""))
        found.append({"name": name[:100], "data": base64.b64encode(data).decode("ascii")})
    return found


def _dayone_items(
    documents: list[tuple[str, Any]], photos: dict[str, tuple[str, bytes]] | None = None
) -> list[dict[str, Any]]:
    photos = photos or {}
    problems = _Problems()
    items: list[dict[str, Any]] = []
    seen: set[str] = set()
    for name, document in documents:
        prefix = f"{name}: " if len(documents) > 1 else ""
        entries = document.get("entries")
        if not isinstance(entries, list):
            problems.add(f"{prefix}entries", "must be a list of entries")
            continue
        for index, entry in enumerate(entries):
            where = f"{prefix}entries[{index}]"
            if not isinstance(entry, dict):
                problems.add(where, "must be an object")
                continue
            uuid = entry.get("uuid")
            if not isinstance(uuid, str) or not uuid.strip():
                problems.add(f"{where}.uuid", "is missing")
                continue
            if uuid in seen:
                problems.add(f"{where}.uuid", f"{uuid!r} appears twice")
                continue
            seen.add(uuid)
            occurred_at = _when(entry, "creationDate", where, problems)
            text = _text(entry, "text", where, problems, default="")
            tags = _list_of(entry, "tags", where, problems, str)
            kinds = {_KIND_BY_TAG[tag.strip().lower()] for tag in tags if tag.strip().lower() in _KIND_BY_TAG}
            title, body = _dayone_title_and_body(_DAYONE_MOMENT.sub("", text))
            if len(body) > MEMORY_BODY_MAX_LENGTH:
                problems.add(f"{where}.text", f"is longer than {MEMORY_BODY_MAX_LENGTH} characters")
            items.append(
                {
                    "type": "dayone",
                    "key": f"dayone:{uuid}",
                    "title": title,
                    "body": body,
                    "occurred_at": occurred_at,
                    # A tag naming exactly one kind ("event", "task", …) sets it; otherwise
                    # the memory services choose, as for a memory typed in the journal.
                    "kind": kinds.pop() if len(kinds) == 1 else None,
                    "photos": _dayone_entry_photos(entry, photos),
                }
            )
    problems.raise_if_any()
    return items


def _dayone_title_and_body(text: str) -> tuple[str, str]:
    """Day One starts an entry with its title as a Markdown heading when it has one."""
    text = _DAYONE_ESCAPE.sub(r"\1", text).strip()
    first_line, _newline, rest = text.partition("\n")
    if not first_line.startswith("#"):
        return "", text
    title = first_line.lstrip("#").strip()
    if len(title) > TITLE_MAX_LENGTH:
        title = title[: TITLE_MAX_LENGTH - 1] + "…"
    return title, rest.strip() or title
