from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.db import models

from config.models import UUIDModel, owner_key
from memories.models import MemoryKind, Sensitivity


class AgentRole(models.TextChoices):
    CAREGIVER = "caregiver", "Caregiver"
    REVIEWER = "reviewer", "Reviewer"
    TUTOR = "tutor", "Tutor"
    BRAINSTORM = "brainstorm", "Brainstorm"
    CUSTOM = "custom", "Custom"


class Agent(UUIDModel):
    """One of the owner's AI agents. Agents only ever read consent-gated memories."""

    owner = owner_key("agents")
    name = models.CharField(max_length=100)
    role = models.CharField(max_length=20, choices=AgentRole.choices, default=AgentRole.CUSTOM)
    instructions = models.TextField(blank=True)
    is_builtin = models.BooleanField(default=False)
    # SPEC §3: `sensitive` memories (health, money, …) go to this agent's language model
    # only when the owner says so. Off by default: withheld like ungranted ones.
    may_read_sensitive = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-is_builtin", "name"]
        constraints = [models.UniqueConstraint(fields=["owner", "name"], name="unique_agent_name_per_owner")]

    def __str__(self) -> str:
        return self.name


class Conversation(UUIDModel):
    """One chat thread between the owner and one of their agents."""

    owner = owner_key("conversations")
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="conversations")
    title = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    # Up to when the owner's messages were read for memories to propose (agents/tasks.py);
    # the task claims a pass with a conditional update on it.
    proposals_scanned_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-updated_at"]
        indexes = [models.Index(fields=["owner", "agent", "-updated_at"])]

    def __str__(self) -> str:
        return self.title or f"Conversation {self.id}"


class MessageRole(models.TextChoices):
    USER = "user", "User"
    ASSISTANT = "assistant", "Assistant"


class Message(UUIDModel):
    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="messages")
    role = models.CharField(max_length=10, choices=MessageRole.choices)
    content = models.TextField()
    # The memories handed to the agent for this reply. A M2M (not an array of ids) so a
    # deleted memory drops out of old citations instead of leaving a dangling id.
    cited_memories = models.ManyToManyField("memories.Memory", blank=True, related_name="cited_in_messages")
    # What the reply was built from, kept when a source is deleted (its citation row is not):
    # the provenance of derived text (SPEC §3). The owner reads their own chats in full, so
    # nothing here is gated on read today; the ids say what the text came from.
    source_ids = ArrayField(models.UUIDField(), default=list, blank=True)
    # People the question named whose memories were withheld for lack of consent: the
    # reply says so (quoting nothing) and offers the owner a consent request.
    withheld_people = models.ManyToManyField("people.Person", blank=True, related_name="+")
    # An assistant message that records a failed LLM call rather than a real reply.
    is_error = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [models.Index(fields=["conversation", "created_at"])]

    def __str__(self) -> str:
        return f"{self.role}: {self.content[:60]}"


class AccessSurface(models.TextChoices):
    CHAT = "chat", "Chat"
    API = "api", "API"
    MCP = "mcp", "MCP"
    A2A = "a2a", "Agent to agent"
    CIRCLE = "circle", "Circle"


class AccessLog(models.Model):
    """One memory handed to an agent (or viewer) on one surface. Append-only."""

    owner = owner_key()
    memory = models.ForeignKey("memories.Memory", on_delete=models.CASCADE, related_name="access_logs")
    surface = models.CharField(max_length=10, choices=AccessSurface.choices)
    # SET_NULL plus a name snapshot: deleting a custom agent must not erase who saw what.
    agent = models.ForeignKey(
        Agent, on_delete=models.SET_NULL, null=True, blank=True, related_name="access_logs"
    )
    agent_name = models.CharField(max_length=100, blank=True)
    viewer = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["memory", "-created_at"])]

    def __str__(self) -> str:
        return f"{self.memory_id} via {self.surface}"


class ConsentRequestStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    APPROVED = "approved", "Approved"
    DISMISSED = "dismissed", "Dismissed"


class ConsentRequest(UUIDModel):
    """An agent's suggestion that the owner ask a person for consent. Only the owner acts on it."""

    owner = owner_key()
    person = models.ForeignKey("people.Person", on_delete=models.CASCADE, related_name="consent_requests")
    agent = models.ForeignKey(
        Agent, on_delete=models.SET_NULL, null=True, blank=True, related_name="consent_requests"
    )
    conversation = models.ForeignKey(
        Conversation, on_delete=models.SET_NULL, null=True, blank=True, related_name="consent_requests"
    )
    # Written by us from the question's context, never quoting a gated memory.
    reason = models.TextField(blank=True)
    # What the agent itself said when it asked (MCP / API): its own words, so shown to the
    # owner only, never to a linked person, who sees `reason`.
    agent_reason = models.TextField(blank=True)
    status = models.CharField(
        max_length=10, choices=ConsentRequestStatus.choices, default=ConsentRequestStatus.PENDING
    )
    created_at = models.DateTimeField(auto_now_add=True)
    resolved_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["person", "status"])]
        constraints = [
            # One open request per person is enough; asking again reuses it.
            models.UniqueConstraint(
                fields=["person"],
                condition=models.Q(status="pending"),
                name="one_pending_consent_request_per_person",
            ),
        ]

    def __str__(self) -> str:
        return f"Consent request for {self.person_id} ({self.status})"


class MemoryProposalStatus(models.TextChoices):
    PENDING = "pending", "Waiting for you"
    CONFIRMED = "confirmed", "Saved"
    DISMISSED = "dismissed", "Dismissed"


class ProposalSurface(models.TextChoices):
    CHAT = "chat", "Chat"
    API = "api", "API"
    MCP = "mcp", "MCP"
    TASK = "task", "From a finished conversation"


class MemoryProposal(UUIDModel):
    """A memory one of the owner's agents suggests keeping. Nothing is saved until the owner confirms.

    People are matched among the owner's people when it is proposed; names nobody has
    are kept as text in `new_people` and become (pending) people only on confirmation.
    An insight proposal (`is_insight`) has no people and records the memories it
    generalises, and is saved through insights.services.insight_create.
    The memory it became keeps the link to the agent that proposed it (`memory`), so
    Memory itself needs no column for it.
    """

    owner = owner_key()
    # SET_NULL plus a name snapshot: deleting a custom agent keeps who proposed what.
    agent = models.ForeignKey(
        Agent, on_delete=models.SET_NULL, null=True, blank=True, related_name="memory_proposals"
    )
    agent_name = models.CharField(max_length=100, blank=True)
    conversation = models.ForeignKey(
        Conversation, on_delete=models.SET_NULL, null=True, blank=True, related_name="memory_proposals"
    )
    # The agent's chat reply that carries the proposal, so the chat shows it in place.
    message = models.ForeignKey(
        Message, on_delete=models.SET_NULL, null=True, blank=True, related_name="memory_proposals"
    )
    surface = models.CharField(max_length=10, choices=ProposalSurface.choices)
    text = models.TextField()
    kind = models.CharField(max_length=20, choices=MemoryKind.choices)
    sensitivity = models.CharField(max_length=10, choices=Sensitivity.choices)
    people = models.ManyToManyField("people.Person", blank=True, related_name="+")
    new_people = ArrayField(models.CharField(max_length=200), default=list, blank=True)
    is_insight = models.BooleanField(default=False)
    sources = models.ManyToManyField("memories.Memory", blank=True, related_name="+")
    # The sources' ids, kept when one is deleted (its row in `sources` is not).
    source_ids = ArrayField(models.UUIDField(), default=list, blank=True)
    status = models.CharField(
        max_length=10, choices=MemoryProposalStatus.choices, default=MemoryProposalStatus.PENDING
    )
    created_at = models.DateTimeField(auto_now_add=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    memory = models.ForeignKey(
        "memories.Memory", on_delete=models.SET_NULL, null=True, blank=True, related_name="agent_proposals"
    )

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["owner", "status", "-created_at"])]

    def __str__(self) -> str:
        return f"{self.text[:60]} ({self.status})"
