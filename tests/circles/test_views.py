"""The circles pages: my circles, a circle's page, invites, sharing, consent per circle.

Alice owns "Family", Bob is in it, Mallory has no access (tests/circles/conftest.py).
Each htmx view is asked plain and with HX-Request.
"""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from agents.models import AccessLog
from circles.models import Circle, CircleInvite, CircleMembership, JoinRequest, JoinRequestStatus, MemoryShare
from circles.services import circle_create, invite_accept, invite_create, invite_revoke, memory_share
from memories import embeddings
from memories.models import Memory
from memories.services import ParticipantSpec, memory_create
from people.models import ConsentEvent, ConsentStatus, Person, PersonConsent
from people.services import person_create, person_set_consent

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}
CARD = 'class="memory-card card circle-card"'


def hx(htmx: bool) -> dict:
    return HX if htmx else {}


@pytest.fixture(autouse=True)
def no_model(monkeypatch):
    """Search answers by full text when the embedding model is not there (as in the web process)."""

    def unavailable(text: str) -> list[float]:
        raise OSError("model not installed")

    monkeypatch.setattr(embeddings, "embed_text", unavailable)


@pytest.fixture
def bob_client(bob):
    client = Client()
    client.force_login(bob)
    return client


@pytest.fixture
def rose(alice):
    """Someone in Alice's journal."""
    return person_create(owner=alice, display_name="Grandma Rose")


def grant(person: Person, circle: Circle, status: str = ConsentStatus.GRANTED) -> None:
    person_set_consent(person=person, status=status, actor=person.owner, audience=circle.audience)


def shared(owner, circle, body: str, *, people=(), sensitivity: str = "public", **fields) -> Memory:
    memory = memory_create(
        owner=owner,
        body=body,
        sensitivity=sensitivity,
        participants=[ParticipantSpec(person=person) for person in people],
        **fields,
    )
    memory_share(memory=memory, circle=circle, by=owner)
    return memory


def circle_logs(**filters):
    return AccessLog.objects.filter(surface="circle", **filters)


# --- my circles ---------------------------------------------------------------------------


@pytest.mark.parametrize("htmx", [False, True])
def test_circles_page_lists_my_circles_with_owner_members_and_my_role(
    bob_client, alice, family, mallory, htmx
):
    circle_create(owner=mallory, name="Mallory's club")
    response = bob_client.get(reverse("circle_list"), **hx(htmx))
    assert response.status_code == 200
    html = response.content.decode()
    assert "Family" in html and "alice" in html
    assert '<td class="num">2</td>' in html
    assert "Member" in html
    assert "Mallory's club" not in html and "Mallory&#x27;s club" not in html
    assert ("<html" in html) is (not htmx)
    assert 'id="circle-table"' in html


def test_circles_page_needs_login(client):
    response = client.get(reverse("circle_list"))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


def test_nav_links_to_circles(alice_client):
    html = alice_client.get(reverse("timeline")).content.decode()
    assert f'href="{reverse("circle_list")}"' in html


@pytest.mark.parametrize("htmx", [False, True])
def test_creating_a_circle_opens_it(alice_client, alice, htmx):
    response = alice_client.post(
        reverse("circle_create"), {"name": "  Care   team ", "description": "For Dad"}, **hx(htmx)
    )
    circle = Circle.objects.get(owner=alice)
    assert (circle.name, circle.description) == ("Care team", "For Dad")
    url = reverse("circle_detail", args=[circle.pk])
    if htmx:
        assert response.status_code == 200 and response["HX-Redirect"] == url
    else:
        assert response.status_code == 302 and response["Location"] == url
    assert CircleMembership.objects.get(circle=circle, user=alice).role == "owner"


@pytest.mark.parametrize("htmx", [False, True])
@pytest.mark.parametrize(
    ("name", "error"),
    [
        ("", "Give the circle a name."),
        ("   ", "Give the circle a name."),
        ("x" * 81, "at most 80 characters"),
    ],
)
def test_a_bad_circle_name_is_refused_with_a_clear_error(alice_client, alice, name, error, htmx):
    response = alice_client.post(reverse("circle_create"), {"name": name, "description": ""}, **hx(htmx))
    assert response.status_code == 200
    html = response.content.decode()
    assert error in html
    assert ('id="circle-create"' in html) and (("<html" in html) is (not htmx))
    assert not Circle.objects.filter(owner=alice).exists()


# --- a circle's page ----------------------------------------------------------------------


@pytest.mark.parametrize("htmx", [False, True])
def test_member_sees_the_circle_timeline_with_owners_dates_and_people(
    bob_client, alice, bob, family, rose, htmx
):
    grant(rose, family)
    old = shared(
        alice, family, "We planted tulips", people=[rose], occurred_at=timezone.now() - timedelta(days=3)
    )
    new = shared(bob, family, "Bob's bike ride")
    private = memory_create(owner=alice, body="Alice's private diary", sensitivity="public")
    response = bob_client.get(reverse("circle_detail", args=[family.pk]), **hx(htmx))
    assert response.status_code == 200
    html = response.content.decode()
    assert html.index("Bob&#x27;s bike ride") < html.index("We planted tulips")
    assert "Alice&#x27;s private diary" not in html and str(private.pk) not in html
    assert "alice" in html and old.occurred_at.strftime("%-d %b %Y") in html
    assert ">Grandma Rose<" in html
    # Bob has no page for Alice's people, and is not told their consent: names only.
    assert reverse("person_detail", args=[rose.pk]) not in html
    # Someone else's memory opens read-only inside the circle; his own opens in his journal.
    assert reverse("circle_memory_detail", args=[family.pk, old.pk]) in html
    assert reverse("memory_detail", args=[new.pk]) in html
    if htmx:
        assert "<html" not in html and 'id="members-title"' not in html
    else:
        assert 'id="circle-members"' in html and 'id="circle-add"' in html
        assert 'id="circle-invites"' not in html  # owner only


def test_owner_sees_members_invites_and_requests(alice_client, alice, family, mallory):
    invite_accept(token=invite_create(circle=family, by=alice).token, user=mallory)
    html = alice_client.get(reverse("circle_detail", args=[family.pk])).content.decode()
    for section in ("circle-members", "circle-invites", "circle-requests"):
        assert f'id="{section}"' in html
    assert "mallory" in html and "asks to join" in html
    assert reverse("circle_edit", args=[family.pk]) in html
    assert reverse("circle_delete", args=[family.pk]) in html


def test_circle_timeline_scrolls_25_at_a_time_with_a_plain_older_link(bob_client, alice, family):
    start = timezone.now()
    for index in range(30):
        shared(alice, family, f"Shared {index:02d}", occurred_at=start - timedelta(hours=index))
    first = bob_client.get(reverse("circle_detail", args=[family.pk])).content.decode()
    assert first.count(CARD) == 25
    older = reverse("circle_detail", args=[family.pk]) + "?page=2"
    assert f'<a href="{older}">Older</a>' in first
    assert f'hx-get="{older}"' in first and 'hx-trigger="revealed"' in first
    second = bob_client.get(older, **HX).content.decode()
    assert second.count(CARD) == 5 and "Shared 29" in second and "Older" not in second
    plain_second = bob_client.get(older).content.decode()
    assert plain_second.count(CARD) == 5 and "<html" in plain_second


def test_a_page_past_the_end_says_so(bob_client, family):
    html = bob_client.get(reverse("circle_detail", args=[family.pk]) + "?page=7").content.decode()
    assert "No older memories." in html


def test_member_sees_nothing_of_a_memory_until_everyone_in_it_consented(bob_client, alice, family, rose):
    grant(rose, family)
    memory = shared(alice, family, "Tea with Rose", people=[rose])
    grant(rose, family, ConsentStatus.REVOKED)
    html = bob_client.get(reverse("circle_detail", args=[family.pk])).content.decode()
    assert "Tea with Rose" not in html
    url = reverse("circle_memory_detail", args=[family.pk, memory.pk])
    assert bob_client.get(url).status_code == 404


# --- the access log -----------------------------------------------------------------------


def test_every_memory_bob_is_shown_is_logged_with_surface_circle(bob_client, alice, bob, family):
    first = shared(alice, family, "Tulips in spring")
    second = shared(alice, family, "Apple pie")
    own = shared(bob, family, "Bob's own")
    bob_client.get(reverse("circle_detail", args=[family.pk]))
    rows = circle_logs(viewer=bob)
    assert sorted(rows.values_list("memory_id", flat=True)) == sorted([first.pk, second.pk])
    assert set(rows.values_list("owner_id", flat=True)) == {alice.pk}
    assert not AccessLog.objects.filter(memory=own).exists()  # his own reads are not logged
    bob_client.get(reverse("circle_memory_detail", args=[family.pk, first.pk]))
    assert circle_logs(viewer=bob, memory=first).count() == 2


def test_alices_own_views_are_not_logged(alice_client, alice, family):
    memory = shared(alice, family, "Tulips in spring")
    alice_client.get(reverse("circle_detail", args=[family.pk]))
    alice_client.get(reverse("circle_search", args=[family.pk]) + "?q=tulips")
    response = alice_client.get(reverse("circle_memory_detail", args=[family.pk, memory.pk]))
    assert response.status_code == 302 and response["Location"] == reverse("memory_detail", args=[memory.pk])
    assert not AccessLog.objects.exists()


def test_the_memory_page_says_who_has_seen_it_people_as_well_as_agents(
    alice_client, bob_client, alice, family
):
    memory = shared(alice, family, "Tulips in spring")
    bob_client.get(reverse("circle_memory_detail", args=[family.pk, memory.pk]))
    html = alice_client.get(reverse("memory_detail", args=[memory.pk])).content.decode()
    section = html[html.index('id="access-log"') :]
    assert "bob" in section and "<td>Circle</td>" in section


# --- search -------------------------------------------------------------------------------


@pytest.mark.parametrize("htmx", [False, True])
def test_search_finds_only_what_the_member_may_see_and_logs_it(bob_client, alice, bob, family, htmx):
    hit = shared(alice, family, "Tulips by the fence")
    memory_create(owner=alice, body="Tulips in my private notes", sensitivity="public")
    shared(alice, family, "Apple pie")
    response = bob_client.get(reverse("circle_search", args=[family.pk]) + "?q=tulips", **hx(htmx))
    assert response.status_code == 200
    html = response.content.decode()
    assert "Tulips by the fence" in html and "1 result for “tulips”" in html
    assert "private notes" not in html and "Apple pie" not in html
    assert html.lstrip().startswith('<div id="circle-memories"') is htmx
    assert list(circle_logs(viewer=bob).values_list("memory_id", flat=True)) == [hit.pk]


def test_search_with_nothing_typed_shows_the_timeline(bob_client, alice, family):
    shared(alice, family, "Apple pie")
    html = bob_client.get(reverse("circle_search", args=[family.pk]) + "?q=+").content.decode()
    assert "Apple pie" in html


def test_search_text_too_long_is_refused(bob_client, family):
    response = bob_client.get(reverse("circle_search", args=[family.pk]) + "?q=" + "a" * 501)
    assert response.status_code == 400
    assert "too long" in response.content.decode()


# --- a memory shared by someone else ------------------------------------------------------


@pytest.mark.parametrize("htmx", [False, True])
def test_member_reads_a_shared_memory_read_only(bob_client, alice, family, rose, htmx):
    grant(rose, family)
    memory = shared(alice, family, "We planted tulips by the fence.", people=[rose], title="Tulips")
    response = bob_client.get(reverse("circle_memory_detail", args=[family.pk, memory.pk]), **hx(htmx))
    assert response.status_code == 200
    html = response.content.decode()
    assert "We planted tulips by the fence." in html and "Grandma Rose" in html and "alice" in html
    assert reverse("memory_edit", args=[memory.pk]) not in html
    assert reverse("person_detail", args=[rose.pk]) not in html
    assert ("<html" in html) is (not htmx)


def test_a_personal_memory_is_shown_only_to_the_member_it_is_about(bob_client, alice, bob, family, rose):
    grant(rose, family)
    memory = shared(alice, family, "Rose's birthday", people=[rose], sensitivity="personal")
    url = reverse("circle_memory_detail", args=[family.pk, memory.pk])
    assert bob_client.get(url).status_code == 404
    Person.objects.filter(pk=rose.pk).update(linked_user=bob)
    assert bob_client.get(url).status_code == 200


# --- isolation: nothing of Alice's circle exists for Mallory ---------------------------------


def _alice_world(alice, bob, family, mallory):
    memory = shared(alice, family, "Tulips in spring")
    invite = invite_create(circle=family, by=alice).invite
    carol = get_user_model().objects.create_user(username="carol", password="x")
    join_request = invite_accept(token=invite_create(circle=family, by=alice).token, user=carol)
    return memory, invite, join_request


OWNER_ONLY = [
    ("get", "circle_edit", lambda c, m, i, r, b: [c.pk]),
    ("post", "circle_edit", lambda c, m, i, r, b: [c.pk]),
    ("get", "circle_delete", lambda c, m, i, r, b: [c.pk]),
    ("post", "circle_delete", lambda c, m, i, r, b: [c.pk]),
    ("post", "circle_invite_create", lambda c, m, i, r, b: [c.pk]),
    ("post", "circle_invite_revoke", lambda c, m, i, r, b: [c.pk, i.pk]),
    ("post", "circle_request_approve", lambda c, m, i, r, b: [c.pk, r.pk]),
    ("post", "circle_request_decline", lambda c, m, i, r, b: [c.pk, r.pk]),
    ("get", "circle_member_remove", lambda c, m, i, r, b: [c.pk, b.pk]),
    ("post", "circle_member_remove", lambda c, m, i, r, b: [c.pk, b.pk]),
]
MEMBERS_ONLY = [
    ("get", "circle_detail", lambda c, m, i, r, b: [c.pk]),
    ("get", "circle_search", lambda c, m, i, r, b: [c.pk]),
    ("get", "circle_leave", lambda c, m, i, r, b: [c.pk]),
    ("post", "circle_leave", lambda c, m, i, r, b: [c.pk]),
    ("post", "circle_memory_create", lambda c, m, i, r, b: [c.pk]),
    ("get", "circle_memory_detail", lambda c, m, i, r, b: [c.pk, m.pk]),
    ("post", "memory_share", lambda c, m, i, r, b: [c.pk, m.pk]),
    ("post", "memory_unshare", lambda c, m, i, r, b: [c.pk, m.pk]),
]


def _call(client, method, url, htmx):
    data = {
        "name": "Pwned",
        "description": "",
        "days": "14",
        "body": "x",
        "sensitivity": "public",
        "q": "tulips",
    }
    if method == "get":
        return client.get(url, **hx(htmx))
    return client.post(url, data, **hx(htmx))


def _nothing_changed(alice, family, memory, invite, join_request):
    family.refresh_from_db()
    invite.refresh_from_db()
    join_request.refresh_from_db()
    assert family.name == "Family"
    assert invite.revoked_at is None
    assert join_request.status == JoinRequestStatus.PENDING
    assert MemoryShare.objects.filter(memory=memory, circle=family).exists()
    assert CircleMembership.objects.filter(circle=family).count() == 2
    assert list(Memory.objects.filter(owner__username="mallory")) == []


@pytest.mark.parametrize(("method", "name", "args"), OWNER_ONLY + MEMBERS_ONLY)
@pytest.mark.parametrize("htmx", [False, True])
def test_mallory_gets_404_for_everything_of_alices_circle(
    mallory_client, alice, bob, family, mallory, method, name, args, htmx
):
    memory, invite, join_request = _alice_world(alice, bob, family, mallory)
    response = _call(
        mallory_client, method, reverse(name, args=args(family, memory, invite, join_request, bob)), htmx
    )
    assert response.status_code == 404
    html = response.content.decode()
    assert "Family" not in html and "Tulips" not in html
    _nothing_changed(alice, family, memory, invite, join_request)
    assert not AccessLog.objects.exists()


@pytest.mark.parametrize(("method", "name", "args"), OWNER_ONLY)
@pytest.mark.parametrize("htmx", [False, True])
def test_a_member_cannot_manage_the_circle(bob_client, alice, bob, family, mallory, method, name, args, htmx):
    memory, invite, join_request = _alice_world(alice, bob, family, mallory)
    response = _call(
        bob_client, method, reverse(name, args=args(family, memory, invite, join_request, bob)), htmx
    )
    assert response.status_code == 404
    _nothing_changed(alice, family, memory, invite, join_request)


def test_bob_cannot_share_or_unshare_alices_memory(bob_client, alice, family):
    memory = shared(alice, family, "Tulips in spring")
    assert bob_client.post(reverse("memory_unshare", args=[family.pk, memory.pk])).status_code == 404
    assert MemoryShare.objects.filter(memory=memory).exists()


def test_unknown_ids_answer_404(alice_client, family):
    assert alice_client.get("/circles/00000000-0000-0000-0000-000000000000/").status_code == 404
    url = reverse("circle_memory_detail", args=[family.pk, "00000000-0000-0000-0000-000000000000"])
    assert alice_client.get(url).status_code == 404


def test_a_removed_members_next_request_is_404(alice_client, bob_client, alice, bob, family):
    memory = shared(alice, family, "Tulips in spring")
    assert bob_client.get(reverse("circle_detail", args=[family.pk])).status_code == 200
    alice_client.post(reverse("circle_member_remove", args=[family.pk, bob.pk]))
    assert not CircleMembership.objects.filter(circle=family, user=bob).exists()
    assert bob_client.get(reverse("circle_detail", args=[family.pk])).status_code == 404
    assert bob_client.get(reverse("circle_memory_detail", args=[family.pk, memory.pk])).status_code == 404
    assert (
        reverse("circle_detail", args=[family.pk])
        not in bob_client.get(reverse("circle_list")).content.decode()
    )


# --- the owner: edit, delete, remove; a member leaves ------------------------------------------


@pytest.mark.parametrize("htmx", [False, True])
def test_owner_renames_and_describes_the_circle(alice_client, family, htmx):
    page = alice_client.get(reverse("circle_edit", args=[family.pk]), **hx(htmx))
    assert page.status_code == 200 and 'value="Family"' in page.content.decode()
    response = alice_client.post(
        reverse("circle_edit", args=[family.pk]), {"name": "The Smiths", "description": "Us"}, **hx(htmx)
    )
    assert response.status_code == 200 if htmx else 302
    family.refresh_from_db()
    assert (family.name, family.description) == ("The Smiths", "Us")


def test_renaming_to_nothing_shows_the_error(alice_client, family):
    response = alice_client.post(reverse("circle_edit", args=[family.pk]), {"name": " ", "description": ""})
    assert response.status_code == 200 and "Give the circle a name." in response.content.decode()
    family.refresh_from_db()
    assert family.name == "Family"


@pytest.mark.parametrize("htmx", [False, True])
def test_deleting_a_circle_asks_first_then_removes_shares_never_memories(alice_client, alice, family, htmx):
    memory = shared(alice, family, "Tulips in spring")
    confirm = alice_client.get(reverse("circle_delete", args=[family.pk]), **hx(htmx))
    assert confirm.status_code == 200 and "Delete Family?" in confirm.content.decode()
    assert "No memory is deleted." in confirm.content.decode()
    response = alice_client.post(reverse("circle_delete", args=[family.pk]), **hx(htmx))
    assert response.status_code == (200 if htmx else 302)
    assert not Circle.objects.filter(pk=family.pk).exists()
    assert not MemoryShare.objects.exists()
    assert Memory.objects.filter(pk=memory.pk).exists()


@pytest.mark.parametrize("htmx", [False, True])
def test_a_member_leaves_after_confirming(bob_client, alice, bob, family, htmx):
    own = shared(bob, family, "Bob's bike ride")
    confirm = bob_client.get(reverse("circle_leave", args=[family.pk]), **hx(htmx))
    assert confirm.status_code == 200 and "Leave Family?" in confirm.content.decode()
    assert CircleMembership.objects.filter(circle=family, user=bob).exists()
    response = bob_client.post(reverse("circle_leave", args=[family.pk]), **hx(htmx))
    url = reverse("circle_list")
    assert (response["HX-Redirect"] if htmx else response["Location"]) == url
    assert not CircleMembership.objects.filter(circle=family, user=bob).exists()
    assert not MemoryShare.objects.filter(memory=own).exists() and Memory.objects.filter(pk=own.pk).exists()
    assert bob_client.get(reverse("circle_detail", args=[family.pk])).status_code == 404


def test_the_owner_cannot_leave_and_is_told_to_delete_instead(alice_client, alice, family):
    response = alice_client.post(reverse("circle_leave", args=[family.pk]))
    assert response.status_code == 200
    assert "delete the circle instead" in response.content.decode()
    assert CircleMembership.objects.filter(circle=family, user=alice).exists()


@pytest.mark.parametrize("htmx", [False, True])
def test_owner_removes_a_member_after_confirming(alice_client, bob, family, htmx):
    confirm = alice_client.get(reverse("circle_member_remove", args=[family.pk, bob.pk]), **hx(htmx))
    assert confirm.status_code == 200 and "Remove bob from Family?" in confirm.content.decode()
    response = alice_client.post(reverse("circle_member_remove", args=[family.pk, bob.pk]), **hx(htmx))
    assert response.status_code == (200 if htmx else 302)
    assert not CircleMembership.objects.filter(circle=family, user=bob).exists()


def test_the_owner_cannot_be_removed(alice_client, alice, family):
    response = alice_client.get(reverse("circle_member_remove", args=[family.pk, alice.pk]))
    assert response.status_code == 404


# --- invite links and join requests -----------------------------------------------------------


def _shown_invite_url(html: str) -> str:
    match = re.search(r'id="new-invite-url" type="text" readonly value="([^"]+)"', html)
    assert match, "the new link is shown"
    return match.group(1)


@pytest.mark.parametrize("htmx", [False, True])
def test_an_invite_link_is_shown_once_with_a_copy_button_then_listed_with_its_expiry(
    alice_client, family, mallory, htmx
):
    response = alice_client.post(reverse("circle_invite_create", args=[family.pk]), {"days": "7"}, **hx(htmx))
    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]
    html = response.content.decode()
    url = _shown_invite_url(html)
    assert ">Copy</button>" in html
    assert html.lstrip().startswith('<section id="circle-invites"') is htmx
    invite = CircleInvite.objects.get(circle=family)
    assert timedelta(days=6, hours=23) < invite.expires_at - timezone.now() <= timedelta(days=7)
    token = url.rstrip("/").rsplit("/", 1)[1]
    assert invite.token_hash != token and token not in str(invite.__dict__)
    # Shown once: the page lists it with its expiry, never the link again.
    page = alice_client.get(reverse("circle_detail", args=[family.pk])).content.decode()
    assert token not in page and "Works" in page and invite.expires_at.strftime("%-d %b %Y") in page


def test_an_invite_with_an_unknown_length_is_refused(alice_client, family):
    response = alice_client.post(reverse("circle_invite_create", args=[family.pk]), {"days": "365"})
    assert response.status_code == 200 and "Choose 7, 14 or 30 days." in response.content.decode()
    assert not CircleInvite.objects.exists()


@pytest.mark.parametrize("htmx", [False, True])
def test_owner_withdraws_an_invite_and_the_link_stops_working(alice_client, client, alice, family, htmx):
    new = invite_create(circle=family, by=alice)
    response = alice_client.post(reverse("circle_invite_revoke", args=[family.pk, new.invite.pk]), **hx(htmx))
    assert response.status_code == (200 if htmx else 302)
    new.invite.refresh_from_db()
    assert new.invite.revoked_at is not None
    page = Client().get(reverse("circle_invite", args=[new.token]))
    assert page.status_code == 404
    assert "withdrawn by the circle's owner" in page.content.decode().replace("&#x27;", "'")


@pytest.mark.parametrize("htmx", [False, True])
def test_owner_approves_a_request_and_the_members_list_follows(alice_client, alice, family, mallory, htmx):
    join_request = invite_accept(token=invite_create(circle=family, by=alice).token, user=mallory)
    response = alice_client.post(
        reverse("circle_request_approve", args=[family.pk, join_request.pk]), **hx(htmx)
    )
    assert CircleMembership.objects.filter(circle=family, user=mallory).exists()
    if htmx:
        html = response.content.decode()
        assert html.lstrip().startswith('<section id="circle-requests"')
        assert "mallory is now a member of Family." in html
        assert (
            'id="circle-members" class="card circle-panel" aria-labelledby="members-title" hx-swap-oob="true"'
            in html
        )
        assert "mallory" in html[html.index('id="circle-members"') :]
    else:
        assert response.status_code == 302
        page = alice_client.get(response["Location"]).content.decode()
        assert "mallory is now a member of Family." in page


@pytest.mark.parametrize("htmx", [False, True])
def test_owner_declines_a_request(alice_client, alice, family, mallory, htmx):
    join_request = invite_accept(token=invite_create(circle=family, by=alice).token, user=mallory)
    alice_client.post(reverse("circle_request_decline", args=[family.pk, join_request.pk]), **hx(htmx))
    join_request.refresh_from_db()
    assert join_request.status == JoinRequestStatus.DECLINED
    assert not CircleMembership.objects.filter(circle=family, user=mallory).exists()


def test_deciding_twice_says_it_was_already_decided(alice_client, alice, family, mallory):
    join_request = invite_accept(token=invite_create(circle=family, by=alice).token, user=mallory)
    alice_client.post(reverse("circle_request_decline", args=[family.pk, join_request.pk]))
    response = alice_client.post(reverse("circle_request_approve", args=[family.pk, join_request.pk]), **HX)
    assert "already declined" in response.content.decode()
    assert not CircleMembership.objects.filter(circle=family, user=mallory).exists()


# --- the invite page ------------------------------------------------------------------------


@pytest.mark.parametrize("htmx", [False, True])
def test_signed_out_the_invite_says_which_circle_and_who_and_offers_sign_in_or_up(
    client, alice, family, htmx
):
    new = invite_create(circle=family, by=alice)
    path = reverse("circle_invite", args=[new.token])
    response = client.get(path, **hx(htmx))
    assert response.status_code == 200
    html = response.content.decode()
    assert "<strong>alice</strong> invites you to join <strong>Family</strong>" in html
    assert f'href="{reverse("login")}?next={path}"' in html
    assert f'href="{reverse("signup")}?next={path}"' in html
    assert "Ask to join" not in html


@pytest.mark.parametrize(
    ("spoil", "message"),
    [
        ("unknown", "This invite link is not valid."),
        ("expired", "This invite link has expired."),
        ("revoked", "This invite link was withdrawn"),
    ],
)
@pytest.mark.parametrize("signed_in", [False, True])
def test_a_spoilt_invite_shows_why_never_a_500(client, alice, family, mallory, spoil, message, signed_in):
    new = invite_create(circle=family, by=alice)
    token = "not-a-real-token" if spoil == "unknown" else new.token
    if spoil == "expired":
        CircleInvite.objects.filter(pk=new.invite.pk).update(expires_at=timezone.now() - timedelta(minutes=1))
    if spoil == "revoked":
        invite_revoke(invite=new.invite, by=alice)
    if signed_in:
        client.force_login(mallory)
    for response in (
        client.get(reverse("circle_invite", args=[token])),
        client.post(reverse("circle_invite_ask", args=[token])),
    ):
        if not signed_in and response.request["REQUEST_METHOD"] == "POST":
            assert response.status_code == 302  # asked to log in first
            continue
        assert response.status_code == 404
        html = response.content.decode()
        assert message in html and "Family" not in html
    assert not JoinRequest.objects.exists()


@pytest.mark.parametrize("htmx", [False, True])
def test_asking_to_join_then_the_page_says_waiting_for_the_owner(client, alice, family, mallory, htmx):
    client.force_login(mallory)
    new = invite_create(circle=family, by=alice)
    page = client.get(reverse("circle_invite", args=[new.token])).content.decode()
    assert "Ask to join" in page
    response = client.post(reverse("circle_invite_ask", args=[new.token]), **hx(htmx))
    if not htmx:
        assert response.status_code == 302 and response["Location"] == reverse(
            "circle_invite", args=[new.token]
        )
        response = client.get(response["Location"])
    html = response.content.decode()
    assert "Waiting for alice to approve." in html and "Ask to join" not in html
    assert JoinRequest.objects.get(circle=family, user=mallory).status == JoinRequestStatus.PENDING
    # Asking again is still one request.
    client.post(reverse("circle_invite_ask", args=[new.token]))
    assert JoinRequest.objects.filter(circle=family, user=mallory).count() == 1
    # Nothing of the circle opens before approval.
    assert client.get(reverse("circle_detail", args=[family.pk])).status_code == 404


def test_a_member_opening_an_invite_is_told_they_are_in(bob_client, alice, family):
    new = invite_create(circle=family, by=alice)
    html = bob_client.get(reverse("circle_invite", args=[new.token])).content.decode()
    assert "You are a member of Family." in html
    response = bob_client.post(reverse("circle_invite_ask", args=[new.token]))
    assert "You are already a member of Family." in response.content.decode()


def test_invite_flow_signed_out_then_signup_then_back_then_ask_then_approval(
    client, alice_client, alice, family
):
    memory = shared(alice, family, "Tulips in spring")
    new = invite_create(circle=family, by=alice)
    invite_path = reverse("circle_invite", args=[new.token])
    visitor = Client()
    assert visitor.get(invite_path).status_code == 200
    signup_page = visitor.get(reverse("signup") + f"?next={invite_path}").content.decode()
    assert f'name="next" value="{invite_path}"' in signup_page
    response = visitor.post(
        reverse("signup"),
        {
            "username": "carol",
            "password1": "a sturdy passphrase",
            "password2": "a sturdy passphrase",
            "next": invite_path,
        },
    )
    assert response.status_code == 302 and response["Location"] == invite_path
    response = visitor.post(reverse("circle_invite_ask", args=[new.token]), follow=True)
    assert "Waiting for alice to approve." in response.content.decode()
    join_request = JoinRequest.objects.get(circle=family, user__username="carol")
    owner_page = alice_client.get(reverse("circle_detail", args=[family.pk])).content.decode()
    assert (
        "carol" in owner_page
        and reverse("circle_request_approve", args=[family.pk, join_request.pk]) in owner_page
    )
    alice_client.post(reverse("circle_request_approve", args=[family.pk, join_request.pk]))
    circle_page = visitor.get(reverse("circle_detail", args=[family.pk]))
    assert circle_page.status_code == 200 and "Tulips in spring" in circle_page.content.decode()
    assert circle_logs(viewer__username="carol", memory=memory).count() == 1


def test_signed_out_ask_goes_to_login_then_back_to_the_invite(client, alice, family):
    new = invite_create(circle=family, by=alice)
    response = client.post(reverse("circle_invite_ask", args=[new.token]))
    assert response.status_code == 302
    assert response["Location"] == f"{reverse('login')}?next={reverse('circle_invite', args=[new.token])}"


@pytest.mark.parametrize("target", ["https://evil.example/", "//evil.example/x", "javascript:alert(1)"])
def test_signup_ignores_a_next_that_leaves_the_site(client, db, target):
    response = client.post(
        reverse("signup"),
        {
            "username": "carol",
            "password1": "a sturdy passphrase",
            "password2": "a sturdy passphrase",
            "next": target,
        },
    )
    assert response.status_code == 302 and response["Location"] == reverse("timeline")


# --- add a memory from the circle's page ---------------------------------------------------


def _add_data(**overrides) -> dict:
    return {"body": "We baked apple pie.", "title": "", "sensitivity": "public", **overrides}


@pytest.mark.parametrize("htmx", [False, True])
def test_a_memory_added_on_the_circle_page_is_saved_in_my_journal_and_shared(
    bob_client, alice, bob, family, htmx
):
    response = bob_client.post(
        reverse("circle_memory_create", args=[family.pk]), _add_data(title="Pie"), **hx(htmx)
    )
    memory = Memory.objects.get(owner=bob)
    assert (memory.title, memory.body, memory.sensitivity) == ("Pie", "We baked apple pie.", "public")
    assert MemoryShare.objects.filter(memory=memory, circle=family, shared_by=bob).exists()
    if htmx:
        html = response.content.decode()
        assert html.lstrip().startswith('<form id="circle-add"')
        assert 'hx-swap-oob="afterbegin:#memory-list"' in html and f'id="memory-{memory.pk}"' in html
        assert "Memory saved and shared into Family." in html
    else:
        assert response.status_code == 302
        page = bob_client.get(response["Location"]).content.decode()
        assert "Memory saved and shared into Family." in page and "We baked apple pie." in page


@pytest.mark.parametrize("htmx", [False, True])
def test_a_refused_share_keeps_the_memory_private_and_names_who_has_not_consented(
    alice_client, alice, family, rose, htmx
):
    response = alice_client.post(
        reverse("circle_memory_create", args=[family.pk]),
        _add_data(body="Tea with Rose", people=[str(rose.pk)]),
        **hx(htmx),
    )
    memory = Memory.objects.get(owner=alice, body="Tea with Rose")
    assert list(memory.participants.values_list("person_id", flat=True)) == [rose.pk]
    assert not MemoryShare.objects.exists()
    html = response.content.decode() if htmx else alice_client.get(response["Location"]).content.decode()
    assert "Saved in your journal, but not shared into Family" in html
    assert f'<a href="{reverse("person_detail", args=[rose.pk])}">Grandma Rose</a> (pending)' in html
    assert 'hx-swap-oob="afterbegin:#memory-list"' not in html


def test_people_from_another_journal_cannot_be_picked(bob_client, bob, family, rose):
    response = bob_client.post(
        reverse("circle_memory_create", args=[family.pk]), _add_data(people=[str(rose.pk)])
    )
    assert response.status_code == 200 and "Pick people from your journal." in response.content.decode()
    assert not Memory.objects.filter(owner=bob).exists()


@pytest.mark.parametrize("htmx", [False, True])
def test_an_empty_memory_is_refused_and_nothing_is_written(bob_client, bob, family, htmx):
    response = bob_client.post(
        reverse("circle_memory_create", args=[family.pk]), _add_data(body="  "), **hx(htmx)
    )
    assert response.status_code == 200
    assert "a memory needs a body" in response.content.decode()
    assert not Memory.objects.filter(owner=bob).exists() and not MemoryShare.objects.exists()


# --- the memory page: Share and "Who can see this" ---------------------------------------------


@pytest.mark.parametrize("htmx", [False, True])
def test_memory_page_share_panel_lists_my_circles_and_who_has_not_consented(
    alice_client, alice, family, rose, htmx
):
    care = circle_create(owner=alice, name="Care team")
    memory = memory_create(owner=alice, body="Tea with Rose", participants=[ParticipantSpec(person=rose)])
    grant(rose, family)
    memory_share(memory=memory, circle=family, by=alice)
    html = alice_client.get(reverse("memory_detail", args=[memory.pk]), **hx(htmx)).content.decode()
    panel = html[html.index('id="share-panel"') : html.index('id="privacy-audit"')]
    assert "Family" in panel and "Care team" in panel
    assert reverse("memory_unshare", args=[family.pk, memory.pk]) in panel
    assert reverse("memory_share", args=[care.pk, memory.pk]) in panel
    care_row = panel[panel.index("Care team") :]
    assert f'<a href="{reverse("person_detail", args=[rose.pk])}">Grandma Rose</a>' in care_row
    assert "consent-pending" in care_row


@pytest.mark.parametrize("htmx", [False, True])
def test_sharing_and_unsharing_from_the_memory_page(alice_client, alice, family, htmx):
    memory = memory_create(owner=alice, body="Tulips in spring", sensitivity="public")
    response = alice_client.post(reverse("memory_share", args=[family.pk, memory.pk]), **hx(htmx))
    assert MemoryShare.objects.filter(memory=memory, circle=family).exists()
    if htmx:
        html = response.content.decode()
        assert html.lstrip().startswith('<section id="share-panel"')
        assert "Shared into Family: seen by 2 of 2 members." in html
        # "Who can see this" follows out of band: bob now sees it.
        audit = html[html.index('id="privacy-audit"') :]
        assert 'hx-swap-oob="true"' in audit and "bob" in audit
    else:
        assert response["Location"] == reverse("memory_detail", args=[memory.pk]) + "#share-panel"
    alice_client.post(reverse("memory_unshare", args=[family.pk, memory.pk]), **hx(htmx))
    assert not MemoryShare.objects.filter(memory=memory).exists()
    assert Memory.objects.filter(pk=memory.pk).exists()


@pytest.mark.parametrize("htmx", [False, True])
def test_a_refused_share_names_the_person_and_writes_nothing(alice_client, alice, family, rose, htmx):
    memory = memory_create(owner=alice, body="Tea with Rose", participants=[ParticipantSpec(person=rose)])
    grant(rose, family, ConsentStatus.REVOKED)
    response = alice_client.post(
        reverse("memory_share", args=[family.pk, memory.pk]), **hx(htmx), follow=not htmx
    )
    html = response.content.decode()
    assert "Not shared into Family" in html
    assert f'<a href="{reverse("person_detail", args=[rose.pk])}">Grandma Rose</a> (revoked)' in html
    assert not MemoryShare.objects.exists()
    assert PersonConsent.objects.get(person=rose, audience=family.audience).status == "revoked"


def test_a_memory_can_only_be_shared_by_its_owner(bob_client, mallory_client, alice, family):
    memory = memory_create(owner=alice, body="Tulips in spring", sensitivity="public")
    assert bob_client.post(reverse("memory_share", args=[family.pk, memory.pk])).status_code == 404
    assert not MemoryShare.objects.exists()


def test_who_can_see_this_answers_owner_agents_and_each_member(alice_client, alice, bob, family, rose):
    grant(rose, family)
    memory = shared(alice, family, "Rose's birthday", people=[rose], sensitivity="personal")
    html = alice_client.get(reverse("memory_detail", args=[memory.pk])).content.decode()
    audit = html[html.index('id="privacy-audit"') : html.index('id="access-log"')]
    assert "You (the owner)" in audit and "Your agents" in audit
    assert "Grandma Rose has not consented (pending)" in audit  # agents: Rose said yes to Family only
    assert "In <a" in audit and "Family" in audit
    bob_row = audit[audit.index('<span class="audit-who">bob</span>') - 80 :]
    assert "consent-revoked" in bob_row[:120]  # No
    assert "personal and not about them: shown only to a member it is about" in bob_row


# --- the person page: consent per audience ---------------------------------------------------


@pytest.mark.parametrize("htmx", [False, True])
def test_person_page_has_a_consent_switch_per_audience(alice_client, alice, family, rose, htmx):
    care = circle_create(owner=alice, name="Care team")
    html = alice_client.get(reverse("person_detail", args=[rose.pk]), **hx(htmx)).content.decode()
    assert reverse("person_consent", args=[rose.pk]) in html  # My agents, as before
    assert reverse("person_circle_consent", args=[family.pk, rose.pk]) in html
    assert reverse("person_circle_consent", args=[care.pk, rose.pk]) in html
    assert 'id="audience-agents"' in html and f'id="audience-{family.pk}"' in html


@pytest.mark.parametrize("htmx", [False, True])
def test_setting_consent_for_a_circle_records_the_audience(alice_client, alice, family, rose, htmx):
    response = alice_client.post(
        reverse("person_circle_consent", args=[family.pk, rose.pk]),
        {"status": "granted", "reason": "said yes at lunch"},
        **hx(htmx),
    )
    consent = PersonConsent.objects.get(person=rose, audience=family.audience)
    assert (consent.status, consent.reason) == ("granted", "said yes at lunch")
    rose.refresh_from_db()
    assert rose.consent_status == ConsentStatus.PENDING  # My agents is its own audience
    event = ConsentEvent.objects.get(person=rose)
    assert (event.audience, event.new_status, event.surface, event.actor) == (
        family.audience,
        "granted",
        "ui",
        alice,
    )
    if htmx:
        html = response.content.decode()
        assert html.lstrip().startswith('<section id="consent-panel"')
    else:
        assert response["Location"] == reverse("person_detail", args=[rose.pk])
        html = alice_client.get(response["Location"]).content.decode()
        assert "Grandma Rose&#x27;s consent for Family is now granted." in html
    history = html[html.index('class="history"') :]
    assert '<span class="history-audience">Family</span>' in history and "said yes at lunch" in history


def test_history_names_each_events_audience(alice_client, alice, family, rose):
    person_set_consent(person=rose, status="granted", actor=alice, reason="agents ok")
    grant(rose, family)
    html = alice_client.get(reverse("person_detail", args=[rose.pk])).content.decode()
    history = html[html.index('class="history"') :]
    assert '<span class="history-audience">My agents</span>' in history
    assert '<span class="history-audience">Family</span>' in history


@pytest.mark.parametrize("htmx", [False, True])
def test_a_bad_circle_consent_shows_the_error_and_changes_nothing(alice_client, family, rose, htmx):
    response = alice_client.post(
        reverse("person_circle_consent", args=[family.pk, rose.pk]), {"status": "maybe"}, **hx(htmx)
    )
    assert response.status_code == 200
    assert "Choose granted, pending or revoked." in response.content.decode()
    assert not PersonConsent.objects.filter(person=rose, audience=family.audience).exists()


def test_self_is_granted_by_sharing_without_a_switch(alice_client, alice, family):
    me = Person.objects.get(owner=alice, is_self=True)
    html = alice_client.get(reverse("person_detail", args=[me.pk])).content.decode()
    assert "granted by sharing" in html
    assert reverse("person_circle_consent", args=[family.pk, me.pk]) not in html
    assert reverse("person_consent", args=[me.pk]) in html  # My agents keeps its switch
    response = alice_client.post(
        reverse("person_circle_consent", args=[family.pk, me.pk]), {"status": "revoked"}
    )
    assert "given by sharing a memory into it" in response.content.decode()
    assert not PersonConsent.objects.filter(person=me, audience=family.audience).exists()


def test_circle_consent_is_only_for_my_people_and_my_circles(
    mallory_client, bob_client, mallory, family, rose
):
    url = reverse("person_circle_consent", args=[family.pk, rose.pk])
    assert mallory_client.post(url, {"status": "granted"}).status_code == 404
    assert bob_client.post(url, {"status": "granted"}).status_code == 404  # Bob is in Family, Rose is not his
    mallorys = person_create(owner=mallory, display_name="M")
    other = reverse("person_circle_consent", args=[family.pk, mallorys.pk])
    assert mallory_client.post(other, {"status": "granted"}).status_code == 404  # not her circle
    assert not PersonConsent.objects.exclude(audience="agents").exists()
    assert not ConsentEvent.objects.exists()


def test_a_linked_person_grants_for_themself_so_the_owner_is_told_why_not(alice_client, bob, family, rose):
    Person.objects.filter(pk=rose.pk).update(linked_user=bob)
    response = alice_client.post(
        reverse("person_circle_consent", args=[family.pk, rose.pk]), {"status": "granted"}, **HX
    )
    assert response.status_code == 200
    assert "decides their own consent" in response.content.decode()
    assert not PersonConsent.objects.filter(person=rose, audience=family.audience).exists()
