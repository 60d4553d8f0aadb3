"""Property: no reader ever receives a stored circle reply with a source they may not see now.

Hypothesis builds the worlds of tests/circles/test_circle_property.py (users, circles,
people with consent per audience, memories, shares; built in the database and in the
independent oracle, tests/memories/consent_oracle.py), stores replies in the circles'
shared and private conversations — each built from some memories, as the circle's turn
stores them — and then changes the world: consent revoked or granted, memories shared
and unshared, members joining, leaving or removed, links, a circle deleted, a memory's
sensitivity raised, a memory deleted. After the replies are stored and after every
change, every reader of every conversation reads it through the one selector
(circles.replies.circle_messages_for_reader), and each reply must be shown exactly when
the oracle's `reply_visible` says so: its words and citations when every source is
visible to that reader, the placeholder and no citations otherwise. After the last
change the chat page is read too, for one member of each circle.

Each example lives in a savepoint rolled back at its end.
"""

from __future__ import annotations

import pytest
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.test import Client
from hypothesis import given
from hypothesis import strategies as st

from circles.agent import circle_conversation
from circles.models import CircleConversation, CircleMessage
from circles.replies import REPLY_WITHHELD, circle_messages_for_reader
from memories.models import Memory
from memories.services import memory_delete
from tests.circles.test_circle_property import SENSITIVITIES, CircleWorld, change_spec, world_spec
from tests.circles.test_reply_provenance import stored_reply
from tests.privacy import privacy_settings

pytestmark = pytest.mark.django_db

reply_spec = st.fixed_dictionaries(
    {
        "circle": st.integers(0, 2),
        # A private conversation of this user when they are a member; else the shared one.
        "private_to": st.none() | st.integers(0, 5),
        # Sources among the memories shared into the circle when the reply is stored…
        "shared_sources": st.lists(st.integers(0, 9), max_size=3, unique=True),
        # …and, now and then, any memory at all (the check must not trust the writer).
        "other_sources": st.lists(st.integers(0, 9), max_size=1),
    }
)
later_change = st.one_of(
    change_spec,
    st.tuples(st.just("sensitivity"), st.integers(0, 9), st.sampled_from(SENSITIVITIES)),
    st.tuples(st.just("delete_memory"), st.integers(0, 9)),
)


class _Rollback(Exception):
    pass


class ReplyWorld(CircleWorld):
    """A circle world with stored replies, and two more changes: sensitivity raised, memory deleted."""

    def __init__(self, spec: dict, replies: list[dict]) -> None:
        super().__init__(spec)
        # (conversation, reply, its original words, its sources' ids as the oracle spells them)
        self.replies: list[tuple[CircleConversation, CircleMessage, str, list[str]]] = []
        for number, item in enumerate(replies):
            self._store_reply(number, item)

    def _store_reply(self, number: int, item: dict) -> None:
        circle = self.circle(item["circle"])
        if circle is None:
            return
        oracle_circle = self.oracle.circles[str(circle.pk)]
        member = self.user_by_id[min(oracle_circle.members)] if oracle_circle.members else None
        reader = None if item["private_to"] is None else self.user(item["private_to"])
        if reader is not None and str(reader.pk) in oracle_circle.members:
            conversation = circle_conversation(circle=circle, user=reader, private=True)
        elif member is not None:
            conversation = circle_conversation(circle=circle, user=member, private=False)
        else:
            return
        shared = sorted(
            memory_id for memory_id, circle_id in self.oracle.shares if circle_id == oracle_circle.id
        )
        sources = [shared[index % len(shared)] for index in item["shared_sources"] if shared]
        sources += [str(self.memories[index % len(self.memories)].pk) for index in item["other_sources"]]
        sources = list(dict.fromkeys(sources))
        words = f"REPLY-{number}-WORDS"
        reply = stored_reply(conversation, words, [self.memory_by_id[source] for source in sources])
        self.replies.append((conversation, reply, words, sources))

    def apply(self, change: tuple) -> None:
        if change[0] == "sensitivity":
            _, memory_index, drawn = change
            memory = self.memories[memory_index % len(self.memories)]
            oracle_memory = self.oracle.memories[str(memory.pk)]
            # Raised only: never less strict than it was.
            raised = max(oracle_memory.sensitivity, drawn, key=SENSITIVITIES.index)
            Memory.objects.filter(pk=memory.pk).update(sensitivity=raised)
            oracle_memory.sensitivity = raised
        elif change[0] == "delete_memory":
            if len(self.memories) < 2:
                return  # the other changes pick among the memories left
            memory = self.memories.pop(change[1] % len(self.memories))
            memory_id = str(memory.pk)
            memory_delete(memory=memory)
            del self.memory_by_id[memory_id]
            del self.oracle.memories[memory_id]
            self.oracle.shares = {pair for pair in self.oracle.shares if pair[0] != memory_id}
            for other in self.oracle.memories.values():
                if other.superseded_by == memory_id:
                    other.superseded_by = None  # SET_NULL
        else:
            super().apply(change)


def check_replies(world: ReplyWorld, step: str, *, pages: bool = False) -> None:
    oracle = world.oracle
    conversations = {conversation.pk: conversation for conversation, *_ in world.replies}
    live = {pk for pk in conversations if CircleConversation.objects.filter(pk=pk).exists()}
    expected_replies = {reply.pk: (words, sources) for _, reply, words, sources in world.replies}
    for pk in live:
        conversation = conversations[pk]
        circle_id = str(conversation.circle_id)
        members = oracle.circles[circle_id].members
        private_to = None if conversation.private_to_id is None else str(conversation.private_to_id)
        readers = members if private_to is None else members & {private_to}
        for user in world.users:
            if str(user.pk) in readers:
                continue
            with pytest.raises(PermissionDenied):
                circle_messages_for_reader(conversation=conversation, reader=user)
        for reader_id in sorted(readers):
            where = f"{step}: conversation {pk} in {circle_id}, reader {reader_id}"
            readable = circle_messages_for_reader(
                conversation=conversation, reader=world.user_by_id[reader_id]
            )
            for message in readable.messages:
                words, sources = expected_replies[message.pk]
                allowed = oracle.reply_visible(sources, circle_id, reader_id)
                assert message.withheld == (not allowed), f"{where}: reply {words} from {sources}"
                cited = {str(memory.pk) for memory in message.citations}
                if allowed:
                    assert message.content == words, where
                    assert cited == set(sources), where
                else:
                    assert message.content == REPLY_WITHHELD and not message.citations, where
            if pages and private_to is None and reader_id == min(readers):
                client = Client()
                client.force_login(world.user_by_id[reader_id])
                html = client.get(f"/circles/{circle_id}/chat/").content.decode()
                for message in readable.messages:
                    words, sources = expected_replies[message.pk]
                    assert (words in html) == oracle.reply_visible(sources, circle_id, reader_id), where


@privacy_settings
@given(
    spec=world_spec,
    replies=st.lists(reply_spec, min_size=1, max_size=6),
    changes=st.lists(later_change, min_size=1, max_size=4),
)
def test_no_reader_receives_a_reply_with_a_source_invisible_to_them(spec, replies, changes):
    try:
        with transaction.atomic():
            world = ReplyWorld(spec, replies)
            check_replies(world, "stored")
            for number, change in enumerate(changes):
                world.apply(change)
                check_replies(world, f"after change {number} {change}", pages=number == len(changes) - 1)
            raise _Rollback
    except _Rollback:
        pass
