"""The owner's consent requests: a header badge and a section of the inbox that says nothing was sent."""

from __future__ import annotations

import pytest
from django.urls import reverse

from agents.models import Agent, ConsentRequest, ConsentRequestStatus
from agents.services import consent_request_create
from memories.services import ParticipantSpec, memory_create
from people.models import ConsentStatus
from people.services import person_create, person_set_consent

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def bob_request(alice):
    bob = person_create(owner=alice, display_name="Bob")
    memory_create(owner=alice, body="Bob taught me chess.", participants=[ParticipantSpec(person=bob)])
    caregiver = Agent.objects.get(owner=alice, name="Caregiver")
    return consent_request_create(owner=alice, person=bob, agent=caregiver, conversation=None)


def test_header_badge_counts_requests_waiting_for_the_owner(alice_client, bob_request):
    page = alice_client.get(reverse("timeline")).content.decode()
    assert 'id="consent-requests-badge"' in page
    assert 'aria-label="1 consent request waiting for you">1</span>' in page


def test_no_badge_without_requests_or_for_someone_else(alice_client, mallory_client, alice, bob_request):
    assert 'id="consent-requests-badge"' not in mallory_client.get(reverse("timeline")).content.decode()
    person_set_consent(person=bob_request.person, status=ConsentStatus.GRANTED, actor=alice)
    # Bob consented since: the request is moot, no badge.
    assert 'id="consent-requests-badge"' not in alice_client.get(reverse("timeline")).content.decode()


@pytest.mark.parametrize("htmx", [False, True])
def test_inbox_lists_the_request_and_says_it_was_not_sent(alice_client, bob_request, htmx):
    response = alice_client.get(reverse("inbox"), **(HX if htmx else {}))
    html = response.content.decode()
    assert response.status_code == 200
    assert ("<html" in html) is (not htmx)
    assert "Bob" in html
    assert "Keepsake does not send it to the person" in html
    assert "Bob has not been told" in html
    assert reverse("consent_request_approve", args=[bob_request.pk]) in html


def test_someone_elses_inbox_shows_none_of_the_owners_requests(mallory_client, bob_request):
    html = mallory_client.get(reverse("inbox")).content.decode()
    assert "Bob" not in html
    assert "No consent requests waiting." in html


def test_dismissing_from_the_inbox_returns_to_the_inbox(alice_client, bob_request):
    response = alice_client.post(
        reverse("consent_request_dismiss", args=[bob_request.pk]), {"next": reverse("inbox")}
    )
    assert response.status_code == 302 and response["Location"] == reverse("inbox")
    bob_request.refresh_from_db()
    assert bob_request.status == ConsentRequestStatus.DISMISSED
    assert 'id="consent-requests-badge"' not in alice_client.get(reverse("timeline")).content.decode()


def test_next_elsewhere_is_ignored(alice_client, bob_request):
    response = alice_client.post(
        reverse("consent_request_dismiss", args=[bob_request.pk]), {"next": "https://evil.example/"}
    )
    assert response["Location"] == reverse("person_detail", args=[bob_request.person.pk])
    assert ConsentRequest.objects.filter(pk=bob_request.pk, status=ConsentRequestStatus.DISMISSED).exists()
