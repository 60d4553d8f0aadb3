"""The memories a reply cites, kept in the order the prompt numbered them.

The prompt numbers memories [1], [2], … (agents/prompt.py) and the model cites
those numbers, so a reply's citations are only readable in that order. A
ManyToMany `.set()` inserts its rows in set order, which loses it; here the
through rows are written in prompt order, and their serial ids keep it. The same
holds for the agents' chat (Message) and a circle's chat (CircleMessage).

The same ids are kept on the message itself (`source_ids`), which a deleted memory
does not empty: the citation rows go with their memory, but what a reply was built
from must not (SPEC §3, a derived text is gated like its sources on every read;
circles/replies.py asks the gate for them).
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db import models, transaction

from memories.models import Memory


# Without a savepoint inside a caller's transaction (every reply is saved in one): a failure
# here fails the caller's whole transaction anyway, and the savepoint cost two round trips.
@transaction.atomic(savepoint=False)
def citations_save(*, message: models.Model, memories: Iterable[Memory], new: bool = False) -> None:
    """Record `memories` as what `message` cites and was built from, [1] first.

    Replaces any earlier citations and provenance; both are written in one transaction,
    so a reply is never seen with citations but no sources. `new`: the message was
    created in the caller's transaction a moment ago, so it has no citations to replace;
    created with these memories' ids as its `source_ids` (citation_source_ids), it is
    not written again either (two statements fewer on every chat turn).
    """
    memories = list(dict.fromkeys(memories))
    manager = message.cited_memories
    through = manager.through
    if not new:
        through.objects.filter(**{manager.source_field_name: message}).delete()
    through.objects.bulk_create(
        through(**{manager.source_field_name: message, manager.target_field_name: memory})
        for memory in memories
    )
    source_ids = [memory.pk for memory in memories]
    if new and message.source_ids == source_ids:
        return
    message.source_ids = source_ids
    type(message).objects.filter(pk=message.pk).update(source_ids=message.source_ids)


def citation_source_ids(memories: Iterable[Memory]) -> list:
    """The `source_ids` citations_save records for `memories`: to create a message with them."""
    return [memory.pk for memory in dict.fromkeys(memories)]


def citations_attach(messages: Iterable[models.Model]) -> list[models.Model]:
    """Set `message.citations` on each message: what it cites, [1] first, in one query.

    Replies saved before citations were kept in order come back in some fixed order.
    """
    messages = list(messages)
    if not messages:
        return messages
    manager = messages[0].cited_memories
    source, target = manager.source_field_name, manager.target_field_name
    by_message: dict[object, list[Memory]] = {message.pk: [] for message in messages}
    rows = (
        manager.through.objects.filter(**{f"{source}__in": list(by_message)})
        .select_related(f"{target}__owner")
        .order_by("pk")
    )
    for row in rows:
        by_message[getattr(row, f"{source}_id")].append(getattr(row, target))
    for message in messages:
        message.citations = by_message[message.pk]
    return messages
