"""Property: no photo of a memory, nor its thumbnail, is served to a reader who may not see the memory.

Hypothesis builds the circle worlds of tests/circles/test_circle_property.py (users,
circles, people with consent per audience, memories with participants, sensitivities,
shares; in the database and in the independent oracle, tests/memories/consent_oracle.py),
puts photos on some memories and then changes the world: consent granted or revoked per
audience, shares and unshares, members joining, leaving or removed (by the service or
behind its back), links, a circle deleted, a memory's sensitivity raised, a memory
deleted. After the photos are added and after every change, every user is checked
against every photo through the serving selector (attachments.selectors, which asks the
gate), and after the last change through the views themselves (display copy and
thumbnail over HTTP): a photo is served exactly when the oracle's `file_visible` says so,
and to anyone but the owner the original never is.

Each example lives in a savepoint rolled back at its end (the files it wrote stay in the
test's temporary store).
"""

from __future__ import annotations

import pytest
from django.db import transaction
from django.http import Http404
from django.test import Client
from hypothesis import given
from hypothesis import strategies as st

from attachments.images import image_prepare
from attachments.selectors import attachment_for_reader
from attachments.services import attachments_add
from tests.attachments.photos import upload
from tests.circles.test_circle_property import world_spec
from tests.circles.test_reply_provenance_property import ReplyWorld, later_change
from tests.privacy import privacy_settings

pytestmark = pytest.mark.django_db

_PREPARED = []


def prepared_photo():
    if not _PREPARED:
        _PREPARED.append(image_prepare(upload()))
    return _PREPARED[0]


class _Rollback(Exception):
    pass


class PhotoWorld(ReplyWorld):
    def __init__(self, spec: dict, photo_memories: list[int]) -> None:
        super().__init__(spec, [])
        # (attachment id, memory id as the oracle spells it)
        self.photos: list[tuple[object, str]] = []
        for index in dict.fromkeys(number % len(self.memories) for number in photo_memories):
            memory = self.memories[index]
            for attachment in attachments_add(memory=memory, images=[prepared_photo()]):
                self.photos.append((attachment.pk, str(memory.pk)))


def served(attachment_id, user) -> bool:
    try:
        attachment_for_reader(attachment_id=attachment_id, reader=user)
    except Http404:
        return False
    return True


def check_photos(world: PhotoWorld, step: str, *, over_http: bool) -> None:
    for user in world.users:
        client = None
        if over_http:
            client = Client()
            client.force_login(user)
        for number, (attachment_id, memory_id) in enumerate(world.photos):
            expected = world.oracle.file_visible(memory_id, str(user.pk))
            where = f"{step}: photo of {memory_id} to user {user.pk}"
            assert served(attachment_id, user) == expected, where
            if client is not None:
                variant = "" if number % 2 else "thumbnail/"
                response = client.get(f"/photos/{attachment_id}/{variant}")
                assert response.status_code == (200 if expected else 404), where
                original = client.get(f"/photos/{attachment_id}/original/")
                is_owner = memory_id in world.oracle.memories and (
                    world.oracle.memories[memory_id].owner == str(user.pk)
                )
                assert original.status_code == (200 if is_owner else 404), where


@privacy_settings
@given(
    spec=world_spec,
    photo_memories=st.lists(st.integers(0, 9), min_size=1, max_size=5),
    changes=st.lists(later_change, min_size=1, max_size=4),
)
def test_no_photo_is_served_to_a_reader_who_may_not_see_its_memory(spec, photo_memories, changes):
    try:
        with transaction.atomic():
            world = PhotoWorld(spec, photo_memories)
            check_photos(world, "added", over_http=False)
            for number, change in enumerate(changes):
                world.apply(change)
                check_photos(world, f"after change {number} {change}", over_http=number == len(changes) - 1)
            raise _Rollback
    except _Rollback:
        pass
