"""The lifecycle on the owner's pages: inferred kind and sensitivity, refused secrets,
expiry badges and filter, and supersession (link, chain, undo, worker suggestions)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from memories.models import EdgeKind, Memory, MemoryEdge, ProposalStatus, SupersessionProposal
from memories.services import ParticipantSpec, memory_create
from memories.supersession import memory_supersede
from people.models import Person
from people.services import person_create
from tests.memories.test_views import CARD, HX, quick_add_data

SECRET_BODY = "New router. wifi password: Tr0ub4dor&3 (kitchen)"


def _headers(htmx: bool) -> dict:
    return HX if htmx else {}


@pytest.fixture
def bob(alice):
    return person_create(owner=alice, display_name="Bob")


def _expired_event(owner, body: str) -> Memory:
    return memory_create(
        owner=owner, body=body, kind="event", occurred_at=timezone.now() - timedelta(days=40)
    )


def _card(html: str, text: str) -> str:
    """The one memory card on a page that contains `text`."""
    (card,) = [card for card in html.split(CARD)[1:] if text in card]
    return card


def _pair(owner, *, older_body="Bob lives in Paris", newer_body="Bob moved to Berlin"):
    now = timezone.now()
    older = memory_create(
        owner=owner,
        body=older_body,
        kind="knowledge",
        sensitivity="personal",
        occurred_at=now - timedelta(days=9),
    )
    newer = memory_create(
        owner=owner,
        body=newer_body,
        kind="knowledge",
        sensitivity="personal",
        occurred_at=now - timedelta(days=1),
    )
    return older, newer


def _proposal(older: Memory, newer: Memory, similarity: float = 0.83) -> SupersessionProposal:
    # What the worker's supersession_propose stores (it needs real embeddings to decide).
    return SupersessionProposal.objects.create(
        owner_id=older.owner_id, older=older, newer=newer, similarity=similarity
    )


# --- Kind and sensitivity: "Work it out" -------------------------------------------------------


def test_quick_add_offers_work_it_out_first_and_selected(alice_client):
    html = alice_client.get(reverse("timeline")).content.decode()
    for name in ("kind", "sensitivity"):
        select = html[html.index(f'name="{name}"') :]
        select = select[: select.index("</select>")]
        assert select[select.index("<option") :].startswith('<option value="" selected>Work it out</option>')
    assert "“remind me” makes a task, “loves” a preference" in html
    assert (
        "religion, politics, legal matters, a break-up, a confidence or passwords make it sensitive" in html
    )
    # Short-lived kinds say how long agents may use them.
    assert ">Event (30 days)</option>" in html and ">Knowledge</option>" in html


@pytest.mark.parametrize("htmx", [False, True])
def test_quick_add_left_to_work_it_out_infers_kind_and_sensitivity(alice_client, alice, htmx):
    data = quick_add_data(
        body="Remind me to book the doctor about my blood pressure", kind="", sensitivity=""
    )
    response = alice_client.post(reverse("memory_create"), data, **_headers(htmx))
    memory = Memory.objects.get(owner=alice)
    assert (memory.kind, memory.sensitivity) == ("task", "sensitive")
    assert memory.expires_at == memory.occurred_at + timedelta(days=14)
    note = "Worked out from the text — kind: task, sensitivity: sensitive."
    if htmx:
        html = response.content.decode()
        assert response.status_code == 200
        assert '<div id="messages" class="messages" hx-swap-oob="true">' in html
        assert note in html
    else:
        assert response.status_code == 302
        assert note in alice_client.get(response["Location"]).content.decode()


def test_quick_add_works_out_a_preference_and_personal(alice_client, alice):
    alice_client.post(
        reverse("memory_create"), quick_add_data(body="Bob loves jazz", kind="", sensitivity="")
    )
    memory = Memory.objects.get(owner=alice)
    assert (memory.kind, memory.sensitivity, memory.expires_at) == ("preference", "personal", None)


def test_an_explicit_kind_and_sensitivity_win_over_the_text(alice_client, alice):
    data = quick_add_data(body="Remind me: the doctor's number", kind="knowledge", sensitivity="public")
    response = alice_client.post(reverse("memory_create"), data, follow=True)
    memory = Memory.objects.get(owner=alice)
    assert (memory.kind, memory.sensitivity) == ("knowledge", "public")
    assert "Worked out" not in response.content.decode()


def test_editing_back_to_work_it_out_infers_again(alice_client, alice):
    memory = memory_create(
        owner=alice, body="Need to renew my passport", kind="knowledge", sensitivity="public"
    )
    edit_page = alice_client.get(reverse("memory_edit", args=[memory.pk])).content.decode()
    assert '<option value="knowledge" selected>Knowledge</option>' in edit_page
    assert "“Work it out” guesses from your words" in edit_page
    data = quick_add_data(body="Need to renew my passport", kind="", sensitivity="")
    response = alice_client.post(reverse("memory_edit", args=[memory.pk]), data, follow=True)
    assert "Worked out from the text — kind: task, sensitivity: personal." in response.content.decode()
    memory.refresh_from_db()
    assert (memory.kind, memory.sensitivity) == ("task", "personal")


@pytest.mark.parametrize("htmx", [False, True])
def test_quick_add_refuses_a_password_in_place_keeping_the_text_and_saving_nothing(alice_client, alice, htmx):
    data = quick_add_data(body=SECRET_BODY, kind="", sensitivity="", **{"people-0-new_name": "Dora"})
    response = alice_client.post(reverse("memory_create"), data, **_headers(htmx))
    assert response.status_code == 200
    html = response.content.decode()
    assert "Keepsake is not a secret store: this looks like a password or key." in html
    # Shown on the body field itself, with what was typed still there to fix.
    body_field = html[html.index('<div class="field has-error">') :]
    assert body_field.index('name="body"') < body_field.index("Keepsake is not a secret store")
    assert "Tr0ub4dor&amp;3 (kitchen)</textarea>" in html
    assert 'value="Dora"' in html
    if htmx:
        assert html.lstrip().startswith('<form id="quick-add"') and "hx-swap-oob" not in html
    assert not Memory.objects.filter(owner=alice).exists()
    assert not Person.objects.filter(owner=alice, display_name="Dora").exists()


def test_quick_add_refuses_a_secret_in_the_title_whatever_the_sensitivity(alice_client, alice):
    data = quick_add_data(
        title="api_key = sk_live_abcdefghijklmnop1234", body="Shop set-up", sensitivity="sensitive"
    )
    html = alice_client.post(reverse("memory_create"), data).content.decode()
    assert "Keepsake is not a secret store" in html
    assert not Memory.objects.filter(owner=alice).exists()


def test_edit_refuses_a_password_and_changes_nothing(alice_client, alice, bob):
    memory = memory_create(owner=alice, body="Router set up", participants=[ParticipantSpec(person=bob)])
    data = quick_add_data(body=SECRET_BODY, **{"people-0-new_name": "Dora"})
    response = alice_client.post(reverse("memory_edit", args=[memory.pk]), data, **HX)
    assert response.status_code == 200
    assert "Keepsake is not a secret store" in response.content.decode()
    memory.refresh_from_db()
    assert memory.body == "Router set up"
    assert list(memory.participants.values_list("person__display_name", flat=True)) == ["Bob"]
    assert not Person.objects.filter(owner=alice, display_name="Dora").exists()


# --- Expiry ---------------------------------------------------------------------------------------


def test_expired_memory_card_says_expired_and_hidden_from_agents(alice_client, alice):
    _expired_event(alice, "Old concert")
    memory_create(owner=alice, body="Fresh concert", kind="event")
    html = alice_client.get(reverse("timeline")).content.decode()
    old_card = _card(html, "Old concert")
    assert '<span class="tag tag-expired"' in old_card
    assert "Hidden from agents: expired, agents no longer see this" in old_card
    fresh_card = _card(html, "Fresh concert")
    assert "tag-expired" not in fresh_card and "Hidden from agents" not in fresh_card


def test_expired_badge_keeps_naming_who_has_not_consented(alice_client, alice, bob):
    memory_create(
        owner=alice,
        body="Party with Bob",
        kind="event",
        occurred_at=timezone.now() - timedelta(days=60),
        participants=[ParticipantSpec(person=bob)],
    )
    html = alice_client.get(reverse("timeline")).content.decode()
    assert "Hidden from agents: Bob (pending) · expired, agents no longer see this" in html


def test_card_names_a_source_who_has_not_consented(alice_client, alice):
    carol = person_create(owner=alice, display_name="Carol")
    memory_create(owner=alice, body="Heard the shop closes", source_person=carol)
    html = alice_client.get(reverse("timeline")).content.decode()
    assert "Hidden from agents: told by Carol (pending)" in html


@pytest.mark.parametrize("htmx", [False, True])
def test_memory_page_of_an_expired_memory_says_agents_no_longer_see_it(alice_client, alice, htmx):
    memory = _expired_event(alice, "Old concert")
    html = alice_client.get(reverse("memory_detail", args=[memory.pk]), **_headers(htmx)).content.decode()
    assert '<span class="tag tag-expired">Expired</span>' in html
    assert f"Expired on {timezone.localtime(memory.expires_at):%-d %B %Y}:" in html
    assert "agents no longer see this" in html
    assert "your agents may use it" not in html
    assert "expires on" not in html


def test_memory_page_of_a_short_lived_memory_says_when_it_expires(alice_client, alice):
    task = memory_create(owner=alice, body="Buy stamps", kind="task")
    html = alice_client.get(reverse("memory_detail", args=[task.pk])).content.decode()
    assert f"expires on {timezone.localtime(task.expires_at):%-d %B %Y}" in html
    assert "tag-expired" not in html
    knowledge = memory_create(owner=alice, body="The sky is blue", kind="knowledge")
    html = alice_client.get(reverse("memory_detail", args=[knowledge.pk])).content.decode()
    assert "expires on" not in html and "tag-expired" not in html


@pytest.mark.parametrize(
    ("choice", "shown", "not_shown"),
    [
        ("", {"Old concert", "Fresh concert"}, set()),
        ("live", {"Fresh concert"}, {"Old concert"}),
        ("expired", {"Old concert"}, {"Fresh concert"}),
    ],
)
def test_timeline_expiry_filter(alice_client, alice, choice, shown, not_shown):
    _expired_event(alice, "Old concert")
    memory_create(owner=alice, body="Fresh concert", kind="event")
    html = alice_client.get(reverse("timeline"), {"expired": choice}).content.decode()
    assert all(body in html for body in shown)
    assert not any(body in html for body in not_shown)
    assert f'<option value="{choice}" selected>' in html


def test_timeline_expiry_filter_is_kept_by_infinite_scroll(alice_client, alice):
    for index in range(26):
        _expired_event(alice, f"Expired {index}")
    memory_create(owner=alice, body="Still live", kind="preference")
    first = alice_client.get(reverse("timeline"), {"expired": "expired"}).content.decode()
    assert 'hx-get="/?expired=expired&amp;page=2"' in first
    second = alice_client.get(reverse("timeline"), {"expired": "expired", "page": "2"}, **HX).content.decode()
    assert second.count(CARD) == 1
    assert "Still live" not in second


def test_timeline_bad_expiry_filter_is_an_error_not_a_guess(alice_client, alice):
    _expired_event(alice, "Old concert")
    html = alice_client.get(reverse("timeline"), {"expired": "maybe"}).content.decode()
    assert "Select a valid choice" in html and "Old concert" in html


# --- Supersession: linking by hand ----------------------------------------------------------------


def test_memory_page_offers_only_memories_it_could_replace(alice_client, alice, mallory):
    older, newer = _pair(alice)
    memory_create(owner=alice, body="Bob's diagnosis", sensitivity="sensitive")
    gone, replacement = _pair(alice, older_body="Bob liked tea", newer_body="Bob likes coffee now")
    memory_supersede(owner=alice, older=gone, newer=replacement)
    memory_create(owner=mallory, body="Mallory's note", sensitivity="personal")
    html = alice_client.get(reverse("memory_detail", args=[newer.pk])).content.decode()
    picker = html[
        html.index('id="supersede-pick"') : html.index("</form>", html.index('id="supersede-pick"'))
    ]
    assert f'value="{older.pk}"' in picker and "Bob lives in Paris" in picker
    # `replacement` happened after `newer` (by a moment): a memory only replaces older ones.
    assert replacement.occurred_at > newer.occurred_at
    for absent in (
        "Bob&#x27;s diagnosis",
        "Bob liked tea",
        "Mallory",
        f'value="{newer.pk}"',
        f'value="{replacement.pk}"',
    ):
        assert absent not in picker


@pytest.mark.parametrize("htmx", [False, True])
def test_finding_an_older_memory_by_its_words(alice_client, alice, htmx):
    older, newer = _pair(alice)
    memory_create(owner=alice, body="Bob's cat is called Miso")
    url = reverse("memory_supersede_options", args=[newer.pk])
    response = alice_client.get(url, {"q": "  lives   PARIS "}, **_headers(htmx))
    assert response.status_code == 200
    html = response.content.decode()
    assert "Bob lives in Paris" in html and "Miso" not in html
    assert 'name="q" value="lives PARIS"' in html  # carried to the POST, so a refusal keeps the list
    if htmx:
        assert html.lstrip().startswith('<form id="supersede-pick"') and "<html" not in html
    else:
        assert "<html" in html and 'id="supersede-q" type="search" name="q" value="lives PARIS"' in html
    nothing = alice_client.get(url, {"q": "zanzibar"}, **_headers(htmx)).content.decode()
    assert "No older personal memory matching “zanzibar” that this one could replace." in nothing


@pytest.mark.parametrize("htmx", [False, True])
def test_marking_a_memory_as_replacing_an_older_one(alice_client, alice, htmx):
    older, newer = _pair(alice)
    url = reverse("memory_supersede", args=[newer.pk])
    response = alice_client.post(url, {"older": str(older.pk), "q": ""}, **_headers(htmx))
    older.refresh_from_db()
    assert older.superseded_by_id == newer.pk
    assert MemoryEdge.objects.filter(source=newer, target=older, kind=EdgeKind.SUPERSEDES).exists()
    if htmx:
        assert response.status_code == 200
        html = response.content.decode()
        assert html.lstrip().startswith('<section id="supersession"')
        assert "Linked: this memory replaces “Bob lives in Paris”." in html
        assert html.index("Bob lives in Paris") < html.index("<strong>Bob moved to Berlin</strong>")
        assert "Replaced by this memory" in html
        assert '<div id="agent-visibility" class="agent-visibility" hx-swap-oob="true">' in html
    else:
        assert response.status_code == 302
        assert response["Location"] == reverse("memory_detail", args=[newer.pk])


def test_the_older_memory_page_says_what_replaced_it(alice_client, alice):
    older, newer = _pair(alice)
    memory_supersede(owner=alice, older=older, newer=newer)
    html = alice_client.get(reverse("memory_detail", args=[older.pk])).content.decode()
    assert "Replaced by a newer memory:</strong> hidden from agents" in html
    assert f'<a href="{reverse("memory_detail", args=[newer.pk])}">Bob moved to Berlin</a> instead' in html
    assert '<span class="tag tag-newest">Newest</span>' in html
    timeline = alice_client.get(reverse("timeline")).content.decode()
    assert "Hidden from agents: replaced by a newer memory" in timeline
    assert '<span class="tag tag-replaced"' in timeline


def test_chain_is_listed_oldest_first_on_every_page_of_it(alice_client, alice):
    now = timezone.now()
    first = memory_create(owner=alice, body="Lives in Paris", occurred_at=now - timedelta(days=30))
    second = memory_create(owner=alice, body="Moved to Lyon", occurred_at=now - timedelta(days=20))
    third = memory_create(owner=alice, body="Moved to Berlin", occurred_at=now - timedelta(days=10))
    memory_supersede(owner=alice, older=first, newer=second)
    memory_supersede(owner=alice, older=second, newer=third)
    for memory in (first, second, third):
        html = alice_client.get(reverse("memory_detail", args=[memory.pk])).content.decode()
        chain = html[html.index('<ol class="chain">') : html.index("</ol>", html.index('<ol class="chain">'))]
        assert chain.index("Lives in Paris") < chain.index("Moved to Lyon") < chain.index("Moved to Berlin")
        assert chain.count(">Undo</button>") == 2


@pytest.mark.parametrize("htmx", [False, True])
def test_a_refused_link_is_explained_in_place_and_changes_nothing(alice_client, alice, htmx):
    older, newer = _pair(alice)
    private = memory_create(owner=alice, body="Bob's test results", sensitivity="sensitive")
    response = alice_client.post(
        reverse("memory_supersede", args=[newer.pk]), {"older": str(private.pk), "q": "Bob"}, **_headers(htmx)
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert "Only memories with the same sensitivity can replace each other" in html
    assert 'name="q" value="Bob"' in html
    assert ("<html" in html) is (not htmx)
    private.refresh_from_db()
    assert private.superseded_by_id is None
    assert not MemoryEdge.objects.filter(kind=EdgeKind.SUPERSEDES).exists()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({}, "Pick the older memory this one replaces."),
        ({"older": "not-a-uuid"}, "is not a valid UUID"),
    ],
)
def test_linking_without_a_valid_choice_asks_for_one(alice_client, alice, data, message):
    older, newer = _pair(alice)
    response = alice_client.post(reverse("memory_supersede", args=[newer.pk]), data, **HX)
    assert response.status_code == 200
    assert message in response.content.decode()
    older.refresh_from_db()
    assert older.superseded_by_id is None


def test_a_memory_cannot_replace_itself(alice_client, alice):
    memory = memory_create(owner=alice, body="Alone")
    response = alice_client.post(reverse("memory_supersede", args=[memory.pk]), {"older": str(memory.pk)})
    assert "A memory cannot replace itself." in response.content.decode()
    memory.refresh_from_db()
    assert memory.superseded_by_id is None


@pytest.mark.parametrize("htmx", [False, True])
def test_undo_unlinks_and_agents_may_see_the_older_one_again(alice_client, alice, htmx):
    older, newer = _pair(alice)
    memory_supersede(owner=alice, older=older, newer=newer)
    response = alice_client.post(
        reverse("memory_unsupersede", args=[older.pk]), {"replaced": str(older.pk)}, **_headers(htmx)
    )
    older.refresh_from_db()
    assert older.superseded_by_id is None
    assert not MemoryEdge.objects.filter(kind=EdgeKind.SUPERSEDES).exists()
    if htmx:
        html = response.content.decode()
        assert "Undone: “Bob lives in Paris” is no longer replaced." in html
        # The page's own notice is refreshed out of band: nothing hides it now.
        notice = html[html.index('id="agent-visibility"') :]
        assert "your agents may use it" in notice and "Replaced by" not in notice
        assert '<ol class="chain">' not in html
    else:
        assert response.status_code == 302
        page = alice_client.get(response["Location"]).content.decode()
        assert "Undone: “Bob lives in Paris” is no longer replaced." in page


@pytest.mark.parametrize("replaced", ["", "nope"])
def test_undo_without_a_memory_is_a_400(alice_client, alice, replaced):
    memory = memory_create(owner=alice, body="Alone")
    response = alice_client.post(reverse("memory_unsupersede", args=[memory.pk]), {"replaced": replaced})
    assert response.status_code == 400


# --- Supersession: the worker's suggestions -------------------------------------------------------


@pytest.mark.parametrize("page", ["newer", "older"])
def test_suggestions_are_shown_on_both_memories_with_confirm_and_dismiss(alice_client, alice, page):
    older, newer = _pair(alice)
    proposal = _proposal(older, newer)
    memory = newer if page == "newer" else older
    html = alice_client.get(reverse("memory_detail", args=[memory.pk])).content.decode()
    if page == "newer":
        assert "This memory may replace" in html and "Bob lives in Paris</a>" in html
    else:
        assert "Bob moved to Berlin</a> may replace this memory" in html
    assert "83% alike" in html
    assert reverse("supersession_proposal_confirm", args=[memory.pk, proposal.pk]) in html
    assert reverse("supersession_proposal_dismiss", args=[memory.pk, proposal.pk]) in html


@pytest.mark.parametrize("htmx", [False, True])
def test_confirming_a_suggestion_links_the_pair(alice_client, alice, htmx):
    older, newer = _pair(alice)
    proposal = _proposal(older, newer)
    url = reverse("supersession_proposal_confirm", args=[older.pk, proposal.pk])
    response = alice_client.post(url, **_headers(htmx))
    older.refresh_from_db()
    proposal.refresh_from_db()
    assert older.superseded_by_id == newer.pk
    assert proposal.status == ProposalStatus.CONFIRMED
    if htmx:
        html = response.content.decode()
        assert "Confirmed: “Bob moved to Berlin” replaces “Bob lives in Paris”." in html
        assert "may replace this memory" not in html
        # This page's memory is now the replaced one: its notice says so, in place.
        notice = html[html.index('id="agent-visibility"') :]
        assert "Replaced by a newer memory:" in notice
    else:
        assert response.status_code == 302
        assert response["Location"] == reverse("memory_detail", args=[older.pk])


@pytest.mark.parametrize("htmx", [False, True])
def test_dismissing_a_suggestion_keeps_both_and_hides_it(alice_client, alice, htmx):
    older, newer = _pair(alice)
    proposal = _proposal(older, newer)
    url = reverse("supersession_proposal_dismiss", args=[newer.pk, proposal.pk])
    response = alice_client.post(url, **_headers(htmx))
    proposal.refresh_from_db()
    older.refresh_from_db()
    assert proposal.status == ProposalStatus.DISMISSED
    assert older.superseded_by_id is None
    page = response.content.decode() if htmx else alice_client.get(response["Location"]).content.decode()
    assert "Dismissed: that pair won&#x27;t be suggested again." in page
    assert "This memory may replace" not in page


def test_confirming_a_stale_suggestion_explains_why_it_cannot(alice_client, alice):
    older, newer = _pair(alice)
    proposal = _proposal(older, newer)
    other = memory_create(owner=alice, body="Bob moved to Rome", occurred_at=timezone.now())
    memory_supersede(owner=alice, older=older, newer=other)
    response = alice_client.post(reverse("supersession_proposal_confirm", args=[newer.pk, proposal.pk]), **HX)
    assert response.status_code == 200
    assert (
        "That memory is already replaced by another one. Undo that link first." in response.content.decode()
    )
    older.refresh_from_db()
    proposal.refresh_from_db()
    assert older.superseded_by_id == other.pk
    assert proposal.status == ProposalStatus.PENDING


def test_a_suggestion_is_only_reachable_from_its_own_memories(alice_client, alice):
    older, newer = _pair(alice)
    proposal = _proposal(older, newer)
    unrelated = memory_create(owner=alice, body="Unrelated")
    url = reverse("supersession_proposal_confirm", args=[unrelated.pk, proposal.pk])
    assert alice_client.post(url).status_code == 404
    assert alice_client.post(f"/memories/{newer.pk}/suggestions/{'9' * 30}/confirm/").status_code == 404
    proposal.refresh_from_db()
    assert proposal.status == ProposalStatus.PENDING


@pytest.mark.parametrize("name", ["memory_supersede", "memory_unsupersede"])
def test_supersession_actions_need_post(alice_client, alice, name):
    memory = memory_create(owner=alice, body="Alone")
    assert alice_client.get(reverse(name, args=[memory.pk])).status_code == 405


# --- Mallory: none of it exists for her ----------------------------------------------------------


def _alice_state(older: Memory, newer: Memory, proposal: SupersessionProposal) -> tuple:
    older.refresh_from_db()
    newer.refresh_from_db()
    proposal.refresh_from_db()
    return older.superseded_by_id, newer.superseded_by_id, proposal.status, MemoryEdge.objects.count()


@pytest.mark.parametrize(
    "action",
    [
        "options",
        "supersede",
        "undo",
        "confirm",
        "dismiss",
        "confirm-from-her-memory",
        "dismiss-from-her-memory",
        "undo-from-her-memory",
    ],
)
@pytest.mark.parametrize("htmx", [False, True])
def test_another_owners_memories_and_suggestions_answer_404_and_nothing_changes(
    mallory_client, alice, mallory, action, htmx
):
    older, newer = _pair(alice)
    third = memory_create(owner=alice, body="Bob visits Rome", occurred_at=timezone.now())
    memory_supersede(owner=alice, older=newer, newer=third)
    proposal = _proposal(older, newer)
    hers = memory_create(owner=mallory, body="Mallory's own memory")
    before = _alice_state(older, newer, proposal)
    requests = {
        "options": ("get", reverse("memory_supersede_options", args=[newer.pk]), {"q": "Bob"}),
        "supersede": ("post", reverse("memory_supersede", args=[newer.pk]), {"older": str(older.pk)}),
        "undo": ("post", reverse("memory_unsupersede", args=[newer.pk]), {"replaced": str(newer.pk)}),
        "confirm": ("post", reverse("supersession_proposal_confirm", args=[newer.pk, proposal.pk]), {}),
        "dismiss": ("post", reverse("supersession_proposal_dismiss", args=[older.pk, proposal.pk]), {}),
        "confirm-from-her-memory": (
            "post",
            reverse("supersession_proposal_confirm", args=[hers.pk, proposal.pk]),
            {},
        ),
        "dismiss-from-her-memory": (
            "post",
            reverse("supersession_proposal_dismiss", args=[hers.pk, proposal.pk]),
            {},
        ),
        "undo-from-her-memory": (
            "post",
            reverse("memory_unsupersede", args=[hers.pk]),
            {"replaced": str(newer.pk)},
        ),
    }
    method, url, data = requests[action]
    response = getattr(mallory_client, method)(url, data, **_headers(htmx))
    assert response.status_code == 404
    html = response.content.decode()
    assert "Bob" not in html and "Paris" not in html
    assert _alice_state(older, newer, proposal) == before


def test_another_owners_memory_cannot_be_picked_as_the_older_one(mallory_client, alice, mallory):
    alices = memory_create(owner=alice, body="Alice's diary", sensitivity="personal")
    hers = memory_create(owner=mallory, body="Mallory's own memory", sensitivity="personal")
    response = mallory_client.post(
        reverse("memory_supersede", args=[hers.pk]), {"older": str(alices.pk)}, **HX
    )
    assert response.status_code == 200
    html = response.content.decode()
    assert "Pick one of your memories from the list." in html
    assert "Alice" not in html
    alices.refresh_from_db()
    assert alices.superseded_by_id is None
    assert not MemoryEdge.objects.exists()
