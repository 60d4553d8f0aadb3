"""The people API's relationship and birthday: agents see them only for people who consented."""

from __future__ import annotations

import io

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from PIL import Image

from people.models import Person
from people.services import person_set_photo


@pytest.fixture(autouse=True)
def _media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"


def _png() -> SimpleUploadedFile:
    out = io.BytesIO()
    Image.new("RGB", (64, 64), (10, 120, 40)).save(out, format="PNG")
    return SimpleUploadedFile("p.png", out.getvalue(), content_type="image/png")


def test_api_gives_relationship_and_birthday_never_the_photo(owner_api, agent_api, world):
    carol = world.carol
    response = owner_api.patch(
        f"/api/v1/people/{carol.pk}/", {"relationship": "neighbour", "birthday": "--07-04"}
    )
    assert response.status_code == 200
    assert (response.json()["relationship"], response.json()["birthday"]) == ("neighbour", "--07-04")
    person_set_photo(person=Person.objects.get(pk=carol.pk), upload=_png())
    client = Client()
    client.force_login(world.alice)
    assert client.get(f"/people/{carol.pk}/photo/").status_code == 200
    # Carol granted consent for agents: her details reach them, her photo never does.
    seen = agent_api.get(f"/api/v1/people/{carol.pk}/").json()
    assert (seen["relationship"], seen["birthday"]) == ("neighbour", "--07-04")
    assert not any("photo" in key for key in seen)
    assert "photo" not in owner_api.get(f"/api/v1/people/{carol.pk}/").content.decode()


def test_api_hides_a_non_consenting_persons_details_from_agents(owner_api, agent_api, world):
    owner_api.patch(f"/api/v1/people/{world.bob.pk}/", {"relationship": "brother", "birthday": "1985-03-02"})
    assert owner_api.get(f"/api/v1/people/{world.bob.pk}/").json()["birthday"] == "1985-03-02"
    assert agent_api.get(f"/api/v1/people/{world.bob.pk}/").status_code == 404
    listing = agent_api.get("/api/v1/people/").content.decode()
    assert "brother" not in listing and "1985-03-02" not in listing


@pytest.mark.parametrize("birthday", ["1990-02-30", "05-01", 19900501, "--13-01"])
def test_api_refuses_a_bad_birthday(owner_api, world, birthday):
    response = owner_api.patch(f"/api/v1/people/{world.bob.pk}/", {"birthday": birthday})
    assert response.status_code == 400
    assert Person.objects.get(pk=world.bob.pk).birthday is None


def test_api_put_without_a_birthday_clears_it_and_patch_keeps_it(owner_api, world):
    url = f"/api/v1/people/{world.bob.pk}/"
    owner_api.patch(url, {"birthday": "--05-01"})
    owner_api.patch(url, {"notes": "changed"})
    assert owner_api.get(url).json()["birthday"] == "--05-01"
    owner_api.put(url, {"display_name": "Bob"})
    assert owner_api.get(url).json()["birthday"] is None
    created = owner_api.post("/api/v1/people/", {"display_name": "Hugo", "birthday": "2001-09-09"}).json()
    assert created["birthday"] == "2001-09-09" and created["relationship"] == ""
