from __future__ import annotations

import factory
from django.contrib.auth import get_user_model

from memories.models import Memory, MemoryParticipant
from people.models import ConsentStatus, Person


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user{n}")
    password = factory.PostGenerationMethodCall("set_password", "correct horse battery")

    @factory.post_generation
    def _save(obj, create, extracted, **kwargs):
        if create:
            obj.save()

    @factory.post_generation
    def with_self(obj, create, extracted, **kwargs):
        """A granted Self person, as sign-up makes (UserFactory(with_self=False): none)."""
        if create and extracted is not False:
            from people.services import person_create_self

            person_create_self(owner=obj)


class PersonFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Person

    owner = factory.SubFactory(UserFactory)
    display_name = factory.Sequence(lambda n: f"Person {n}")
    consent_status = ConsentStatus.PENDING


class MemoryFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Memory

    owner = factory.SubFactory(UserFactory)
    body = factory.Sequence(lambda n: f"Memory number {n}: we walked by the river.")


class ParticipantFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = MemoryParticipant

    memory = factory.SubFactory(MemoryFactory)
    person = factory.SubFactory(PersonFactory, owner=factory.SelfAttribute("..memory.owner"))
    role = "subject"
