"""Photos on pages: capture and edit forms, the memory page's gallery, cards, calendar, circle pages.

Personas: Alice owns, Bob is in her circle "Family", Mallory has no access.
"""

from __future__ import annotations

import pytest
from django.test import Client
from django.test.client import BOUNDARY, MULTIPART_CONTENT, encode_multipart
from django.urls import reverse
from django.utils import timezone

from attachments.images import image_prepare
from attachments.models import Attachment
from attachments.services import attachments_add
from circles.services import memory_share
from memories.models import Memory
from tests.attachments.photos import image_bytes, upload
from tests.attachments.test_bad_input import stored_files
from tests.memories.test_views import quick_add_data

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}


def photo(name="IMG_0001.jpg", fmt="JPEG"):
    return upload(image_bytes(fmt), name=name)


@pytest.mark.parametrize("htmx", [False, True])
def test_capture_saves_the_memory_with_its_photos(alice_client, alice, htmx):
    data = quick_add_data(body="Tulips in the garden", photos=[photo("a.jpg"), photo("b.png")])
    response = alice_client.post(reverse("memory_create"), data, **(HX if htmx else {}))
    assert response.status_code == (200 if htmx else 302)
    memory = Memory.objects.get(owner=alice)
    photos = list(memory.attachments.all())
    assert [item.original_name for item in photos] == ["a.jpg", "b.png"]
    assert [item.position for item in photos] == [0, 1]
    if htmx:
        html = response.content.decode()
        assert reverse("attachment_thumbnail", args=[photos[0].pk]) in html  # the new card, with thumbnails
    timeline = alice_client.get(reverse("timeline")).content.decode()
    for item in photos:
        assert (
            f'src="{reverse("attachment_thumbnail", args=[item.pk])}" alt="Photo {item.position + 1}"'
            in timeline
        )
    assert 'accept="image/*"' in timeline and 'enctype="multipart/form-data"' in timeline


@pytest.mark.parametrize("htmx", [False, True])
def test_a_bad_photo_saves_nothing_and_says_why(alice_client, alice, photo_store, htmx):
    data = quick_add_data(
        body="Tulips", photos=[photo("good.jpg"), upload(b"%PDF-1.4 not a photo", name="doc.pdf")]
    )
    response = alice_client.post(reverse("memory_create"), data, **(HX if htmx else {}))
    assert response.status_code == 200
    html = response.content.decode()
    assert "doc.pdf: That file is not a photo Keepsake can read" in html
    assert "choose the photos again" in html
    assert "Tulips" in html  # what was typed is kept
    assert not Memory.objects.filter(owner=alice).exists()
    assert stored_files(photo_store) == []


def test_too_many_photos_in_one_capture_saves_nothing(alice_client, alice, settings, photo_store):
    settings.ATTACHMENTS_PER_MEMORY = 2
    data = quick_add_data(body="Tulips", photos=[photo(), photo(), photo()])
    response = alice_client.post(reverse("memory_create"), data)
    assert response.status_code == 200
    assert "at most 2 photos" in response.content.decode()
    assert not Memory.objects.filter(owner=alice).exists()
    assert stored_files(photo_store) == []


def test_an_upload_interrupted_halfway_saves_nothing(alice_client, alice, photo_store):
    # As the page sends it: the marker before the photo input, the photo, the rest, the end marker.
    fields = {"photos_begin": "1", "photos": [photo()], **quick_add_data(body="Tulips"), "form_end": "1"}
    whole = encode_multipart(BOUNDARY, fields)
    response = alice_client.generic("POST", reverse("memory_create"), whole, content_type=MULTIPART_CONTENT)
    assert response.status_code == 302  # whole, it saves
    Memory.objects.filter(owner=alice).delete()
    Attachment.objects.all().delete()
    for path in stored_files(photo_store):
        path.unlink()
    body = encode_multipart(BOUNDARY, fields)
    cut = body[: len(body) // 2 + 200]  # the connection dropped in the middle of the photo
    response = alice_client.generic(
        "POST", reverse("memory_create"), cut, content_type=MULTIPART_CONTENT, CONTENT_LENGTH=str(len(cut))
    )
    assert response.status_code == 200
    assert "The upload was interrupted before it finished; nothing was saved." in response.content.decode()
    assert not Memory.objects.filter(owner=alice).exists()
    assert not Attachment.objects.exists()
    assert stored_files(photo_store) == []


def test_the_edit_page_adds_captions_and_removes_photos(
    alice_client, alice, photo_store, django_capture_on_commit_callbacks
):
    memory = Memory.objects.create(owner=alice, body="Tulips", kind="event")
    edit = reverse("memory_edit", args=[memory.pk])
    data = quick_add_data(body="Tulips, later", photos=[photo("later.webp", fmt="WEBP")])
    assert alice_client.post(edit, data).status_code == 302
    [attachment] = memory.attachments.all()
    assert attachment.media_type == "image/webp"
    page = alice_client.get(edit).content.decode()
    assert reverse("attachment_caption", args=[attachment.pk]) in page
    response = alice_client.post(
        reverse("attachment_caption", args=[attachment.pk]), {"caption": "Red tulips"}
    )
    assert response.status_code == 302
    detail = alice_client.get(reverse("memory_detail", args=[memory.pk])).content.decode()
    assert 'alt="Red tulips"' in detail and "<figcaption>Red tulips</figcaption>" in detail
    assert reverse("attachment_original", args=[attachment.pk]) in detail
    with django_capture_on_commit_callbacks(execute=True):
        alice_client.post(reverse("attachment_delete", args=[attachment.pk]))
    assert not memory.attachments.exists()
    assert stored_files(photo_store) == []


def test_nobody_else_can_caption_or_remove(mallory_client, alice):
    memory = Memory.objects.create(owner=alice, body="x")
    [attachment] = attachments_add(memory=memory, images=[image_prepare(photo())])
    assert (
        mallory_client.post(
            reverse("attachment_caption", args=[attachment.pk]), {"caption": "Mine"}
        ).status_code
        == 404
    )
    assert mallory_client.post(reverse("attachment_delete", args=[attachment.pk])).status_code == 404
    attachment.refresh_from_db()
    assert attachment.caption == ""


def test_a_member_sees_thumbnails_on_the_circle_pages_without_the_original(alice, bob, family):
    memory = Memory.objects.create(owner=alice, body="Grandma's garden", sensitivity="public")
    [attachment] = attachments_add(memory=memory, images=[image_prepare(photo())], captions=["Grandma"])
    memory_share(memory=memory, circle=family, by=alice)
    client = Client()
    client.force_login(bob)
    circle_page = client.get(reverse("circle_detail", args=[family.pk])).content.decode()
    assert reverse("attachment_thumbnail", args=[attachment.pk]) in circle_page
    detail = client.get(reverse("circle_memory_detail", args=[family.pk, memory.pk])).content.decode()
    assert 'alt="Grandma"' in detail
    assert reverse("attachment_original", args=[attachment.pk]) not in detail
    assert "IMG_0001" not in detail


def test_the_calendar_and_on_this_day_show_thumbnails(alice_client, alice):
    today = Memory.objects.create(owner=alice, body="Tulips", kind="event")
    [attachment] = attachments_add(memory=today, images=[image_prepare(photo())])
    calendar = alice_client.get(reverse("memory_calendar")).content.decode()
    assert f'class="day-photo" src="{reverse("attachment_thumbnail", args=[attachment.pk])}"' in calendar
    now = timezone.now()
    year_ago = Memory.objects.create(
        owner=alice,
        body="Daffodils",
        kind="event",
        occurred_at=now.replace(year=now.year - 1, day=min(now.day, 28)),
    )
    [older] = attachments_add(memory=year_ago, images=[image_prepare(photo())])
    day = timezone.localtime(year_ago.occurred_at).date().replace(year=now.year)
    on_this_day = alice_client.get(reverse("memory_on_this_day"), {"date": day.isoformat()}).content.decode()
    assert reverse("attachment_thumbnail", args=[older.pk]) in on_this_day


def test_the_universe_draws_a_memory_with_its_first_photo(alice_client, alice):
    with_photo = Memory.objects.create(owner=alice, body="Tulips", kind="event")
    first, _ = attachments_add(memory=with_photo, images=[image_prepare(photo()), image_prepare(photo())])
    without = Memory.objects.create(owner=alice, body="Rain", kind="event")
    nodes = {node["id"]: node for node in alice_client.get(reverse("universe_graph")).json()["nodes"]}
    assert nodes[f"m-{with_photo.pk}"]["thumbnail"] == reverse("attachment_thumbnail", args=[first.pk])
    assert "thumbnail" not in nodes[f"m-{without.pk}"]


def test_the_timeline_reads_every_cards_photos_in_one_query(
    alice_client, alice, django_assert_max_num_queries
):
    for number in range(3):
        memory = Memory.objects.create(owner=alice, body=f"Tulips {number}", kind="event")
        attachments_add(memory=memory, images=[image_prepare(photo())])
    alice_client.get(reverse("timeline"))  # warm: sessions, Self, agents
    with django_assert_max_num_queries(60) as captured:
        html = alice_client.get(reverse("timeline")).content.decode()
    assert html.count('class="photo-strip"') == 3
    photo_queries = [
        query["sql"] for query in captured.captured_queries if "attachments_attachment" in query["sql"]
    ]
    assert len(photo_queries) == 2  # the cards' prefetch and the calendar's month


def test_a_memory_added_from_a_circle_page_keeps_its_photos_and_a_bad_one_saves_nothing(
    alice, bob, family, photo_store
):
    client = Client()
    client.force_login(alice)
    url = reverse("circle_memory_create", args=[family.pk])
    refused = client.post(
        url, {"body": "Picnic", "sensitivity": "public", "photos": [upload(b"no", name="x.jpg")]}
    )
    assert refused.status_code == 200 and "x.jpg: That file is not a photo" in refused.content.decode()
    assert not Memory.objects.filter(owner=alice).exists()
    assert stored_files(photo_store) == []
    saved = client.post(url, {"body": "Picnic", "sensitivity": "public", "photos": [photo()]})
    assert saved.status_code in (200, 302)
    memory = Memory.objects.get(owner=alice)
    [attachment] = memory.attachments.all()
    member = Client()
    member.force_login(bob)
    assert member.get(reverse("attachment_thumbnail", args=[attachment.pk])).status_code == 200
