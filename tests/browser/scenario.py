"""A journal people live in, for the browser tests of issue #39: three accounts, a circle, a link.

Ana owns the journal and the circle "Family"; Ben is in it and is linked to the "Ben" of
Ana's journal (he decides his own consent); Carol is in it too. Ana shared "Ran my first
10k" (personal, about nobody: only Ana sees it in Family) and "Mum's 60th" (public, Mum
consented to Family: everyone sees it); "Coffee with Ben" (personal, about Ben) is not
shared yet. Made through the services, as the pages would.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.utils import timezone
from playwright.sync_api import Page, expect

from accounts.services import user_signup
from agents.models import Agent
from agents.services import chat_turn
from circles.models import Circle
from circles.services import circle_create, invite_accept, invite_create, join_request_approve, memory_share
from linked.services import person_link_accept, person_link_invite_create
from memories.models import Memory, ParticipantRole, Sensitivity
from memories.services import ParticipantSpec, memory_create
from people.models import AGENTS_AUDIENCE, ConsentActor, ConsentStatus, Person, circle_audience
from people.services import person_create, person_set_consent

PASSWORD = "a sturdy passphrase"
PHONE = {"width": 390, "height": 844}
DESKTOP = {"width": 1280, "height": 900}

# Innermost elements of the page that stick out past the window's right edge.
WIDER_THAN_WINDOW = """() => {
  const limit = document.documentElement.clientWidth;
  const out = [...document.querySelectorAll("body *")].filter((el) => {
    if (!el.getClientRects().length) return false;
    const style = getComputedStyle(el);
    if (style.position === "fixed" || style.visibility === "hidden") return false;
    return el.getBoundingClientRect().right > limit + 0.5;
  });
  return out
    .filter((el) => !out.some((other) => other !== el && el.contains(other)))
    .filter((el) => !el.closest(".visually-hidden, .skip-link"))
    .map((el) => `<${el.tagName.toLowerCase()}.${el.className}> "${el.textContent.trim().slice(0, 40)}"`);
}"""


@dataclass
class Journal:
    ana: object
    ben: object
    carol: object
    family: Circle
    ben_person: Person
    mum: Person
    run: Memory
    sixtieth: Memory
    coffee: Memory


def _at(days_ago: int, hour: int = 10) -> datetime:
    now = timezone.localtime()
    return (now - timedelta(days=days_ago)).replace(hour=hour, minute=0, second=0, microsecond=0)


def _join(circle: Circle, owner, user) -> None:
    invite = invite_create(circle=circle, by=owner)
    join_request_approve(request=invite_accept(token=invite.token, user=user), by=owner)


def a_lived_in_journal(*, chat: bool = False) -> Journal:
    ana = user_signup(username="ana", password=PASSWORD)
    ben = user_signup(username="ben", password=PASSWORD)
    carol = user_signup(username="carol", password=PASSWORD)
    family = circle_create(owner=ana, name="Family", description="Ana, Ben and Carol.")
    _join(family, ana, ben)
    _join(family, ana, carol)

    mum = person_create(owner=ana, display_name="Mum", relationship="mother")
    for audience in (AGENTS_AUDIENCE, circle_audience(family.pk)):
        person_set_consent(
            person=mum, status=ConsentStatus.GRANTED, actor=ana, audience=audience, reason="asked her"
        )
    ben_person = person_create(owner=ana, display_name="Ben", relationship="brother")
    _invite, token = person_link_invite_create(person=ben_person, by=ana)
    person_link_accept(token=token, user=ben)
    ben_person.refresh_from_db()
    for audience in (AGENTS_AUDIENCE, circle_audience(family.pk)):
        person_set_consent(
            person=ben_person,
            status=ConsentStatus.GRANTED,
            actor=ben,
            audience=audience,
            reason="fine by me",
            actor_kind=ConsentActor.SELF,
        )
    person_create(owner=ana, display_name="Dr Patel", relationship="doctor")

    run = memory_create(
        owner=ana,
        title="Ran my first 10k",
        body="Ran my first 10k along the river. Legs like jelly, very proud.",
        occurred_at=_at(3, 8),
        sensitivity=Sensitivity.PERSONAL,
    )
    sixtieth = memory_create(
        owner=ana,
        title="Mum's 60th",
        body="Mum's 60th at the lake house. Ben gave a speech that made everyone cry.",
        occurred_at=_at(10, 18),
        sensitivity=Sensitivity.PUBLIC,
        participants=[
            ParticipantSpec(person=mum),
            ParticipantSpec(person=ben_person, role=ParticipantRole.PRESENT),
        ],
    )
    coffee = memory_create(
        owner=ana,
        title="Coffee with Ben",
        body="Coffee with Ben: he is thinking about moving to Lisbon.",
        occurred_at=_at(1, 15),
        sensitivity=Sensitivity.PERSONAL,
        participants=[ParticipantSpec(person=ben_person)],
    )
    memory_create(
        owner=ana, title="Garden", body="Planted tomatoes and basil on the balcony.", occurred_at=_at(5)
    )
    memory_share(memory=run, circle=family, by=ana)
    memory_share(memory=sixtieth, circle=family, by=ana)
    if chat:
        agent = Agent.objects.get(owner=ana, name="Caregiver")
        turn = chat_turn(owner=ana, agent=agent, text="What happened at Mum's 60th?")
        for question in (
            "Who gave a speech?",
            "What did I plant?",
            "Anything about running?",
            "Summarise my week.",
        ):
            chat_turn(owner=ana, agent=agent, text=question, conversation=turn.conversation)
    return Journal(ana, ben, carol, family, ben_person, mum, run, sixtieth, coffee)


def log_in(page: Page, base: str, username: str) -> None:
    page.goto(f"{base}/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("main button[type=submit]")
    expect(page).not_to_have_url(f"{base}/accounts/login/")


def too_wide(page: Page) -> list[str]:
    return page.evaluate(WIDER_THAN_WINDOW)
