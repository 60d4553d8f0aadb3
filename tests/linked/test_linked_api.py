"""The REST API of "people decide for themselves" (SPEC §6: the paths and status codes are the contract).

Alice owns the journal and the circle Family, Bob is the person "Bob" in it with his own
account, Mallory has no access; each calls with their own owner token. Alice's agent
token gets 404 everywhere here.
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from accounts.models import TokenKind
from accounts.services import access_token_create
from agents.models import Agent
from agents.services import consent_request_create
from circles.services import circle_create, memory_share
from linked.services import LINK_REFUSED, person_link_accept, person_link_invite_create
from memories.services import ParticipantSpec, memory_create
from people.models import (
    ConsentActor,
    ConsentEvent,
    ConsentStatus,
    Person,
    PersonConsent,
    PersonLinkInvite,
    circle_audience,
)
from people.services import person_create, person_set_consent
from tests.api.conftest import ApiClient
from tests.linked.refused_links import NAMES, invites_state, links_state, refused_link_tokens

pytestmark = pytest.mark.django_db

SECRET_TITLE = "The hospital night"
SECRET_BODY = "Bob cried in the car park after the scan results."


@pytest.fixture
def bob(db):
    from accounts.services import user_signup

    return user_signup(username="bob", password="correct horse battery")


def api_for(user, kind: str = TokenKind.OWNER, agent: Agent | None = None) -> ApiClient:
    _, token = access_token_create(owner=user, kind=kind, agent=agent)
    return ApiClient(Client(), token)


@pytest.fixture
def alice_api(alice) -> ApiClient:
    return api_for(alice)


@pytest.fixture
def bob_api(bob) -> ApiClient:
    return api_for(bob)


@pytest.fixture
def mallory_api(mallory) -> ApiClient:
    return api_for(mallory)


@pytest.fixture
def agent_api(alice) -> ApiClient:
    return api_for(alice, kind=TokenKind.AGENT, agent=Agent.objects.get(owner=alice, name="Caregiver"))


@pytest.fixture
def family(alice):
    return circle_create(owner=alice, name="Family")


@pytest.fixture
def bob_person(alice) -> Person:
    return person_create(owner=alice, display_name="Bob")


@pytest.fixture
def secret(alice, bob_person, family):
    """Shared while Alice still decides for Bob: ask for it before `linked` (then only he can grant)."""
    memory = memory_create(
        owner=alice, title=SECRET_TITLE, body=SECRET_BODY, participants=[ParticipantSpec(person=bob_person)]
    )
    person_set_consent(person=bob_person, status=ConsentStatus.GRANTED, actor=alice, audience=family.audience)
    memory_share(memory=memory, circle=family, by=alice)
    person_set_consent(person=bob_person, status=ConsentStatus.PENDING, actor=alice, audience=family.audience)
    return memory


@pytest.fixture
def linked(alice, bob, bob_person) -> Person:
    _, token = person_link_invite_create(person=bob_person, by=alice)
    return person_link_accept(token=token, user=bob)


# --- people/{id}/link-invite/ --------------------------------------------------------------------


def test_owner_creates_a_link_invite_shown_once(alice_api, bob_person):
    response = alice_api.post(f"/api/v1/people/{bob_person.pk}/link-invite/")
    assert response.status_code == 201
    body = response.json()
    assert set(body) >= {"url", "token", "expires_at"}
    assert body["url"] == f"http://testserver/links/{body['token']}/"
    invite = PersonLinkInvite.objects.get(person=bob_person)
    assert invite.token_hash != body["token"]
    assert timedelta(days=13) < invite.expires_at - timezone.now() <= timedelta(days=14)


def test_link_invite_is_404_for_agent_tokens_and_strangers_and_400_when_it_cannot_be(
    alice, alice_api, agent_api, mallory_api, bob_person, linked
):
    assert agent_api.post(f"/api/v1/people/{bob_person.pk}/link-invite/").status_code == 404
    assert mallory_api.post(f"/api/v1/people/{bob_person.pk}/link-invite/").status_code == 404
    already = alice_api.post(f"/api/v1/people/{linked.pk}/link-invite/")
    assert already.status_code == 400 and "already linked" in json.dumps(already.json())
    me = Person.objects.get(owner=alice, is_self=True)
    assert alice_api.post(f"/api/v1/people/{me.pk}/link-invite/").status_code == 400
    assert PersonLinkInvite.objects.filter(person=bob_person).count() == 1  # the fixture's, used


# --- links/{token}/accept/ --------------------------------------------------------------------------


def test_accepting_links_and_answers_the_person_and_the_owner(alice, bob, bob_api, bob_person):
    _, token = person_link_invite_create(person=bob_person, by=alice)
    response = bob_api.post(f"/api/v1/links/{token}/accept/")
    assert response.status_code == 201
    assert response.json() == {"person": str(bob_person.pk), "display_name": "Bob", "owner": "alice"}
    bob_person.refresh_from_db()
    assert bob_person.linked_user == bob


def test_every_refused_token_is_one_404_naming_nobody_and_changes_nothing(alice, bob, mallory, agent_api):
    """Unknown, expired, withdrawn, replaced, used, a second invitation after linking, unlinking
    or account deletion, a person linked meanwhile, one's own journal: one answer (SPEC §4)."""
    cases = refused_link_tokens(alice=alice, bob=bob, mallory=mallory)
    apis = {user.pk: api_for(user) for user in (alice, mallory)}
    invites, links = invites_state(), links_state()
    unknown = apis[mallory.pk].post(f"/api/v1/links/{cases['unknown'].token}/accept/")
    assert unknown.status_code == 404 and unknown.json() == {"detail": LINK_REFUSED}
    for case, refused in cases.items():
        response = apis[refused.user.pk].post(f"/api/v1/links/{refused.token}/accept/")
        assert (response.status_code, response.json()) == (unknown.status_code, unknown.json()), case
        body = response.content.decode()
        assert not [name for name in NAMES if name in body], case
    assert agent_api.post(f"/api/v1/links/{cases['own journal'].token}/accept/").status_code == 404
    assert (invites_state(), links_state()) == (invites, links)


def test_a_new_invite_replaces_the_open_one(alice_api, bob_api, bob_person):
    first = alice_api.post(f"/api/v1/people/{bob_person.pk}/link-invite/").json()
    second = alice_api.post(f"/api/v1/people/{bob_person.pk}/link-invite/").json()
    assert bob_api.post(f"/api/v1/links/{first['token']}/accept/").json() == {"detail": LINK_REFUSED}
    assert bob_api.post(f"/api/v1/links/{second['token']}/accept/").status_code == 201


# --- people/{id}/link/ DELETE -----------------------------------------------------------------------


def test_the_owner_unlinks_with_the_persons_id(alice_api, bob, linked):
    person_set_consent(person=linked, status=ConsentStatus.GRANTED, actor=bob, actor_kind=ConsentActor.SELF)
    assert alice_api.delete(f"/api/v1/people/{linked.pk}/link/").status_code == 204
    linked.refresh_from_db()
    assert linked.linked_user is None and linked.consent_status == ConsentStatus.GRANTED
    again = alice_api.delete(f"/api/v1/people/{linked.pk}/link/")
    assert again.status_code == 409 and "not linked" in again.json()["detail"]


def test_the_linked_person_unlinks_with_the_same_id(bob_api, linked):
    assert bob_api.delete(f"/api/v1/people/{linked.pk}/link/").status_code == 204
    linked.refresh_from_db()
    assert linked.linked_user is None
    # No longer linked: for Bob the person does not exist any more.
    assert bob_api.delete(f"/api/v1/people/{linked.pk}/link/").status_code == 404


def test_nobody_else_unlinks(mallory_api, agent_api, linked, bob):
    assert mallory_api.delete(f"/api/v1/people/{linked.pk}/link/").status_code == 404
    assert agent_api.delete(f"/api/v1/people/{linked.pk}/link/").status_code == 404
    linked.refresh_from_db()
    assert linked.linked_user == bob


# --- me/consents/ ------------------------------------------------------------------------------------


def test_my_consents_lists_journals_people_and_audiences_with_counts_only(
    alice, bob_api, family, secret, linked
):
    consent_request_create(owner=alice, person=linked, agent=Agent.objects.get(owner=alice, name="Caregiver"))
    response = bob_api.get("/api/v1/me/consents/")
    assert response.status_code == 200
    raw = response.content.decode()
    assert SECRET_TITLE not in raw and SECRET_BODY not in raw and "scan" not in raw
    [journal] = response.json()["results"]
    assert journal["owner"] == "alice"
    [entry] = journal["people"]
    assert entry["person"] == str(linked.pk) and entry["display_name"] == "Bob"
    by_audience = {row["audience"]: row for row in entry["audiences"]}
    assert set(by_audience) == {"agents", family.audience}
    assert by_audience["agents"]["label"] == "alice's agents"
    assert by_audience[family.audience]["label"] == "Family"
    assert by_audience["agents"]["memory_count"] == 1 and by_audience[family.audience]["memory_count"] == 1
    assert by_audience["agents"]["status"] == "pending"
    [request] = entry["consent_requests"]
    assert request["agent"] == "Caregiver" and "Bob" in request["reason"]


def test_my_consents_is_empty_for_someone_nobody_links(mallory_api, linked):
    response = mallory_api.get("/api/v1/me/consents/")
    assert response.status_code == 200 and response.json() == {"results": []}


def test_the_linked_person_decides_through_the_api(alice, bob, bob_api, linked, family):
    response = bob_api.post(
        "/api/v1/me/consents/",
        {
            "person": str(linked.pk),
            "audience": family.audience,
            "status": "granted",
            "reason": "Family is fine",
        },
    )
    assert response.status_code == 200
    body = response.json()
    assert body["consent"]["status"] == "granted" and body["consent"]["updated_by"] == "self"
    assert body["event"]["new_status"] == "granted" and body["event"]["surface"] == "api"
    consent = PersonConsent.objects.get(person=linked, audience=family.audience)
    assert (consent.status, consent.updated_by, consent.reason) == ("granted", "self", "Family is fine")
    event = ConsentEvent.objects.filter(person=linked).first()
    assert (event.actor, event.actor_kind) == (bob, ConsentActor.SELF)
    # Unchanged: 200 with a null event.
    again = bob_api.post(
        "/api/v1/me/consents/", {"person": str(linked.pk), "audience": family.audience, "status": "granted"}
    )
    assert again.status_code == 200 and again.json()["event"] is None


def test_my_consents_post_404_for_a_person_not_linked_to_you_and_400_for_a_foreign_audience(
    alice, bob_api, mallory, mallory_api, agent_api, linked, bob_person
):
    stranger = person_create(owner=alice, display_name="Dana")
    for api, person in ((bob_api, stranger), (mallory_api, linked)):
        response = api.post(
            "/api/v1/me/consents/", {"person": str(person.pk), "audience": "agents", "status": "granted"}
        )
        assert response.status_code == 404
    assert agent_api.get("/api/v1/me/consents/").status_code == 404
    strangers = circle_create(owner=mallory, name="Strangers")
    for audience in (circle_audience(strangers.pk), "everyone", "circle:not-a-uuid"):
        response = bob_api.post(
            "/api/v1/me/consents/", {"person": str(linked.pk), "audience": audience, "status": "granted"}
        )
        assert response.status_code == 400, audience
        assert "audience" in response.json()
    bad_status = bob_api.post(
        "/api/v1/me/consents/", {"person": str(linked.pk), "audience": "agents", "status": "yes"}
    )
    assert bad_status.status_code == 400
    assert not ConsentEvent.objects.filter(person__in=[linked, stranger]).exists()


# --- the owner cannot grant for a linked person -------------------------------------------------------


def test_the_owner_cannot_grant_a_linked_person_403_with_a_clear_message(alice_api, linked, family):
    for url, payload in (
        (f"/api/v1/people/{linked.pk}/consent/", {"status": "granted"}),
        (f"/api/v1/people/{linked.pk}/consents/", {"audience": "agents", "status": "granted"}),
        (f"/api/v1/people/{linked.pk}/consents/", {"audience": family.audience, "status": "granted"}),
    ):
        response = alice_api.post(url, payload)
        assert response.status_code == 403, url
        assert "Bob decides their own consent" in response.json()["detail"]
    linked.refresh_from_db()
    assert linked.consent_status == ConsentStatus.PENDING
    assert not ConsentEvent.objects.filter(person=linked).exists()


def test_the_owner_may_still_revoke_or_reset_a_linked_person(alice_api, bob, linked, family):
    person_set_consent(person=linked, status=ConsentStatus.GRANTED, actor=bob, actor_kind=ConsentActor.SELF)
    assert alice_api.post(f"/api/v1/people/{linked.pk}/consent/", {"status": "revoked"}).status_code == 200
    response = alice_api.post(
        f"/api/v1/people/{linked.pk}/consents/", {"audience": family.audience, "status": "revoked"}
    )
    assert response.status_code == 200
    linked.refresh_from_db()
    assert linked.consent_status == ConsentStatus.REVOKED
