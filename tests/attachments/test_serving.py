"""Serving photos: the owner, a member the gate allows, and nobody else; no metadata to non-owners.

Personas: Alice owns the memory, Bob is in her circle "Family", Mallory has no access.
"""

from __future__ import annotations

import io

import pytest
from django.test import Client
from PIL import Image

from accounts.models import TokenKind
from accounts.services import access_token_create
from attachments.images import image_prepare
from attachments.models import Attachment
from attachments.services import attachments_add
from circles.models import MemoryShare
from circles.services import membership_remove, memory_share, memory_unshare
from memories.models import Memory
from memories.services import memory_delete
from tests.attachments.photos import SECRET_NAME, assert_clean, image_bytes, upload

pytestmark = pytest.mark.django_db


def photo_memory(owner, *, sensitivity="public", data=None, name=SECRET_NAME) -> tuple[Memory, Attachment]:
    memory = Memory.objects.create(
        owner=owner, body="Grandma's garden", kind="event", sensitivity=sensitivity
    )
    [attachment] = attachments_add(memory=memory, images=[image_prepare(upload(data, name=name))])
    return memory, attachment


def client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def body(response) -> bytes:
    return b"".join(response.streaming_content)


def urls(attachment) -> dict[str, str]:
    base = f"/photos/{attachment.pk}/"
    return {"display": base, "thumbnail": f"{base}thumbnail/", "original": f"{base}original/"}


def test_the_owner_gets_every_copy_and_the_original_under_its_own_name(alice):
    _, attachment = photo_memory(alice)
    client = client_for(alice)
    for variant in ("display", "thumbnail"):
        response = client.get(urls(attachment)[variant])
        assert response.status_code == 200
        assert response["Content-Type"] == "image/jpeg"
        assert SECRET_NAME not in response["Content-Disposition"]
        assert_clean(body(response))
    original = client.get(urls(attachment)["original"])
    assert original.status_code == 200
    assert SECRET_NAME in original["Content-Disposition"]
    assert body(original) == image_bytes()  # the owner keeps the original, metadata and all
    assert original["Cache-Control"].startswith("private")


def test_a_member_who_may_see_the_memory_gets_clean_copies_only(alice, bob, family):
    memory, attachment = photo_memory(alice)
    memory_share(memory=memory, circle=family, by=alice)
    client = client_for(bob)
    for variant in ("display", "thumbnail"):
        response = client.get(urls(attachment)[variant])
        assert response.status_code == 200
        served = body(response)
        assert_clean(served)
        assert SECRET_NAME.rsplit(".", 1)[0] not in response["Content-Disposition"]
        assert response["Content-Disposition"].startswith("inline;")
        assert response["Cache-Control"] == "private, no-store"
        assert response["X-Content-Type-Options"] == "nosniff"
    # Never the original, which carries the GPS position.
    assert client.get(urls(attachment)["original"]).status_code == 404


def test_every_served_format_is_stripped_for_members(alice, bob, family):
    client = client_for(bob)
    for fmt in ("JPEG", "PNG", "WEBP", "HEIF"):
        memory, attachment = photo_memory(alice, data=image_bytes(fmt), name=f"IMG_{fmt}_SECRET.x")
        memory_share(memory=memory, circle=family, by=alice)
        for variant in ("display", "thumbnail"):
            response = client.get(urls(attachment)[variant])
            assert response.status_code == 200, fmt
            assert_clean(body(response), original_name=f"IMG_{fmt}_SECRET.x")


@pytest.mark.parametrize("variant", ["display", "thumbnail", "original"])
def test_mallory_and_anonymous_get_nothing(alice, mallory, variant):
    _, attachment = photo_memory(alice)
    assert client_for(mallory).get(urls(attachment)[variant]).status_code == 404
    anonymous = Client().get(urls(attachment)[variant])
    assert anonymous.status_code == 302 and "/accounts/login/" in anonymous["Location"]


def test_a_member_loses_the_photo_with_the_memory_unshare_leave_consent_or_delete(alice, bob, family):
    memory, attachment = photo_memory(alice)
    memory_share(memory=memory, circle=family, by=alice)
    client = client_for(bob)
    assert client.get(urls(attachment)["thumbnail"]).status_code == 200
    memory_unshare(memory=memory, circle=family, by=alice)
    assert client.get(urls(attachment)["thumbnail"]).status_code == 404
    memory_share(memory=memory, circle=family, by=alice)
    membership_remove(circle=family, user_id=bob.pk, by=bob)
    assert client.get(urls(attachment)["thumbnail"]).status_code == 404


def test_a_personal_photo_is_not_served_to_a_member_it_is_not_about(alice, bob, family):
    memory, attachment = photo_memory(alice, sensitivity="personal")
    MemoryShare.objects.create(memory=memory, circle=family, shared_by=alice)
    assert client_for(bob).get(urls(attachment)["display"]).status_code == 404
    assert client_for(alice).get(urls(attachment)["display"]).status_code == 200


def test_an_agent_token_never_reaches_the_bytes(alice):
    _, attachment = photo_memory(alice)
    for kind in (TokenKind.AGENT, TokenKind.OWNER):
        agent = alice.agents.first() if kind == TokenKind.AGENT else None
        _, raw = access_token_create(owner=alice, kind=kind, agent=agent)
        for url in urls(attachment).values():
            response = Client().get(url, HTTP_AUTHORIZATION=f"Bearer {raw}")
            # Session views only: a bearer token is no sign-in here.
            assert response.status_code == 302, url


def test_files_go_with_the_memory_after_commit(alice, photo_store, django_capture_on_commit_callbacks):
    memory, attachment = photo_memory(alice)
    stored = [photo_store / name for name in attachment.stored_names()]
    assert all(path.exists() for path in stored)
    with django_capture_on_commit_callbacks(execute=True):
        memory_delete(memory=memory)
    assert not Attachment.objects.filter(pk=attachment.pk).exists()
    assert not any(path.exists() for path in stored)
    assert client_for(alice).get(urls(attachment)["display"]).status_code == 404


def test_the_display_copy_is_upright(alice):
    # Stored sideways with "rotate 90° clockwise to view": served upright, taller than wide.
    _, attachment = photo_memory(alice, data=image_bytes(size=(80, 40), orientation=6))
    served = body(client_for(alice).get(urls(attachment)["display"]))
    with Image.open(io.BytesIO(served)) as image:
        assert image.size == (40, 80)
    assert (attachment.width, attachment.height) == (40, 80)
