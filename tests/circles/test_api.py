"""The circles and sharing REST API (SPEC §6 "Sharing"): contract, isolation, consent, the access log.

Alice owns the circle "Family"; Bob is a member; Mallory has no access and her
own journal and circle. Everyone calls with an owner token, as scripts do.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import timedelta
from urllib.parse import urlsplit

import pytest
from django.test import Client
from django.urls import resolve
from django.utils import timezone

from accounts.models import TokenKind
from accounts.services import access_token_create
from agents.models import AccessLog, AccessSurface, Agent
from circles.models import Circle, CircleInvite, CircleMembership, JoinRequest, JoinRequestStatus, MemoryShare
from circles.services import circle_create, invite_accept, invite_create, memory_share
from memories.models import Memory
from memories.services import ParticipantSpec, memory_create
from people.models import ConsentStatus, Person, PersonConsent
from people.services import person_create, person_set_consent
from tests.api.conftest import ApiClient
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db

API = "/api/v1"


def _api(user, kind: str = TokenKind.OWNER, agent: Agent | None = None) -> ApiClient:
    _, token = access_token_create(owner=user, kind=kind, agent=agent)
    return ApiClient(Client(), token)


def grant(person: Person, circle, status: str = ConsentStatus.GRANTED) -> None:
    person_set_consent(person=person, status=status, actor=person.owner, audience=circle.audience)


@dataclass
class Family:
    """Alice's "Family" circle with Bob in it, what Alice shared there, and Mallory's own circle."""

    circle: object
    carol: Person
    dan: Person
    picnic: Memory  # public, Carol (granted): Bob sees it
    lake: Memory  # public, Alice alone: Bob sees it
    secret: Memory  # public, Dan (pending): shared before Dan's consent was revoked; Bob does not see it
    unshared: Memory  # public, never shared
    mallory_circle: object
    mallory_memory: Memory


@pytest.fixture
def world(alice, bob, family, mallory) -> Family:
    carol = person_create(owner=alice, display_name="Carol")
    dan = person_create(owner=alice, display_name="Dan")
    grant(carol, family)
    grant(dan, family)
    now = timezone.now()
    picnic = memory_create(
        owner=alice,
        title="Picnic",
        body="Carol brought plums to the picnic.",
        sensitivity="public",
        occurred_at=now - timedelta(days=1),
        participants=[ParticipantSpec(person=carol)],
    )
    lake = memory_create(
        owner=alice,
        title="Lake",
        body="I swam in the cold lake.",
        sensitivity="public",
        occurred_at=now - timedelta(days=2),
    )
    secret = memory_create(
        owner=alice,
        title="Dan's secret",
        body="Dan told me his secret.",
        sensitivity="public",
        occurred_at=now - timedelta(days=3),
        participants=[ParticipantSpec(person=dan)],
    )
    for memory in (picnic, lake, secret):
        memory_share(memory=memory, circle=family, by=alice)
    grant(dan, family, ConsentStatus.REVOKED)
    unshared = memory_create(owner=alice, title="Diary", body="Only mine.", sensitivity="public")
    mallory_circle = circle_create(owner=mallory, name="Mallory's gang")
    mallory_memory = memory_create(owner=mallory, title="Plan", body="Mallory's plan.", sensitivity="public")
    memory_share(memory=mallory_memory, circle=mallory_circle, by=mallory)
    return Family(
        circle=family,
        carol=carol,
        dan=dan,
        picnic=picnic,
        lake=lake,
        secret=secret,
        unshared=unshared,
        mallory_circle=mallory_circle,
        mallory_memory=mallory_memory,
    )


@pytest.fixture
def alice_api(alice) -> ApiClient:
    return _api(alice)


@pytest.fixture
def bob_api(bob) -> ApiClient:
    return _api(bob)


@pytest.fixture
def mallory_api(mallory) -> ApiClient:
    return _api(mallory)


def circle_url(circle, rest: str = "") -> str:
    return f"{API}/circles/{circle.pk}/{rest}"


# --- circles ---------------------------------------------------------------------------------------


def test_list_shows_my_circles_with_my_role_and_member_count(world, alice_api, bob_api, mallory_api):
    alice_list = alice_api.get(f"{API}/circles/").json()["results"]
    bob_list = bob_api.get(f"{API}/circles/").json()["results"]
    mallory_list = mallory_api.get(f"{API}/circles/").json()["results"]

    assert [(c["name"], c["role"], c["member_count"]) for c in alice_list] == [("Family", "owner", 2)]
    assert [(c["name"], c["role"], c["member_count"]) for c in bob_list] == [("Family", "member", 2)]
    assert bob_list[0]["owner"]["username"] == "alice"
    assert [c["name"] for c in mallory_list] == ["Mallory's gang"]


def test_create_makes_me_the_owner(alice, alice_api):
    response = alice_api.post(f"{API}/circles/", {"name": "  Care   team ", "description": "Mum's carers"})

    assert response.status_code == 201
    body = response.json()
    assert (body["name"], body["description"], body["role"], body["member_count"]) == (
        "Care team",
        "Mum's carers",
        "owner",
        1,
    )
    assert [(m["username"], m["role"]) for m in body["members"]] == [("alice", "owner")]


@pytest.mark.parametrize("payload", [{}, {"name": ""}, {"name": "   "}, {"name": "x" * 81}, ["Family"]])
def test_create_refuses_bad_input_with_a_clear_400(alice, alice_api, payload):
    response = alice_api.post(f"{API}/circles/", payload)

    assert response.status_code == 400
    assert response.json()
    assert not alice.owned_circles.exists()


def test_detail_lists_members_for_any_member(world, bob_api):
    response = bob_api.get(circle_url(world.circle))

    assert response.status_code == 200
    body = response.json()
    assert body["role"] == "member"
    assert [(m["username"], m["role"]) for m in body["members"]] == [("alice", "owner"), ("bob", "member")]


def test_owner_renames_a_member_may_not(world, alice_api, bob_api, mallory_api):
    refused = bob_api.patch(circle_url(world.circle), {"name": "Bob's"})
    hidden = mallory_api.patch(circle_url(world.circle), {"name": "Mine"})
    invalid = alice_api.patch(circle_url(world.circle), {"name": ""})
    renamed = alice_api.patch(circle_url(world.circle), {"description": "All of us"})

    assert refused.status_code == 403
    assert "Only the circle's owner" in refused.json()["detail"]
    assert hidden.status_code == 404
    assert invalid.status_code == 400 and "name" in invalid.json()
    assert renamed.status_code == 200
    assert (renamed.json()["name"], renamed.json()["description"]) == ("Family", "All of us")


def test_only_the_owner_deletes_a_circle_and_memories_stay(world, alice_api, bob_api, mallory_api):
    member = bob_api.delete(circle_url(world.circle))
    stranger = mallory_api.delete(circle_url(world.circle))

    assert member.status_code == 403
    assert "Only the circle's owner can delete it" in member.json()["detail"]
    assert stranger.status_code == 404
    assert alice_api.delete(circle_url(world.circle)).status_code == 204
    assert not MemoryShare.objects.filter(circle_id=world.circle.pk).exists()
    assert Memory.objects.filter(pk=world.picnic.pk).exists()
    assert alice_api.get(circle_url(world.circle)).status_code == 404


# --- members ------------------------------------------------------------------------------------------


def test_members_list(world, bob_api):
    response = bob_api.get(circle_url(world.circle, "members/"))

    assert response.status_code == 200
    assert [m["username"] for m in response.json()["results"]] == ["alice", "bob"]


def test_owner_removes_a_member(alice, bob, world, alice_api):
    response = alice_api.delete(circle_url(world.circle, f"members/{bob.pk}/"))

    assert response.status_code == 204
    assert not CircleMembership.objects.filter(circle=world.circle, user=bob).exists()


def test_a_member_leaves_but_cannot_remove_others(alice, bob, world, bob_api):
    refused = bob_api.delete(circle_url(world.circle, f"members/{alice.pk}/"))
    left = bob_api.delete(circle_url(world.circle, f"members/{bob.pk}/"))

    assert refused.status_code == 403
    assert "Only the circle's owner can remove" in refused.json()["detail"]
    assert left.status_code == 204
    assert not CircleMembership.objects.filter(circle=world.circle, user=bob).exists()


def test_member_removal_edge_cases(alice, bob, mallory, world, alice_api, mallory_api):
    owner_leaving = alice_api.delete(circle_url(world.circle, f"members/{alice.pk}/"))
    not_a_member = alice_api.delete(circle_url(world.circle, f"members/{mallory.pk}/"))
    huge_id = alice_api.delete(circle_url(world.circle, f"members/{10**30}/"))
    stranger = mallory_api.delete(circle_url(world.circle, f"members/{bob.pk}/"))

    assert owner_leaving.status_code == 400
    assert "delete the circle instead" in str(owner_leaving.json())
    assert not_a_member.status_code == 404
    assert huge_id.status_code == 404
    assert stranger.status_code == 404
    assert CircleMembership.objects.filter(circle=world.circle).count() == 2


def test_a_removed_members_token_loses_access_on_the_next_request(alice, bob, world, alice_api, bob_api):
    memories_url = circle_url(world.circle, "memories/")
    memory_url = circle_url(world.circle, f"memories/{world.picnic.pk}/")
    assert bob_api.get(memories_url).status_code == 200
    assert bob_api.get(memory_url).status_code == 200

    assert alice_api.delete(circle_url(world.circle, f"members/{bob.pk}/")).status_code == 204

    for url in [circle_url(world.circle), circle_url(world.circle, "members/"), memories_url, memory_url]:
        assert bob_api.get(url).status_code == 404, url
    assert bob_api.get(f"{API}/circles/").json()["results"] == []


# --- invites and join requests ---------------------------------------------------------------------------


def test_owner_creates_an_invite_link_shown_once(world, alice_api):
    response = alice_api.post(circle_url(world.circle, "invites/"), {"days": 3})

    assert response.status_code == 201
    body = response.json()
    assert set(body) == {"id", "url", "token", "expires_at"}
    assert body["url"] == f"http://testserver/circles/invites/{body['token']}/"
    assert resolve(urlsplit(body["url"]).path).url_name == "circle_invite"  # the invite page
    invite = CircleInvite.objects.get(pk=body["id"])
    assert invite.token_hash != body["token"]
    assert timedelta(days=2) < invite.expires_at - timezone.now() <= timedelta(days=3)

    listed = alice_api.get(circle_url(world.circle, "invites/"))
    assert listed.status_code == 200
    [row] = listed.json()["results"]
    assert (row["id"], row["state"]) == (body["id"], "active")
    assert body["token"] not in listed.content.decode()
    assert "token" not in row and "url" not in row


def test_invite_defaults_to_fourteen_days_and_checks_its_length(world, alice_api):
    default = alice_api.post(circle_url(world.circle, "invites/"))
    assert default.status_code == 201
    expires = CircleInvite.objects.get(pk=default.json()["id"]).expires_at
    assert timedelta(days=13) < expires - timezone.now() <= timedelta(days=14)
    for days in [0, 91, "soon", None]:
        response = alice_api.post(circle_url(world.circle, "invites/"), {"days": days})
        assert response.status_code == 400, days
        assert "days" in response.json()
    assert CircleInvite.objects.count() == 1


def test_invites_are_the_owners_business(world, bob_api, mallory_api):
    invite = invite_create(circle=world.circle, by=world.circle.owner).invite
    for api, expected in [(bob_api, 403), (mallory_api, 404)]:
        assert api.post(circle_url(world.circle, "invites/")).status_code == expected
        assert api.get(circle_url(world.circle, "invites/")).status_code == expected
        assert api.delete(circle_url(world.circle, f"invites/{invite.pk}/")).status_code == expected
    assert CircleInvite.objects.count() == 1
    assert CircleInvite.objects.get().revoked_at is None


def test_revoked_invite_cannot_be_used(world, alice_api, mallory_api):
    created = alice_api.post(circle_url(world.circle, "invites/")).json()

    assert alice_api.delete(circle_url(world.circle, f"invites/{created['id']}/")).status_code == 204
    accept = mallory_api.post(f"{API}/invites/{created['token']}/accept/")

    assert accept.status_code == 400
    assert "withdrawn" in accept.json()["detail"]
    assert alice_api.get(circle_url(world.circle, "invites/")).json()["results"][0]["state"] == "revoked"
    assert not JoinRequest.objects.exists()


def test_an_invite_of_another_circle_is_not_found(world, alice_api, mallory):
    mallory_invite = invite_create(circle=world.mallory_circle, by=mallory).invite
    response = alice_api.delete(circle_url(world.circle, f"invites/{mallory_invite.pk}/"))

    assert response.status_code == 404
    assert CircleInvite.objects.get(pk=mallory_invite.pk).revoked_at is None


def test_accepting_an_invite_asks_to_join(world, mallory, mallory_api):
    token = invite_create(circle=world.circle, by=world.circle.owner).token

    first = mallory_api.post(f"{API}/invites/{token}/accept/")
    again = mallory_api.post(f"{API}/invites/{token}/accept/")

    assert first.status_code == 201
    body = first.json()
    assert body["circle"] == {"id": str(world.circle.pk), "name": "Family"}
    assert body["status"] == "pending"
    assert again.json()["id"] == body["id"]  # asking twice is one request
    assert not CircleMembership.objects.filter(circle=world.circle, user=mallory).exists()


def test_invalid_expired_and_member_invites_are_clear_400s(world, bob_api, mallory_api):
    new = invite_create(circle=world.circle, by=world.circle.owner)
    expired = invite_create(circle=world.circle, by=world.circle.owner)
    CircleInvite.objects.filter(pk=expired.invite.pk).update(expires_at=timezone.now() - timedelta(seconds=1))

    cases = [
        (mallory_api, "nonsense", "not valid"),
        (mallory_api, expired.token, "expired"),
        (bob_api, new.token, "already a member of Family"),
    ]
    for api, token, words in cases:
        response = api.post(f"{API}/invites/{token}/accept/")
        assert response.status_code == 400, token
        assert words in response.json()["detail"]
    assert not JoinRequest.objects.exists()


def test_owner_sees_approves_and_declines_requests(alice, world, mallory, alice_api):
    request = invite_accept(token=invite_create(circle=world.circle, by=alice).token, user=mallory)

    listed = alice_api.get(circle_url(world.circle, "requests/"))
    assert listed.status_code == 200
    assert [(r["id"], r["user"]["username"]) for r in listed.json()["results"]] == [
        (str(request.pk), "mallory")
    ]

    approved = alice_api.post(circle_url(world.circle, f"requests/{request.pk}/approve/"))
    assert approved.status_code == 200
    assert approved.json()["status"] == "approved"
    assert CircleMembership.objects.filter(circle=world.circle, user=mallory).exists()
    again = alice_api.post(circle_url(world.circle, f"requests/{request.pk}/decline/"))
    assert again.status_code == 400
    assert "already approved" in str(again.json())
    assert alice_api.get(circle_url(world.circle, "requests/")).json()["results"] == []


def test_declining_a_request(alice, world, mallory, alice_api):
    request = invite_accept(token=invite_create(circle=world.circle, by=alice).token, user=mallory)

    declined = alice_api.post(circle_url(world.circle, f"requests/{request.pk}/decline/"))

    assert declined.status_code == 200
    assert declined.json()["status"] == "declined"
    assert not CircleMembership.objects.filter(circle=world.circle, user=mallory).exists()


def test_requests_are_the_owners_business(alice, world, mallory, bob_api, mallory_api):
    request = invite_accept(token=invite_create(circle=world.circle, by=alice).token, user=mallory)
    for api, expected in [(bob_api, 403), (mallory_api, 404)]:
        assert api.get(circle_url(world.circle, "requests/")).status_code == expected
        for action in ["approve", "decline"]:
            response = api.post(circle_url(world.circle, f"requests/{request.pk}/{action}/"))
            assert response.status_code == expected
    assert JoinRequest.objects.get(pk=request.pk).status == JoinRequestStatus.PENDING


def test_a_request_of_another_circle_is_not_found(alice, bob, world, mallory, alice_api):
    other = invite_accept(token=invite_create(circle=world.mallory_circle, by=mallory).token, user=bob)

    response = alice_api.post(circle_url(world.circle, f"requests/{other.pk}/approve/"))

    assert response.status_code == 404
    assert JoinRequest.objects.get(pk=other.pk).status == JoinRequestStatus.PENDING


def test_an_old_invite_after_removal_gives_a_new_pending_request_not_access(
    alice, bob, world, alice_api, bob_api
):
    token = alice_api.post(circle_url(world.circle, "invites/")).json()["token"]
    assert alice_api.delete(circle_url(world.circle, f"members/{bob.pk}/")).status_code == 204

    response = bob_api.post(f"{API}/invites/{token}/accept/")

    assert response.status_code == 201
    assert response.json()["status"] == "pending"
    assert bob_api.get(circle_url(world.circle)).status_code == 404
    assert bob_api.get(circle_url(world.circle, "memories/")).status_code == 404


# --- what a member sees ---------------------------------------------------------------------------------


def test_member_sees_what_the_gate_allows_with_owner_and_people(world, bob_api):
    response = bob_api.get(circle_url(world.circle, "memories/"))

    assert response.status_code == 200
    body = response.json()
    assert body["count"] == 2
    assert [m["title"] for m in body["results"]] == ["Picnic", "Lake"]  # Dan revoked: his memory is hidden
    picnic = body["results"][0]
    assert picnic["owner"] == "alice"
    assert picnic["occurred_at"]
    assert picnic["people"] == [{"name": "Carol", "role": "subject"}]
    assert "Dan" not in response.content.decode()


def test_owner_sees_all_their_shared_memories(world, alice_api):
    body = alice_api.get(circle_url(world.circle, "memories/")).json()

    assert [m["title"] for m in body["results"]] == ["Picnic", "Lake", "Dan's secret"]


def test_memories_page_and_bounds(world, bob_api):
    url = circle_url(world.circle, "memories/")

    first = bob_api.get(url, {"limit": 1}).json()
    second = bob_api.get(url, {"limit": 1, "offset": 1}).json()
    past = bob_api.get(url, {"limit": 1, "offset": 5}).json()

    assert [m["title"] for m in first["results"]] == ["Picnic"]
    assert "offset=1" in first["next"] and first["previous"] is None
    assert [m["title"] for m in second["results"]] == ["Lake"]
    assert second["next"] is None and "offset=0" in second["previous"]
    assert past["results"] == [] and past["count"] == 2
    for params in [
        {"limit": 0},
        {"limit": 101},
        {"limit": "ten"},
        {"offset": -1},
        {"offset": 10**7},
        {"offset": 10**30},
        {"offset": "x"},
    ]:
        response = bob_api.get(url, params)
        assert response.status_code == 400, params
        assert set(response.json()) <= {"limit", "offset"}


def test_search_finds_only_what_the_member_may_see(world, bob_api, monkeypatch):
    # Full text only: the embedding model is an enrichment search works without.
    monkeypatch.setattr("memories.search.hybrid._embed_query", lambda query: None)
    url = circle_url(world.circle, "memories/")

    plums = bob_api.get(url, {"q": "plums"}).json()
    secret = bob_api.get(url, {"q": "secret"}).json()

    assert [m["title"] for m in plums["results"]] == ["Picnic"]
    assert plums["results"][0]["owner"] == "alice" and plums["results"][0]["score"] > 0
    assert secret["results"] == [] and secret["count"] == 0


def test_one_memory_for_a_member(world, bob_api, mallory_api):
    ok = bob_api.get(circle_url(world.circle, f"memories/{world.picnic.pk}/"))

    assert ok.status_code == 200
    assert (ok.json()["title"], ok.json()["owner"]) == ("Picnic", "alice")
    for memory in [world.secret, world.unshared, world.mallory_memory]:
        assert bob_api.get(circle_url(world.circle, f"memories/{memory.pk}/")).status_code == 404
    assert mallory_api.get(circle_url(world.circle, f"memories/{world.picnic.pk}/")).status_code == 404


def test_memories_shown_to_bob_are_logged_but_alices_own_reads_are_not(alice, bob, world, alice_api, bob_api):
    alice_api.get(circle_url(world.circle, "memories/"))
    alice_api.get(circle_url(world.circle, f"memories/{world.picnic.pk}/"))
    assert not AccessLog.objects.exists()

    bob_api.get(circle_url(world.circle, "memories/"))
    bob_api.get(circle_url(world.circle, f"memories/{world.lake.pk}/"))

    rows = AccessLog.objects.order_by("id")
    assert [(row.memory_id, row.surface, row.viewer_id, row.owner_id, row.agent_id) for row in rows] == [
        (world.picnic.pk, AccessSurface.CIRCLE, bob.pk, alice.pk, None),
        (world.lake.pk, AccessSurface.CIRCLE, bob.pk, alice.pk, None),
        (world.lake.pk, AccessSurface.CIRCLE, bob.pk, alice.pk, None),
    ]


# --- shares ----------------------------------------------------------------------------------------------


def test_owner_lists_shares_shares_and_unshares(world, alice_api, bob_api):
    shares_url = f"{API}/memories/{world.unshared.pk}/shares/"
    assert alice_api.get(shares_url).json()["results"] == []

    created = alice_api.post(shares_url, {"circle": str(world.circle.pk)})

    assert created.status_code == 201
    assert created.json()["circle"] == {"id": str(world.circle.pk), "name": "Family"}
    assert [s["circle"]["name"] for s in alice_api.get(shares_url).json()["results"]] == ["Family"]
    assert bob_api.get(circle_url(world.circle, f"memories/{world.unshared.pk}/")).status_code == 200

    assert alice_api.delete(f"{shares_url}{world.circle.pk}/").status_code == 204
    assert alice_api.delete(f"{shares_url}{world.circle.pk}/").status_code == 404
    assert bob_api.get(circle_url(world.circle, f"memories/{world.unshared.pk}/")).status_code == 404


def test_share_refused_names_each_person_and_status_and_writes_nothing(alice, world, alice_api):
    eve = person_create(owner=alice, display_name="Eve")
    memory = memory_create(
        owner=alice,
        body="Eve and Dan argued.",
        participants=[ParticipantSpec(person=eve), ParticipantSpec(person=world.dan)],
    )

    response = alice_api.post(f"{API}/memories/{memory.pk}/shares/", {"circle": str(world.circle.pk)})

    assert response.status_code == 409
    body = response.json()
    assert "Not shared into Family" in body["detail"]
    assert body["not_consented"] == [
        {"person": str(world.dan.pk), "name": "Dan", "status": "revoked"},
        {"person": str(eve.pk), "name": "Eve", "status": "pending"},
    ]
    assert not MemoryShare.objects.filter(memory=memory).exists()


def test_sharing_is_the_memory_owners_and_only_into_their_circles(world, alice_api, bob_api, mallory_api):
    before = MemoryShare.objects.count()
    into = {"circle": str(world.circle.pk)}

    assert bob_api.post(f"{API}/memories/{world.unshared.pk}/shares/", into).status_code == 404
    assert mallory_api.post(f"{API}/memories/{world.unshared.pk}/shares/", into).status_code == 404
    for circle_id in [world.mallory_circle.pk, uuid.uuid4()]:
        response = alice_api.post(f"{API}/memories/{world.unshared.pk}/shares/", {"circle": str(circle_id)})
        assert response.status_code == 404
        assert "gang" not in response.content.decode()
    assert alice_api.post(f"{API}/memories/{world.unshared.pk}/shares/", {"circle": "x"}).status_code == 400
    assert alice_api.post(f"{API}/memories/{world.unshared.pk}/shares/", {}).status_code == 400
    assert bob_api.get(f"{API}/memories/{world.picnic.pk}/shares/").status_code == 404
    assert bob_api.delete(f"{API}/memories/{world.picnic.pk}/shares/{world.circle.pk}/").status_code == 404
    assert MemoryShare.objects.count() == before


# --- the privacy audit ------------------------------------------------------------------------------------


def test_audit_says_who_can_see_and_why(alice, bob, world, alice_api, bob_api, mallory_api):
    response = alice_api.get(f"{API}/memories/{world.secret.pk}/audit/")

    assert response.status_code == 200
    body = response.json()
    assert body["owner"]["visible"] is True
    assert body["agents"]["visible"] is False and body["agents"]["reasons"]
    [circle] = body["circles"]
    assert (circle["id"], circle["name"]) == (str(world.circle.pk), "Family")
    members = {m["username"]: m for m in circle["members"]}
    assert members["alice"]["visible"] is True and members["alice"]["user"] == alice.pk
    assert members["bob"]["visible"] is False
    assert any("Dan has not consented for Family (revoked)" in reason for reason in members["bob"]["reasons"])
    assert bob_api.get(f"{API}/memories/{world.secret.pk}/audit/").status_code == 404
    assert mallory_api.get(f"{API}/memories/{world.secret.pk}/audit/").status_code == 404


# --- consents per audience ---------------------------------------------------------------------------------


def test_consents_list_every_audience(world, alice_api):
    response = alice_api.get(f"{API}/people/{world.carol.pk}/consents/")

    assert response.status_code == 200
    rows = {row["audience"]: row for row in response.json()["results"]}
    assert rows["agents"]["status"] == "pending" and rows["agents"]["circle"] is None
    family = rows[f"circle:{world.circle.pk}"]
    assert (family["label"], family["status"]) == ("Family", "granted")
    assert family["circle"] == {"id": str(world.circle.pk), "name": "Family"}


def test_consent_is_set_per_audience(world, alice_api, bob_api):
    audience = f"circle:{world.circle.pk}"

    response = alice_api.post(
        f"{API}/people/{world.carol.pk}/consents/",
        {"audience": audience, "status": "revoked", "reason": "she asked"},
    )

    assert response.status_code == 200
    body = response.json()
    assert (body["consent"]["audience"], body["consent"]["status"]) == (audience, "revoked")
    assert body["event"]["new_status"] == "revoked"
    assert PersonConsent.objects.get(person=world.carol, audience=audience).status == "revoked"
    assert Person.objects.get(pk=world.carol.pk).consent_status == "pending"  # agents untouched
    # The gate reads consent at once: Carol's memory leaves Bob's view.
    titles = [m["title"] for m in bob_api.get(circle_url(world.circle, "memories/")).json()["results"]]
    assert titles == ["Lake"]

    agents = alice_api.post(
        f"{API}/people/{world.carol.pk}/consents/", {"audience": "agents", "status": "granted"}
    )
    assert agents.status_code == 200
    assert Person.objects.get(pk=world.carol.pk).consent_status == "granted"


@pytest.mark.parametrize("audience", ["everyone", "circle:nope", "", "circle:{mallory}", "circle:{random}"])
def test_consent_for_an_unknown_or_foreign_audience_is_a_clear_400(world, alice_api, audience):
    audience = audience.format(mallory=world.mallory_circle.pk, random=uuid.uuid4())

    response = alice_api.post(
        f"{API}/people/{world.carol.pk}/consents/", {"audience": audience, "status": "granted"}
    )

    assert response.status_code == 400
    assert "audience" in response.json()
    assert "gang" not in response.content.decode()
    assert not PersonConsent.objects.filter(
        person=world.carol, audience__contains=str(world.mallory_circle.pk)
    )


def test_self_consent_for_a_circle_is_refused_with_the_services_message(alice, world, alice_api):
    me = Person.objects.get(owner=alice, is_self=True)

    response = alice_api.post(
        f"{API}/people/{me.pk}/consents/", {"audience": f"circle:{world.circle.pk}", "status": "revoked"}
    )

    assert response.status_code == 400
    assert "given by sharing a memory into it" in str(response.json()["audience"])


def test_the_older_consent_endpoint_keeps_working(world, alice_api):
    response = alice_api.post(f"{API}/people/{world.carol.pk}/consent/", {"status": "granted"})

    assert response.status_code == 200
    assert Person.objects.get(pk=world.carol.pk).consent_status == "granted"


def test_consents_of_another_owners_person_are_not_found(world, mallory_api):
    assert mallory_api.get(f"{API}/people/{world.carol.pk}/consents/").status_code == 404
    response = mallory_api.post(
        f"{API}/people/{world.carol.pk}/consents/", {"audience": "agents", "status": "granted"}
    )
    assert response.status_code == 404
    assert Person.objects.get(pk=world.carol.pk).consent_status == "pending"


# --- isolation and callers ----------------------------------------------------------------------------


def _alice_urls(world, alice, bob) -> list[tuple[str, str]]:
    invite = invite_create(circle=world.circle, by=alice).invite
    request = invite_accept(token=invite_create(circle=world.circle, by=alice).token, user=UserFactory())
    return [
        ("get", circle_url(world.circle)),
        ("patch", circle_url(world.circle)),
        ("delete", circle_url(world.circle)),
        ("get", circle_url(world.circle, "members/")),
        ("delete", circle_url(world.circle, f"members/{bob.pk}/")),
        ("get", circle_url(world.circle, "invites/")),
        ("post", circle_url(world.circle, "invites/")),
        ("delete", circle_url(world.circle, f"invites/{invite.pk}/")),
        ("get", circle_url(world.circle, "requests/")),
        ("post", circle_url(world.circle, f"requests/{request.pk}/approve/")),
        ("post", circle_url(world.circle, f"requests/{request.pk}/decline/")),
        ("get", circle_url(world.circle, "memories/")),
        ("get", circle_url(world.circle, f"memories/{world.picnic.pk}/")),
        ("get", f"{API}/memories/{world.picnic.pk}/shares/"),
        ("post", f"{API}/memories/{world.picnic.pk}/shares/"),
        ("delete", f"{API}/memories/{world.picnic.pk}/shares/{world.circle.pk}/"),
        ("get", f"{API}/memories/{world.picnic.pk}/audit/"),
        ("get", f"{API}/people/{world.carol.pk}/consents/"),
        ("post", f"{API}/people/{world.carol.pk}/consents/"),
    ]


def _call(api: ApiClient, method: str, url: str):
    if method in ("get", "delete"):
        return getattr(api, method)(url)
    return api.request(method, url, {"name": "x", "circle": "", "audience": "agents", "status": "granted"})


def _state() -> tuple:
    return (
        list(Circle.objects.order_by("pk").values_list("pk", "name", "description")),
        list(CircleMembership.objects.order_by("pk").values_list("pk", "circle_id", "user_id")),
        list(CircleInvite.objects.order_by("pk").values_list("pk", "revoked_at")),
        list(JoinRequest.objects.order_by("pk").values_list("pk", "status")),
        list(MemoryShare.objects.order_by("pk").values_list("pk", flat=True)),
        list(PersonConsent.objects.order_by("pk").values_list("pk", "status")),
        list(Person.objects.order_by("pk").values_list("pk", "consent_status")),
        AccessLog.objects.count(),
    )


def test_mallory_gets_404_for_everything_of_alices_as_for_ids_that_do_not_exist(
    alice, bob, world, mallory_api
):
    urls = _alice_urls(world, alice, bob)
    before = _state()
    secrets = ["Family", "Picnic", "plums", "Carol", "alice", "bob", "Grandma"]

    for method, url in urls:
        response = _call(mallory_api, method, url)
        assert response.status_code == 404, (method, url, response.content)
        leaked = [word for word in secrets if word in response.content.decode()]
        assert leaked == [], (url, leaked)
        # Guessing: the answer for Alice's real ids is the answer for ids nobody has.
        guessed = url
        for real in [world.circle.pk, world.picnic.pk, world.carol.pk]:
            guessed = guessed.replace(str(real), str(uuid.uuid4()))
        assert _call(mallory_api, method, guessed).json() == response.json(), guessed
    assert _state() == before


@pytest.mark.parametrize("bad", ["not-a-uuid", "123", "%00", "0" * 40])
def test_malformed_ids_are_json_404s(world, alice_api, bad):
    for url in [
        f"{API}/circles/{bad}/",
        f"{API}/circles/{bad}/memories/",
        f"{API}/circles/{world.circle.pk}/memories/{bad}/",
        f"{API}/circles/{world.circle.pk}/requests/{bad}/approve/",
        f"{API}/circles/{world.circle.pk}/members/{bad}x/",
        f"{API}/memories/{bad}/shares/",
        f"{API}/memories/{world.picnic.pk}/shares/{bad}/",
    ]:
        response = alice_api.get(url) if "approve" not in url else alice_api.post(url)
        assert response.status_code in (404, 405), url
        assert response["Content-Type"] == "application/json"


def test_agent_tokens_get_404_everywhere_and_write_nothing(alice, bob, world):
    agent = Agent.objects.filter(owner=alice).first()
    agent_api = _api(alice, kind=TokenKind.AGENT, agent=agent)
    urls = _alice_urls(world, alice, bob) + [
        ("get", f"{API}/circles/"),
        ("post", f"{API}/circles/"),
        ("post", f"{API}/invites/{invite_create(circle=world.circle, by=alice).token}/accept/"),
    ]
    before = _state()

    for method, url in urls:
        response = _call(agent_api, method, url)
        assert response.status_code == 404, (method, url, response.content)
        assert "Family" not in response.content.decode()
    assert _state() == before


def test_a_signed_in_session_acts_as_the_user_and_anonymous_is_401(alice, world):
    client = Client()
    client.force_login(alice)

    assert ApiClient(client).get(f"{API}/circles/").json()["results"][0]["name"] == "Family"
    anonymous = ApiClient(Client()).get(circle_url(world.circle))
    assert anonymous.status_code == 401


def test_a_linked_person_decides_the_owner_may_only_revoke(bob, world, alice_api):
    Person.objects.filter(pk=world.carol.pk).update(linked_user=bob)
    audience = f"circle:{world.circle.pk}"
    url = f"{API}/people/{world.carol.pk}/consents/"

    revoked = alice_api.post(url, {"audience": audience, "status": "revoked"})
    granted = alice_api.post(url, {"audience": audience, "status": "granted"})

    assert revoked.status_code == 200
    assert granted.status_code == 403
    assert "only they can grant it" in granted.json()["detail"]
    assert PersonConsent.objects.get(person=world.carol, audience=audience).status == "revoked"
