"""Settings → Access tokens: create (shown once), list with last use, revoke with confirmation."""

from __future__ import annotations

import re

import pytest
from django.utils import timezone

from accounts.models import AccessToken, TokenKind
from accounts.services import access_token_create
from agents.models import Agent

pytestmark = pytest.mark.django_db

PAGE = "/settings/tokens/"
TOKEN_RE = re.compile(r"ks_[0-9a-f]{8}_[A-Za-z0-9_-]{20,}")


def caregiver(owner) -> Agent:
    return Agent.objects.get(owner=owner, name="Caregiver")


def test_the_page_needs_a_signed_in_owner(client, db):
    response = client.get(PAGE)
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/")


@pytest.mark.parametrize("htmx", [False, True])
def test_the_page_lists_only_my_tokens_and_links_the_api_docs(alice_client, alice, mallory, htmx):
    access_token_create(owner=alice, kind=TokenKind.OWNER, name="Laptop scripts")
    access_token_create(owner=alice, kind=TokenKind.AGENT, agent=caregiver(alice), name="Claude Desktop")
    access_token_create(owner=mallory, kind=TokenKind.OWNER, name="Mallory's script")
    headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
    response = alice_client.get(PAGE, **headers)
    assert response.status_code == 200
    page = response.content.decode()
    assert "Laptop scripts" in page and "Claude Desktop" in page
    assert "Mallory" not in page
    assert ("<html" in page) is not htmx
    if not htmx:
        assert 'href="/api/docs/"' in page
    assert not TOKEN_RE.search(page)  # no secret is ever listed


def test_settings_page_and_header_link_to_the_tokens_page(alice_client):
    settings_page = alice_client.get("/settings/").content.decode()
    assert f'href="{PAGE}"' in settings_page
    tokens_page = alice_client.get(PAGE).content.decode()
    # The header's Settings link leads here too, and says where you are.
    assert re.search(r'<a href="/settings/"[^>]*aria-current="page">Settings</a>', tokens_page)


def test_creating_an_owner_token_shows_its_secret_once(alice_client, alice):
    response = alice_client.post(PAGE, {"name": "Laptop scripts", "acts_as": "owner"})
    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]
    page = response.content.decode()
    assert "Copy your new token now" in page
    raw = TOKEN_RE.search(page).group(0)
    token = AccessToken.objects.get(owner=alice)
    assert (token.kind, token.agent, token.name) == (TokenKind.OWNER, None, "Laptop scripts")
    assert raw.startswith(f"ks_{token.prefix}_")
    assert 'data-copy-target="#new-token"' in page
    # It works, and the page never shows it again.
    api = alice_client.get("/api/v1/memories/", HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert api.status_code == 200
    again = alice_client.get(PAGE).content.decode()
    assert raw not in again
    assert f"ks_{token.prefix}_…" in again


def test_creating_an_agent_token_binds_it_to_my_agent(alice_client, alice):
    agent = caregiver(alice)
    page = alice_client.post(PAGE, {"name": "", "acts_as": str(agent.pk)}).content.decode()
    token = AccessToken.objects.get(owner=alice)
    assert (token.kind, token.agent) == (TokenKind.AGENT, agent)
    assert "Acts as <strong>Caregiver</strong>" in page
    assert "/mcp/" in page


def test_an_agent_of_another_owner_cannot_be_chosen(alice_client, alice, mallory):
    response = alice_client.post(PAGE, {"name": "sneaky", "acts_as": str(caregiver(mallory).pk)})
    assert response.status_code == 200
    assert "Select a valid choice" in response.content.decode()
    assert not AccessToken.objects.exists()


def test_creating_with_htmx_swaps_in_the_panel_with_the_secret(alice_client, alice):
    response = alice_client.post(PAGE, {"name": "hx", "acts_as": "owner"}, HTTP_HX_REQUEST="true")
    page = response.content.decode()
    assert "<html" not in page
    assert page.lstrip().startswith('<div id="tokens-panel"')
    assert TOKEN_RE.search(page)
    assert AccessToken.objects.filter(owner=alice, name="hx").count() == 1


@pytest.mark.parametrize("htmx", [False, True])
def test_revoking_asks_first_then_revokes(alice_client, alice, htmx):
    token, raw = access_token_create(owner=alice, kind=TokenKind.OWNER, name="Old laptop")
    headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
    url = f"{PAGE}{token.pk}/revoke/"
    confirm = alice_client.get(url, **headers)
    assert confirm.status_code == 200
    assert "Revoke Old laptop?" in confirm.content.decode()
    token.refresh_from_db()
    assert token.is_active  # asking changes nothing
    done = alice_client.post(url, **headers)
    if htmx:
        assert done["HX-Redirect"] == PAGE
    else:
        assert done.status_code == 302 and done["Location"] == PAGE
    token.refresh_from_db()
    assert token.revoked_at is not None
    assert alice_client.get("/api/v1/memories/", HTTP_AUTHORIZATION=f"Bearer {raw}").status_code == 401
    page = alice_client.get(PAGE).content.decode()
    assert "Revoked Old laptop" in page  # the message
    assert "Revoked tokens (1)" in page
    assert f'href="{url}"' not in page


def test_another_users_token_cannot_be_revoked(mallory_client, alice):
    token, _ = access_token_create(owner=alice, kind=TokenKind.OWNER, name="Alice's")
    url = f"{PAGE}{token.pk}/revoke/"
    assert mallory_client.get(url).status_code == 404
    assert mallory_client.post(url).status_code == 404
    token.refresh_from_db()
    assert token.revoked_at is None


def test_last_use_is_shown_after_an_api_call(alice_client, alice):
    token, raw = access_token_create(owner=alice, kind=TokenKind.OWNER, name="Script")
    row = re.compile(rf'<tr id="token-{token.pk}">.*?</tr>', re.S)
    before = row.search(alice_client.get(PAGE).content.decode()).group(0)
    assert "Never" in before
    assert alice_client.get("/api/v1/people/", HTTP_AUTHORIZATION=f"Bearer {raw}").status_code == 200
    token.refresh_from_db()
    assert token.last_used_at is not None
    after = row.search(alice_client.get(PAGE).content.decode()).group(0)
    assert "Never" not in after
    shown = timezone.localtime(token.last_used_at).strftime("%-d %b %Y, %H:%M")
    assert shown in after
