"""Property: no e-mail carries a memory's text, or a person's name as a journal names them,
to anyone but that journal's owner (or, for a name, the person themself).

Hypothesis builds small worlds: Alice's journal (people with any consent, for her agents
and for her circle "Family", some linked to Bob; memories about them on this day in
earlier years, any sensitivity, shared into Family when everyone consented), Bob's own
journal, and Carol, a stranger. All three have verified addresses and the daily digest
on. Then everything that writes mail or a notification happens, through the pages where
there is one: Alice invites Carol and Bob to Family (by e-mail and by username) and
invites each of her unlinked people to link (by e-mail to Carol, by username to Bob);
Carol asks to join and is approved; Bob decides his own consent and Alice overrides it;
Bob asks for a password reset, Carol changes her address; the beat makes everyone's
digest. Every message is sent by the worker's task to the real SMTP server the test
started, and each one received is checked against tests/memories/consent_oracle.py
(email_may_quote, email_may_name).

Each example lives in a savepoint rolled back at its end.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import transaction
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from hypothesis import Phase, event, given, settings
from hypothesis import strategies as st

from circles.models import JoinRequest
from circles.services import ShareRefused, circle_create, join_request_approve, memory_share
from linked.services import person_link_accept, person_link_invite_create
from mail import services, tasks
from memories.services import ParticipantSpec, memory_create
from people.models import PersonConsent
from people.services import person_create, person_set_consent
from tests.factories import UserFactory
from tests.mail.conftest import deliver_outbox, verified
from tests.memories.consent_oracle import OracleMemory, OraclePerson, OracleWorld
from tests.privacy import privacy_settings

pytestmark = pytest.mark.django_db

STATUSES = ["granted", "pending", "revoked"]
# Distinctive words: a name or a memory's text found in a message cannot be a coincidence.
NAMES = ["Quorvath", "Zilphaine", "Brumtallow", "Oskivar", "Thessaly Vunk", "Marrowen"]
ADDRESSES = {"alice": "alice@example.org", "bob": "bob@example.org", "carol": "carol@example.org"}

person_spec = st.fixed_dictionaries(
    {
        "agents": st.sampled_from(STATUSES),
        "family": st.sampled_from(STATUSES),
        "linked_to_bob": st.booleans(),
    }
)
memory_spec = st.fixed_dictionaries(
    {
        "people": st.sets(st.integers(0, 5), max_size=3),
        "role": st.sampled_from(["subject", "present", "source"]),
        "sensitivity": st.sampled_from(["public", "personal", "sensitive"]),
        "years_ago": st.integers(1, 4),
        "share": st.booleans(),
        "titled": st.booleans(),
    }
)
world_spec = st.fixed_dictionaries(
    {
        "people": st.lists(person_spec, min_size=1, max_size=len(NAMES)),
        "memories": st.lists(memory_spec, min_size=1, max_size=5),
        "bob_overridden": st.booleans(),
    }
)


def _client(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def accounts(db, settings):
    # Every example sends Alice's invitations again: no daily limit across a hundred worlds.
    settings.KEEPSAKE_RATELIMITS = settings.KEEPSAKE_RATELIMITS | {"mail_per_account": ""}
    return {name: UserFactory(username=name) for name in ADDRESSES}


# No explain phase: re-running a world many times to point at lines costs minutes and says little here.
@settings(privacy_settings, phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink])
@given(spec=world_spec)
def test_no_email_carries_a_memory_or_a_name_to_anyone_but_its_owner(spec, accounts, smtp_settings):
    smtp_settings.clear()
    with transaction.atomic():
        _run(spec, accounts, smtp_settings)
        transaction.set_rollback(True)


def _run(spec: dict, accounts: dict, server) -> None:
    alice, bob, carol = accounts["alice"], accounts["bob"], accounts["carol"]
    for name, user in accounts.items():
        verified(user, ADDRESSES[name])
        services.email_digest_set(user=user, daily_digest=True)
    family = circle_create(owner=alice, name="Family", description="")
    world = OracleWorld()
    alice_client, bob_client, carol_client = _client(alice), _client(bob), _client(carol)
    today = timezone.localdate()

    people = []
    for index, person in enumerate(spec["people"]):
        row = person_create(owner=alice, display_name=NAMES[index])
        if person["linked_to_bob"]:
            _, token = person_link_invite_create(person=row, by=alice)
            person_link_accept(token=token, user=bob)
            # Bob decides his own consent; Alice is told, naming him as her journal does.
            person_set_consent(
                person=row, status="granted", actor=bob, actor_kind="self", audience=f"circle:{family.pk}"
            )
            if spec["bob_overridden"]:
                person_set_consent(person=row, status="revoked", actor=alice, audience=f"circle:{family.pk}")
        else:
            person_set_consent(person=row, status=person["agents"], actor=alice)
            person_set_consent(
                person=row, status=person["family"], actor=alice, audience=f"circle:{family.pk}"
            )
        row.refresh_from_db()
        people.append(row)
        consents = dict(PersonConsent.objects.filter(person=row).values_list("audience", "status"))
        world.people[str(row.pk)] = OraclePerson(
            id=str(row.pk),
            owner="alice",
            consent_status=row.consent_status,
            consents=consents,
            linked_user="bob" if row.linked_user_id == bob.pk else None,
        )

    bodies = {}
    for index, memory in enumerate(spec["memories"]):
        chosen = [people[i] for i in sorted(memory["people"]) if i < len(people)]
        body = f"Xenolith memory {index} kelpmoth{index}"
        title = f"Glimmerdown title {index}" if memory["titled"] else ""
        occurred = timezone.localtime().replace(year=today.year - memory["years_ago"])
        created = memory_create(
            owner=alice,
            body=body,
            title=title,
            occurred_at=occurred,
            sensitivity=memory["sensitivity"],
            participants=[ParticipantSpec(person=person, role=memory["role"]) for person in chosen],
        )
        if memory["share"]:
            try:
                memory_share(memory=created, circle=family, by=alice)
            except ShareRefused:
                event("share refused")
        bodies[str(created.pk)] = [body, f"kelpmoth{index}"] + ([title] if title else [])
        world.memories[str(created.pk)] = OracleMemory(
            id=str(created.pk), owner="alice", words=body.split(), kind="event", occurred_at=occurred
        )
    bob_memory = memory_create(
        owner=bob, body="Bob's own Sandspire note", occurred_at=timezone.localtime() - timedelta(days=366 * 2)
    )
    bodies[str(bob_memory.pk)] = ["Sandspire"]
    world.memories[str(bob_memory.pk)] = OracleMemory(
        id=str(bob_memory.pk),
        owner="bob",
        words=["Sandspire"],
        kind="event",
        occurred_at=bob_memory.occurred_at,
    )

    # Invitations, through the pages: by e-mail and to a username.
    alice_client.post(reverse("circle_invite_send", args=[family.pk]), {"to": ADDRESSES["carol"]})
    alice_client.post(reverse("circle_invite_send", args=[family.pk]), {"to": "bob"})
    for index, person in enumerate(people):
        if person.linked_user_id is None:
            to = ADDRESSES["carol"] if index % 2 else "bob"
            alice_client.post(reverse("person_link_invite_send", args=[person.pk]), {"to": to})
    # Carol follows her e-mailed invitation and is let in; Bob and Carol ask for links.
    deliver_outbox()
    (invite_link,) = [
        link
        for received in server.to(ADDRESSES["carol"])
        for link in received.links()
        if "/circles/invites/" in link
    ]
    carol_client.post(invite_link.split("testserver", 1)[1] + "ask/")
    join_request_approve(request=JoinRequest.objects.get(circle=family, user=carol), by=alice)
    Client().post(reverse("mail_password_reset"), {"address": ADDRESSES["bob"]})
    carol_client.post(reverse("mail_address_set"), {"address": "carol.new@example.org"})
    bob_client.get(reverse("inbox"))  # reading the inbox does not keep it out of the digest

    tasks.digests.apply()  # the beat: it queues each due digest (here: runs them in process)
    for user in accounts.values():
        services.digest_make(user_id=user.pk, day=today)
    deliver_outbox()

    recipients = {address: name for name, address in ADDRESSES.items()} | {"carol.new@example.org": "carol"}
    assert server.messages, "the world sent no mail at all"
    digest_to_alice = [r for r in server.to(ADDRESSES["alice"]) if "Your Keepsake day" in r.subject]
    assert len(digest_to_alice) == 1  # her memories on this day make one, and only one
    assert any(word in digest_to_alice[0].whole for words in bodies.values() for word in words)
    for received in server.messages:
        recipient = recipients[received.to]
        whole = received.whole
        for memory_id, words in bodies.items():
            for word in words:
                if word in whole:
                    assert world.email_may_quote(memory_id, recipient), (recipient, received.subject, word)
        for person_id, person in world.people.items():
            name = next(p.display_name for p in people if str(p.pk) == person_id)
            if name in whole:
                assert world.email_may_name(person_id, recipient), (recipient, received.subject, name)
                event(f"a name went to {'its owner' if recipient == person.owner else 'the person'}")
    event(f"{len(server.messages)} messages")
