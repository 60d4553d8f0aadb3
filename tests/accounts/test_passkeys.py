"""Passkeys: the server's rules.

The ceremonies themselves run in chromium (tests/browser/test_account_security.py).
"""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from accounts.models import Passkey
from accounts.passkeys import user_handle
from accounts.sessions import SignedInSession

pytestmark = pytest.mark.django_db


def _post_json(client, name: str, body: object):
    return client.post(reverse(name), data=json.dumps(body), content_type="application/json")


def _passkey(owner, credential_id: bytes = b"\x01" * 16, name: str = "Laptop") -> Passkey:
    return Passkey.objects.create(
        owner=owner, name=name, credential_id=credential_id, public_key=b"\x02" * 77
    )


def test_registration_asks_for_a_discoverable_verified_passkey_and_excludes_the_ones_there(
    alice, alice_client
):
    _passkey(alice)
    response = alice_client.post(reverse("passkey_register_options"))
    assert response.status_code == 200
    options = response.json()
    assert options["rp"] == {"id": "testserver", "name": "Keepsake"}
    assert options["authenticatorSelection"]["residentKey"] == "required"
    assert options["authenticatorSelection"]["userVerification"] == "required"
    assert options["excludeCredentials"][0]["id"] == "AQEBAQEBAQEBAQEBAQEBAQ"
    assert options["user"]["name"] == "alice"
    assert "alice" not in options["user"]["id"]
    assert "no-store" in response["Cache-Control"]


def test_the_user_handle_is_stable_and_differs_between_accounts(alice, mallory):
    assert user_handle(user=alice) == user_handle(user=alice)
    assert user_handle(user=alice) != user_handle(user=mallory)
    assert b"alice" not in user_handle(user=alice)


def test_registration_and_its_options_need_a_signed_in_person(client, db):
    assert client.post(reverse("passkey_register_options")).status_code == 302
    assert _post_json(client, "passkey_register", {"name": "x", "credential": {}}).status_code == 302


def test_a_registration_without_a_name_or_without_its_challenge_is_refused(alice, alice_client):
    alice_client.post(reverse("passkey_register_options"))
    response = _post_json(alice_client, "passkey_register", {"name": "  ", "credential": {"id": "x"}})
    assert response.status_code == 400 and "name" in response.json()["error"]
    # No options asked for (or used up): refused, nothing stored.
    response = _post_json(alice_client, "passkey_register", {"name": "Laptop", "credential": {"id": "x"}})
    assert response.status_code == 400 and "expired" in response.json()["error"]
    assert not Passkey.objects.exists()


def test_a_forged_registration_is_refused_and_its_challenge_spent(alice, alice_client):
    alice_client.post(reverse("passkey_register_options"))
    forged = {"id": "AQID", "rawId": "AQID", "type": "public-key", "response": {"clientDataJSON": "e30"}}
    response = _post_json(alice_client, "passkey_register", {"name": "Laptop", "credential": forged})
    assert response.status_code == 400 and "could not be checked" in response.json()["error"]
    response = _post_json(alice_client, "passkey_register", {"name": "Laptop", "credential": forged})
    assert "expired" in response.json()["error"]
    assert not Passkey.objects.exists()


def test_signing_in_asks_for_any_passkey_of_this_site_with_user_verification(client, db):
    response = client.post(reverse("passkey_login_options"))
    assert response.status_code == 200
    options = response.json()
    assert options["rpId"] == "testserver"
    assert options["userVerification"] == "required"
    assert options.get("allowCredentials", []) == []
    assert client.get(reverse("passkey_login_options")).status_code == 405


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b"[1, 2]",
        b'{"credential": null}',
        b'{"credential": {"rawId": 12}}',
        b'{"credential": {"rawId": "%%%"}}',
        b"\xff\xfe",
        b'{"credential": {"rawId": "AQEB", "response": "x"}}',
        b'{"credential": {"rawId": "AQEB", "response": {"userHandle": "%%"}}}',
        b'{"credential": "{\\"rawId\\": [1]}"}',
    ],
)
def test_a_malformed_passkey_sign_in_is_a_400_never_a_500(client, db, body):
    client.post(reverse("passkey_login_options"))
    response = client.post(reverse("passkey_login"), data=body, content_type="application/json")
    assert response.status_code == 400
    assert "error" in response.json()


def test_an_unknown_passkey_signs_nobody_in(alice, client):
    _passkey(alice)
    client.post(reverse("passkey_login_options"))
    response = _post_json(client, "passkey_login", {"credential": {"id": "AgICAg", "rawId": "AgICAg"}})
    assert response.status_code == 400 and "not registered" in response.json()["error"]
    assert client.get(reverse("timeline")).status_code == 302


def test_a_known_passkey_with_a_bad_signature_signs_nobody_in(alice, client):
    _passkey(alice)
    client.post(reverse("passkey_login_options"))
    credential = {
        "id": "AQEBAQEBAQEBAQEBAQEBAQ",
        "rawId": "AQEBAQEBAQEBAQEBAQEBAQ",
        "type": "public-key",
        "response": {
            "clientDataJSON": "e30",
            "authenticatorData": "AA",
            "signature": "AA",
            "userHandle": None,
        },
    }
    response = _post_json(client, "passkey_login", {"credential": credential})
    assert response.status_code == 400
    assert client.get(reverse("timeline")).status_code == 302
    assert not SignedInSession.objects.exists()


def test_a_passkey_presented_for_another_account_is_refused(alice, mallory, client):
    _passkey(alice)
    client.post(reverse("passkey_login_options"))
    from webauthn.helpers import bytes_to_base64url

    credential = {
        "id": "AQEBAQEBAQEBAQEBAQEBAQ",
        "rawId": "AQEBAQEBAQEBAQEBAQEBAQ",
        "type": "public-key",
        "response": {"userHandle": bytes_to_base64url(user_handle(user=mallory))},
    }
    response = _post_json(client, "passkey_login", {"credential": credential})
    assert response.status_code == 400


def test_another_persons_passkey_cannot_be_deleted(alice, mallory, mallory_client):
    passkey = _passkey(alice)
    assert mallory_client.get(reverse("passkey_delete", args=[passkey.pk])).status_code == 404
    assert mallory_client.post(reverse("passkey_delete", args=[passkey.pk])).status_code == 404
    assert Passkey.objects.filter(pk=passkey.pk).exists()


def test_deleting_a_passkey_asks_first(alice, alice_client):
    passkey = _passkey(alice)
    page = alice_client.get(reverse("passkey_delete", args=[passkey.pk]))
    assert page.status_code == 200 and "Delete “Laptop”?" in page.content.decode()
    assert Passkey.objects.filter(pk=passkey.pk).exists()
    assert alice_client.post(reverse("passkey_delete", args=[passkey.pk])).status_code == 302
    assert not Passkey.objects.filter(pk=passkey.pk).exists()
