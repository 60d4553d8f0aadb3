"""Generalise without revealing (Kernle): the insight check, insight_create, the page, who sees sources."""

from __future__ import annotations

import json

import pytest
from django.core.exceptions import ValidationError
from django.test import Client
from django.urls import reverse

from accounts.models import TokenKind
from accounts.services import access_token_authenticate, access_token_create
from agents.mcpserver import tools
from agents.models import Agent
from insights.models import InsightSource
from insights.services import insight_check, insight_create
from memories.gate import agent_visible_memories
from memories.models import Memory, MemoryKind
from memories.services import ParticipantSpec, memory_create
from people.models import ConsentStatus, Person
from people.services import person_create, person_set_consent
from tests.agents.conftest import llm_stub, offline  # noqa: F401 (the local LLM stub, shared)
from tests.api.conftest import ApiClient

pytestmark = pytest.mark.django_db

HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def lesson(alice) -> Memory:
    """A private memory with Sean Murphy (alias Shay) and Anna (alias Bella), told by Dana."""
    sean = person_create(owner=alice, display_name="Sean Murphy", aliases=["Shay"])
    anna = person_create(owner=alice, display_name="Anna", aliases=["Bella"])
    dana = person_create(owner=alice, display_name="Dana")
    return memory_create(
        owner=alice,
        title="Fractions",
        body="Sean's son struggled with fractions for weeks until Anna drew pizza slices for him.",
        participants=[ParticipantSpec(person=sean), ParticipantSpec(person=anna, role="present")],
        source_person=dana,
    )


def _texts(findings) -> list[str]:
    return [finding.text for finding in findings]


# --- the check ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text, blocked",
    [
        ("Anna showed that drawings help.", "Anna"),
        ("anna showed that drawings help.", "anna"),  # any case
        ("ANNA's drawings help.", "ANNA"),  # a possessive is still the whole word
        ("Drawings from Bella help.", "Bella"),  # an alias
        ("Shay's boy learnt it with pizza.", "Shay"),
        ("Sean Murphy learnt it.", "Sean Murphy"),
        ("Sean learnt it.", "Sean"),  # part of a longer name, capitalised as a name
        ("Dana says drawings help.", "Dana"),  # who told the memory counts too
    ],
)
def test_a_name_or_alias_as_a_whole_word_blocks(lesson, text, blocked):
    check = insight_check(text=text, source_memories=[lesson])

    assert check.blocked
    assert _texts(check.blocks) == [blocked]
    assert blocked in check.block_message and "blocks" in check.block_message


@pytest.mark.parametrize(
    "text, word",
    [
        ("Annabelle-style drawings help.", "Annabelle"),  # a name inside another word
        ("Isabella drew slices.", "Isabella"),  # an alias (a nickname) inside a word
        ("Shaylee drew slices.", "Shaylee"),
        ("Murphys drew slices.", "Murphys"),  # part of a name, inside a word
    ],
)
def test_a_name_inside_another_word_only_warns_and_says_so(lesson, text, word):
    check = insight_check(text=text, source_memories=[lesson])

    assert not check.blocked
    [warning] = [warning for warning in check.warnings if warning.kind == "name_in_word"]
    assert warning.text == word
    assert "inside the word" in warning.message and "only a warning, not a block" in warning.message


def test_a_lower_case_part_of_a_name_is_an_everyday_word_and_only_warns(alice):
    will = person_create(owner=alice, display_name="Rose Will")
    memory = memory_create(owner=alice, body="Rose Will came.", participants=[ParticipantSpec(person=will)])

    check = insight_check(text="Children will learn what they can touch.", source_memories=[memory])

    assert not check.blocked
    assert [(warning.kind, warning.text) for warning in check.warnings] == [("name_in_word", "will")]


def test_only_people_in_the_sources_count_and_the_owners_self_never_does(alice, lesson):
    person_create(owner=alice, display_name="Zed")
    me = Person.objects.get(owner=alice, is_self=True)
    mine = memory_create(owner=alice, body="I drew it myself.", participants=[ParticipantSpec(person=me)])

    assert not insight_check(text="Zed and Self like drawings.", source_memories=[lesson, mine]).blocked


@pytest.mark.parametrize(
    "text, found",
    [
        ("It worked on 2024-03-12.", "2024-03-12"),
        ("It worked on 12 March.", "12 March"),
        ("It worked on March 12th.", "March 12th"),
        ("It worked on 12/03/2024.", "12/03/2024"),
        ("It worked last Tuesday.", "Tuesday"),
        ("It worked on wednesdays.", "wednesdays"),
        ("It worked in 2019.", "2019"),
        ("It worked last week.", "last week"),
        ("It worked in September.", "September"),
        ("It worked in May.", "in May"),
    ],
)
def test_dates_warn(lesson, text, found):
    check = insight_check(text=text, source_memories=[lesson])

    assert not check.blocked
    assert [(warning.kind, warning.text) for warning in check.warnings] == [("date", found)]
    assert "when it happened" in check.warnings[0].message


@pytest.mark.parametrize(
    "text, found",
    [
        ("Children in Leeds like drawings.", "Leeds"),
        ("Children near the Old Mill like drawings.", "Old Mill"),
        ("A teacher from Paris uses drawings.", "Paris"),
        ("At St Mary's they use drawings.", "St Mary's"),
        ("Children at Hogwarts School of Magic like drawings.", "Hogwarts School of Magic"),
    ],
)
def test_places_warn(lesson, text, found):
    check = insight_check(text=text, source_memories=[lesson])

    assert [(warning.kind, warning.text) for warning in check.warnings] == [("place", found)]
    assert "where it happened" in check.warnings[0].message


@pytest.mark.parametrize(
    "text, found",
    [
        ("Children aged 7 like drawings.", "7"),
        ("Write to teacher@example.org about drawings.", "teacher@example.org"),
        ("Call +44 7700 900123 about drawings.", "+44 7700 900123"),
    ],
)
def test_unique_details_warn(lesson, text, found):
    check = insight_check(text=text, source_memories=[lesson])

    assert [(warning.kind, warning.text) for warning in check.warnings] == [("detail", found)]


def test_words_copied_from_a_source_warn(lesson):
    text = "A boy struggled with fractions for weeks until pictures helped."

    check = insight_check(text=text, source_memories=[lesson])

    assert [warning.kind for warning in check.warnings] == ["copied"]


def test_a_real_generalisation_passes_clean(lesson):
    check = insight_check(text="Visual fraction models help concrete thinkers.", source_memories=[lesson])

    assert not check.blocked and check.warnings == []


# --- saving ------------------------------------------------------------------------------------
def test_blocked_text_is_refused_with_the_names_and_nothing_is_saved(alice, lesson):
    before = Memory.objects.count()

    with pytest.raises(ValidationError) as refused:
        insight_create(owner=alice, text="Shay's son needed pictures.", sources=[lesson])

    assert "“Shay”" in refused.value.message_dict["text"][0]
    assert Memory.objects.count() == before and not InsightSource.objects.exists()


def test_warnings_need_the_owners_confirmation_of_exactly_what_the_text_raises(alice, lesson):
    text = "Children in Leeds learn fractions with drawings."
    check = insight_check(text=text, source_memories=[lesson])

    with pytest.raises(ValidationError) as unconfirmed:
        insight_create(owner=alice, text=text, sources=[lesson])
    assert "Leeds" in unconfirmed.value.message_dict["confirm"][0]
    # Confirming one text's warnings does not cover a new detail added afterwards.
    with pytest.raises(ValidationError):
        insight_create(
            owner=alice, text=text + " Aged 7.", sources=[lesson], confirmed_warnings=check.warning_keys
        )

    insight = insight_create(owner=alice, text=text, sources=[lesson], confirmed_warnings=check.warning_keys)
    assert insight.body == text


def test_the_saved_insight_is_knowledge_with_nobody_in_it_and_remembers_its_sources(alice, lesson):
    other = memory_create(owner=alice, body="Drawing helped again.", kind="event")

    insight = insight_create(
        owner=alice, text="Visual fraction models help concrete thinkers.", sources=[lesson, other, lesson]
    )

    assert insight.kind == MemoryKind.KNOWLEDGE
    assert not insight.participants.exists() and insight.source_person is None
    assert set(InsightSource.objects.filter(insight=insight).values_list("source_id", flat=True)) == {
        lesson.pk,
        other.pk,
    }


def test_an_insight_is_gated_by_the_owners_self_like_any_untagged_memory(alice, lesson):
    insight = insight_create(
        owner=alice, text="Visual fraction models help concrete thinkers.", sources=[lesson]
    )
    me = Person.objects.get(owner=alice, is_self=True)

    # Its source is hidden (Sean has not consented); the insight is not.
    assert not agent_visible_memories(alice).filter(pk=lesson.pk).exists()
    assert agent_visible_memories(alice).filter(pk=insight.pk).exists()
    person_set_consent(person=me, status=ConsentStatus.REVOKED, actor=alice)
    assert not agent_visible_memories(alice).filter(pk=insight.pk).exists()


def test_someone_elses_memory_is_not_a_source(alice, mallory, lesson):
    theirs = memory_create(owner=mallory, body="Mallory's note.")

    with pytest.raises(ValidationError) as refused:
        insight_create(owner=alice, text="Drawings help.", sources=[lesson, theirs])
    assert refused.value.message_dict["sources"] == ["Unknown memory."]
    with pytest.raises(ValidationError):
        insight_create(owner=alice, text="Drawings help.", sources=[])


# --- sources stay with the owner -----------------------------------------------------------------
def test_no_agent_surface_shows_where_an_insight_came_from(request, alice, lesson):
    stub = request.getfixturevalue("llm_stub")
    carol = person_create(owner=alice, display_name="Carol")
    person_set_consent(person=carol, status=ConsentStatus.GRANTED, actor=alice)
    visible_source = memory_create(
        owner=alice,
        body="Carol's fractions homework went well.",
        participants=[ParticipantSpec(person=carol)],
    )
    insight = insight_create(
        owner=alice, text="Visual fraction models help concrete thinkers.", sources=[lesson, visible_source]
    )
    agent = Agent.objects.get(owner=alice, name="Tutor")
    _, raw = access_token_create(owner=alice, kind=TokenKind.AGENT, agent=agent)
    token = access_token_authenticate(raw_token=raw)
    api = ApiClient(Client(), raw)

    answers = [
        api.get(f"/api/v1/memories/{insight.pk}/").content.decode(),
        api.get("/api/v1/memories/", {"limit": 100}).content.decode(),
        api.get("/api/v1/memories/search/", {"q": "fraction models"}).content.decode(),
        json.dumps(tools.search_memories(token=token, query="fraction models")),
        json.dumps(tools.privacy_audit(token=token, memory_id=str(insight.pk))),
        api.post(reverse("api-agent-chat", args=[agent.pk]), {"message": "fraction models"}).content.decode(),
        json.dumps(stub.requests[-1]["messages"]),
    ]

    assert str(insight.pk) in answers[0]
    for answer in answers:
        assert str(lesson.pk) not in answer
        assert "insight_source" not in answer and "Insight from" not in answer
        assert "pizza slices" not in answer
    assert str(visible_source.pk) not in answers[0] and str(visible_source.pk) not in answers[4]


# --- the page ----------------------------------------------------------------------------------
def _page(lesson) -> str:
    return reverse("insight_new") + f"?from={lesson.pk}"


def test_page_shows_the_sources_and_the_names_that_block(alice_client, lesson):
    response = alice_client.get(_page(lesson))

    assert response.status_code == 200
    html = response.content.decode()
    assert "Fractions" in html and "Names that block" in html and "Sean Murphy" in html and "(Shay)" in html


def test_page_is_the_owners_only(client, mallory, lesson):
    client.force_login(mallory)

    assert client.get(_page(lesson)).status_code == 404
    assert client.get(reverse("insight_new") + "?from=not-a-uuid").status_code == 404
    assert (
        client.post(reverse("insight_new"), {"from": str(lesson.pk), "text": "x", "save": "1"}).status_code
        == 404
    )


def test_checking_swaps_the_panel_with_htmx_and_rerenders_the_page_without(alice_client, lesson):
    data = {"from": str(lesson.pk), "text": "Anna's drawings on 12 March helped.", "check": "1"}

    fragment = alice_client.post(reverse("insight_new"), data, **HX).content.decode()
    page = alice_client.post(reverse("insight_new"), data).content.decode()

    assert fragment.lstrip().startswith('<div id="insight-check"')
    assert "Blocked:" in fragment and "12 March" in fragment
    assert "<html" in page and "Blocked:" in page
    assert not Memory.objects.filter(body__startswith="Anna's drawings").exists()


def test_saving_blocked_text_shows_the_names_and_saves_nothing(alice_client, lesson):
    response = alice_client.post(
        reverse("insight_new"), {"from": str(lesson.pk), "text": "Sean's boy learnt with pizza.", "save": "1"}
    )

    assert response.status_code == 200
    assert "“Sean”" in response.content.decode()
    assert not Memory.objects.filter(body__contains="pizza.").exists()


def test_saving_with_warnings_needs_the_box_ticked_then_saves_and_shows_sources_to_the_owner(
    alice_client, lesson
):
    text = "Children in Leeds learn fractions with drawings."
    data = {"from": str(lesson.pk), "text": text, "save": "1", "confirmed": ["place:leeds"]}

    unconfirmed = alice_client.post(reverse("insight_new"), data)
    assert unconfirmed.status_code == 200 and "Check these details" in unconfirmed.content.decode()
    assert not Memory.objects.filter(body=text).exists()

    saved = alice_client.post(reverse("insight_new"), {**data, "confirm": "on"})
    insight = Memory.objects.get(body=text)
    assert saved.status_code == 302 and saved["Location"] == reverse("memory_detail", args=[insight.pk])
    detail = alice_client.get(saved["Location"]).content.decode()
    assert "Insight from" in detail and reverse("memory_detail", args=[lesson.pk]) in detail
    source_page = alice_client.get(reverse("memory_detail", args=[lesson.pk])).content.decode()
    assert f"{reverse('insight_new')}?from={lesson.pk}" in source_page
