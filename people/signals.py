"""The one signal in people: a deleted person's photo file goes with the row.

A signal rather than a service because people are also deleted by cascade (an
account deleted with everything in it) where no people service runs, and a
photo left on disk after its person is gone would outlive the owner's wish.
"""

from __future__ import annotations

from django.db import transaction
from django.db.models.signals import post_delete
from django.dispatch import receiver

from people.models import Person


@receiver(post_delete, sender=Person, dispatch_uid="people_photo_file_delete")
def person_photo_file_delete(sender, instance: Person, **kwargs) -> None:
    name = instance.photo.name
    if name:
        storage = instance.photo.storage
        # After commit: a rolled-back delete keeps its person, and so its photo.
        transaction.on_commit(lambda: storage.delete(name))
