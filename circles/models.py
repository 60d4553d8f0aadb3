"""Circles: shared contexts between people (SPEC §4).

This app builds on `people` and `memories`, never the other way round — except
that the one consent gate (memories/retrieval.py) reads MemoryShare and
CircleMembership when its viewer is a circle member: one gate, with a case per
audience.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVectorField
from django.db import models
from pgvector.django import HalfVectorField, HnswIndex

from config.models import UUIDModel, owner_key
from memories.models import EMBEDDING_DIMENSIONS

CIRCLE_NAME_MAX_LENGTH = 80
CIRCLE_DESCRIPTION_MAX_LENGTH = 1000
MAX_MEMBERS = 50


class Circle(UUIDModel):
    """A shared context owned by one user: a family, a care team, a class."""

    owner = owner_key("owned_circles")
    name = models.CharField(max_length=CIRCLE_NAME_MAX_LENGTH)
    description = models.TextField(blank=True, max_length=CIRCLE_DESCRIPTION_MAX_LENGTH)
    # A2A (SPEC §4): members' agents may read what is shared here. Off by default.
    agents_may_read = models.BooleanField(default=False)
    # The circle's own agent: one of the four built-in roles, with the circle
    # owner's instructions (empty: the role's own).
    agent_role = models.CharField(max_length=20, default="caregiver")
    agent_instructions = models.TextField(blank=True, max_length=4000)
    # The circle's agent may read `sensitive` memories (only ever in a member's private
    # conversation, about that member). Off by default; the circle's owner decides.
    agent_may_read_sensitive = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name", "created_at"]

    def __str__(self) -> str:
        return self.name

    @property
    def audience(self) -> str:
        from people.models import circle_audience

        return circle_audience(self.pk)


class MembershipRole(models.TextChoices):
    OWNER = "owner", "Owner"
    MEMBER = "member", "Member"


class CircleMembership(models.Model):
    circle = models.ForeignKey(Circle, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="circle_memberships"
    )
    role = models.CharField(max_length=10, choices=MembershipRole.choices, default=MembershipRole.MEMBER)
    joined_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["circle", "user"], name="one_membership_per_user")]
        indexes = [models.Index(fields=["user", "circle"], name="circle_membership_user_idx")]

    def __str__(self) -> str:
        return f"{self.user_id} in {self.circle_id} ({self.role})"


class CircleInvite(UUIDModel):
    """An invite link. Only the token's hash is stored; the link is shown once."""

    circle = models.ForeignKey(Circle, on_delete=models.CASCADE, related_name="invites")
    token_hash = models.CharField(max_length=64, unique=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"invite to {self.circle_id}"


class JoinRequestStatus(models.TextChoices):
    PENDING = "pending", "Waiting"
    APPROVED = "approved", "Approved"
    DECLINED = "declined", "Declined"


class JoinRequest(UUIDModel):
    circle = models.ForeignKey(Circle, on_delete=models.CASCADE, related_name="join_requests")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="join_requests")
    invite = models.ForeignKey(
        CircleInvite, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    status = models.CharField(
        max_length=10, choices=JoinRequestStatus.choices, default=JoinRequestStatus.PENDING
    )
    created_at = models.DateTimeField(auto_now_add=True)
    decided_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["circle", "user"],
                condition=models.Q(status="pending"),
                name="one_pending_join_request",
            )
        ]

    def __str__(self) -> str:
        return f"{self.user_id} asks to join {self.circle_id} ({self.status})"


class MemoryShare(models.Model):
    """A memory shared into a circle. No share, no reader but the owner.

    The last five fields are a hint kept by database triggers (circles migrations
    0002 and 0006), never written by Python: `blocked_count` counts the memory's
    people (participants, and who told it) not granted for this circle's audience
    (Self counts as granted), and `owner`, `occurred_at`, `embedding` (half
    precision) and `search_vector` copy the memory's. They let a circle's
    timeline, vector search and full-text search walk only the shares that can
    pass; the gate in memories/retrieval.py still filters
    every row, so a wrong count could only make a result smaller, never leak.
    """

    memory = models.ForeignKey("memories.Memory", on_delete=models.CASCADE, related_name="shares")
    circle = models.ForeignKey(Circle, on_delete=models.CASCADE, related_name="shares")
    shared_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    shared_at = models.DateTimeField(auto_now_add=True)
    blocked_count = models.IntegerField(default=1, editable=False)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        db_index=False,
        null=True,
        editable=False,
        related_name="+",
    )
    occurred_at = models.DateTimeField(null=True, editable=False)
    embedding = HalfVectorField(dimensions=EMBEDDING_DIMENSIONS, null=True, editable=False)
    search_vector = SearchVectorField(null=True, editable=False)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["memory", "circle"], name="one_share_per_circle")]
        indexes = [
            models.Index(fields=["circle", "memory"], name="memory_share_circle_idx"),
            # The circle's timeline, newest first, and the count of open shares.
            models.Index(
                fields=["circle", "-occurred_at"],
                include=["blocked_count", "owner"],
                name="memory_share_timeline",
            ),
            # Counting a circle's open shares, and finding a viewer's own blocked ones.
            models.Index(
                fields=["circle"],
                include=["memory"],
                condition=models.Q(blocked_count=0),
                name="memory_share_open_idx",
            ),
            models.Index(
                fields=["owner", "circle"],
                condition=models.Q(blocked_count__gt=0),
                name="memory_share_blocked_owner_idx",
            ),
            # A circle's open shares with their vectors, read index-only: what an exact circle
            # search ranks (memories/search/circles.py: _ranked_shares), without reading its other shares.
            models.Index(
                fields=["circle"],
                include=["memory", "embedding"],
                condition=models.Q(blocked_count=0, embedding__isnull=False),
                name="memory_share_open_vectors",
            ),
            HnswIndex(
                fields=["embedding"],
                condition=models.Q(blocked_count=0),
                name="memory_share_open_hnsw",
                m=24,
                ef_construction=128,
                opclasses=["halfvec_cosine_ops"],
            ),
            # The full-text side of circle search: only shares that can pass (btree_gin),
            # and a viewer's own blocked ones (the owner always sees their own).
            GinIndex(
                fields=["circle", "search_vector"],
                condition=models.Q(blocked_count=0),
                name="memory_share_open_text",
            ),
            GinIndex(
                fields=["owner", "circle", "search_vector"],
                condition=models.Q(blocked_count__gt=0),
                name="memory_share_blocked_text",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.memory_id} in {self.circle_id}"


class CircleConversation(UUIDModel):
    """A chat with the circle's agent: shared (every current member reads it) or private to one member."""

    circle = models.ForeignKey(Circle, on_delete=models.CASCADE, related_name="conversations")
    started_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    # Set: a private conversation, read only by this member; its viewer set is them alone.
    private_to = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-updated_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["circle"], condition=models.Q(private_to__isnull=True), name="one_shared_circle_chat"
            ),
            models.UniqueConstraint(
                fields=["circle", "private_to"],
                condition=models.Q(private_to__isnull=False),
                name="one_private_circle_chat_per_member",
            ),
        ]

    def __str__(self) -> str:
        return f"chat in {self.circle_id}" + (
            f" (private to {self.private_to_id})" if self.private_to_id else ""
        )


class CircleMessage(UUIDModel):
    class Role(models.TextChoices):
        USER = "user", "Member"
        ASSISTANT = "assistant", "Agent"

    conversation = models.ForeignKey(CircleConversation, on_delete=models.CASCADE, related_name="messages")
    author = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    role = models.CharField(max_length=10, choices=Role.choices)
    content = models.TextField()
    is_error = models.BooleanField(default=False)
    # The memories the gate handed to the agent for this reply (viewer set at that moment).
    cited_memories = models.ManyToManyField("memories.Memory", blank=True, related_name="+")
    # The same memories' ids, kept when a memory is deleted (its citation row goes with it):
    # what the reply was built from, asked of the gate for each reader on every read
    # (circles/replies.py). A deleted source is one nobody may see, never "no source".
    source_ids = ArrayField(models.UUIDField(), default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"{self.role}: {self.content[:40]}"
