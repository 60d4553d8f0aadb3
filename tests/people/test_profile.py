"""What a person page holds besides consent: relationship, birthday, photo (owner only)."""

from __future__ import annotations

import io
from datetime import date, timedelta

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from django.utils import timezone
from PIL import Image

from people.birthdays import Birthday
from people.models import Person
from people.photos import PHOTO_MAX_BYTES
from people.selectors import person_upcoming_birthdays
from people.services import person_create, person_delete

HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture(autouse=True)
def _media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    return settings.MEDIA_ROOT


def _image(fmt: str = "PNG", size=(800, 600), exif: bool = False) -> bytes:
    image = Image.new("RGB", size, (200, 120, 40))
    out = io.BytesIO()
    if exif:
        data = Image.Exif()
        data[0x010F] = "SpyCam"  # Make
        data[0x8825] = {2: (51.0, 30.0, 0.0)}  # GPS latitude
        image.save(out, format=fmt, exif=data)
    else:
        image.save(out, format=fmt)
    return out.getvalue()


def _edit_data(person: Person, **overrides) -> dict:
    data = {
        "display_name": person.display_name,
        "relationship": person.relationship,
        "aliases": ", ".join(person.aliases),
        "kind": person.kind,
        "notes": person.notes,
        "birthday_day": "",
        "birthday_month": "",
        "birthday_year": "",
    }
    data.update(overrides)
    return data


# --- birthdays --------------------------------------------------------------------------------


def test_birthday_text_round_trips_with_and_without_a_year():
    assert Birthday.parse("1990-05-01") == Birthday(month=5, day=1, year=1990)
    assert Birthday.parse("--02-29") == Birthday(month=2, day=29)
    assert Birthday(month=2, day=29).isoformat() == "--02-29"
    assert Birthday(month=12, day=3, year=1950).label() == "3 December 1950"


@pytest.mark.parametrize("text", ["1990-02-30", "2023-02-29", "--13-01", "1990/05/01", "--5-1", "3000-01-01"])
def test_impossible_birthdays_are_refused(text):
    with pytest.raises(ValueError):
        Birthday.parse(text)


def test_29_february_is_celebrated_on_28_february_in_common_years():
    leap = Birthday(month=2, day=29, year=2000)
    assert leap.next_on_or_after(date(2023, 1, 1)) == date(2023, 2, 28)
    assert leap.next_on_or_after(date(2024, 1, 1)) == date(2024, 2, 29)
    assert leap.age_on(date(2023, 2, 28)) == 23
    assert leap.age_on(date(2023, 2, 27)) == 22


def test_upcoming_birthdays_are_the_next_month_soonest_first(alice, mallory):
    today = date(2024, 12, 20)
    person_create(owner=alice, display_name="Later", birthday=Birthday(month=1, day=10, year=1980))
    person_create(owner=alice, display_name="Today", birthday=Birthday(month=12, day=20))
    person_create(owner=alice, display_name="Far", birthday=Birthday(month=3, day=1))
    person_create(owner=alice, display_name="Passed", birthday=Birthday(month=12, day=19))
    person_create(owner=mallory, display_name="Mallory's", birthday=Birthday(month=12, day=21))
    upcoming = person_upcoming_birthdays(owner=alice, today=today, within_days=30)
    assert [(item.person.display_name, item.on, item.days_away, item.turns) for item in upcoming] == [
        ("Today", date(2024, 12, 20), 0, None),
        ("Later", date(2025, 1, 10), 21, 45),
    ]


def test_a_person_is_added_with_relationship_and_birthday(alice_client, alice):
    response = alice_client.post(
        reverse("person_create"),
        {
            "display_name": "Anna",
            "relationship": "  big   sister ",
            "kind": "human",
            "birthday_day": "1",
            "birthday_month": "5",
            "birthday_year": "1990",
        },
    )
    anna = Person.objects.get(owner=alice, display_name="Anna")
    assert response.status_code == 302
    assert anna.relationship == "big sister"
    assert anna.birthday == Birthday(month=5, day=1, year=1990)
    page = alice_client.get(reverse("person_detail", args=[anna.pk])).content.decode()
    assert "big sister" in page and "Birthday 1 May 1990" in page


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"birthday_day": "30", "birthday_month": "2"}, "February has no day 30."),
        ({"birthday_day": "29", "birthday_month": "2", "birthday_year": "2023"}, "2023 had no 29 February."),
        ({"birthday_year": "1990"}, "Add the day and month too"),
        ({"birthday_day": "4"}, "A birthday needs both a day and a month."),
        ({"birthday_day": "4", "birthday_month": "13"}, "Select a valid choice"),
        ({"birthday_day": "4", "birthday_month": "5", "birthday_year": "2999"}, "cannot be in the future"),
        ({"relationship": "x" * 101}, "at most 100 characters"),
    ],
)
def test_bad_details_are_form_errors_and_nothing_is_saved(alice_client, alice, fields, message):
    data = {"display_name": "Anna", "kind": "human", **fields}
    response = alice_client.post(reverse("person_create"), data)
    assert response.status_code == 200
    assert message in response.content.decode()
    assert not Person.objects.filter(owner=alice, display_name="Anna").exists()


def test_the_birthday_without_a_year_says_when_it_comes(alice_client, alice):
    soon = timezone.localdate() + timedelta(days=3)
    anna = person_create(owner=alice, display_name="Anna", birthday=Birthday(month=soon.month, day=soon.day))
    page = alice_client.get(reverse("person_detail", args=[anna.pk])).content.decode()
    assert f"Birthday {soon.day} {soon:%B}" in page and "(in 3 days)" in page
    listing = alice_client.get(reverse("person_list")).content.decode()
    assert "Upcoming birthdays" in listing and "in 3 days" in listing


def test_editing_can_clear_a_birthday(alice_client, alice):
    anna = person_create(owner=alice, display_name="Anna", birthday=Birthday(month=5, day=1))
    response = alice_client.post(reverse("person_edit", args=[anna.pk]), _edit_data(anna))
    assert response.status_code == 302
    anna.refresh_from_db()
    assert anna.birthday is None


# --- the list --------------------------------------------------------------------------------


@pytest.mark.parametrize("htmx", [False, True])
def test_people_are_listed_by_name_whatever_the_capitals_self_first(alice_client, alice, htmx):
    for name in ("bob", "Zoe", "anna", "Carl"):
        person_create(owner=alice, display_name=name)
    html = alice_client.get(reverse("person_list"), **(HX if htmx else {})).content.decode()
    positions = [html.index(f">{name}</a>") for name in ("Self", "anna", "bob", "Carl", "Zoe")]
    assert positions == sorted(positions)


# --- photos --------------------------------------------------------------------------------------


def _upload(alice_client, person, content: bytes, name="photo.png", content_type="image/png", **fields):
    data = _edit_data(person, **fields)
    data["photo"] = SimpleUploadedFile(name, content, content_type=content_type)
    return alice_client.post(reverse("person_edit", args=[person.pk]), data)


def test_a_photo_is_stored_small_without_its_metadata_and_shown_to_the_owner(alice_client, alice, _media):
    anna = person_create(owner=alice, display_name="Anna")
    response = _upload(alice_client, anna, _image("JPEG", (1600, 900), exif=True), name="a.jpg")
    assert response.status_code == 302
    anna.refresh_from_db()
    assert anna.photo.name.startswith(f"people/{alice.pk}/") and anna.photo.name.endswith(".jpg")
    stored = _media / anna.photo.name
    with Image.open(stored) as image:
        assert image.format == "JPEG" and image.size == (512, 512)
        assert not image.getexif()
    assert b"SpyCam" not in stored.read_bytes()
    served = alice_client.get(reverse("person_photo", args=[anna.pk]))
    assert served.status_code == 200
    assert served["Content-Type"] == "image/jpeg"
    assert "private" in served["Cache-Control"]
    assert b"".join(served.streaming_content) == stored.read_bytes()
    page = alice_client.get(reverse("person_detail", args=[anna.pk])).content.decode()
    assert f'src="/people/{anna.pk}/photo/?v=' in page


def test_a_photo_is_never_served_to_anyone_else(alice, mallory_client, client):
    anna = person_create(owner=alice, display_name="Anna")
    alice_client = client.__class__()
    alice_client.force_login(alice)
    _upload(alice_client, anna, _image())
    assert mallory_client.get(reverse("person_photo", args=[anna.pk])).status_code == 404
    anonymous = client.__class__().get(reverse("person_photo", args=[anna.pk]))
    assert anonymous.status_code == 302 and "/accounts/login/" in anonymous["Location"]


def test_without_a_photo_the_avatar_is_initials_and_the_photo_url_is_a_404(alice_client, alice):
    anna = person_create(owner=alice, display_name="Anna maria Smith")
    page = alice_client.get(reverse("person_detail", args=[anna.pk])).content.decode()
    assert ">AS</span>" in page
    assert alice_client.get(reverse("person_photo", args=[anna.pk])).status_code == 404


@pytest.mark.parametrize(
    ("content", "name", "message"),
    [
        (b"GIF89a but not really an image", "x.gif", "not a photo Keepsake can read"),
        (b"%PDF-1.4 a document", "x.png", "not a photo Keepsake can read"),
        (_image("BMP"), "x.bmp", "not a photo Keepsake can read"),
    ],
)
def test_files_that_are_not_photos_are_refused_and_nothing_changes(
    alice_client, alice, content, name, message
):
    anna = person_create(owner=alice, display_name="Anna")
    response = _upload(alice_client, anna, content, name=name, relationship="sister")
    assert response.status_code == 200
    assert message in response.content.decode()
    anna.refresh_from_db()
    assert not anna.photo and anna.relationship == ""


def test_a_photo_too_large_is_refused(alice_client, alice, _media):
    anna = person_create(owner=alice, display_name="Anna")
    response = _upload(alice_client, anna, b"\xff" * (PHOTO_MAX_BYTES + 1), name="big.jpg")
    assert "A photo can be at most 5 MB." in response.content.decode()
    anna.refresh_from_db()
    assert not anna.photo
    assert not any(_media.rglob("*.jpg")) if _media.exists() else True


def test_replacing_and_removing_a_photo_deletes_the_old_files(
    alice_client, alice, _media, django_capture_on_commit_callbacks
):
    anna = person_create(owner=alice, display_name="Anna")
    with django_capture_on_commit_callbacks(execute=True):
        _upload(alice_client, anna, _image())
    anna.refresh_from_db()
    first = _media / anna.photo.name
    with django_capture_on_commit_callbacks(execute=True):
        _upload(alice_client, anna, _image("WEBP"), name="b.webp", content_type="image/webp")
    anna.refresh_from_db()
    second = _media / anna.photo.name
    assert second.exists() and not first.exists()
    with django_capture_on_commit_callbacks(execute=True):
        alice_client.post(reverse("person_edit", args=[anna.pk]), _edit_data(anna, remove_photo="on"))
    anna.refresh_from_db()
    assert not anna.photo and not second.exists()


def test_deleting_a_person_or_the_whole_account_deletes_the_photo(
    alice_client, alice, _media, django_capture_on_commit_callbacks
):
    anna = person_create(owner=alice, display_name="Anna")
    bob = person_create(owner=alice, display_name="Bob")
    with django_capture_on_commit_callbacks(execute=True):
        _upload(alice_client, anna, _image())
        _upload(alice_client, bob, _image())
    anna.refresh_from_db()
    bob.refresh_from_db()
    anna_file, bob_file = _media / anna.photo.name, _media / bob.photo.name
    with django_capture_on_commit_callbacks(execute=True):
        person_delete(person=anna)
    assert not anna_file.exists() and bob_file.exists()
    with django_capture_on_commit_callbacks(execute=True):
        alice.delete()
    assert not bob_file.exists()
