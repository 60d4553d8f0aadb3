"""Photos through the API (multipart, owner only) and what agents learn of them: a count, and only
of a memory they may see — never bytes, an address, a name or any other metadata."""

from __future__ import annotations

import json

import pytest
from django.test import Client
from django.utils import timezone

from accounts.models import TokenKind
from accounts.services import access_token_authenticate, access_token_create
from agents.mcpserver import tools
from attachments.images import image_prepare
from attachments.models import Attachment
from attachments.services import attachments_add
from memories.models import Memory
from people.models import ConsentStatus
from people.services import person_create, person_set_consent
from tests.attachments.photos import SECRET_NAME, assert_clean, image_bytes, upload
from tests.attachments.test_bad_input import stored_files

pytestmark = pytest.mark.django_db


def bearer(user, kind=TokenKind.OWNER) -> tuple[dict, str]:
    agent = user.agents.first() if kind == TokenKind.AGENT else None
    _, raw = access_token_create(owner=user, kind=kind, agent=agent)
    return {"HTTP_AUTHORIZATION": f"Bearer {raw}"}, raw


def photos_url(memory) -> str:
    return f"/api/v1/memories/{memory.pk}/photos/"


@pytest.fixture
def memory(alice):
    return Memory.objects.create(owner=alice, body="Tulips in the garden", kind="knowledge")


def test_the_owner_uploads_lists_captions_downloads_and_deletes(alice, memory, photo_store):
    auth, _ = bearer(alice)
    client = Client()
    response = client.post(
        photos_url(memory),
        {
            "files": [upload(name=SECRET_NAME), upload(image_bytes("PNG"), name="b.png")],
            "captions": ["Red", "Blue"],
        },
        **auth,
    )
    assert response.status_code == 201, response.content
    created = response.json()
    assert [(item["caption"], item["original_name"]) for item in created] == [
        ("Red", SECRET_NAME),
        ("Blue", "b.png"),
    ]
    assert [item["media_type"] for item in created] == ["image/jpeg", "image/png"]
    listed = client.get(photos_url(memory), **auth).json()
    assert [item["id"] for item in listed] == [item["id"] for item in created]
    photo_id = created[0]["id"]
    patched = client.patch(
        f"/api/v1/photos/{photo_id}/",
        json.dumps({"caption": "Tulips"}),
        content_type="application/json",
        **auth,
    )
    assert patched.json()["caption"] == "Tulips"
    display = client.get(f"/api/v1/photos/{photo_id}/file/", **auth)
    assert display.status_code == 200
    assert_clean(b"".join(display.streaming_content))
    original = client.get(f"/api/v1/photos/{photo_id}/file/", {"variant": "original"}, **auth)
    assert b"".join(original.streaming_content) == image_bytes()
    assert SECRET_NAME in original["Content-Disposition"]
    assert (
        client.get(f"/api/v1/photos/{photo_id}/file/", {"variant": "../../secret"}, **auth).status_code == 400
    )
    detail = client.get(f"/api/v1/memories/{memory.pk}/", **auth).json()
    assert detail["photo_count"] == 2
    assert client.delete(f"/api/v1/photos/{photo_id}/", **auth).status_code == 204
    assert Attachment.objects.filter(memory=memory).count() == 1


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ([upload(b"%PDF-1.4", name="doc.pdf")], "not a photo"),
        ([upload(), upload(image_bytes()[:300], name="cut.jpg")], "not a photo"),
        ([], "This list may not be empty."),
    ],
    ids=["pdf", "one-truncated", "none"],
)
def test_bad_uploads_answer_400_and_store_nothing(alice, memory, photo_store, files, message):
    auth, _ = bearer(alice)
    response = Client().post(photos_url(memory), {"files": files} if files else {}, **auth)
    assert response.status_code == 400
    assert message in json.dumps(response.json())
    assert not Attachment.objects.exists()
    assert stored_files(photo_store) == []


def test_json_is_refused_and_too_many_is_400(alice, memory, settings, photo_store):
    auth, _ = bearer(alice)
    client = Client()
    as_json = client.post(
        photos_url(memory), json.dumps({"files": []}), content_type="application/json", **auth
    )
    assert as_json.status_code == 415
    settings.ATTACHMENTS_PER_MEMORY = 1
    response = client.post(photos_url(memory), {"files": [upload(), upload()]}, **auth)
    assert response.status_code == 400
    assert "at most 1 photos" in json.dumps(response.json())
    assert stored_files(photo_store) == []


def test_another_owner_gets_404(alice, mallory, memory):
    [photo] = attachments_add(memory=memory, images=[image_prepare(upload())])
    auth, _ = bearer(mallory)
    client = Client()
    assert client.get(photos_url(memory), **auth).status_code == 404
    assert client.post(photos_url(memory), {"files": [upload()]}, **auth).status_code == 404
    for url in (f"/api/v1/photos/{photo.pk}/", f"/api/v1/photos/{photo.pk}/file/"):
        assert client.get(url, **auth).status_code == 404
    assert client.delete(f"/api/v1/photos/{photo.pk}/", **auth).status_code == 404


def _agent_world(alice):
    """An open memory with two photos; a memory about Bob (pending) with one."""
    open_memory = Memory.objects.create(
        owner=alice, body="Tulips", kind="knowledge", occurred_at=timezone.now()
    )
    attachments_add(
        memory=open_memory,
        images=[image_prepare(upload()), image_prepare(upload())],
        captions=["CAPTION-WORDS"],
    )
    bob = person_create(owner=alice, display_name="Bob")
    hidden = Memory.objects.create(
        owner=alice, body="Bob's secret", kind="knowledge", occurred_at=timezone.now()
    )
    hidden.participants.create(person=bob, role="subject")
    attachments_add(memory=hidden, images=[image_prepare(upload())])
    return open_memory, hidden, bob


def test_an_agent_token_gets_a_count_for_what_it_may_see_and_nothing_else(alice):
    open_memory, hidden, bob = _agent_world(alice)
    auth, _ = bearer(alice, TokenKind.AGENT)
    client = Client()
    listing = client.get("/api/v1/memories/", **auth)
    results = {item["id"]: item for item in listing.json()["results"]}
    assert results[str(open_memory.pk)]["photo_count"] == 2
    assert str(hidden.pk) not in results
    assert client.get(f"/api/v1/memories/{hidden.pk}/", **auth).status_code == 404
    assert client.get(f"/api/v1/memories/{open_memory.pk}/", **auth).json()["photo_count"] == 2
    photo = Attachment.objects.filter(memory=open_memory).first()
    for url in (
        photos_url(open_memory),
        f"/api/v1/photos/{photo.pk}/",
        f"/api/v1/photos/{photo.pk}/file/",
        f"/api/v1/photos/{photo.pk}/file/?variant=original",
        f"/photos/{photo.pk}/",
    ):
        response = client.get(url, **auth)
        assert response.status_code in (404, 302), url  # 302: the session views do not know tokens
    assert client.post(photos_url(open_memory), {"files": [upload()]}, **auth).status_code == 404
    text = listing.content.decode()
    for leak in ("/photos/", SECRET_NAME, "image/jpeg", "CAPTION-WORDS", str(photo.pk)):
        assert leak not in text
    # Consent given: the count comes with the memory, never before.
    person_set_consent(person=bob, status=ConsentStatus.GRANTED, actor=alice)
    assert client.get(f"/api/v1/memories/{hidden.pk}/", **auth).json()["photo_count"] == 1


def test_mcp_tools_say_how_many_photos_of_visible_memories_only(alice):
    open_memory, hidden, bob = _agent_world(alice)
    _, raw = bearer(alice, TokenKind.AGENT)
    token = access_token_authenticate(raw_token=raw)
    day = timezone.localdate().isoformat()
    window = tools.timeline_window(token=token, start=day, end=day, limit=50)
    by_id = {memory["id"]: memory for memory in window["memories"]}
    assert by_id[str(open_memory.pk)]["photos"] == 2
    assert str(hidden.pk) not in by_id
    text = json.dumps(window)
    photo = Attachment.objects.filter(memory=open_memory).first()
    for leak in ("/photos/", SECRET_NAME, "image/jpeg", "CAPTION-WORDS", str(photo.pk), "sha256"):
        assert leak not in text
    person_set_consent(person=bob, status=ConsentStatus.GRANTED, actor=alice)
    window = tools.timeline_window(token=token, start=day, end=day, limit=50)
    assert {memory["id"]: memory["photos"] for memory in window["memories"]}[str(hidden.pk)] == 1


def test_the_schema_documents_the_multipart_upload(db):
    schema = Client().get("/api/schema/", {"format": "json"}).json()
    add = schema["paths"]["/api/v1/memories/{memory_id}/photos/"]["post"]
    assert "multipart/form-data" in add["requestBody"]["content"]
    assert "/api/v1/photos/{photo_id}/file/" in schema["paths"]
    memory = schema["components"]["schemas"]["Memory"]
    assert "photo_count" in memory["properties"]
