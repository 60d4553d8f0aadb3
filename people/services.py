from __future__ import annotations

import uuid

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import transaction
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone

from config.db_retry import retry_on_conflict
from people.birthdays import Birthday
from people.models import (
    AGENTS_AUDIENCE,
    CIRCLE_AUDIENCE_PREFIX,
    ConsentActor,
    ConsentEvent,
    ConsentStatus,
    ConsentSurface,
    Person,
    PersonConsent,
    PersonKind,
    circle_audience,
    person_photo_path,
)
from people.photos import photo_prepare

MAX_REASON_LENGTH = 2000
RELATIONSHIP_MAX_LENGTH = 100


class _Keep:
    """Default of person_update's birthday: leave it as it is (None clears it)."""

    def __repr__(self) -> str:
        return "KEEP"


KEEP = _Keep()


def _set_birthday(person: Person, birthday: Birthday | None) -> None:
    person.birthday_month = birthday.month if birthday else None
    person.birthday_day = birthday.day if birthday else None
    person.birthday_year = birthday.year if birthday else None


def _clean_relationship(relationship: str) -> str:
    relationship = " ".join(relationship.split())
    if len(relationship) > RELATIONSHIP_MAX_LENGTH:
        raise ValidationError(
            {"relationship": f"A relationship can be at most {RELATIONSHIP_MAX_LENGTH} characters."}
        )
    return relationship


def _clean_aliases(aliases: list[str] | None) -> list[str]:
    seen: list[str] = []
    for alias in aliases or []:
        alias = alias.strip()
        if alias and alias not in seen:
            seen.append(alias)
    return seen


def person_create(
    *,
    owner: AbstractBaseUser,
    display_name: str,
    aliases: list[str] | None = None,
    kind: str = PersonKind.HUMAN,
    notes: str = "",
    relationship: str = "",
    birthday: Birthday | None = None,
) -> Person:
    """A new person always starts with consent pending (fail closed)."""
    display_name = display_name.strip()
    if not display_name:
        raise ValidationError({"display_name": "A name is required."})
    person = Person(
        owner=owner,
        display_name=display_name,
        aliases=_clean_aliases(aliases),
        kind=kind,
        notes=notes,
        relationship=_clean_relationship(relationship),
        consent_status=ConsentStatus.PENDING,
    )
    _set_birthday(person, birthday)
    person.full_clean()
    person.save()
    return person


def person_create_self(*, owner: AbstractBaseUser) -> Person:
    """The owner's own Person: they consent to their own memories."""
    now = timezone.now()
    return Person.objects.create(
        owner=owner,
        display_name="Self",
        is_self=True,
        linked_user=owner,
        consent_status=ConsentStatus.GRANTED,
        consent_updated_at=now,
    )


def person_update(
    *,
    person: Person,
    display_name: str,
    aliases: list[str] | None = None,
    kind: str | None = None,
    notes: str | None = None,
    relationship: str | None = None,
    birthday: Birthday | None | _Keep = KEEP,
) -> Person:
    """Edit details. Consent is never changed here: see person_set_consent.

    None leaves kind, notes and relationship as they are; a birthday of None clears it.
    """
    display_name = display_name.strip()
    if not display_name:
        raise ValidationError({"display_name": "A name is required."})
    person.display_name = display_name
    person.aliases = _clean_aliases(aliases)
    if kind is not None:
        person.kind = kind
    if notes is not None:
        person.notes = notes
    if relationship is not None:
        person.relationship = _clean_relationship(relationship)
    if not isinstance(birthday, _Keep):
        _set_birthday(person, birthday)
    person.full_clean()
    person.save()
    return person


def audience_validate(audience: str) -> str:
    """`agents` or `circle:<uuid>` (lower-case uuid), or a ValidationError that says so."""
    audience = (audience or "").strip().lower()
    if audience == AGENTS_AUDIENCE:
        return audience
    if audience.startswith(CIRCLE_AUDIENCE_PREFIX):
        try:
            return circle_audience(uuid.UUID(audience[len(CIRCLE_AUDIENCE_PREFIX) :]))
        except ValueError:
            pass
    raise ValidationError({"audience": "An audience is 'agents' or 'circle:<circle id>'."})


@retry_on_conflict
@transaction.atomic
def person_set_consent(
    *,
    person: Person,
    status: str,
    actor: AbstractBaseUser | None,
    surface: str = ConsentSurface.UI,
    reason: str = "",
    audience: str = AGENTS_AUDIENCE,
    actor_kind: str = ConsentActor.OWNER,
) -> ConsentEvent | None:
    """Change a person's consent for one audience and append a ConsentEvent.

    Returns None when the status is unchanged (nothing to record). The person row
    is locked first, whatever the audience, so two concurrent changes of one
    person are recorded in order with correct old/new statuses. For `agents` the
    column Person.consent_status is written (the agents' gate reads it; a trigger
    mirrors it into PersonConsent); circle audiences live in PersonConsent only.
    A Self person counts as granted for every circle (sharing your own memory is
    your consent), so only its `agents` consent can be set.
    """
    if status not in ConsentStatus.values:
        raise ValidationError({"status": f"Consent must be one of: {', '.join(ConsentStatus.values)}."})
    if surface not in ConsentSurface.values:
        raise ValidationError({"surface": "Unknown surface."})
    if actor_kind not in ConsentActor.values:
        raise ValidationError({"actor": "Unknown actor."})
    audience = audience_validate(audience)
    reason = (reason or "").strip()
    if len(reason) > MAX_REASON_LENGTH:
        raise ValidationError({"reason": f"A reason is at most {MAX_REASON_LENGTH} characters."})
    locked = Person.objects.select_for_update().get(pk=person.pk)
    # Who decides is read from the locked row, not the caller's copy: a person
    # loaded before they linked their account must not let the owner grant.
    _check_who_decides(person=locked, status=status, actor=actor, actor_kind=actor_kind)
    if locked.is_self and audience != AGENTS_AUDIENCE:
        raise ValidationError(
            {"audience": "Your own consent for a circle is given by sharing a memory into it."}
        )
    now = timezone.now()
    if audience == AGENTS_AUDIENCE:
        old_status = locked.consent_status
        person.consent_status = locked.consent_status
        person.consent_updated_at = locked.consent_updated_at
        if old_status == status:
            return None
        Person.objects.filter(pk=person.pk).update(consent_status=status, consent_updated_at=now)
        if status == ConsentStatus.GRANTED:
            from memories.tasks import queue_gate_indexing

            # The memories this opened reach the agents' vector index after commit,
            # not in this transaction (memories/gate_index.py).
            queue_gate_indexing(person.owner_id)
        person.consent_status = status
        person.consent_updated_at = now
        # The trigger has written the status; the reason and who decided are ours.
        PersonConsent.objects.filter(person=person, audience=audience).update(
            reason=reason, updated_by=actor_kind, updated_at=now
        )
    else:
        current = PersonConsent.objects.filter(person=person, audience=audience).first()
        old_status = current.status if current is not None else ConsentStatus.PENDING
        if old_status == status:
            return None
        PersonConsent.objects.update_or_create(
            person=person,
            audience=audience,
            defaults={"status": status, "reason": reason, "updated_by": actor_kind},
        )
    from inbox.models import NotificationKind
    from inbox.services import notify

    if actor_kind == ConsentActor.SELF:
        notify(
            recipient=person.owner_id,
            kind=NotificationKind.CONSENT_CHANGED,
            text=f"{locked.display_name} set their consent for {audience_label(audience)} to {status}.",
            url=f"/people/{person.pk}/",
        )
    elif person_is_linked(locked):
        # The owner overrode what is the person's own to decide (only ever towards more care):
        # they are told, in words they know — the owner, the audience, how the owner names them.
        owner = locked.owner.get_username()
        notify(
            recipient=locked.linked_user_id,
            kind=NotificationKind.CONSENT_OVERRIDDEN,
            text=f"{owner} changed your consent for {audience_label(audience, owner_name=owner)} "
            f"from {old_status} to {status} (you are “{locked.display_name}” in {owner}'s journal).",
            url=reverse("my_consents"),
        )
    return ConsentEvent.objects.create(
        person=person,
        person_name=locked.display_name,
        owner_id=person.owner_id,
        audience=audience,
        old_status=old_status,
        new_status=status,
        actor=actor,
        actor_kind=actor_kind,
        surface=surface,
        reason=reason,
    )


def person_is_linked(person: Person) -> bool:
    """Linked to someone else's account: then that person decides their own consent."""
    return (
        person.linked_user_id is not None and person.linked_user_id != person.owner_id and not person.is_self
    )


def _check_who_decides(
    *, person: Person, status: str, actor: AbstractBaseUser | None, actor_kind: str
) -> None:
    if actor_kind == ConsentActor.SELF:
        if not person_is_linked(person) or actor is None or actor.pk != person.linked_user_id:
            raise PermissionDenied(
                "Only the person themself, signed in to their linked account, decides here."
            )
        return
    if status == ConsentStatus.GRANTED and person_is_linked(person):
        raise PermissionDenied(
            f"{person.display_name} decides their own consent: you can revoke it or reset it to pending, "
            "but only they can grant it."
        )


def audience_label(audience: str, *, owner_name: str | None = None) -> str:
    """An audience in a notification's words: the journal owner's agents, or a circle by name.

    The agents are "your agents" to their owner, "alice's agents" to anyone else
    (`owner_name`); a circle is named while it still exists.
    """
    if audience == AGENTS_AUDIENCE:
        return "your agents" if owner_name is None else f"{owner_name}'s agents"
    from django.apps import apps

    circle_model = apps.get_model("circles", "Circle")
    circle = circle_model.objects.filter(pk=audience[len(CIRCLE_AUDIENCE_PREFIX) :]).first()
    return f"the circle {circle.name}" if circle is not None else "a circle"


class PersonInUse(Exception):
    def __init__(self, person: Person, memory_count: int) -> None:
        self.person = person
        self.memory_count = memory_count
        super().__init__(
            f"{person.display_name} is in {memory_count} "
            f"memor{'y' if memory_count == 1 else 'ies'}; remove them from "
            f"{'it' if memory_count == 1 else 'those'} before deleting."
        )


@transaction.atomic
def person_delete(*, person: Person) -> None:
    """Delete a person who is in no memory, as a participant or as its source.

    Dropping a participant (or clearing a "told by") silently would make the
    memory visible to agents without that person's consent, so a person still
    in memories is refused.
    """
    from memories.models import Memory

    if person.is_self:
        raise ValidationError("Your own entry (Self) cannot be deleted.")
    memory_count = (
        Memory.objects.filter(Q(participants__person=person) | Q(source_person=person)).distinct().count()
    )
    if memory_count:
        raise PersonInUse(person, memory_count)
    person.delete()  # its photo file goes after commit (people/signals.py)


def _delete_file_after_commit(name: str) -> None:
    if name:
        storage = Person._meta.get_field("photo").storage
        transaction.on_commit(lambda: storage.delete(name))


@transaction.atomic
def person_set_photo(*, person: Person, upload) -> Person:
    """Store a new photo (checked and re-encoded by people.photos); the old file goes after commit."""
    prepared = photo_prepare(upload)
    locked = Person.objects.select_for_update().get(pk=person.pk)
    old_name = locked.photo.name
    storage = locked.photo.storage
    new_name = storage.save(person_photo_path(locked, prepared.name), prepared)
    try:
        Person.objects.filter(pk=person.pk).update(photo=new_name, updated_at=timezone.now())
    except Exception:
        storage.delete(new_name)
        raise
    _delete_file_after_commit(old_name)
    person.photo.name = new_name
    return person


@transaction.atomic
def person_remove_photo(*, person: Person) -> Person:
    locked = Person.objects.select_for_update().get(pk=person.pk)
    old_name = locked.photo.name
    Person.objects.filter(pk=person.pk).update(photo="", updated_at=timezone.now())
    _delete_file_after_commit(old_name)
    person.photo.name = ""
    return person
