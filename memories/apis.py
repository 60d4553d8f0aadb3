"""REST API for memories (`/api/v1/memories/`).

Owner tokens and sessions read the whole journal; `respect_consent` is theirs to
choose. Agent tokens read through the one consent gate in memories/retrieval.py:
`respect_consent` is forced on whatever the client sends, a memory outside the
gate answers 404 exactly like one that does not exist, and nothing is written.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db.models import Prefetch, QuerySet, prefetch_related_objects
from django.http import Http404
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.api_errors import AGENT_FORBIDDEN, VALIDATION_ERROR, error_response
from accounts.authentication import AgentTokensReadOnly, request_agent
from agents.models import AccessSurface
from agents.services import access_log_record
from attachments.selectors import photo_count, photo_counts_attach
from config.api_inputs import StrictCharField, validated
from config.api_outputs import page_links, page_of
from config.api_views import ReplaceOrChangeApi, api_base, operation, replace_or_change_schema
from config.limits import API_MAX_OFFSET, MEMORY_BODY_MAX_LENGTH, MEMORY_TITLE_MAX_LENGTH
from memories.gate import agent_visible_memories
from memories.models import Memory, MemoryKind, MemoryParticipant, ParticipantRole, Sensitivity
from memories.retrieval import memory_search, memory_similar
from memories.selectors import LIST_DEFERRED, MemoryFilters, memory_apply_filters, memory_get, memory_list
from memories.services import ParticipantSpec, memory_create, memory_delete, memory_update
from people.models import ConsentStatus, Person
from people.selectors import person_list, person_list_for_agents

NOT_FOUND = error_response("Unknown memory (or another owner's, or hidden from this agent).")
# Left out or null: memory_create / memory_update work it out from the text, the one
# inference path the web form's "Work it out" uses too (memories.lifecycle). A value given is kept.
KIND_HELP = "Left out or null: worked out from the text, exactly as the web form does."
SENSITIVITY_HELP = (
    "Left out or null: worked out from the text, exactly as the web form does (health, money, work "
    "trouble, sex life, sexuality, religion, politics, … make it sensitive). A value given is kept."
)
CONSENT_GATED_HELP = (
    "True when results went through the consent gate: always for agent tokens, and for owners "
    "who asked for respect_consent."
)


# --- Output ---------------------------------------------------------------------
class ParticipantOutputSerializer(serializers.Serializer):
    person = serializers.UUIDField(source="person_id")
    display_name = serializers.CharField(source="person.display_name")
    role = serializers.ChoiceField(choices=ParticipantRole.choices)
    consent_status = serializers.ChoiceField(source="person.consent_status", choices=ConsentStatus.choices)

    class Meta:
        ref_name = "MemoryParticipant"


class MemoryOutputSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    title = serializers.CharField()
    body = serializers.CharField()
    occurred_at = serializers.DateTimeField()
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    kind = serializers.ChoiceField(choices=MemoryKind.choices)
    sensitivity = serializers.ChoiceField(choices=Sensitivity.choices)
    expires_at = serializers.DateTimeField(allow_null=True)
    source_person = serializers.UUIDField(source="source_person_id", allow_null=True)
    superseded_by = serializers.UUIDField(source="superseded_by_id", allow_null=True)
    participants = ParticipantOutputSerializer(many=True, source="participants.all")
    embedding_status = serializers.SerializerMethodField(
        help_text="“pending” until the worker has computed the embedding, then “ready”."
    )
    photo_count = serializers.SerializerMethodField(
        help_text="How many photos the memory has. The photos themselves (bytes, addresses, "
        "metadata) are the owner's: /memories/{id}/photos/, never given to agent tokens."
    )

    class Meta:
        ref_name = "Memory"

    def get_photo_count(self, memory: Memory) -> int:
        return photo_count(memory)

    @extend_schema_field(serializers.ChoiceField(choices=["pending", "ready"]))
    def get_embedding_status(self, memory: Memory) -> str:
        return "pending" if memory.embedded_at is None else "ready"

    def to_representation(self, memory: Memory) -> dict:
        """What DRF's walk over the fields above returns, built directly.

        Every search result and list page goes through here: DRF's generic walk
        (per field: its source, the attribute, the None check, the field's own
        to_representation) took ~2.5 ms for ten results, with participants, of a
        ~20 ms search. The fields that convert (dates, choices) still convert;
        tests/api/test_memories_api.py compares this with DRF's walk. The converting
        fields are one set made once (_MEMORY_FIELDS): `self.fields` deep-copies every
        declared field, the nested participants' serializer included, for each serializer
        instance (~1 ms of Python per search or page); these fields' conversions read
        nothing of the serializer they belong to.
        """
        fields = _MEMORY_FIELDS

        def converted(name: str, value):
            return None if value is None else fields[name].to_representation(value)

        return {
            "id": str(memory.id),
            "title": str(memory.title),
            "body": str(memory.body),
            "occurred_at": converted("occurred_at", memory.occurred_at),
            "created_at": converted("created_at", memory.created_at),
            "updated_at": converted("updated_at", memory.updated_at),
            "kind": converted("kind", memory.kind),
            "sensitivity": converted("sensitivity", memory.sensitivity),
            "expires_at": converted("expires_at", memory.expires_at),
            "source_person": converted("source_person", memory.source_person_id),
            "superseded_by": converted("superseded_by", memory.superseded_by_id),
            "participants": [
                {
                    "person": str(participant.person_id),
                    "display_name": str(participant.person.display_name),
                    "role": _ROLE.to_representation(participant.role),
                    "consent_status": _CONSENT_STATUS.to_representation(participant.person.consent_status),
                }
                for participant in memory.participants.all()
            ],
            "embedding_status": self.get_embedding_status(memory),
            "photo_count": photo_count(memory),
        }


# The participant fields that convert, for MemoryOutputSerializer.to_representation.
_ROLE = ParticipantOutputSerializer().fields["role"]
_CONSENT_STATUS = ParticipantOutputSerializer().fields["consent_status"]
# The memory fields that convert, for the same.
_MEMORY_FIELDS = MemoryOutputSerializer().fields


SCORES_ONLY = " Only with scores=1."


class SearchResultSerializer(serializers.Serializer):
    memory = MemoryOutputSerializer()
    score = serializers.FloatField(
        required=False,
        help_text="What orders the results, higher is better: the fused reciprocal-rank score for a "
        "search, the cosine similarity for similar memories. Its scale means nothing on its own."
        + SCORES_ONLY,
    )
    similarity = serializers.FloatField(
        required=False,
        allow_null=True,
        help_text="Cosine similarity of meaning (1 is identical); null when not embedded yet." + SCORES_ONLY,
    )
    text_rank = serializers.FloatField(
        required=False,
        allow_null=True,
        help_text="Full-text rank (PostgreSQL ts_rank); null when the words did not match." + SCORES_ONLY,
    )

    class Meta:
        ref_name = "MemorySearchResult"


class SearchOutputSerializer(serializers.Serializer):
    results = SearchResultSerializer(many=True)
    consent_gated = serializers.BooleanField(help_text=CONSENT_GATED_HELP)

    class Meta:
        ref_name = "MemorySearchResults"


def _search_results(hits: list, *, scores: bool) -> list[dict]:
    # Raw scores only when asked: they are ranking internals (a fused reciprocal-rank
    # score has no meaning outside one result list), not something to show people.
    # One serializer for all of them: DRF copies a serializer's fields per instance.
    memories = MemoryOutputSerializer(photo_counts_attach([hit.memory for hit in hits]), many=True).data
    if not scores:
        return [{"memory": memory} for memory in memories]
    return [
        {"memory": memory, "score": hit.score, "similarity": hit.similarity, "text_rank": hit.text_rank}
        for memory, hit in zip(memories, hits, strict=True)
    ]


# --- Input helpers ----------------------------------------------------------------
def _worked_out_choice(choices: list, help_text: str) -> serializers.ChoiceField:
    """A kind or sensitivity: a value given is kept; left out or null, memory_create / memory_update
    work it out from the text."""
    return serializers.ChoiceField(
        choices=choices, required=False, allow_null=True, default=None, help_text=help_text
    )


# The text of a memory as a create or an update takes it (each names its own schema; no docstring:
# drf-spectacular would print it as the schema's description).
class MemoryTextInputSerializer(serializers.Serializer):
    body = StrictCharField(max_length=MEMORY_BODY_MAX_LENGTH)
    title = StrictCharField(max_length=MEMORY_TITLE_MAX_LENGTH, allow_blank=True, required=False, default="")


class ParticipantInputSerializer(serializers.Serializer):
    person = serializers.UUIDField()
    role = serializers.ChoiceField(choices=ParticipantRole.choices, default=ParticipantRole.SUBJECT)

    class Meta:
        ref_name = "MemoryParticipantInput"


def _owner_people(request: Request, person_ids: list) -> dict:
    """The owner's people among `person_ids`; an unknown id is a 400, never a silent drop."""
    if not person_ids:
        # Most writes name nobody: building person_list's statement (its counts) cost
        # ~3 ms of Python per write, for a query that could only answer nothing.
        return {}
    found = {person.pk: person for person in person_list(owner=request.user).filter(pk__in=person_ids)}
    return found


def _participant_specs(request: Request, participants: list[dict]) -> list[ParticipantSpec]:
    people = _owner_people(request, [p["person"] for p in participants])
    unknown = [str(p["person"]) for p in participants if p["person"] not in people]
    if unknown:
        # The same message whether the id is someone else's or nobody's.
        raise serializers.ValidationError({"participants": [f"Unknown person: {', '.join(unknown)}."]})
    # .get: a PATCH validates partially, which leaves nested defaults (role) unapplied.
    return [
        ParticipantSpec(person=people[p["person"]], role=p.get("role", ParticipantRole.SUBJECT))
        for p in participants
    ]


def _filter_person(request: Request, person_id) -> Person:
    """The person a list is narrowed to. For an agent, someone hidden from it is as unknown as no one."""
    if request_agent(request) is None:
        person = _owner_people(request, [person_id]).get(person_id)
    else:
        person = person_list_for_agents(owner=request.user).filter(pk=person_id).first()
    if person is None:
        raise serializers.ValidationError({"person": ["Unknown person."]})
    return person


def _source_person(request: Request, person_id) -> Person | None:
    if person_id is None:
        return None
    person = _owner_people(request, [person_id]).get(person_id)
    if person is None:
        raise serializers.ValidationError({"source_person": ["Unknown person."]})
    return person


def _log_agent_access(request: Request, memories: Iterable[Memory]) -> None:
    """Every memory handed to an agent token is recorded ("who has seen this")."""
    agent = request_agent(request)
    if agent is not None:
        access_log_record(owner=request.user, memories=memories, surface=AccessSurface.API, agent=agent)


def _respect_consent(request: Request, requested: bool) -> bool:
    """Agents are always gated, whatever they ask for; owners choose."""
    return True if request_agent(request) is not None else requested


def _may_read_sensitive(request: Request) -> bool:
    """The calling agent's clearance for sensitive memories (none for an owner asking as agents would)."""
    agent = request_agent(request)
    return agent is not None and agent.may_read_sensitive


def _agent_scope(
    request: Request, filters: MemoryFilters | None = None, *, whole_journal: bool = False
) -> QuerySet[Memory]:
    """What an agent may read: the shared consent gate (`whole_journal`: planned for a count), then
    the client's filters."""
    scope = agent_visible_memories(
        request.user, may_read_sensitive=_may_read_sensitive(request), whole_journal=whole_journal
    )
    return memory_apply_filters(scope, filters)


def _agent_memories(request: Request, filters: MemoryFilters | None = None) -> QuerySet[Memory]:
    """_agent_scope with the people each memory shows."""
    return (
        _agent_scope(request, filters)
        .select_related("source_person")
        .prefetch_related(
            Prefetch("participants", queryset=MemoryParticipant.objects.select_related("person"))
        )
    )


def _participants_with_people() -> Prefetch:
    """A memory's participants with their people, ordered as memory_get loads them."""
    return Prefetch(
        "participants",
        queryset=MemoryParticipant.objects.select_related("person").order_by("person__display_name"),
    )


def _visible_memory(request: Request, memory_id) -> Memory:
    """The memory this caller may read, or 404 (for an agent: gated-out looks missing)."""
    if request_agent(request) is None:
        return memory_get(owner=request.user, memory_id=memory_id)
    memory = _agent_memories(request).filter(pk=memory_id).first()
    if memory is None:
        raise Http404
    return memory


# --- Views ------------------------------------------------------------------------
# The journal: owners read and write, agent tokens only read (through the gate).
MemoryApi = api_base("MemoryApi", "memories", AgentTokensReadOnly)
# Search and similar memories: reads only, for owners and agent tokens alike.
MemoryReadApi = api_base("MemoryReadApi", "memories")


class MemoryListApi(MemoryApi):
    class FilterSerializer(serializers.Serializer):
        person = serializers.UUIDField(required=False, help_text="Only memories this person is in.")
        kind = serializers.ChoiceField(choices=MemoryKind.choices, required=False)
        date_from = serializers.DateField(required=False, help_text="On or after this day.")
        date_to = serializers.DateField(required=False, help_text="On or before this day.")
        limit = serializers.IntegerField(min_value=1, max_value=100, default=20)
        offset = serializers.IntegerField(min_value=0, max_value=API_MAX_OFFSET, default=0)

        class Meta:
            ref_name = "MemoryListFilters"

        def validate(self, data: dict) -> dict:
            if data.get("date_from") and data.get("date_to") and data["date_from"] > data["date_to"]:
                raise serializers.ValidationError({"date_to": ["Must not be before date_from."]})
            return data

    class OutputSerializer(page_of(MemoryOutputSerializer, "MemoryPage")):
        consent_gated = serializers.BooleanField(help_text="True for agent tokens: only gated memories.")

    class InputSerializer(MemoryTextInputSerializer):
        occurred_at = serializers.DateTimeField(
            required=False, allow_null=True, default=None, help_text="When it happened; defaults to now."
        )
        kind = _worked_out_choice(MemoryKind.choices, KIND_HELP)
        sensitivity = _worked_out_choice(Sensitivity.choices, SENSITIVITY_HELP)
        source_person = serializers.UUIDField(
            required=False, allow_null=True, default=None, help_text="Who told me; null = I saw it myself."
        )
        participants = ParticipantInputSerializer(many=True, required=False, default=list, max_length=100)

        class Meta:
            ref_name = "MemoryCreate"

    @operation("memories_list", {200: OutputSerializer, 400: VALIDATION_ERROR}, parameters=[FilterSerializer])
    def get(self, request: Request) -> Response:
        """List memories, newest first (agent tokens: consent-gated)"""
        data = validated(self.FilterSerializer(data=request.query_params))
        person = _filter_person(request, data["person"]) if "person" in data else None
        filters = MemoryFilters(
            person=person, kind=data.get("kind"), date_from=data.get("date_from"), date_to=data.get("date_to")
        )
        agent = request_agent(request)
        if agent is None:
            memories = memory_list(owner=request.user, filters=filters)
            count = memories.count()
        else:
            memories = (
                _agent_memories(request, filters)
                .defer(*LIST_DEFERRED)
                .order_by("-occurred_at", "-created_at")
            )
            # Counting reads the whole gated journal: planned for that (one pass over
            # the participants), where the page below probes only the rows it shows.
            count = _agent_scope(request, filters, whole_journal=True).count()
        limit, offset = data["limit"], data["offset"]
        page = list(memories[offset : offset + limit])
        _log_agent_access(request, page)
        next_url, previous_url = page_links(request, offset=offset, limit=limit, count=count)
        return Response(
            {
                "count": count,
                "next": next_url,
                "previous": previous_url,
                "results": MemoryOutputSerializer(photo_counts_attach(page), many=True).data,
                "consent_gated": agent is not None,
            }
        )

    @operation(
        "memories_create",
        {201: MemoryOutputSerializer, 400: VALIDATION_ERROR, 403: AGENT_FORBIDDEN},
        request=InputSerializer,
    )
    def post(self, request: Request) -> Response:
        """Record a memory with its participants (all or nothing)"""
        data = validated(self.InputSerializer(data=request.data))
        memory = memory_create(
            owner=request.user,
            body=data["body"],
            title=data["title"],
            occurred_at=data["occurred_at"],
            kind=data["kind"],
            sensitivity=data["sensitivity"],
            source_person=_source_person(request, data["source_person"]),
            participants=_participant_specs(request, data["participants"]),
        )
        # The memory as saved: memory_create's instance holds every column it wrote (the
        # database adds none the output shows), with its participants read back in one
        # query as memory_get orders them. Reading the whole memory again through
        # memory_get cost ~2.5 ms of Python per write, most of it building the statement.
        prefetch_related_objects([memory], _participants_with_people())
        return Response(
            MemoryOutputSerializer(photo_counts_attach([memory])[0]).data, status=status.HTTP_201_CREATED
        )


@replace_or_change_schema(
    "memories",
    "Replace a memory and its participants",
    "Change part of a memory; participants, when given, replace the whole set",
    ok=MemoryOutputSerializer,
    errors={400: VALIDATION_ERROR, 403: AGENT_FORBIDDEN, 404: NOT_FOUND},
)
class MemoryDetailApi(MemoryApi, ReplaceOrChangeApi):
    class InputSerializer(MemoryTextInputSerializer):
        occurred_at = serializers.DateTimeField(required=False, allow_null=True, default=None)
        # PUT without them (or null) works them out from the new text; PATCH without them keeps them.
        kind = _worked_out_choice(MemoryKind.choices, KIND_HELP)
        sensitivity = _worked_out_choice(Sensitivity.choices, SENSITIVITY_HELP)
        source_person = serializers.UUIDField(required=False, allow_null=True, default=None)
        # Required on PUT: silently dropping participants would widen what agents may see.
        participants = ParticipantInputSerializer(
            many=True, max_length=100, help_text="Replaces the whole set. Required on PUT."
        )

        class Meta:
            ref_name = "MemoryUpdate"

    @operation("memories_retrieve", {200: MemoryOutputSerializer, 404: NOT_FOUND})
    def get(self, request: Request, memory_id) -> Response:
        """Get a memory (agent tokens: 404 unless it passes the consent gate)"""
        memory = _visible_memory(request, memory_id)
        _log_agent_access(request, [memory])
        return Response(MemoryOutputSerializer(memory).data)

    def update(self, request: Request, *, partial: bool, memory_id) -> Response:
        memory = memory_get(owner=request.user, memory_id=memory_id)
        data = validated(self.InputSerializer(data=request.data, partial=partial))
        participants = None
        if "participants" in data:
            participants = _participant_specs(request, data["participants"])
        source_person = memory.source_person
        if "source_person" in data:
            source_person = _source_person(request, data["source_person"])
        memory_update(
            memory=memory,
            body=data.get("body", memory.body),
            title=data.get("title", memory.title),
            occurred_at=data.get("occurred_at"),
            kind=data.get("kind", memory.kind),
            sensitivity=data.get("sensitivity", memory.sensitivity),
            source_person=source_person,
            participants=participants,
        )
        memory = memory_get(owner=request.user, memory_id=memory.pk)
        return Response(MemoryOutputSerializer(memory).data)

    @operation("memories_destroy", {204: None, 403: AGENT_FORBIDDEN, 404: NOT_FOUND})
    def delete(self, request: Request, memory_id) -> Response:
        """Delete a memory"""
        memory_delete(memory=memory_get(owner=request.user, memory_id=memory_id))
        return Response(status=status.HTTP_204_NO_CONTENT)


class RetrievalParamsSerializer(serializers.Serializer):
    limit = serializers.IntegerField(min_value=1, max_value=50, default=10)
    respect_consent = serializers.BooleanField(
        default=False, help_text="Owners may ask for the agent view; agent tokens are always gated."
    )
    scores = serializers.BooleanField(
        default=False,
        help_text="Add each result's ranking figures (score, similarity, text_rank). Left out: "
        "results come best first without them.",
    )

    class Meta:
        ref_name = "RetrievalParams"


def _retrieval_options(request: Request, params: dict) -> dict:
    """How a search or a similar-memories read asks: gated for agents, their clearance, the limit."""
    return {
        "respect_consent": _respect_consent(request, params["respect_consent"]),
        "limit": params["limit"],
        "may_read_sensitive": _may_read_sensitive(request),
    }


def _retrieval_response(request: Request, hits: list, params: dict, options: dict) -> Response:
    """The answer to a search or a similar-memories read (the hits recorded when an agent reads them)."""
    _log_agent_access(request, [hit.memory for hit in hits])
    results = _search_results(hits, scores=params["scores"])
    return Response({"results": results, "consent_gated": options["respect_consent"]})


class MemorySearchApi(MemoryReadApi):
    class ParamsSerializer(RetrievalParamsSerializer):
        q = StrictCharField(max_length=1000, help_text="What to look for (words or a question).")

        class Meta:
            ref_name = "MemorySearchParams"

    @operation(
        "memories_search", {200: SearchOutputSerializer, 400: VALIDATION_ERROR}, parameters=[ParamsSerializer]
    )
    def get(self, request: Request) -> Response:
        """Search memories by meaning and words (agent tokens: consent-gated)

        Only relevant memories come back, best first: those whose words all match `q`, or whose meaning
        is close to it (a cosine similarity of at least RELEVANCE_MIN_SIMILARITY). A query nothing
        matches returns no results. Ranking figures only with `scores=1`.
        """
        params = validated(self.ParamsSerializer(data=request.query_params))
        options = _retrieval_options(request, params)
        return _retrieval_response(
            request, memory_search(request.user, params["q"], **options), params, options
        )


class MemorySimilarApi(MemoryReadApi):
    @operation(
        "memories_similar",
        {200: SearchOutputSerializer, 400: VALIDATION_ERROR, 404: NOT_FOUND},
        parameters=[RetrievalParamsSerializer],
    )
    def get(self, request: Request, memory_id) -> Response:
        """Memories similar to this one (agent tokens: consent-gated, and 404 for a hidden one)"""
        memory = _visible_memory(request, memory_id)
        params = validated(RetrievalParamsSerializer(data=request.query_params))
        options = _retrieval_options(request, params)
        return _retrieval_response(request, memory_similar(memory, **options), params, options)
