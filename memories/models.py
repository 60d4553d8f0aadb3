from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVector, SearchVectorField
from django.db import models
from django.utils import timezone
from pgvector.django import HalfVectorField, HnswIndex, VectorField

from config.models import UUIDModel, owner_key

EMBEDDING_DIMENSIONS = 384


class MemoryKind(models.TextChoices):
    KNOWLEDGE = "knowledge", "Knowledge"
    PREFERENCE = "preference", "Preference"
    IDENTITY = "identity", "Identity"
    RELATIONSHIP = "relationship", "Relationship"
    CONTEXT = "context", "Context"
    EVENT = "event", "Event"
    TASK = "task", "Task"
    OBSERVATION = "observation", "Observation"


class Sensitivity(models.TextChoices):
    PUBLIC = "public", "Public"
    PERSONAL = "personal", "Personal"
    SENSITIVE = "sensitive", "Sensitive"


class Memory(UUIDModel):
    owner = owner_key("memories")
    title = models.CharField(max_length=200, blank=True)
    body = models.TextField()
    occurred_at = models.DateTimeField(default=timezone.now)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    kind = models.CharField(max_length=20, choices=MemoryKind.choices, default=MemoryKind.KNOWLEDGE)
    expires_at = models.DateTimeField(null=True, blank=True)
    # Set by the expiry beat task (memories/lifecycle.py) once expires_at has passed.
    # Retrieval trusts expires_at itself; this marker is bookkeeping for the owner and doctor.
    expired_at = models.DateTimeField(null=True, blank=True)
    sensitivity = models.CharField(max_length=10, choices=Sensitivity.choices, default=Sensitivity.PERSONAL)
    source_person = models.ForeignKey(
        "people.Person",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="memories_told",
        help_text="Who told me. Empty means I observed it myself.",
    )
    superseded_by = models.ForeignKey(
        "self", on_delete=models.SET_NULL, null=True, blank=True, related_name="supersedes"
    )
    embedding = VectorField(dimensions=EMBEDDING_DIMENSIONS, null=True, blank=True)
    embedding_model = models.CharField(max_length=100, blank=True)
    embedded_at = models.DateTimeField(null=True, blank=True)
    # Worker bookkeeping (claims make redelivered or concurrent tasks no-ops).
    embedding_claimed_at = models.DateTimeField(null=True, blank=True)
    edges_computed_at = models.DateTimeField(null=True, blank=True)
    supersession_checked_at = models.DateTimeField(null=True, blank=True)
    search_vector = models.GeneratedField(
        expression=SearchVector("title", "body", config="english"),
        output_field=SearchVectorField(),
        db_persist=True,
    )
    people = models.ManyToManyField("people.Person", through="MemoryParticipant", related_name="memories")

    class Meta:
        ordering = ["-occurred_at", "-created_at"]
        indexes = [
            models.Index(fields=["owner", "-occurred_at"]),
            GinIndex(fields=["search_vector"]),
            HnswIndex(
                name="memory_embedding_hnsw",
                fields=["embedding"],
                m=16,
                ef_construction=64,
                opclasses=["vector_cosine_ops"],
            ),
        ]

    def __str__(self) -> str:
        return self.title or self.body[:60]

    @property
    def headline(self) -> str:
        if self.title:
            return self.title
        first_line = self.body.strip().splitlines()[0] if self.body.strip() else ""
        return first_line[:80] + ("…" if len(first_line) > 80 else "")


class ParticipantRole(models.TextChoices):
    SUBJECT = "subject", "Subject"
    PRESENT = "present", "Present"
    SOURCE = "source", "Source"


class MemoryParticipant(models.Model):
    """A person in a memory. Every participant counts for the consent gate."""

    memory = models.ForeignKey(Memory, on_delete=models.CASCADE, related_name="participants")
    # PROTECT: deleting a person must never silently drop them from a memory,
    # which would make that memory visible to agents without their consent.
    person = models.ForeignKey("people.Person", on_delete=models.PROTECT, related_name="participations")
    role = models.CharField(max_length=10, choices=ParticipantRole.choices, default=ParticipantRole.SUBJECT)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["memory", "person"], name="one_role_per_person_per_memory")
        ]
        indexes = [models.Index(fields=["person", "memory"])]

    def __str__(self) -> str:
        return f"{self.person} ({self.role})"


class EdgeKind(models.TextChoices):
    SIMILAR = "similar", "Similar"
    SHARED_PERSON = "shared_person", "Shared person"
    SUPERSEDES = "supersedes", "Supersedes"


class MemoryEdge(models.Model):
    """A computed link between two memories of one owner (workers fill these)."""

    owner = owner_key()
    source = models.ForeignKey(Memory, on_delete=models.CASCADE, related_name="edges_out")
    target = models.ForeignKey(Memory, on_delete=models.CASCADE, related_name="edges_in")
    kind = models.CharField(max_length=20, choices=EdgeKind.choices)
    weight = models.FloatField(default=0.0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["source", "target", "kind"], name="unique_memory_edge")
        ]

    def __str__(self) -> str:
        return f"{self.source_id} -{self.kind}-> {self.target_id}"


class ProposalStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    CONFIRMED = "confirmed", "Confirmed"
    DISMISSED = "dismissed", "Dismissed"


class SupersessionProposal(models.Model):
    """A worker's guess that `newer` replaces `older`; only the owner's confirmation applies it.

    Dismissed proposals are kept so the worker never proposes the same pair again.
    """

    owner = owner_key()
    older = models.ForeignKey(Memory, on_delete=models.CASCADE, related_name="replacement_proposals")
    newer = models.ForeignKey(Memory, on_delete=models.CASCADE, related_name="supersession_proposals")
    similarity = models.FloatField()
    status = models.CharField(max_length=10, choices=ProposalStatus.choices, default=ProposalStatus.PENDING)
    created_at = models.DateTimeField(auto_now_add=True)
    decided_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["older", "newer"], name="one_proposal_per_memory_pair"),
            models.CheckConstraint(condition=~models.Q(older=models.F("newer")), name="proposal_not_self"),
        ]
        indexes = [models.Index(fields=["owner", "status"])]

    def __str__(self) -> str:
        return f"{self.newer_id} may replace {self.older_id} ({self.status})"


class MemoryGate(models.Model):
    """How many things stop agents from seeing a memory, kept exact by database triggers.

    `blocked_count` = participants whose person is not positively `granted` (a
    missing person row counts) + 1 if the source person is set and not granted
    + 1 if the memory has no participants and its owner has no granted Self
    (migration 0006). Written ONLY by the triggers of migration 0004 (never by Python code): they
    recompute the count whenever participants, a person's consent, or a memory's
    source person change, in the same transaction.

    It is a hint for choosing a search strategy, never the consent gate itself:
    retrieval.agent_visible_memories (NOT EXISTS in SQL) still filters every agent
    result. If this count were ever wrong, a search could only return too little.

    A table of its own rather than a column on Memory: a consent change rewrites
    the count of every memory the person is in, and rewriting memory rows (wide,
    HNSW-indexed) would re-insert each one into the vector index.
    """

    memory = models.OneToOneField(Memory, on_delete=models.CASCADE, primary_key=True, related_name="gate")
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        db_index=False,
        related_name="+",
    )
    blocked_count = models.IntegerField(default=0)
    # The memory's embedding at half precision, copied by the same triggers. Rows
    # nothing blocks form the partial HNSW index below: the vector index agents
    # search, in which (by the count) every entry can pass the gate.
    embedding = HalfVectorField(dimensions=EMBEDDING_DIMENSIONS, null=True, editable=False)
    # Whether an open row is in the agents' HNSW index (migration 0009), kept by the
    # same triggers: false when the row becomes blocked or loses its embedding, true
    # when an open row gets a new embedding, unchanged when a row only opens (a
    # grant). memories.index_opened_gates sets it for open rows off the request, so a
    # grant never pays the index inserts; until then the search finds those rows
    # through memory_gate_unindexed_idx. It decides which index a row is found
    # through, nothing more.
    indexed = models.BooleanField(db_default=False, editable=False)

    class Meta:
        indexes = [
            # The memories of an owner nothing blocks: counted (index-only) to pick a
            # strategy, and scanned as the candidate set for exact gated search.
            models.Index(
                fields=["owner"],
                include=["memory"],
                condition=models.Q(blocked_count=0),
                name="memory_gate_open_idx",
            ),
            # The same rows with their half-precision copies: the exact searches over an
            # owner's open memories rank them by an index-only scan of the owner's entries,
            # side by side, instead of reading one table page per row (an owner's gate
            # rows lie spread among everyone's: at 10,000 open, 1,100 pages instead of 8,800).
            models.Index(
                fields=["owner"],
                include=["memory", "embedding"],
                condition=models.Q(blocked_count=0, embedding__isnull=False),
                name="memory_gate_open_vectors",
            ),
            HnswIndex(
                fields=["embedding"],
                condition=models.Q(blocked_count=0, indexed=True),
                name="memory_gate_open_hnsw",
                m=24,
                ef_construction=128,
                opclasses=["halfvec_cosine_ops"],
            ),
            # The owner's open rows not in the HNSW index yet (opened by a grant, the
            # task not run yet): searched exactly beside it. Usually empty.
            models.Index(
                fields=["owner"],
                condition=models.Q(blocked_count=0, indexed=False, embedding__isnull=False),
                name="memory_gate_unindexed_idx",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.memory_id}: {self.blocked_count} blocking"


class MemoryGateChange(models.Model):
    """Which transactions changed an owner's open, embedded gate rows: one row per owner and transaction.

    Written ONLY by the statement triggers of migration 0016 (never by Python code),
    in the transaction that makes the change, whenever a gate row becomes open and
    embedded, stops being either, or changes its embedding while open: a grant, a
    revocation, a memory embedded or deleted. `xid` is that transaction's id
    (pg_current_xact_id, as a number). Each transaction inserts only its own rows,
    so writers never wait for each other here.

    It tells a copy of an owner's open vectors kept in a web process
    (memories/open_vectors.py) whether it is still whole: a copy read with
    snapshot S misses a change exactly when a row of a transaction S did not see
    is visible now. It decides only where a search's candidates come from; the
    gate in SQL still decides what passes. `completed_at` is set by the prune
    (memories.gate_changes_prune) once the transaction has ended; rows are deleted
    a while after that, when no kept copy can predate them.
    """

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        db_index=False,
        related_name="+",
    )
    xid = models.BigIntegerField()
    completed_at = models.DateTimeField(null=True)

    class Meta:
        constraints = [
            # Also the index the freshness probe reads: an owner's rows from a transaction id on.
            models.UniqueConstraint(fields=["owner", "xid"], name="memory_gate_change_owner_xid"),
        ]

    def __str__(self) -> str:
        return f"owner {self.owner_id}, transaction {self.xid}"


class MemoryText(models.Model):
    """A narrow copy of what hybrid search ranks on its full-text side, kept by database triggers.

    Written ONLY by the triggers of migration 0011 (never by Python code): a memory
    inserted, its text (so its search vector), date or owner changed, or deleted
    changes its row here in the same statement.

    `agents_open` (migration 0012) copies "the agents' count lets it pass"
    (MemoryGate.blocked_count = 0), kept by the gate's own refresh: the partial
    index memory_text_open_gin holds only those rows, so the agents' full-text
    side ranks matches that can pass rather than the first of all the owner's
    (at 90% gated, nine in ten of a common word's first 3,000 matches were
    blocked). A hint like the count it copies: the gate still decides.

    Why a copy: the full-text side reads every memory a query matches, up to
    search.settings.TEXT_CANDIDATES_MAX of them, and a memory row carries its 384-float
    embedding in line (~2 KB), so reading 3,000 matches meant ~1,300 pages; these
    rows are ~400 bytes (a common word's 3,000 matches: p95 13.5 → 7.9 ms at 100k).

    Candidates only, never the gate: what any search returns still passes the
    scope it is searched through (for agents the NOT EXISTS gate of
    retrieval.agent_visible_memories). A row missing here can only make a
    result too small; a stale one is checked against the real memory.
    """

    memory = models.OneToOneField(
        Memory, on_delete=models.DO_NOTHING, db_constraint=False, primary_key=True, related_name="+"
    )
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.DO_NOTHING, db_constraint=False, related_name="+"
    )
    occurred_at = models.DateTimeField()
    search_vector = SearchVectorField()
    agents_open = models.BooleanField(default=False, db_default=False, editable=False)

    class Meta:
        # Two more are migration 0013's (written as SQL there): memory_text_repeated_gin, on an
        # expression, and memory_text_recent (a one-word query ranked exactly).
        indexes = [
            GinIndex(fields=["search_vector"], name="memory_text_search_gin"),
            # The agents' full-text side: (owner, words) over the rows that can pass (btree_gin).
            GinIndex(
                fields=["owner", "search_vector"],
                condition=models.Q(agents_open=True),
                name="memory_text_open_gin",
            ),
            # The agents' one-word search, matches held once: the rows that can pass, newest first
            # (memory_text_recent holds every row: at 99% gated a word held by a few open
            # memories walked all the owner's rows, 100,000 at 100k, 62 ms).
            models.Index(
                fields=["owner", "-occurred_at", "memory"],
                condition=models.Q(agents_open=True),
                name="memory_text_open_recent",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.memory_id}: text"
