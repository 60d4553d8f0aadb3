"""Quick capture (@mentions, dates without a time, "+ Add another person" without JavaScript),
month headings, the calendar and On this day: the owner's own journal only."""

from __future__ import annotations

import re
from datetime import date, datetime, time

import pytest
from django.urls import reverse
from django.utils import timezone

from memories.dates import occurred_day, occurred_has_time
from memories.mentions import mentions_find
from memories.models import Memory, MemoryParticipant
from memories.services import ParticipantSpec, memory_create
from memories.views import PAGE_SIZE
from people.models import ConsentStatus, Person
from people.services import person_create

HX = {"HTTP_HX_REQUEST": "true"}


def quick_add(**overrides) -> dict:
    data = {
        "body": "We planted tulips.",
        "people-TOTAL_FORMS": "3",
        "people-INITIAL_FORMS": "0",
    }
    for row in range(3):
        data.update(
            {f"people-{row}-person": "", f"people-{row}-new_name": "", f"people-{row}-role": "subject"}
        )
    data.update(overrides)
    return data


def at(day: str, clock: str | None = None) -> datetime:
    parsed = date.fromisoformat(day)
    if clock is None:
        return occurred_day(parsed)
    return timezone.make_aware(datetime.combine(parsed, time.fromisoformat(clock)))


def people_of(memory: Memory) -> set[tuple[str, str]]:
    return {(p.person.display_name, p.role) for p in MemoryParticipant.objects.filter(memory=memory)}


@pytest.fixture
def anna(alice):
    return person_create(owner=alice, display_name="Anna", aliases=["Annie"])


@pytest.fixture
def anna_smith(alice):
    return person_create(owner=alice, display_name="Anna Smith")


# --- dates without a time ------------------------------------------------------------------------


def test_a_date_without_a_time_is_kept_as_a_day_and_shown_without_a_time(alice_client, alice):
    alice_client.post(reverse("memory_create"), quick_add(body="Picnic", occurred_at="2024-05-01"))
    memory = Memory.objects.get(owner=alice)
    assert memory.occurred_at == occurred_day(date(2024, 5, 1))
    assert not occurred_has_time(memory.occurred_at)
    html = alice_client.get(reverse("timeline")).content.decode()
    assert ">1 May 2024</time>" in html
    detail = alice_client.get(reverse("memory_detail", args=[memory.pk])).content.decode()
    assert ">Wednesday 1 May 2024</time>" in detail


def test_a_date_and_a_time_are_shown_with_the_time(alice_client, alice):
    alice_client.post(
        reverse("memory_create"), quick_add(body="Picnic", occurred_at="2024-05-01", occurred_time="14:30")
    )
    memory = Memory.objects.get(owner=alice)
    assert memory.occurred_at == at("2024-05-01", "14:30")
    assert ">1 May 2024 · 14:30</time>" in alice_client.get(reverse("timeline")).content.decode()


def test_an_old_style_date_and_time_in_one_field_keeps_its_time(alice_client, alice):
    alice_client.post(reverse("memory_create"), quick_add(occurred_at="2024-05-01T09:15"))
    assert Memory.objects.get(owner=alice).occurred_at == at("2024-05-01", "09:15")


def test_no_date_is_now_and_has_a_time(alice_client, alice):
    before = timezone.now()
    alice_client.post(reverse("memory_create"), quick_add())
    memory = Memory.objects.get(owner=alice)
    assert before <= memory.occurred_at <= timezone.now()
    assert occurred_has_time(memory.occurred_at)


def test_the_edit_form_leaves_the_time_empty_for_a_day(alice_client, alice):
    day = memory_create(owner=alice, body="A day", occurred_at=at("2024-05-01"))
    moment = memory_create(owner=alice, body="A moment", occurred_at=at("2024-05-01", "08:05"))
    day_form = alice_client.get(reverse("memory_edit", args=[day.pk])).content.decode()
    assert 'name="occurred_at" value="2024-05-01"' in day_form
    assert re.search(r'<input type="time" name="occurred_time"(?![^>]*value=)', day_form)
    moment_form = alice_client.get(reverse("memory_edit", args=[moment.pk])).content.decode()
    assert 'name="occurred_time" value="08:05"' in moment_form


def test_date_inputs_are_the_browsers_own_date_and_time_pickers(alice_client):
    html = alice_client.get(reverse("timeline")).content.decode()
    assert '<input type="date" name="occurred_at"' in html
    assert '<input type="time" name="occurred_time"' in html


# --- @mentions ---------------------------------------------------------------------------------


def test_mentions_find_people_by_name_or_alias_longest_first(alice, anna, anna_smith):
    bob = person_create(owner=alice, display_name="Bob")
    found = mentions_find(
        text="Tea with @anna smith, then @Annie's dog and @Bob. Mail bob@example.com, not @Bob again.",
        people=Person.objects.filter(owner=alice),
    )
    assert found.known == [anna_smith, anna, bob]
    assert found.unknown == []


def test_mentions_list_unknown_names_once_and_skip_non_names(alice, anna):
    found = mentions_find(
        text="@Zed and @zed met @Jean-Luc at @5pm; @Annabel too. @ alone.",
        people=Person.objects.filter(owner=alice),
    )
    assert found.known == []
    assert found.unknown == ["Zed", "Jean-Luc", "Annabel"]


def test_a_mentioned_person_joins_the_memory(alice_client, alice, anna):
    response = alice_client.post(reverse("memory_create"), quick_add(body="Lunch with @Anna by the sea"))
    assert response.status_code == 302
    memory = Memory.objects.get(owner=alice)
    assert memory.body == "Lunch with @Anna by the sea"
    assert people_of(memory) == {("Anna", "subject")}


def test_a_row_and_a_mention_of_the_same_person_keep_the_rows_role(alice_client, alice, anna):
    data = quick_add(body="@Anna drove", **{"people-0-person": str(anna.pk), "people-0-role": "present"})
    alice_client.post(reverse("memory_create"), data)
    assert people_of(Memory.objects.get(owner=alice)) == {("Anna", "present")}


def test_an_unknown_mention_is_asked_about_before_anything_is_saved(alice_client, alice, htmx=True):
    response = alice_client.post(reverse("memory_create"), quick_add(body="Dinner with @Zed"), **HX)
    html = response.content.decode()
    assert response.status_code == 200
    assert "Add “Zed” as a new person" in html
    assert 'name="mention_asked" value="Zed"' in html
    assert 'name="mention_add" value="Zed" checked' in html
    assert "Dinner with @Zed" in html  # what was typed is kept
    assert not Memory.objects.filter(owner=alice).exists()
    assert not Person.objects.filter(owner=alice, display_name="Zed").exists()


def test_a_ticked_unknown_mention_becomes_a_pending_person_on_the_second_save(alice_client, alice):
    data = quick_add(body="Dinner with @Zed", mention_asked="Zed", mention_add="Zed")
    response = alice_client.post(reverse("memory_create"), data)
    assert response.status_code == 302
    zed = Person.objects.get(owner=alice, display_name="Zed")
    assert zed.consent_status == ConsentStatus.PENDING
    assert people_of(Memory.objects.get(owner=alice)) == {("Zed", "subject")}


def test_an_unticked_unknown_mention_stays_plain_text(alice_client, alice):
    response = alice_client.post(
        reverse("memory_create"), quick_add(body="Dinner with @Zed", mention_asked="Zed")
    )
    assert response.status_code == 302
    memory = Memory.objects.get(owner=alice)
    assert people_of(memory) == set()
    assert not Person.objects.filter(owner=alice, display_name="Zed").exists()


def test_a_new_mention_after_the_question_is_asked_about_too(alice_client, alice):
    data = quick_add(body="@Zed and @Yan", mention_asked="Zed", mention_add="Zed")
    html = alice_client.post(reverse("memory_create"), data).content.decode()
    assert "Add “Yan” as a new person" in html
    assert 'name="mention_add" value="Zed" checked' in html
    assert not Memory.objects.filter(owner=alice).exists()


def test_another_owners_person_is_never_matched_by_a_mention(alice_client, alice, mallory):
    person_create(owner=mallory, display_name="Eve")
    html = alice_client.post(reverse("memory_create"), quick_add(body="Saw @Eve")).content.decode()
    assert "Add “Eve” as a new person" in html
    assert not Memory.objects.filter(owner=alice).exists()


def test_too_many_new_names_at_once_are_refused(alice_client, alice):
    body = " ".join(f"@Name{letter}" for letter in "abcdefghijkl")
    html = alice_client.post(reverse("memory_create"), quick_add(body=body)).content.decode()
    assert "At most 10 new names at once" in html
    assert not Person.objects.filter(owner=alice).exclude(is_self=True).exists()


def test_mention_options_are_the_owners_people_only(alice_client, alice, anna, anna_smith, mallory):
    person_create(owner=mallory, display_name="Annika")
    response = alice_client.get(reverse("person_mention_options"), {"q": "ann"})
    assert response.status_code == 200
    names = [person["name"] for person in response.json()["people"]]
    assert names == ["Anna", "Anna Smith"]
    assert alice_client.get(reverse("person_mention_options"), {"q": "smi"}).json()["people"][0]["name"] == (
        "Anna Smith"
    )


def test_mention_options_need_a_login(client, anna):
    response = client.get(reverse("person_mention_options"), {"q": "ann"})
    assert response.status_code == 302
    assert "Anna" not in response.content.decode()


# --- "+ Add another person" without JavaScript -----------------------------------------------


def test_add_another_person_without_javascript_sends_the_form_back_one_row_longer(alice_client, alice, anna):
    data = quick_add(
        body="Half-written",
        title="Draft",
        add_person_row="1",
        **{"people-0-person": str(anna.pk), "people-1-new_name": "Carol", "people-1-role": "present"},
    )
    response = alice_client.post(reverse("memory_create"), data)
    html = response.content.decode()
    assert response.status_code == 200
    assert 'name="people-TOTAL_FORMS" value="4"' in html
    assert 'name="people-3-person"' in html
    assert f'<option value="{anna.pk}" selected>Anna</option>' in html
    assert 'name="people-1-new_name" value="Carol"' in html
    assert "Half-written" in html and 'value="Draft"' in html
    assert '<details class="capture-more" open>' in html
    assert 'class="error"' not in html  # nothing was validated yet
    assert not Memory.objects.filter(owner=alice).exists()
    assert not Person.objects.filter(owner=alice, display_name="Carol").exists()


def test_the_longer_form_then_saves_everyone(alice_client, alice, anna):
    data = quick_add(
        **{
            "people-TOTAL_FORMS": "4",
            "people-INITIAL_FORMS": "3",
            "people-0-person": str(anna.pk),
            "people-3-new_name": "Carol",
            "people-3-role": "source",
        }
    )
    assert alice_client.post(reverse("memory_create"), data).status_code == 302
    assert people_of(Memory.objects.get(owner=alice)) == {("Anna", "subject"), ("Carol", "source")}


@pytest.mark.parametrize(("sent", "rows"), [("99999999", 20), ("-4", 1), ("x", 1), ("19", 20), ("20", 20)])
def test_add_another_person_keeps_the_row_bounds(alice_client, alice, sent, rows):
    data = quick_add(add_person_row="1", **{"people-TOTAL_FORMS": sent})
    html = alice_client.post(reverse("memory_create"), data).content.decode()
    assert f'name="people-TOTAL_FORMS" value="{rows}"' in html
    assert f'name="people-{rows - 1}-person"' in html
    assert f'name="people-{rows}-person"' not in html


def test_add_another_person_works_on_the_edit_page_without_javascript(alice_client, alice, anna):
    memory = memory_create(owner=alice, body="Old", participants=[ParticipantSpec(person=anna)])
    data = quick_add(body="Changed", add_person_row="1", **{"people-0-person": str(anna.pk)})
    html = alice_client.post(reverse("memory_edit", args=[memory.pk]), data).content.decode()
    assert 'name="people-TOTAL_FORMS" value="4"' in html
    memory.refresh_from_db()
    assert memory.body == "Old"


def test_the_edit_page_asks_about_unknown_mentions_too(alice_client, alice):
    memory = memory_create(owner=alice, body="Old")
    html = alice_client.post(
        reverse("memory_edit", args=[memory.pk]), quick_add(body="Now with @Zed")
    ).content.decode()
    assert "Add “Zed” as a new person" in html
    memory.refresh_from_db()
    assert memory.body == "Old"


# --- where a new card goes ----------------------------------------------------------------------


def _card_order(html: str) -> list[str]:
    return re.findall(r'<article class="memory-card card[^"]*" id="memory-([0-9a-f-]+)"', html)


def test_a_new_card_lands_in_date_order_not_at_the_top(alice_client, alice):
    june = memory_create(owner=alice, body="June", occurred_at=at("2024-06-10"))
    april = memory_create(owner=alice, body="April", occurred_at=at("2024-04-10"))
    response = alice_client.post(
        reverse("memory_create"), quick_add(body="May", occurred_at="2024-05-10"), **HX
    )
    html = response.content.decode()
    may = Memory.objects.get(owner=alice, body="May")
    listing = html[html.index('<div id="memory-list"') :]
    assert _card_order(listing) == [str(june.pk), str(may.pk), str(april.pk)]
    assert f'class="memory-card card is-new" id="memory-{may.pk}"' in html
    # The calendar comes along, showing the new memory's month.
    assert 'id="calendar"' in html and 'hx-swap-oob="true"' in html and "May 2024" in html


def test_a_new_card_older_than_the_first_page_is_pointed_to(alice_client, alice):
    for day in range(1, PAGE_SIZE + 2):
        memory_create(owner=alice, body=f"Recent {day}", occurred_at=at(f"2024-03-{day % 28 + 1:02d}"))
    html = alice_client.post(
        reverse("memory_create"), quick_add(body="Long ago", occurred_at="2001-02-03"), **HX
    ).content.decode()
    assert "It is dated 3 February 2001, further down" in html
    assert "?date_from=2001-02-03&amp;date_to=2001-02-03" in html


def test_a_new_card_redraws_the_list_with_the_filters_it_was_sent_from(alice_client, alice, anna):
    memory_create(owner=alice, body="Without Anna", occurred_at=at("2024-06-01"))
    with_anna = memory_create(
        owner=alice,
        body="With Anna",
        occurred_at=at("2024-05-01"),
        participants=[ParticipantSpec(person=anna)],
    )
    data = quick_add(body="Also @Anna", occurred_at="2024-05-02", return_query=f"person={anna.pk}")
    html = alice_client.post(reverse("memory_create"), data, **HX).content.decode()
    new = Memory.objects.get(owner=alice, body="Also @Anna")
    listing = html[html.index('<div id="memory-list"') :]
    assert _card_order(listing) == [str(new.pk), str(with_anna.pk)]


# --- month headings ------------------------------------------------------------------------------


def test_the_timeline_has_one_heading_per_month(alice_client, alice):
    for day in ("2024-06-20", "2024-06-02", "2024-05-30", "2023-12-25"):
        memory_create(owner=alice, body=day, occurred_at=at(day))
    html = alice_client.get(reverse("timeline")).content.decode()
    headings = re.findall(r'<h2 class="month-heading"><time datetime="([\d-]+)">([^<]+)</time>', html)
    assert headings == [("2024-06", "June 2024"), ("2024-05", "May 2024"), ("2023-12", "December 2023")]


@pytest.mark.parametrize("htmx", [False, True])
def test_a_page_continuing_a_month_does_not_repeat_its_heading(alice_client, alice, htmx):
    for day in range(PAGE_SIZE + 3):
        memory_create(owner=alice, body=f"June {day}", occurred_at=at("2024-06-15", f"{day % 24:02d}:00"))
    memory_create(owner=alice, body="May", occurred_at=at("2024-05-15"))
    html = alice_client.get(reverse("timeline"), {"page": 2}, **(HX if htmx else {})).content.decode()
    headings = re.findall(r'<h2 class="month-heading"><time datetime="([\d-]+)">', html)
    assert headings == ["2024-05"]


# --- calendar ------------------------------------------------------------------------------------


def day_names(html: str) -> set[str]:
    """What a screen reader reads for each day link: its text, visible and visually hidden."""
    import re

    cells = re.findall(r'<td class="[^"]*">\s*(?:\{#.*?#\})?\s*<a [^>]*>(.*?)</a>', html, re.DOTALL)
    return {" ".join(re.sub(r"<[^>]+>", "", cell).split()).replace(" :", ":") for cell in cells}


def test_the_calendar_counts_the_owners_memories_per_day(alice_client, alice, mallory):
    memory_create(owner=alice, body="a", occurred_at=at("2024-05-01", "09:00"))
    memory_create(owner=alice, body="b", occurred_at=at("2024-05-01"))
    memory_create(owner=alice, body="c", occurred_at=at("2024-05-20", "23:59"))
    memory_create(owner=alice, body="june", occurred_at=at("2024-06-01"))
    memory_create(owner=mallory, body="mallory's", occurred_at=at("2024-05-20"))
    response = alice_client.get(reverse("memory_calendar"), {"month": "2024-05"})
    html = response.content.decode()
    assert response.status_code == 200
    assert '<h2 id="calendar-title" aria-live="polite">May 2024</h2>' in html
    days = day_names(html)
    assert "1 May 2024: 2 memories" in days
    assert "20 May 2024: 1 memory" in days
    assert "2 May 2024: no memories" in days
    assert "3 memories in May" in html
    assert "?date_from=2024-05-20&amp;date_to=2024-05-20" in html
    assert "?month=2024-04" in html and "?month=2024-06" in html


def test_another_accounts_calendar_shows_none_of_alices_memories(mallory_client, alice):
    memory_create(owner=alice, body="Alice's", occurred_at=at("2024-05-01"))
    html = mallory_client.get(reverse("memory_calendar"), {"month": "2024-05"}).content.decode()
    assert "1 May 2024: no memories" in day_names(html)
    assert "No memories in May" in html


def test_the_calendar_over_htmx_is_just_the_month(alice_client, alice):
    html = alice_client.get(reverse("memory_calendar"), {"month": "2024-05", "in": "timeline"}, **HX)
    html = html.content.decode()
    assert "<html" not in html and html.lstrip().startswith('<section id="calendar"')
    # Beside the timeline, the month arrows stay on the timeline without JavaScript.
    assert 'href="/?month=2024-04"' in html


@pytest.mark.parametrize("month", ["", "2024-13", "nonsense", "0000-01", "0001-01", "9001-01", "99999-01"])
def test_a_bad_month_shows_this_month(alice_client, month):
    html = alice_client.get(reverse("memory_calendar"), {"month": month}).content.decode()
    assert timezone.localdate().strftime("%B %Y") in html


def test_the_first_month_the_calendar_shows_has_no_previous_month(alice_client):
    html = alice_client.get(reverse("memory_calendar"), {"month": "0002-01"}).content.decode()
    assert "Previous month" not in html and "Next month" in html


def test_a_day_of_the_calendar_is_the_timeline_of_that_day(alice_client, alice):
    memory_create(owner=alice, body="Tulips in bloom", occurred_at=at("2024-05-01", "10:00"))
    memory_create(owner=alice, body="Rain all afternoon", occurred_at=at("2024-05-02", "10:00"))
    html = alice_client.get(reverse("timeline"), {"date_from": "2024-05-01", "date_to": "2024-05-01"})
    html = html.content.decode()
    assert "<h2>Wednesday 1 May 2024</h2>" in html
    assert "Tulips in bloom" in html and "Rain all afternoon" not in html
    # A memory written here belongs to that day unless told otherwise.
    assert 'name="occurred_at" value="2024-05-01"' in html
    assert 'aria-current="date"' in html


# --- On this day ---------------------------------------------------------------------------------


def test_on_this_day_shows_earlier_years_only_and_only_the_owners(alice_client, alice, mallory):
    today = timezone.localdate()
    earlier = today.replace(year=today.year - 3) if (today.month, today.day) != (2, 29) else date(2020, 2, 29)
    memory_create(owner=alice, body="Three years ago today", occurred_at=occurred_day(earlier))
    memory_create(owner=alice, body="Earlier this year", occurred_at=timezone.now())
    memory_create(owner=mallory, body="Mallory long ago", occurred_at=occurred_day(earlier))
    html = alice_client.get(reverse("memory_on_this_day")).content.decode()
    assert "Three years ago today" in html
    assert "3 years ago" in html
    assert "Earlier this year" not in html and "Mallory long ago" not in html
    timeline = alice_client.get(reverse("timeline")).content.decode()
    assert "Three years ago today" in timeline.split('aria-labelledby="on-this-day-title"')[1]


def test_on_this_day_for_another_date(alice_client, alice):
    memory_create(owner=alice, body="Birthday 2019", occurred_at=at("2019-06-14", "18:00"))
    memory_create(owner=alice, body="Birthday 2024", occurred_at=at("2024-06-14", "18:00"))
    html = alice_client.get(reverse("memory_on_this_day"), {"date": "2024-06-14"}).content.decode()
    assert "Birthday 2019" in html and "5 years ago" in html
    assert "Birthday 2024" not in html


def test_on_28_february_of_a_common_year_29_february_comes_too(alice_client, alice):
    memory_create(owner=alice, body="Leap day", occurred_at=at("2020-02-29"))
    html = alice_client.get(reverse("memory_on_this_day"), {"date": "2023-02-28"}).content.decode()
    assert "Leap day" in html
    html = alice_client.get(reverse("memory_on_this_day"), {"date": "2024-02-28"}).content.decode()
    assert "Leap day" not in html


def test_on_this_day_with_a_bad_date_is_today(alice_client):
    html = alice_client.get(reverse("memory_on_this_day"), {"date": "2024-02-30"}).content.decode()
    assert timezone.localdate().strftime("%-d %B") in html


@pytest.mark.parametrize("name", ["memory_calendar", "memory_on_this_day"])
def test_calendar_pages_need_a_login(client, name):
    response = client.get(reverse(name))
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]
