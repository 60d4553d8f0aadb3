"""The installable app's server side: manifest, service worker at the root, the offline page,
and captures typed offline saved once whatever the retries (Idempotency-Key)."""

from __future__ import annotations

import json
import threading
import uuid

import pytest
from django.db import connection
from django.urls import reverse

from memories.models import Memory
from people.models import ConsentStatus
from people.services import person_create
from pwa.models import OfflineCapture
from pwa.services import offline_capture_save

pytestmark = pytest.mark.django_db


def _send(client, body: str, key: str, **extra):
    return client.post(reverse("pwa_offline_capture"), {"body": body, **extra}, HTTP_IDEMPOTENCY_KEY=key)


def test_manifest_names_the_app_its_scope_and_icons(client):
    response = client.get("/manifest.webmanifest")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/manifest+json"
    manifest = json.loads(response.content)
    assert manifest["start_url"] == "/" and manifest["scope"] == "/"
    assert manifest["display"] == "standalone"
    sizes = {icon["sizes"] for icon in manifest["icons"]}
    assert {"192x192", "512x512", "any"} <= sizes
    assert any(icon.get("purpose") == "maskable" for icon in manifest["icons"])
    for icon in manifest["icons"]:
        assert client.get(icon["src"]).status_code == 200


def test_service_worker_is_served_from_the_root_never_cached_and_keeps_only_the_shell(client, alice):
    client.force_login(alice)
    response = client.get("/sw.js")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/javascript")
    assert response["Service-Worker-Allowed"] == "/"
    assert "no-cache" in response["Cache-Control"] or "max-age=0" in response["Cache-Control"]
    script = response.content.decode()
    shell = json.loads(script.split("const SHELL = ", 1)[1].split(";", 1)[0])
    # The offline page and static files only: no page of anyone's, no API.
    assert reverse("pwa_offline") in shell
    assert all(url == reverse("pwa_offline") or url.startswith("/static/") for url in shell)
    # Signed in or not, the same script: nothing in it is anyone's.
    client.logout()
    assert client.get("/sw.js").content.decode() == script


def test_offline_page_is_the_same_for_everyone(client, alice):
    anonymous = client.get(reverse("pwa_offline")).content.decode()
    client.force_login(alice)
    signed_in = client.get(reverse("pwa_offline")).content.decode()
    assert "alice" not in signed_in
    # Only the CSRF-free markup: the page holds no token and no name.
    assert anonymous == signed_in


def test_a_capture_is_saved_once_however_often_it_is_sent(alice_client, alice):
    key = str(uuid.uuid4())
    first = _send(alice_client, "Rain on the tin roof all night.", key)
    assert first.status_code == 201
    again = _send(alice_client, "Rain on the tin roof all night.", key)
    assert again.status_code == 200
    assert json.loads(again.content)["memory"] == json.loads(first.content)["memory"]
    assert Memory.objects.filter(owner=alice, body="Rain on the tin roof all night.").count() == 1
    # Another key is another capture.
    assert _send(alice_client, "Rain on the tin roof all night.", str(uuid.uuid4())).status_code == 201
    assert Memory.objects.filter(owner=alice).count() == 2


def test_a_key_is_per_account(client, alice):
    from accounts.services import user_signup

    bob = user_signup(username="bob", password="correct horse battery")
    key = str(uuid.uuid4())
    client.force_login(alice)
    assert _send(client, "Alice's note", key).status_code == 201
    client.force_login(bob)
    answer = _send(client, "Bob's note", key)
    assert answer.status_code == 201  # Bob's own capture, never Alice's memory
    assert Memory.objects.get(pk=json.loads(answer.content)["memory"]).owner == bob


def test_mentions_make_participants_and_an_unknown_name_waits_for_the_owner(alice_client, alice):
    anna = person_create(owner=alice, display_name="Anna")
    answer = _send(alice_client, "Lunch with @Anna by the river", str(uuid.uuid4()))
    assert answer.status_code == 201
    memory = Memory.objects.get(pk=json.loads(answer.content)["memory"])
    assert list(memory.participants.values_list("person_id", flat=True)) == [anna.pk]
    assert anna.consent_status == ConsentStatus.PENDING  # so agents do not get it
    refused = _send(alice_client, "Coffee with @Zed", str(uuid.uuid4()))
    assert refused.status_code == 409
    assert json.loads(refused.content)["unknown"] == ["Zed"]
    assert not Memory.objects.filter(body__contains="Zed").exists()


def test_typed_at_is_kept_but_never_in_the_future(alice_client, alice):
    answer = _send(
        alice_client, "Written on the train", str(uuid.uuid4()), typed_at="2026-01-02T08:30:00+00:00"
    )
    memory = Memory.objects.get(pk=json.loads(answer.content)["memory"])
    assert memory.occurred_at.isoformat().startswith("2026-01-02T08:30")
    later = _send(alice_client, "From the future", str(uuid.uuid4()), typed_at="2999-01-01T00:00:00+00:00")
    assert Memory.objects.get(pk=json.loads(later.content)["memory"]).occurred_at.year < 2999


@pytest.mark.parametrize(
    ("body", "key"),
    [
        ("", "a-good-key-123"),
        ("text", ""),
        ("text", "short"),
        ("text", "bad key with spaces"),
        ("x" * 50_001, "k" * 20),
    ],
)
def test_bad_captures_answer_400_and_write_nothing(alice_client, body, key):
    assert _send(alice_client, body, key).status_code == 400
    assert not Memory.objects.exists() and not OfflineCapture.objects.exists()


def test_signed_out_capture_is_refused(client):
    response = _send(client, "Nobody's", str(uuid.uuid4()))
    assert response.status_code == 302
    assert not Memory.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_two_tries_at_once_save_one_memory(alice):
    key = str(uuid.uuid4())
    barrier = threading.Barrier(2)
    results = []

    def send():
        try:
            barrier.wait()
            results.append(offline_capture_save(owner=alice, key=key, body="Both at once"))
        finally:
            connection.close()

    threads = [threading.Thread(target=send) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(results) == 2
    assert results[0].memory.pk == results[1].memory.pk
    assert Memory.objects.filter(owner=alice, body="Both at once").count() == 1
    assert sorted(result.created for result in results) == [False, True]
