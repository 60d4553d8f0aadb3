"""@mentions in a memory's text: "Lunch with @Anna and @Ben".

`@` starts a mention at the start of the text or after a space or punctuation
(never inside an e-mail address). The owner's people are matched by name or
alias, case aside, longest first, so "@Anna Smith" is Anna Smith even when there
is also an Anna. Anything else after an `@` that starts with a letter is an
unknown name: one word, hyphens allowed ("@Jean-Luc"). The text is kept as typed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from people.models import Person

_MENTION_START = re.compile(r"(?<![\w@.])@(?=[^\W\d_])")
_UNKNOWN_NAME = re.compile(r"[^\W\d_]\w*(?:-[^\W\d_]\w*)*")


@dataclass
class Mentions:
    known: list[Person] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)


def mentions_find(*, text: str, people: Iterable[Person]) -> Mentions:
    """The people mentioned in `text` (each once, in order) and the names that match no one."""
    names = sorted(
        (
            (name.lower(), person)
            for person in people
            if not person.is_self
            for name in (person.display_name, *person.aliases)
            if name.strip()
        ),
        key=lambda pair: len(pair[0]),
        reverse=True,
    )
    found = Mentions()
    seen_people: set = set()
    seen_names: set[str] = set()
    for start in _MENTION_START.finditer(text):
        rest = text[start.end() :]
        person = _longest_known(rest, names)
        if person is not None:
            if person.pk not in seen_people:
                seen_people.add(person.pk)
                found.known.append(person)
            continue
        word = _UNKNOWN_NAME.match(rest)
        if word and word.group().casefold() not in seen_names:
            seen_names.add(word.group().casefold())
            found.unknown.append(word.group())
    return found


def _longest_known(rest: str, names: list[tuple[str, Person]]) -> Person | None:
    for name, person in names:
        if rest[: len(name)].lower() == name:
            following = rest[len(name) : len(name) + 1]
            # "@Anna's" and "@Anna," are Anna; "@Annabel" is not.
            if not (following.isalnum() or following == "_"):
                return person
    return None
