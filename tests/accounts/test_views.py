from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse

from agents.models import Agent
from people.models import ConsentStatus, Person

User = get_user_model()


@pytest.mark.parametrize("htmx", [False, True])
@pytest.mark.parametrize("name", ["signup", "login"])
def test_account_pages_render_for_visitors(client, db, name, htmx):
    headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
    response = client.get(reverse(name), **headers)
    assert response.status_code == 200
    assert b'name="username"' in response.content


def test_signup_creates_account_with_self_and_builtin_agents_and_logs_in(client, db):
    response = client.post(
        reverse("signup"),
        {
            "username": "carol",
            "email": "",
            "password1": "a sturdy passphrase",
            "password2": "a sturdy passphrase",
        },
    )
    assert response.status_code == 302
    assert response["Location"] == reverse("timeline")
    carol = User.objects.get(username="carol")
    me = Person.objects.get(owner=carol, is_self=True)
    assert me.consent_status == ConsentStatus.GRANTED
    assert sorted(Agent.objects.filter(owner=carol).values_list("role", flat=True)) == [
        "brainstorm",
        "caregiver",
        "reviewer",
        "tutor",
    ]
    # Logged in: the timeline answers instead of redirecting to the login page.
    assert client.get(reverse("timeline")).status_code == 200


def test_signup_with_mismatched_passwords_shows_error_and_creates_nothing(client, db):
    response = client.post(
        reverse("signup"),
        {"username": "carol", "password1": "a sturdy passphrase", "password2": "another passphrase"},
    )
    assert response.status_code == 200
    assert "The two password fields didn’t match." in response.content.decode()
    assert not User.objects.filter(username="carol").exists()
    assert not Person.objects.exists()


def test_signup_refuses_a_taken_username(client, alice):
    response = client.post(
        reverse("signup"),
        {"username": "alice", "password1": "a sturdy passphrase", "password2": "a sturdy passphrase"},
    )
    assert response.status_code == 200
    assert "already exists" in response.content.decode()
    assert User.objects.filter(username="alice").count() == 1


def test_signup_refuses_a_weak_password(client, db):
    response = client.post(reverse("signup"), {"username": "carol", "password1": "123", "password2": "123"})
    assert response.status_code == 200
    assert "too short" in response.content.decode()
    assert not User.objects.filter(username="carol").exists()


def test_login_with_right_password_reaches_timeline(client, alice):
    response = client.post(reverse("login"), {"username": "alice", "password": "correct horse battery"})
    assert response.status_code == 302
    assert response["Location"] == reverse("timeline")


def test_login_with_wrong_password_shows_error(client, alice):
    response = client.post(reverse("login"), {"username": "alice", "password": "wrong"})
    assert response.status_code == 200
    assert "Please enter a correct username and password" in response.content.decode()
    assert "_auth_user_id" not in client.session


def test_logout_is_a_post_and_ends_the_session(alice_client):
    assert alice_client.get(reverse("logout")).status_code == 405
    response = alice_client.post(reverse("logout"))
    assert response.status_code == 302
    assert alice_client.get(reverse("timeline")).status_code == 302


@pytest.mark.parametrize("htmx", [False, True])
def test_password_change_page_renders(alice_client, htmx):
    headers = {"HTTP_HX_REQUEST": "true"} if htmx else {}
    response = alice_client.get(reverse("password_change"), **headers)
    assert response.status_code == 200
    assert b'name="old_password"' in response.content


def test_password_change_replaces_the_password(alice_client, alice):
    response = alice_client.post(
        reverse("password_change"),
        {
            "old_password": "correct horse battery",
            "new_password1": "a brand new passphrase",
            "new_password2": "a brand new passphrase",
        },
    )
    assert response.status_code == 302
    assert response["Location"] == reverse("password_change_done")
    alice.refresh_from_db()
    assert alice.check_password("a brand new passphrase")
    assert alice_client.get(reverse("password_change_done")).status_code == 200


def test_password_change_with_wrong_old_password_changes_nothing(alice_client, alice):
    response = alice_client.post(
        reverse("password_change"),
        {
            "old_password": "nope",
            "new_password1": "a brand new passphrase",
            "new_password2": "a brand new passphrase",
        },
    )
    assert response.status_code == 200
    assert "Your old password was entered incorrectly" in response.content.decode()
    alice.refresh_from_db()
    assert alice.check_password("correct horse battery")


@pytest.mark.parametrize(
    "url",
    ["/", "/people/", "/accounts/password/", "/people/00000000-0000-0000-0000-000000000000/"],
)
def test_pages_send_visitors_to_log_in(client, db, url):
    response = client.get(url)
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login") + "?next=")


def test_nav_links_the_signed_in_pages_and_logs_out_by_post(alice_client):
    html = alice_client.get(reverse("timeline")).content.decode()
    for name in ("timeline", "person_list", "settings", "password_change"):
        assert f'href="{reverse(name)}"' in html
    assert f'<form method="post" action="{reverse("logout")}"' in html


def test_signed_in_user_visiting_signup_goes_to_timeline(alice_client):
    response = alice_client.get(reverse("signup"))
    assert response.status_code == 302
    assert response["Location"] == reverse("timeline")
