from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse
from django.utils import timezone

from memories.models import EdgeKind, Memory, MemoryEdge, MemoryParticipant
from memories.services import NewPersonSpec, ParticipantSpec, memory_create, memory_create_with_new_people
from people.models import ConsentStatus, Person
from people.services import person_create, person_set_consent

HX = {"HTTP_HX_REQUEST": "true"}
CARD = 'class="memory-card card"'


@pytest.fixture
def bob(alice):
    return person_create(owner=alice, display_name="Bob")


def quick_add_data(**overrides) -> dict:
    """A filled-in quick-add form: memory fields plus three empty people rows."""
    data = {
        "body": "We planted tulips.",
        "title": "",
        "occurred_at": "",
        "kind": "event",
        "sensitivity": "personal",
        "source_person": "",
        "people-TOTAL_FORMS": "3",
        "people-INITIAL_FORMS": "0",
        "people-MIN_NUM_FORMS": "0",
        "people-MAX_NUM_FORMS": "20",
    }
    for row in range(3):
        data.update(
            {f"people-{row}-person": "", f"people-{row}-new_name": "", f"people-{row}-role": "subject"}
        )
    data.update(overrides)
    return data


# --- Timeline ---------------------------------------------------------------------------------


@pytest.mark.parametrize("htmx", [False, True])
def test_timeline_lists_own_memories_newest_first(alice_client, alice, mallory, htmx):
    now = timezone.now()
    memory_create(owner=alice, body="Older walk", occurred_at=now - timedelta(days=2))
    memory_create(owner=alice, body="Newer walk", occurred_at=now - timedelta(days=1))
    memory_create(owner=mallory, body="Mallory's secret")
    response = alice_client.get(reverse("timeline"), **(HX if htmx else {}))
    assert response.status_code == 200
    html = response.content.decode()
    assert html.index("Newer walk") < html.index("Older walk")
    assert "Mallory" not in html
    if htmx:
        # The fragment is the cards alone (what infinite scroll appends).
        assert "<html" not in html and 'id="quick-add"' not in html
    else:
        assert 'id="quick-add"' in html
        assert '<form class="search-box" action="/search/" method="get"' in html
        assert 'name="q"' in html


def test_timeline_page_has_htmx_and_csrf_header(alice_client):
    html = alice_client.get(reverse("timeline")).content.decode()
    assert "django_htmx/htmx-2.min.js" in html
    assert 'hx-headers=\'{"x-csrftoken": "' in html


def test_timeline_scrolls_25_at_a_time(alice_client, alice):
    start = timezone.now()
    for index in range(30):
        memory_create(owner=alice, body=f"Memory {index:02d}", occurred_at=start - timedelta(hours=index))
    first = alice_client.get(reverse("timeline")).content.decode()
    assert first.count(CARD) == 25
    assert 'hx-get="/?page=2" hx-trigger="revealed" hx-swap="outerHTML"' in first
    assert '<a href="/?page=2">Older memories</a>' in first
    second = alice_client.get(reverse("timeline"), {"page": "2"}, **HX).content.decode()
    assert second.count(CARD) == 5
    assert "Memory 29" in second and "Memory 24" not in second
    assert 'hx-trigger="revealed"' not in second


def test_timeline_page_number_too_large_for_the_database_is_just_empty(alice_client, alice):
    memory_create(owner=alice, body="Only one")
    response = alice_client.get(reverse("timeline"), {"page": "9" * 30}, **HX)
    assert response.status_code == 200
    assert CARD not in response.content.decode()


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"person": "not-a-uuid"}, "is not a valid UUID"),
        ({"kind": "gossip"}, "Select a valid choice"),
        ({"date_from": "last tuesday"}, "Enter a valid date"),
    ],
)
def test_timeline_bad_filter_values_show_errors(alice_client, alice, params, message):
    memory_create(owner=alice, body="Still listed")
    response = alice_client.get(reverse("timeline"), params)
    assert response.status_code == 200
    assert message in response.content.decode()
    assert "Still listed" in response.content.decode()


@pytest.mark.parametrize("page", ["0", "-3", "abc", ""])
def test_timeline_treats_bad_page_numbers_as_the_first(alice_client, alice, page):
    memory_create(owner=alice, body="Only one")
    response = alice_client.get(reverse("timeline"), {"page": page})
    assert response.status_code == 200
    assert response.content.decode().count(CARD) == 1


def test_timeline_page_past_the_end_is_empty(alice_client, alice):
    memory_create(owner=alice, body="Only one")
    response = alice_client.get(reverse("timeline"), {"page": "99"}, **HX)
    assert response.status_code == 200
    assert CARD not in response.content.decode()


def test_timeline_filters_by_person(alice_client, alice, bob):
    memory_create(owner=alice, body="Chess with Bob", participants=[ParticipantSpec(person=bob)])
    memory_create(owner=alice, body="Alone at the lake")
    html = alice_client.get(reverse("timeline"), {"person": str(bob.pk)}).content.decode()
    assert "Chess with Bob" in html and "Alone at the lake" not in html


def test_timeline_filters_by_kind_and_date_range(alice_client, alice):
    memory_create(owner=alice, body="Buy milk", kind="task", occurred_at=timezone.now() - timedelta(days=40))
    memory_create(owner=alice, body="Likes jazz", kind="preference", occurred_at=timezone.now())
    memory_create(owner=alice, body="Call the plumber", kind="task", occurred_at=timezone.now())
    by_kind = alice_client.get(reverse("timeline"), {"kind": "task"}).content.decode()
    assert "Buy milk" in by_kind and "Call the plumber" in by_kind and "Likes jazz" not in by_kind
    since = (timezone.now() - timedelta(days=7)).date().isoformat()
    recent_tasks = alice_client.get(
        reverse("timeline"), {"kind": "task", "date_from": since}
    ).content.decode()
    assert "Call the plumber" in recent_tasks and "Buy milk" not in recent_tasks
    until = (timezone.now() - timedelta(days=30)).date().isoformat()
    old = alice_client.get(reverse("timeline"), {"date_to": until}).content.decode()
    assert "Buy milk" in old and "Call the plumber" not in old


def test_infinite_scroll_link_keeps_the_filters(alice_client, alice):
    for index in range(26):
        memory_create(owner=alice, body=f"Task {index}", kind="task")
    memory_create(owner=alice, body="Not a task", kind="preference")
    first = alice_client.get(reverse("timeline"), {"kind": "task"}).content.decode()
    assert 'hx-get="/?kind=task&amp;page=2"' in first
    second = alice_client.get(reverse("timeline"), {"kind": "task", "page": "2"}, **HX).content.decode()
    assert second.count(CARD) == 1
    assert "Not a task" not in second


def test_timeline_reversed_date_range_shows_error(alice_client, alice):
    memory_create(owner=alice, body="Still listed")
    response = alice_client.get(reverse("timeline"), {"date_from": "2024-05-02", "date_to": "2024-05-01"})
    assert response.status_code == 200
    html = response.content.decode()
    assert "The “from” date must be on or before the “to” date." in html
    assert "Still listed" in html  # an invalid filter is ignored, not guessed at


def test_timeline_filter_by_another_owners_person_is_an_error_not_a_leak(mallory_client, mallory, bob):
    memory_create(owner=mallory, body="Mallory's own memory")
    response = mallory_client.get(reverse("timeline"), {"person": str(bob.pk)})
    assert response.status_code == 200
    html = response.content.decode()
    assert "Select a valid choice" in html
    assert "Bob" not in html


# --- Quick add -----------------------------------------------------------------------------------


def test_quick_add_saves_memory_with_existing_and_new_people(alice_client, alice, bob):
    data = quick_add_data(
        body="Picnic by the river",
        title="Picnic",
        occurred_at="2024-05-01T14:30",
        kind="event",
        sensitivity="sensitive",
        **{
            "people-0-person": str(bob.pk),
            "people-0-role": "present",
            "people-1-new_name": "  Carol  ",
            "people-1-role": "subject",
        },
    )
    response = alice_client.post(reverse("memory_create"), data)
    assert response.status_code == 302
    assert response["Location"] == reverse("timeline")
    memory = Memory.objects.get(owner=alice)
    assert (memory.title, memory.body, memory.kind, memory.sensitivity) == (
        "Picnic",
        "Picnic by the river",
        "event",
        "sensitive",
    )
    assert memory.occurred_at.isoformat().startswith("2024-05-01T14:30")
    carol = Person.objects.get(owner=alice, display_name="Carol")
    assert carol.consent_status == ConsentStatus.PENDING
    roles = {(p.person.display_name, p.role) for p in MemoryParticipant.objects.filter(memory=memory)}
    assert roles == {("Bob", "present"), ("Carol", "subject")}


def test_quick_add_without_when_uses_now(alice_client, alice):
    before = timezone.now()
    alice_client.post(reverse("memory_create"), quick_add_data())
    memory = Memory.objects.get(owner=alice)
    assert before <= memory.occurred_at <= timezone.now()


def test_quick_add_over_htmx_returns_fresh_form_and_new_card(alice_client, alice, bob):
    data = quick_add_data(body="Coffee with Bob", **{"people-0-person": str(bob.pk)})
    response = alice_client.post(reverse("memory_create"), data, **HX)
    assert response.status_code == 200
    html = response.content.decode()
    assert "<html" not in html
    assert html.lstrip().startswith('<form id="quick-add"')
    # The list is drawn again out of band, so the new card lands where its date puts it.
    assert '<div id="memory-list" class="memory-list" hx-swap-oob="innerHTML">' in html
    assert "Coffee with Bob" in html
    assert "Hidden from agents: Bob (pending)" in html
    assert Memory.objects.filter(owner=alice).count() == 1


@pytest.mark.parametrize("htmx", [False, True])
def test_quick_add_with_blank_body_shows_error_and_saves_nothing(alice_client, alice, htmx):
    data = quick_add_data(body="   ", **{"people-0-new_name": "Dora"})
    response = alice_client.post(reverse("memory_create"), data, **(HX if htmx else {}))
    assert response.status_code == 200
    html = response.content.decode()
    assert "Write something: a memory needs a body." in html
    assert 'value="Dora"' in html  # what was typed is kept
    assert not Memory.objects.filter(owner=alice).exists()
    assert not Person.objects.filter(owner=alice, display_name="Dora").exists()


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"kind": "gossip"}, "Select a valid choice"),
        ({"sensitivity": "secret"}, "Select a valid choice"),
        ({"occurred_at": "yesterday-ish"}, "Enter a date, e.g. 2024-05-01."),
        ({"occurred_time": "teatime"}, "Enter a time, e.g. 14:30."),
        ({"title": "x" * 201}, "at most 200 characters"),
    ],
)
def test_quick_add_with_bad_field_saves_nothing(alice_client, alice, overrides, message):
    data = quick_add_data(**{"people-0-new_name": "Dora"}, **overrides)
    response = alice_client.post(reverse("memory_create"), data)
    assert response.status_code == 200
    assert message in response.content.decode()
    assert not Memory.objects.filter(owner=alice).exists()
    assert not Person.objects.filter(owner=alice, display_name="Dora").exists()


def test_quick_add_refuses_the_same_person_twice(alice_client, alice, bob):
    data = quick_add_data(**{"people-0-person": str(bob.pk), "people-1-person": str(bob.pk)})
    response = alice_client.post(reverse("memory_create"), data)
    assert response.status_code == 200
    assert "Bob is listed more than once." in response.content.decode()
    assert not Memory.objects.filter(owner=alice).exists()


def test_quick_add_refuses_a_person_picked_and_typed_in_one_row(alice_client, alice, bob):
    data = quick_add_data(**{"people-0-person": str(bob.pk), "people-0-new_name": "Dora"})
    response = alice_client.post(reverse("memory_create"), data)
    assert "Pick someone or type a new name, not both." in response.content.decode()
    assert not Memory.objects.filter(owner=alice).exists()
    assert not Person.objects.filter(owner=alice, display_name="Dora").exists()


def test_quick_add_new_name_matching_an_existing_person_asks_to_pick_them(alice_client, alice, bob):
    data = quick_add_data(**{"people-0-new_name": "bob"})
    response = alice_client.post(reverse("memory_create"), data)
    assert "You already have someone called “bob”" in response.content.decode()
    assert Person.objects.filter(owner=alice, display_name__iexact="bob").count() == 1
    assert not Memory.objects.filter(owner=alice).exists()


def test_quick_add_cannot_use_another_owners_person(mallory_client, mallory, bob):
    data = quick_add_data(**{"people-0-person": str(bob.pk)})
    response = mallory_client.post(reverse("memory_create"), data)
    assert response.status_code == 200
    html = response.content.decode()
    assert "Select a valid choice" in html
    assert "Bob" not in html
    assert not Memory.objects.filter(owner=mallory).exists()


def test_quick_add_with_broken_people_rows_is_an_error_not_a_crash(alice_client, alice):
    data = quick_add_data()
    del data["people-TOTAL_FORMS"]
    response = alice_client.post(reverse("memory_create"), data)
    assert response.status_code == 200
    assert "ManagementForm data is missing" in response.content.decode()
    assert not Memory.objects.filter(owner=alice).exists()


def test_memory_with_new_people_service_keeps_no_person_when_memory_is_refused(alice):
    with pytest.raises(ValidationError):
        memory_create_with_new_people(
            owner=alice, body="ok", kind="gossip", new_people=[NewPersonSpec("Dora")]
        )
    assert not Person.objects.filter(owner=alice, display_name="Dora").exists()
    assert not Memory.objects.filter(owner=alice).exists()


def test_add_person_row_continues_the_formset_numbering(alice_client, alice, bob, mallory):
    person_create(owner=mallory, display_name="Mallory's friend")
    response = alice_client.get(reverse("memory_participant_row"), {"people-TOTAL_FORMS": "3"}, **HX)
    assert response.status_code == 200
    html = response.content.decode()
    assert 'name="people-3-person"' in html and 'name="people-3-new_name"' in html
    assert 'name="people-TOTAL_FORMS" value="4" id="id_people-TOTAL_FORMS" hx-swap-oob="true"' in html
    assert f'<option value="{bob.pk}">Bob</option>' in html
    assert "Mallory" not in html


def test_add_person_row_stops_at_the_limit(alice_client):
    response = alice_client.get(reverse("memory_participant_row"), {"people-TOTAL_FORMS": "20"}, **HX)
    assert response.status_code == 204


@pytest.mark.parametrize("count", ["", "x", "-1"])
def test_add_person_row_with_bad_count_is_a_400(alice_client, count):
    response = alice_client.get(reverse("memory_participant_row"), {"people-TOTAL_FORMS": count}, **HX)
    assert response.status_code == 400


def test_quick_add_with_an_added_fourth_row_saves_everyone(alice_client, alice, bob):
    data = quick_add_data(
        **{
            "people-TOTAL_FORMS": "4",
            "people-0-person": str(bob.pk),
            "people-3-person": "",
            "people-3-new_name": "Erin",
            "people-3-role": "source",
        }
    )
    response = alice_client.post(reverse("memory_create"), data)
    assert response.status_code == 302
    memory = Memory.objects.get(owner=alice)
    people = {(p.person.display_name, p.role) for p in memory.participants.select_related("person")}
    assert people == {("Bob", "subject"), ("Erin", "source")}


def test_quick_add_needs_post(alice_client):
    assert alice_client.get(reverse("memory_create")).status_code == 405


# --- Consent badge --------------------------------------------------------------------------------


def test_badge_names_pending_participant_and_goes_after_granting(alice_client, alice, bob):
    memory_create(owner=alice, body="Chess with Bob", participants=[ParticipantSpec(person=bob)])
    html = alice_client.get(reverse("timeline")).content.decode()
    assert "Hidden from agents: Bob (pending)" in html
    alice_client.post(reverse("person_consent", args=[bob.pk]), {"status": "granted"})
    html = alice_client.get(reverse("timeline")).content.decode()
    assert "Chess with Bob" in html
    assert "Hidden from agents" not in html


def test_badge_lists_every_blocker_with_status(alice_client, alice, bob):
    carol = person_create(owner=alice, display_name="Carol")
    dave = person_create(owner=alice, display_name="Dave")
    person_set_consent(person=carol, status="revoked", actor=alice)
    person_set_consent(person=dave, status="granted", actor=alice)
    memory_create(
        owner=alice,
        body="Dinner",
        participants=[
            ParticipantSpec(person=bob),
            ParticipantSpec(person=carol),
            ParticipantSpec(person=dave),
        ],
    )
    html = alice_client.get(reverse("timeline")).content.decode()
    assert "Hidden from agents: Bob (pending), Carol (revoked)" in html
    assert "Dave (" not in html


def test_self_observed_memory_has_no_badge(alice_client, alice):
    me = Person.objects.get(owner=alice, is_self=True)
    memory_create(owner=alice, body="Alone", participants=[])
    memory_create(owner=alice, body="Me", participants=[ParticipantSpec(person=me)])
    assert "Hidden from agents" not in alice_client.get(reverse("timeline")).content.decode()


# --- Memory page, edit, delete ---------------------------------------------------------------------


@pytest.mark.parametrize("htmx", [False, True])
def test_memory_page_shows_full_text_people_roles_and_consent(alice_client, alice, bob, htmx):
    long_body = "First line.\n" + "word " * 200 + "THE END"
    carol = person_create(owner=alice, display_name="Carol")
    person_set_consent(person=carol, status="granted", actor=alice)
    memory = memory_create(
        owner=alice,
        body=long_body,
        source_person=carol,
        participants=[
            ParticipantSpec(person=bob, role="present"),
            ParticipantSpec(person=carol, role="source"),
        ],
    )
    response = alice_client.get(reverse("memory_detail", args=[memory.pk]), **(HX if htmx else {}))
    assert response.status_code == 200
    html = response.content.decode()
    assert "THE END" in html
    assert "<td>Present</td>" in html and "<td>Source</td>" in html
    assert 'class="badge consent-pending"' in html and 'class="badge consent-granted"' in html
    assert "Hidden from agents:</strong> Bob (pending)" in html
    assert "Told to you by" in html
    assert ("<html" in html) is (not htmx)


def test_memory_page_lists_related_memories_from_edges(alice_client, alice):
    memory = memory_create(owner=alice, body="Picnic at the lake")
    other = memory_create(owner=alice, body="Swimming at the lake")
    MemoryEdge.objects.create(owner=alice, source=other, target=memory, kind=EdgeKind.SIMILAR, weight=0.9)
    html = alice_client.get(reverse("memory_detail", args=[memory.pk])).content.decode()
    assert "Related memories" in html
    assert "Swimming at the lake" in html
    assert reverse("memory_detail", args=[other.pk]) in html


def test_memory_page_without_edges_has_no_related_section(alice_client, alice):
    memory = memory_create(owner=alice, body="Picnic at the lake")
    assert (
        "Related memories"
        not in alice_client.get(reverse("memory_detail", args=[memory.pk])).content.decode()
    )


@pytest.mark.parametrize("htmx", [False, True])
def test_edit_page_is_prefilled(alice_client, alice, bob, htmx):
    memory = memory_create(
        owner=alice, body="Chess", participants=[ParticipantSpec(person=bob, role="present")]
    )
    response = alice_client.get(reverse("memory_edit", args=[memory.pk]), **(HX if htmx else {}))
    assert response.status_code == 200
    html = response.content.decode()
    assert "Chess</textarea>" in html
    assert f'<option value="{bob.pk}" selected>Bob</option>' in html
    assert '<option value="present" selected>Present</option>' in html


def test_edit_replaces_fields_and_people(alice_client, alice, bob):
    memory = memory_create(owner=alice, body="Chess", participants=[ParticipantSpec(person=bob)])
    data = quick_add_data(
        body="Chess, then tea",
        title="Sunday",
        kind="relationship",
        **{"people-0-new_name": "Carol", "people-0-role": "present"},
    )
    response = alice_client.post(reverse("memory_edit", args=[memory.pk]), data)
    assert response.status_code == 302
    assert response["Location"] == reverse("memory_detail", args=[memory.pk])
    memory.refresh_from_db()
    assert (memory.body, memory.title, memory.kind) == ("Chess, then tea", "Sunday", "relationship")
    people = {(p.person.display_name, p.role) for p in memory.participants.select_related("person")}
    assert people == {("Carol", "present")}


def test_edit_with_bad_input_changes_nothing(alice_client, alice, bob):
    memory = memory_create(owner=alice, body="Chess", participants=[ParticipantSpec(person=bob)])
    data = quick_add_data(body="", **{"people-0-new_name": "Carol"})
    response = alice_client.post(reverse("memory_edit", args=[memory.pk]), data)
    assert response.status_code == 200
    assert "Write something: a memory needs a body." in response.content.decode()
    memory.refresh_from_db()
    assert memory.body == "Chess"
    assert list(memory.participants.values_list("person__display_name", flat=True)) == ["Bob"]
    assert not Person.objects.filter(owner=alice, display_name="Carol").exists()


@pytest.mark.parametrize("htmx", [False, True])
def test_delete_asks_for_confirmation_first(alice_client, alice, htmx):
    memory = memory_create(owner=alice, body="Regrettable haircut")
    response = alice_client.get(reverse("memory_delete", args=[memory.pk]), **(HX if htmx else {}))
    assert response.status_code == 200
    assert "Delete this memory?" in response.content.decode()
    assert Memory.objects.filter(pk=memory.pk).exists()


def test_delete_on_post_removes_memory_and_keeps_people(alice_client, alice, bob):
    memory = memory_create(
        owner=alice, body="Regrettable haircut", participants=[ParticipantSpec(person=bob)]
    )
    response = alice_client.post(reverse("memory_delete", args=[memory.pk]))
    assert response.status_code == 302
    assert response["Location"] == reverse("timeline")
    assert not Memory.objects.filter(pk=memory.pk).exists()
    assert Person.objects.filter(pk=bob.pk).exists()


# --- Owner scoping: Alice's memories do not exist for Mallory -------------------------------------


@pytest.mark.parametrize(
    ("method", "name", "data"),
    [
        ("get", "memory_detail", None),
        ("get", "memory_edit", None),
        ("post", "memory_edit", quick_add_data(body="Pwned")),
        ("get", "memory_delete", None),
        ("post", "memory_delete", {}),
    ],
)
@pytest.mark.parametrize("htmx", [False, True])
def test_another_owners_memory_answers_404_and_nothing_changes(
    mallory_client, alice, bob, method, name, data, htmx
):
    memory = memory_create(owner=alice, body="Alice's diary", participants=[ParticipantSpec(person=bob)])
    url = reverse(name, args=[memory.pk])
    call = getattr(mallory_client, method)
    headers = HX if htmx else {}
    response = call(url, data, **headers) if data is not None else call(url, **headers)
    assert response.status_code == 404
    assert "Alice&#x27;s diary" not in response.content.decode()
    assert "Alice's diary" not in response.content.decode()
    memory.refresh_from_db()
    assert memory.body == "Alice's diary"


def test_unknown_memory_id_answers_404(alice_client):
    assert alice_client.get("/memories/00000000-0000-0000-0000-000000000000/").status_code == 404
