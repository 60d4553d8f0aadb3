"""What agents may suggest to the owner: memories to keep (Ash's "remember that …") and consent requests.

Agents never write into the journal. They propose; the owner decides:

- **Memory proposals.** "remember that …" / "remember: …" at the start of a chat
  message, the MCP tool `memory_propose`, or the conversation task make a
  MemoryProposal: the text, a kind and sensitivity inferred the way the memory form
  infers them (memories.lifecycle.memory_resolve_kind_and_sensitivity, which also
  refuses secrets), the owner's people named in it (display name or alias, whole
  words, any case) and capitalised names nobody has, kept as text. Nothing is saved
  until the owner confirms; new names become people (consent pending) only then.
- **Consent requests from an agent** (MCP `consent_request`, the API): the answer is
  one fixed sentence whatever the person's state — absent, hidden, already consented —
  so asking reveals nothing; a request is recorded only for someone who has not consented.

Services (writes) and the owner-facing selectors live together here, as in
memories/supersession.py, because they share these rules; agents/services.py keeps
the chat, which hands "remember that …" turns to memory_proposal_from_chat.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Collection, Iterable
from dataclasses import dataclass

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import QuerySet
from django.db.models.functions import Lower
from django.shortcuts import get_object_or_404
from django.utils import timezone

from agents.models import (
    Agent,
    ConsentRequest,
    ConsentRequestStatus,
    Conversation,
    MemoryProposal,
    MemoryProposalStatus,
    Message,
    MessageRole,
    ProposalSurface,
)
from insights.services import InsightCheck, insight_check, insight_create
from memories.classify import refuse_credentials
from memories.lifecycle import memory_resolve_kind_and_sensitivity
from memories.models import Memory, MemoryKind, Sensitivity
from memories.services import NewPersonSpec, ParticipantSpec, memory_create_with_new_people
from people.models import ConsentStatus, Person

MAX_PROPOSAL_LENGTH = 4000
MAX_NEW_PEOPLE = 5
MAX_NEW_PEOPLE_TYPED = 10
MAX_NAME_LENGTH = 200
MAX_AGENT_REASON_LENGTH = 500
# The conversation task proposes at most this many memories per pass: a suggestion list, not a dump.
MAX_PROPOSALS_PER_CONVERSATION = 5

# "remember that …", "Remember: …" at the very start. A question ("remember that time we …?")
# is a question about memories, not a fact to keep.
_REMEMBER = re.compile(r"^\s*remember\s*(?:that\b|:)\s*(?P<fact>.+?)\s*$", re.IGNORECASE | re.DOTALL)

# Capitalised words that are not names: sentence starters, pronouns, days, months, holidays.
_NOT_NAMES = {
    word.lower()
    for word in (
        "I I'm I've I'd I'll A An The This That These Those My Our Your His Her Their Its We You He She "
        "They It Me Us Him Them And But Or So If When While After Before Since Because Although Though "
        "Then Also Yes No Not Today Tomorrow Yesterday Tonight Last Next Every Each Some Any All Always "
        "Never Sometimes Often Usually On In At To From With For By Of About Near Into Over Under Remember "
        "Remind Please Note Ok Okay Hi Hello Dear There Here What Who Where Why How Which Mr Mrs Ms Dr "
        "Monday Tuesday Wednesday Thursday Friday Saturday Sunday January February March April May June "
        "July August September October November December Christmas Easter Halloween New Year Birthday "
        "Self Just Only Still Even Maybe Perhaps Both Neither Either Most Many Much More Less Very Really "
        "Once Again Later Soon Now Earlier Meanwhile Anyway However Otherwise Actually Apparently English "
        "French German Spanish Italian British American"
    ).split()
}
_PLACE_WORDS = {"at", "in", "near", "from", "to", "into", "via"}
_TOKEN = re.compile(r"[A-Za-z][\w'’-]*")
_POSSESSIVE = re.compile(r"['’]s$")

# The conversation task keeps a sentence only if it states something about a person:
# it names one of the owner's people, has a verb of being, liking or doing, and is
# neither a question nor a request to the agent.
_FACT_VERB = re.compile(
    r"\b(?:is|are|was|were|has|have|had|likes?|liked|loves?|loved|prefers?|preferred|hates?|hated|"
    r"enjoys?|enjoyed|works?|worked|lives?|lived|moved|studies|studied|plays?|played|became|turned|"
    r"started|stopped|wants?|wanted|needs?|needed|keeps?|kept|goes|went|got|gets|can't|cannot|won't)\b",
    re.IGNORECASE,
)
_NOT_A_STATEMENT = re.compile(
    r"^\s*(?:what|who|whom|whose|when|where|why|how|which|do|does|did|is|are|was|were|can|could|would|"
    r"should|will|shall|may|might|tell|show|list|find|give|remind|help|please|summari[sz]e|describe|"
    r"explain|suggest|remember|let's|lets)\b",
    re.IGNORECASE,
)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")

AGENT_CONSENT_REQUEST_REPLY = (
    "Noted. If the owner needs to ask this person for consent, they will see your request. "
    "Only the owner (or the person themself) decides, and you will not be told the outcome."
)


def remember_request(text: str) -> str | None:
    """The fact in "remember that …" / "remember: …" (any case), or None for any other message."""
    match = _REMEMBER.match(text or "")
    if match is None:
        return None
    fact = match.group("fact").strip()
    if not fact or fact.endswith("?"):
        return None
    return fact[0].upper() + fact[1:]


# --- who a text names ---------------------------------------------------------------------------


def _names_of(person: Person) -> list[str]:
    return [name.strip() for name in [person.display_name, *person.aliases] if name.strip()]


def _mentions(name: str, text: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(name)}(?!\w)", text, flags=re.IGNORECASE) is not None


def proposal_people_named(*, owner: AbstractBaseUser, text: str) -> list[Person]:
    """The owner's people (whatever their consent) named in `text` by display name or alias, whole words."""
    people = Person.objects.filter(owner=owner, is_self=False).order_by(Lower("display_name"), "pk")
    return [person for person in people if any(_mentions(name, text) for name in _names_of(person))]


def proposal_new_names(*, owner: AbstractBaseUser, text: str) -> list[str]:
    """Capitalised names in `text` that none of the owner's people has: candidates for new people.

    Conservative on purpose (a wrong guess costs the owner a click, a missed one a
    typed name): runs of capitalised words that are not common sentence starters,
    days, months or holidays, not right after at / in / near / from / to (places),
    and not containing or contained in anyone's name or alias.
    """
    known = [name.lower() for person in Person.objects.filter(owner=owner) for name in _names_of(person)]
    runs: list[list[str]] = [[]]
    previous_end = 0
    previous_word = ""
    in_place = False
    for match in _TOKEN.finditer(text):
        written = match.group(0)
        word = _POSSESSIVE.sub("", written)
        capitalised = word[0].isupper() and word[1:2].islower()
        # "from New York": every capitalised word after a place word is part of the place.
        in_place = capitalised and (in_place or previous_word in _PLACE_WORDS)
        if capitalised and not in_place and word.lower() not in _NOT_NAMES:
            # Only a single space joins "Mary Jane"; a comma or full stop starts another name.
            if runs[-1] and text[previous_end : match.start()] == " ":
                runs[-1].append(word)
            else:
                runs.append([word])
            if written != word:
                runs.append([])  # "Bob's garden": the name ends at the possessive
        elif runs[-1]:
            runs.append([])
        previous_end = match.end()
        previous_word = word.lower()
    names: list[str] = []
    for run in runs:
        name = " ".join(run)
        if not name or len(name) > MAX_NAME_LENGTH:
            continue
        lowered = name.lower()
        if any(lowered == other or _mentions(other, name) or _mentions(lowered, other) for other in known):
            continue
        if lowered not in (existing.lower() for existing in names):
            names.append(name)
    return names[:MAX_NEW_PEOPLE]


# --- memory proposals ---------------------------------------------------------------------------


def _clean_text(text: str) -> str:
    text = (text or "").strip()
    if not text:
        raise ValidationError({"text": "Write what to remember."})
    if len(text) > MAX_PROPOSAL_LENGTH:
        raise ValidationError({"text": f"A memory proposal is at most {MAX_PROPOSAL_LENGTH} characters."})
    return text


@transaction.atomic
def memory_proposal_create(
    *,
    owner: AbstractBaseUser,
    agent: Agent | None,
    text: str,
    surface: str,
    conversation: Conversation | None = None,
    message: Message | None = None,
    sources: Iterable[Memory] | None = None,
) -> MemoryProposal:
    """Propose `text` as a memory for the owner to confirm. With `sources` it is an insight proposal.

    Raises ValidationError (and writes nothing) for empty or over-long text and for
    text holding a secret, which no memory may keep. An insight is checked too: one
    that names anyone in its sources is refused here, with the names.
    """
    text = _clean_text(text)
    if agent is not None and agent.owner_id != owner.pk:
        raise ValidationError({"agent": "Unknown agent."})
    if conversation is not None and conversation.owner_id != owner.pk:
        raise ValidationError({"conversation": "Unknown conversation."})
    if surface not in ProposalSurface.values:
        raise ValidationError({"surface": "Unknown surface."})
    source_memories = list(sources or [])
    if any(memory.owner_id != owner.pk for memory in source_memories):
        raise ValidationError({"sources": "Unknown memory."})
    kind, sensitivity = memory_resolve_kind_and_sensitivity(title="", body=text, kind=None, sensitivity=None)
    if source_memories:
        check = insight_check(text=text, source_memories=source_memories)
        if check.blocked:
            raise ValidationError({"text": check.block_message})
        kind = MemoryKind.KNOWLEDGE
    proposal = MemoryProposal.objects.create(
        owner=owner,
        agent=agent,
        agent_name=agent.name if agent is not None else "",
        conversation=conversation,
        message=message,
        surface=surface,
        text=text,
        kind=kind,
        sensitivity=sensitivity,
        is_insight=bool(source_memories),
        new_people=[] if source_memories else proposal_new_names(owner=owner, text=text),
        # Kept when a source is deleted (its row in `sources` is not): what it was made from.
        source_ids=[memory.pk for memory in source_memories],
    )
    if source_memories:
        proposal.sources.set(source_memories)
    else:
        proposal.people.set(proposal_people_named(owner=owner, text=text))
    return proposal


def memory_proposal_from_chat(
    *, owner: AbstractBaseUser, agent: Agent, conversation: Conversation, fact: str, surface: str
) -> tuple[MemoryProposal | None, Message]:
    """A "remember that …" chat turn: the agent's reply proposes the memory instead of answering.

    The reply names no one (an agent token may be the one chatting): who was matched
    is shown to the owner on the proposal itself, never in the reply's text.
    """
    proposal = None
    try:
        with transaction.atomic():
            reply = Message.objects.create(conversation=conversation, role=MessageRole.ASSISTANT, content="")
            proposal = memory_proposal_create(
                owner=owner,
                agent=agent,
                text=fact,
                surface=surface,
                conversation=conversation,
                message=reply,
            )
            reply.content = (
                f"I can remember this for you:\n“{proposal.text}”\n"
                "Nothing is saved until you confirm it: save, edit or dismiss it here or in Memory proposals."
            )
            reply.save(update_fields=["content"])
    except ValidationError as error:
        reply = Message.objects.create(
            conversation=conversation,
            role=MessageRole.ASSISTANT,
            content=f"I cannot remember that: {' '.join(error.messages)} Nothing was saved.",
        )
    Conversation.objects.filter(pk=conversation.pk).update(updated_at=timezone.now())
    return proposal, reply


def _lock_pending(*, proposal: MemoryProposal, actor: AbstractBaseUser) -> MemoryProposal:
    if actor.pk != proposal.owner_id:
        raise ValidationError("Unknown proposal.")
    locked = MemoryProposal.objects.select_for_update().get(pk=proposal.pk)
    if locked.status != MemoryProposalStatus.PENDING:
        raise ValidationError(f"This proposal was already {locked.get_status_display().lower()}.")
    return locked


def _clean_new_names(*, owner: AbstractBaseUser, names: Iterable[str]) -> tuple[list[Person], list[str]]:
    """New names typed or kept by the owner; a name someone already has becomes that person."""
    people: list[Person] = []
    new: list[str] = []
    for raw in names:
        name = " ".join((raw or "").split())
        if not name:
            continue
        if len(name) > MAX_NAME_LENGTH:
            raise ValidationError({"new_people": f"Names are at most {MAX_NAME_LENGTH} characters."})
        existing = Person.objects.filter(owner=owner, display_name__iexact=name).order_by("pk").first()
        if existing is not None:
            people.append(existing)
        elif name.lower() not in (other.lower() for other in new):
            new.append(name)
    return people, new


@transaction.atomic
def memory_proposal_update(
    *,
    proposal: MemoryProposal,
    actor: AbstractBaseUser,
    text: str,
    kind: str | None = None,
    sensitivity: str | None = None,
    people: Iterable[Person] = (),
    new_people: Iterable[str] = (),
) -> MemoryProposal:
    """The owner edits a waiting proposal in place. An insight keeps its kind and has no people."""
    locked = _lock_pending(proposal=proposal, actor=actor)
    text = _clean_text(text)
    refuse_credentials(body=text)
    locked.text = text
    if not locked.is_insight:
        errors = {}
        if kind not in MemoryKind.values:
            errors["kind"] = f"Unknown kind “{kind}”."
        if sensitivity not in Sensitivity.values:
            errors["sensitivity"] = f"Unknown sensitivity “{sensitivity}”."
        chosen = list(people)
        if any(person.owner_id != actor.pk or person.is_self for person in chosen):
            errors["people"] = "Unknown person."
        if errors:
            raise ValidationError(errors)
        existing, new = _clean_new_names(owner=actor, names=new_people)
        locked.kind = kind
        locked.sensitivity = sensitivity
        if len(new) > MAX_NEW_PEOPLE_TYPED:
            raise ValidationError({"new_people": f"Add at most {MAX_NEW_PEOPLE_TYPED} new people at once."})
        locked.new_people = new
        locked.people.set({person.pk: person for person in [*chosen, *existing]}.values())
    elif sensitivity in Sensitivity.values:
        locked.sensitivity = sensitivity
    locked.save(update_fields=["text", "kind", "sensitivity", "new_people"])
    return locked


@transaction.atomic
def memory_proposal_confirm(
    *, proposal: MemoryProposal, actor: AbstractBaseUser, confirmed_warnings: Collection[str] = ()
) -> Memory:
    """Save the proposal as the owner's memory; new names become people now, consent pending.

    An insight proposal goes through insight_create: refused while it names anyone
    in its sources, and its warnings must be among `confirmed_warnings`.
    """
    locked = _lock_pending(proposal=proposal, actor=actor)
    if locked.is_insight:
        sources = list(locked.sources.all())
        if not sources:
            raise ValidationError("The memories this insight came from were deleted: dismiss it.")
        memory = insight_create(
            owner=actor,
            text=locked.text,
            sources=sources,
            confirmed_warnings=confirmed_warnings,
            sensitivity=locked.sensitivity,
        )
    else:
        chosen = list(locked.people.filter(owner=actor, is_self=False))
        existing, new = _clean_new_names(owner=actor, names=locked.new_people)
        people = {person.pk: person for person in [*chosen, *existing]}.values()
        memory = memory_create_with_new_people(
            owner=actor,
            body=locked.text,
            kind=locked.kind,
            sensitivity=locked.sensitivity,
            participants=[ParticipantSpec(person=person) for person in people],
            new_people=[NewPersonSpec(display_name=name) for name in new],
        )
    locked.status = MemoryProposalStatus.CONFIRMED
    locked.decided_at = timezone.now()
    locked.memory = memory
    locked.save(update_fields=["status", "decided_at", "memory"])
    proposal.status, proposal.decided_at, proposal.memory = locked.status, locked.decided_at, memory
    return memory


@transaction.atomic
def memory_proposal_dismiss(*, proposal: MemoryProposal, actor: AbstractBaseUser) -> MemoryProposal:
    locked = _lock_pending(proposal=proposal, actor=actor)
    locked.status = MemoryProposalStatus.DISMISSED
    locked.decided_at = timezone.now()
    locked.save(update_fields=["status", "decided_at"])
    proposal.status, proposal.decided_at = locked.status, locked.decided_at
    return proposal


# --- proposals from a finished conversation (agents/tasks.py) ----------------------------------


def _fact_sentences(text: str) -> list[str]:
    sentences = []
    for sentence in _SENTENCE_END.split(text):
        sentence = sentence.strip().strip("-•* ").strip()
        words = sentence.split()
        if not 3 <= len(words) <= 60 or sentence.endswith("?"):
            continue
        if _NOT_A_STATEMENT.match(sentence) or not _FACT_VERB.search(sentence):
            continue
        sentences.append(sentence)
    return sentences


def memory_proposals_from_conversation(*, conversation_id: uuid.UUID) -> list[MemoryProposal]:
    """Propose, from the owner's messages since the last pass, sentences that state facts about people.

    A sentence qualifies when it names one of the owner's people, states something
    (a verb of being, liking or doing; not a question or a request to the agent) and
    is not already a memory or a proposal. "remember that …" messages are skipped:
    they made their own proposal. Claimed with a conditional update on
    `proposals_scanned_at`, so a redelivered or concurrent task reads each message once.
    Proposals only: nothing is saved.
    """
    conversation = Conversation.objects.select_related("owner", "agent").filter(pk=conversation_id).first()
    if conversation is None:
        return []
    previous = conversation.proposals_scanned_at
    now = timezone.now()
    if (
        Conversation.objects.filter(pk=conversation.pk, proposals_scanned_at=previous).update(
            proposals_scanned_at=now
        )
        != 1
    ):
        return []
    messages = conversation.messages.filter(role=MessageRole.USER, created_at__lte=now)
    if previous is not None:
        messages = messages.filter(created_at__gt=previous)
    owner = conversation.owner
    people = list(Person.objects.filter(owner=owner, is_self=False))
    proposals: list[MemoryProposal] = []
    for message in messages.order_by("created_at", "pk"):
        if remember_request(message.content) is not None:
            continue
        for sentence in _fact_sentences(message.content):
            if len(proposals) >= MAX_PROPOSALS_PER_CONVERSATION:
                return proposals
            if not any(_mentions(name, sentence) for person in people for name in _names_of(person)):
                continue
            if (
                MemoryProposal.objects.filter(owner=owner, text__iexact=sentence).exists()
                or Memory.objects.filter(owner=owner, body__iexact=sentence).exists()
            ):
                continue
            try:
                proposals.append(
                    memory_proposal_create(
                        owner=owner,
                        agent=conversation.agent,
                        text=sentence,
                        surface=ProposalSurface.TASK,
                        conversation=conversation,
                    )
                )
            except ValidationError:
                continue  # a secret in the sentence: never proposed
    return proposals


# --- selectors (the owner's) --------------------------------------------------------------------


def memory_proposal_list(*, owner: AbstractBaseUser, status: str | None = None) -> QuerySet[MemoryProposal]:
    proposals = MemoryProposal.objects.filter(owner=owner).select_related("agent", "conversation", "memory")
    if status is not None:
        proposals = proposals.filter(status=status)
    return proposals.prefetch_related("people", "sources")


def memory_proposal_get(*, owner: AbstractBaseUser, proposal_id: object) -> MemoryProposal:
    """The owner's proposal, or 404 — anyone else's does not exist for you."""
    return get_object_or_404(memory_proposal_list(owner=owner), pk=proposal_id)


def memory_proposal_pending_count(*, owner: AbstractBaseUser) -> int:
    return MemoryProposal.objects.filter(owner=owner, status=MemoryProposalStatus.PENDING).count()


def memory_proposal_check(*, proposal: MemoryProposal) -> InsightCheck | None:
    """For an insight proposal, what the insight check says about its current text."""
    if not proposal.is_insight:
        return None
    return insight_check(text=proposal.text, source_memories=proposal.sources.all())


# --- consent requests from an agent -------------------------------------------------------------


@dataclass(frozen=True)
class AgentConsentAsk:
    person_name: str = ""
    person_id: uuid.UUID | None = None
    reason: str = ""


def _people_asked_about(*, owner: AbstractBaseUser, ask: AgentConsentAsk) -> list[Person]:
    people = Person.objects.filter(owner=owner, is_self=False)
    if ask.person_id is not None:
        return list(people.filter(pk=ask.person_id))
    name = " ".join(ask.person_name.split())
    if not name:
        return []
    return [
        person
        for person in people.order_by("pk")
        if any(candidate.lower() == name.lower() for candidate in _names_of(person))
    ]


def consent_request_from_agent(*, agent: Agent, ask: AgentConsentAsk) -> str:
    """An agent asks the owner to seek someone's consent. Always the same answer.

    Someone who exists, has not consented and is not the owner's Self gets a pending
    ConsentRequest (one per person, reused; a linked person is told by
    consent_request_create). The agent's reason is kept for the owner only. For
    anyone else — no such person, someone already consented, another owner's id —
    nothing is written, and the agent cannot tell the difference.
    """
    from agents.services import consent_request_create

    reason = " ".join(ask.reason.split())[:MAX_AGENT_REASON_LENGTH]
    for person in _people_asked_about(owner=agent.owner, ask=ask):
        if person.consent_status == ConsentStatus.GRANTED:
            continue
        try:
            request = consent_request_create(owner=agent.owner, person=person, agent=agent)
        except ValidationError:
            continue
        if reason and reason not in request.agent_reason:
            said = f"{agent.name}: “{reason}”"
            ConsentRequest.objects.filter(pk=request.pk, status=ConsentRequestStatus.PENDING).update(
                agent_reason="\n".join(filter(None, [request.agent_reason, said]))
            )
    return AGENT_CONSENT_REQUEST_REPLY
