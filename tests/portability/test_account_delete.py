"""Deleting an account leaves nothing of the user in any table.

The check is generic: it walks every installed model (including M2M tables)
and every foreign key, so a model added later is covered without touching
this file.
"""

from __future__ import annotations

import pytest
from django.apps import apps
from django.contrib.auth import get_user_model
from django.contrib.sessions.models import Session
from django.core.exceptions import ValidationError
from django.db import connection, models

from memories.models import Memory, MemoryEdge, SupersessionProposal
from people.models import Person
from people.services import person_create
from portability.models import ImportJob
from portability.services import account_delete, import_run, import_start
from tests.portability.conftest import seed_journal

PASSWORD = "correct horse battery"


def _foreign_keys():
    for model in apps.get_models(include_auto_created=True):
        for field in model._meta.concrete_fields:
            if field.is_relation and field.related_model is not None:
                yield model, field


def _rows_reachable_from(user) -> dict[type[models.Model], set]:
    """Every row that points at the user, or at such a row, through any foreign key, transitively."""
    user_model = get_user_model()
    reached: dict[type[models.Model], set] = {user_model: {user.pk}}
    grew = True
    while grew:
        grew = False
        for model, field in _foreign_keys():
            target_model = field.related_model._meta.concrete_model
            if target_model not in reached:
                continue
            target_values = target_model._base_manager.filter(pk__in=reached[target_model]).values_list(
                field.target_field.attname, flat=True
            )
            pks = set(
                model._base_manager.filter(**{f"{field.attname}__in": list(target_values)}).values_list(
                    "pk", flat=True
                )
            )
            new = pks - reached.get(model, set())
            if new:
                reached.setdefault(model, set()).update(new)
                grew = True
    return reached


def _row_counts() -> dict[str, int]:
    return {
        model._meta.label: model._base_manager.count() for model in apps.get_models(include_auto_created=True)
    }


def _log_in(client, user) -> str:
    client.force_login(user)
    return client.session.session_key


@pytest.fixture
def alice_everything(alice, client):
    """Alice with one of everything the app stores, including an import and a session."""
    journal = seed_journal(alice)
    SupersessionProposal.objects.create(
        owner=alice, older=journal.lives_paris, newer=journal.lives_berlin, similarity=0.9
    )
    job = import_start(
        owner=alice,
        filename="Journal.json",
        content=b'{"entries": [{"uuid": "A1", "creationDate": "2020-01-01T00:00:00Z", "text": "Snow day"}]}',
    )
    import_run(job_id=job.pk)
    session_key = _log_in(client, alice)
    return journal, session_key


def test_deleting_an_account_leaves_no_row_of_theirs_in_any_table(alice_everything, alice, mallory):
    seed_journal(mallory)
    mallory_rows = _rows_reachable_from(mallory)
    reached = _rows_reachable_from(alice)
    # The walk found the rows this test is about (it cannot pass by finding nothing).
    for model in (
        Person,
        Memory,
        MemoryEdge,
        SupersessionProposal,
        ImportJob,
        apps.get_model("accounts.AccessToken"),
    ):
        assert reached.get(model), model
    counts_before = _row_counts()

    account_delete(user=alice, password=PASSWORD)

    for model, pks in reached.items():
        left = model._base_manager.filter(pk__in=pks)
        assert not left.exists(), f"{model._meta.label} still has {left.count()} of alice's rows"
    # Nothing anywhere still points at a deleted row (including DO_NOTHING keys that
    # the transaction would only notice at commit).
    for model, field in _foreign_keys():
        target_model = field.related_model._meta.concrete_model
        if target_model in reached:
            dangling = model._base_manager.filter(**{f"{field.attname}__in": list(reached[target_model])})
            assert not dangling.exists(), f"{model._meta.label}.{field.name} points at a deleted row"
    connection.check_constraints()
    # Mallory's journal is untouched.
    assert _rows_reachable_from(mallory) == mallory_rows
    # Only alice's rows went: the row count fell by exactly what the walk found
    # (sessions hold the user id inside their data, not as a key; tested apart).
    removed = sum(len(pks) for pks in reached.values())
    counts_after = _row_counts()
    del counts_before["sessions.Session"], counts_after["sessions.Session"]
    assert sum(counts_before.values()) - sum(counts_after.values()) == removed


def test_deleting_an_account_ends_its_sessions(alice_everything, alice, mallory, client):
    _journal, session_key = alice_everything
    from django.test import Client

    mallory_session = _log_in(Client(), mallory)
    account_delete(user=alice, password=PASSWORD)
    assert not Session.objects.filter(session_key=session_key).exists()
    assert Session.objects.filter(session_key=mallory_session).exists()


def test_other_owners_person_linked_to_the_account_keeps_their_row_without_the_link(alice, mallory):
    mallorys_friend = person_create(owner=mallory, display_name="Alice (friend)")
    Person.objects.filter(pk=mallorys_friend.pk).update(linked_user=alice)
    account_delete(user=alice, password=PASSWORD)
    mallorys_friend.refresh_from_db()
    assert mallorys_friend.linked_user is None


def test_wrong_password_deletes_nothing(alice_everything, alice):
    counts = _row_counts()
    with pytest.raises(ValidationError) as excinfo:
        account_delete(user=alice, password="hunter2")
    assert "nothing was deleted" in excinfo.value.messages[0]
    assert _row_counts() == counts
