from __future__ import annotations

import pytest
from django.urls import reverse

from memories.services import ParticipantSpec, memory_create
from people.models import ConsentEvent, ConsentStatus, Person
from people.services import person_create, person_set_consent

HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def bob(alice):
    return person_create(owner=alice, display_name="Bob", aliases=["Bobby"])


@pytest.mark.parametrize("htmx", [False, True])
def test_people_list_shows_consent_and_memory_counts(alice_client, alice, bob, htmx):
    memory_create(owner=alice, body="Chess with Bob", participants=[ParticipantSpec(person=bob)])
    response = alice_client.get(reverse("person_list"), **(HX if htmx else {}))
    assert response.status_code == 200
    html = response.content.decode()
    assert "Bob" in html and "Self" in html
    assert 'class="badge consent-pending"' in html
    assert 'class="badge consent-granted"' in html  # Self
    assert '<td class="num">1</td>' in html
    # The htmx request gets the table fragment alone; the page gets the whole layout.
    assert ("<html" in html) is (not htmx)
    assert ('id="people-table"' in html) is True


def test_people_list_shows_only_the_owners_people(mallory_client, bob):
    html = mallory_client.get(reverse("person_list")).content.decode()
    assert "Bob" not in html


def test_add_person_starts_pending(alice_client, alice):
    response = alice_client.post(
        reverse("person_create"),
        {
            "display_name": "  Grandma   Rose ",
            "aliases": "Rose, Nana,, ",
            "kind": "human",
            "notes": "Loves tulips",
        },
    )
    person = Person.objects.get(owner=alice, display_name="Grandma Rose")
    assert response.status_code == 302
    assert response["Location"] == reverse("person_detail", args=[person.pk])
    assert person.consent_status == ConsentStatus.PENDING
    assert person.aliases == ["Rose", "Nana"]
    assert person.notes == "Loves tulips"


def test_add_person_without_a_name_shows_error_and_saves_nothing(alice_client, alice):
    response = alice_client.post(reverse("person_create"), {"display_name": "   ", "kind": "human"})
    assert response.status_code == 200
    assert "A name is required." in response.content.decode()
    assert not Person.objects.filter(owner=alice, is_self=False).exists()


def test_add_person_with_unknown_kind_shows_error(alice_client, alice):
    response = alice_client.post(reverse("person_create"), {"display_name": "Rex", "kind": "dragon"})
    assert response.status_code == 200
    assert "Select a valid choice" in response.content.decode()
    assert not Person.objects.filter(owner=alice, display_name="Rex").exists()


@pytest.mark.parametrize("htmx", [False, True])
def test_person_page_shows_details_memories_and_consent(alice_client, alice, bob, htmx):
    memory_create(owner=alice, body="Chess with Bob in the park", participants=[ParticipantSpec(person=bob)])
    person_set_consent(person=bob, status="revoked", actor=alice, reason="he asked me to stop")
    response = alice_client.get(reverse("person_detail", args=[bob.pk]), **(HX if htmx else {}))
    assert response.status_code == 200
    html = response.content.decode()
    assert 'id="consent-panel"' in html
    assert "he asked me to stop" in html  # consent history
    if htmx:
        assert "<html" not in html
    else:
        assert "Bobby" in html  # aliases
        assert "Chess with Bob in the park" in html


def test_consent_toggle_over_htmx_swaps_panel_and_appends_event(alice_client, alice, bob):
    memory = memory_create(owner=alice, body="Chess with Bob", participants=[ParticipantSpec(person=bob)])
    response = alice_client.post(
        reverse("person_consent", args=[bob.pk]), {"status": "granted", "reason": "said yes at lunch"}, **HX
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert "<html" not in html
    assert html.lstrip().startswith('<section id="consent-panel"')
    assert "said yes at lunch" in html
    # The memories section comes along out of band, now without the badge.
    assert 'id="person-memories" class="person-memories" hx-swap-oob="true"' in html
    assert f'id="memory-{memory.pk}"' in html
    assert "Hidden from agents" not in html
    bob.refresh_from_db()
    assert bob.consent_status == ConsentStatus.GRANTED
    event = ConsentEvent.objects.get(person=bob)
    assert (event.old_status, event.new_status, event.surface, event.actor, event.reason) == (
        "pending",
        "granted",
        "ui",
        alice,
        "said yes at lunch",
    )


def test_consent_toggle_without_javascript_redirects_back_with_message(alice_client, alice, bob):
    response = alice_client.post(reverse("person_consent", args=[bob.pk]), {"status": "revoked"}, follow=True)
    assert response.redirect_chain == [(reverse("person_detail", args=[bob.pk]), 302)]
    assert "consent is now revoked." in response.content.decode()
    bob.refresh_from_db()
    assert bob.consent_status == ConsentStatus.REVOKED


def test_consent_toggle_to_same_status_records_nothing(alice_client, bob):
    alice_client.post(reverse("person_consent", args=[bob.pk]), {"status": "pending"}, **HX)
    assert not ConsentEvent.objects.filter(person=bob).exists()


@pytest.mark.parametrize("htmx", [False, True])
def test_consent_toggle_with_bad_status_shows_error_and_changes_nothing(alice_client, bob, htmx):
    response = alice_client.post(
        reverse("person_consent", args=[bob.pk]), {"status": "maybe"}, **(HX if htmx else {})
    )
    assert response.status_code == 200
    assert "Choose granted, pending or revoked." in response.content.decode()
    bob.refresh_from_db()
    assert bob.consent_status == ConsentStatus.PENDING
    assert not ConsentEvent.objects.filter(person=bob).exists()


def test_consent_reason_too_long_is_refused(alice_client, bob):
    response = alice_client.post(
        reverse("person_consent", args=[bob.pk]), {"status": "granted", "reason": "x" * 501}
    )
    assert response.status_code == 200
    assert "at most 500 characters" in response.content.decode()
    bob.refresh_from_db()
    assert bob.consent_status == ConsentStatus.PENDING


def test_consent_toggle_needs_post(alice_client, bob):
    assert alice_client.get(reverse("person_consent", args=[bob.pk])).status_code == 405


@pytest.mark.parametrize("htmx", [False, True])
def test_edit_person_page_renders_prefilled(alice_client, bob, htmx):
    response = alice_client.get(reverse("person_edit", args=[bob.pk]), **(HX if htmx else {}))
    assert response.status_code == 200
    assert 'value="Bobby"' in response.content.decode()


def test_edit_person_saves_details_but_never_consent(alice_client, bob):
    response = alice_client.post(
        reverse("person_edit", args=[bob.pk]),
        {
            "display_name": "Robert",
            "aliases": "Bob, Rob",
            "kind": "human",
            "notes": "",
            "consent_status": "granted",
        },
    )
    assert response.status_code == 302
    bob.refresh_from_db()
    assert (bob.display_name, bob.aliases, bob.consent_status) == ("Robert", ["Bob", "Rob"], "pending")


def test_edit_person_with_blank_name_shows_error_and_changes_nothing(alice_client, bob):
    response = alice_client.post(reverse("person_edit", args=[bob.pk]), {"display_name": "", "kind": "human"})
    assert response.status_code == 200
    assert "A name is required." in response.content.decode()
    bob.refresh_from_db()
    assert bob.display_name == "Bob"


@pytest.mark.parametrize("htmx", [False, True])
def test_delete_person_asks_for_confirmation_first(alice_client, bob, htmx):
    response = alice_client.get(reverse("person_delete", args=[bob.pk]), **(HX if htmx else {}))
    assert response.status_code == 200
    assert "Delete Bob?" in response.content.decode()
    assert Person.objects.filter(pk=bob.pk).exists()


def test_delete_person_on_post(alice_client, bob):
    response = alice_client.post(reverse("person_delete", args=[bob.pk]))
    assert response.status_code == 302
    assert response["Location"] == reverse("person_list")
    assert not Person.objects.filter(pk=bob.pk).exists()


def test_delete_person_still_in_memories_is_refused_with_reason(alice_client, alice, bob):
    memory_create(owner=alice, body="Chess with Bob", participants=[ParticipantSpec(person=bob)])
    response = alice_client.post(reverse("person_delete", args=[bob.pk]))
    assert response.status_code == 200
    assert "Bob is in 1 memory; remove them from it before deleting." in response.content.decode()
    assert Person.objects.filter(pk=bob.pk).exists()


def test_self_cannot_be_deleted(alice_client, alice):
    me = Person.objects.get(owner=alice, is_self=True)
    response = alice_client.post(reverse("person_delete", args=[me.pk]))
    assert response.status_code == 200
    assert "cannot be deleted" in response.content.decode()
    assert Person.objects.filter(pk=me.pk).exists()


# --- Owner scoping: Alice's people do not exist for Mallory ---------------------------------


@pytest.mark.parametrize(
    ("method", "name", "data"),
    [
        ("get", "person_detail", None),
        ("get", "person_edit", None),
        ("post", "person_edit", {"display_name": "Pwned", "kind": "human"}),
        ("get", "person_delete", None),
        ("post", "person_delete", {}),
        ("post", "person_consent", {"status": "granted", "reason": "mallory says so"}),
    ],
)
@pytest.mark.parametrize("htmx", [False, True])
def test_another_owners_person_answers_404_and_nothing_changes(
    mallory_client, alice, bob, method, name, data, htmx
):
    url = reverse(name, args=[bob.pk])
    call = getattr(mallory_client, method)
    response = (
        call(url, data, **(HX if htmx else {})) if data is not None else call(url, **(HX if htmx else {}))
    )
    assert response.status_code == 404
    assert "Bob" not in response.content.decode()
    bob.refresh_from_db()
    assert (bob.display_name, bob.consent_status) == ("Bob", ConsentStatus.PENDING)
    assert not ConsentEvent.objects.filter(person=bob).exists()


def test_unknown_person_id_answers_404(alice_client):
    response = alice_client.get("/people/00000000-0000-0000-0000-000000000000/")
    assert response.status_code == 404
