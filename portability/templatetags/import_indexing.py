from __future__ import annotations

from django import template

from memories.indexing import IndexingProgress, memory_indexing_progress
from portability.models import ImportedItem, ImportJob, ImportOutcome

register = template.Library()


@register.simple_tag
def import_indexing(job: ImportJob) -> IndexingProgress:
    """`{% import_indexing job as indexing %}`: how many of the memories this import made are embedded."""
    made = ImportedItem.objects.filter(job=job, outcome=ImportOutcome.IMPORTED, object_id__isnull=False)
    return memory_indexing_progress(owner=job.owner_id, memory_ids=made.values("object_id"))
