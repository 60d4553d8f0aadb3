"""The one signal in attachments: a deleted attachment's files go with its row.

A signal rather than a service because attachments are mostly deleted by cascade — a
memory deleted, an account deleted with everything in it — where no attachments
service runs, and a photo left in the store after its memory is gone would outlive the
owner's wish (the same reasoning as people/signals.py).
"""

from __future__ import annotations

from django.db import transaction
from django.db.models.signals import post_delete
from django.dispatch import receiver

from attachments.models import Attachment
from attachments.storage import attachment_storage


@receiver(post_delete, sender=Attachment, dispatch_uid="attachment_files_delete")
def attachment_files_delete(sender, instance: Attachment, **kwargs) -> None:
    names = instance.stored_names()

    def delete_files() -> None:
        storage = attachment_storage()
        for name in names:
            storage.delete(name)

    # After commit: a rolled-back delete keeps its row, and so its files.
    transaction.on_commit(delete_files)
