"""REST API for people and their consent (`/api/v1/people/`).

Owner tokens and sessions see everything. Agent tokens see only the people who
granted consent for agents: anyone else is answered exactly like someone who does
not exist (absent from the list, 404 by id), so nothing an agent receives moves
when the owner edits a hidden person. Even for visible people an agent gets no
memory count (it would hint at gated memories) and no `updated_at` (it moves with
every edit of the owner's). Agent tokens never write or change consent.
"""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers, status
from rest_framework.fields import empty
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.api_errors import AGENT_FORBIDDEN, VALIDATION_ERROR, error_response
from accounts.authentication import AgentTokensReadOnly, OwnerOnly, request_agent
from config.api_inputs import StrictCharField, validated
from config.api_outputs import named_serializer
from config.api_views import ReplaceOrChangeApi, api_base, operation, replace_or_change_schema
from config.limits import PERSON_NOTES_MAX_LENGTH
from people.birthdays import BIRTHDAY_FORMAT_HELP, Birthday
from people.models import ConsentEvent, ConsentStatus, ConsentSurface, Person, PersonKind
from people.selectors import (
    person_consent_events,
    person_get,
    person_get_for_agents,
    person_list,
    person_list_for_agents,
)
from people.services import (
    RELATIONSHIP_MAX_LENGTH,
    PersonInUse,
    person_create,
    person_delete,
    person_set_consent,
    person_update,
)

# Owners read and write; agent tokens only read (the people who consented for agents).
PeopleApi = api_base("PeopleApi", "people", AgentTokensReadOnly)

NOT_FOUND = error_response("Unknown person (or another owner's, or hidden from this agent).")


class BirthdayField(StrictCharField):
    """ "1990-05-01", or "--05-01" when the year is not known; null for none."""

    def __init__(self, **kwargs) -> None:
        super().__init__(allow_null=True, max_length=10, help_text=BIRTHDAY_FORMAT_HELP, **kwargs)

    def run_validation(self, data=empty) -> Birthday | None:
        # The text is checked as text first (a string, not too long), then read as a birthday.
        text = super().run_validation(data)
        if text is None:
            return None
        try:
            return Birthday.parse(text)
        except ValueError as problem:
            raise serializers.ValidationError(str(problem)) from problem


def _birthday_text(person: Person) -> str | None:
    birthday = person.birthday
    return birthday.isoformat() if birthday else None


class PersonOutputSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    display_name = serializers.CharField()
    kind = serializers.ChoiceField(choices=PersonKind.choices)
    consent_status = serializers.ChoiceField(choices=ConsentStatus.choices)
    consent_updated_at = serializers.DateTimeField(allow_null=True)
    is_self = serializers.BooleanField()
    aliases = serializers.ListField(child=serializers.CharField())
    notes = serializers.CharField()
    relationship = serializers.CharField(help_text="Who they are to the owner, in the owner's words.")
    birthday = serializers.SerializerMethodField(
        help_text='"1990-05-01", or "--05-01" when the year is not known; null when not given.'
    )
    memory_count = serializers.IntegerField(
        allow_null=True, help_text="Null for agent tokens: counts would hint at memories they cannot see."
    )
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField(
        allow_null=True, help_text="Null for agent tokens: it moves whenever the owner edits the person."
    )

    class Meta:
        ref_name = "Person"

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_birthday(self, person: Person) -> str | None:
        return _birthday_text(person)


def person_output(person: Person, *, for_agent: bool) -> dict:
    """Serialise a person. Agents only ever get people from person_list_for_agents."""
    data = dict(PersonOutputSerializer(person).data)
    if for_agent:
        data["memory_count"] = None
        data["updated_at"] = None
    elif not hasattr(person, "memory_count"):
        data["memory_count"] = person.participations.count()
    return data


# A person's details as a create or an update takes them (each names its own schema; no docstring:
# drf-spectacular would print it as the schema's description).
class PersonInputSerializer(serializers.Serializer):
    display_name = StrictCharField(max_length=200)
    aliases = serializers.ListField(
        child=StrictCharField(max_length=200, allow_blank=True),
        max_length=50,
        required=False,
        default=list,
    )
    kind = serializers.ChoiceField(choices=PersonKind.choices, default=PersonKind.HUMAN)
    notes = StrictCharField(allow_blank=True, max_length=PERSON_NOTES_MAX_LENGTH, required=False, default="")
    relationship = StrictCharField(
        allow_blank=True, max_length=RELATIONSHIP_MAX_LENGTH, required=False, default=""
    )
    birthday = BirthdayField(required=False, default=None)


class PersonListApi(PeopleApi):
    class OutputSerializer(serializers.Serializer):
        results = PersonOutputSerializer(many=True)
        consent_gated = serializers.BooleanField(
            help_text="True for agent tokens: only people who granted consent for agents are listed."
        )

        class Meta:
            ref_name = "PersonList"

    class InputSerializer(PersonInputSerializer):
        class Meta:
            ref_name = "PersonCreate"

    @operation("people_list", {200: OutputSerializer})
    def get(self, request: Request) -> Response:
        """List people"""
        for_agent = request_agent(request) is not None
        if for_agent:
            people = person_list_for_agents(owner=request.user)
        else:
            people = person_list(owner=request.user)
        return Response(
            {
                "results": [person_output(person, for_agent=for_agent) for person in people],
                "consent_gated": for_agent,
            }
        )

    @operation(
        "people_create",
        {201: PersonOutputSerializer, 400: VALIDATION_ERROR, 403: AGENT_FORBIDDEN},
        request=InputSerializer,
    )
    def post(self, request: Request) -> Response:
        """Add a person (consent starts pending)"""
        person = person_create(owner=request.user, **validated(self.InputSerializer(data=request.data)))
        return Response(person_output(person, for_agent=False), status=status.HTTP_201_CREATED)


@replace_or_change_schema(
    "people",
    "Replace a person's details (consent is changed with the consent endpoint)",
    "Change some of a person's details",
    ok=PersonOutputSerializer,
    errors={400: VALIDATION_ERROR, 403: AGENT_FORBIDDEN, 404: NOT_FOUND},
)
class PersonDetailApi(PeopleApi, ReplaceOrChangeApi):
    class InputSerializer(PersonInputSerializer):
        class Meta:
            ref_name = "PersonUpdate"

    @operation("people_retrieve", {200: PersonOutputSerializer, 404: NOT_FOUND})
    def get(self, request: Request, person_id) -> Response:
        """Get a person (agent tokens: 404 unless they granted consent for agents)"""
        if request_agent(request) is not None:
            person = person_get_for_agents(owner=request.user, person_id=person_id)
            return Response(person_output(person, for_agent=True))
        person = person_get(owner=request.user, person_id=person_id)
        return Response(person_output(person, for_agent=False))

    def update(self, request: Request, *, partial: bool, person_id) -> Response:
        person = person_get(owner=request.user, person_id=person_id)
        data = validated(self.InputSerializer(data=request.data, partial=partial))
        person = person_update(
            person=person,
            display_name=data.get("display_name", person.display_name),
            aliases=data.get("aliases", person.aliases),
            kind=data.get("kind", person.kind),
            notes=data.get("notes", person.notes),
            relationship=data.get("relationship", person.relationship),
            birthday=data.get("birthday", person.birthday),
        )
        return Response(person_output(person, for_agent=False))

    @operation(
        "people_destroy",
        {
            204: None,
            400: VALIDATION_ERROR,
            403: AGENT_FORBIDDEN,
            404: NOT_FOUND,
            409: error_response("The person is still in memories."),
        },
    )
    def delete(self, request: Request, person_id) -> Response:
        """Delete a person who is in no memory"""
        person = person_get(owner=request.user, person_id=person_id)
        try:
            person_delete(person=person)
        except PersonInUse as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        return Response(status=status.HTTP_204_NO_CONTENT)


class ConsentEventOutputSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    old_status = serializers.ChoiceField(choices=ConsentStatus.choices)
    new_status = serializers.ChoiceField(choices=ConsentStatus.choices)
    actor = serializers.CharField(source="actor.get_username", allow_null=True, default=None)
    surface = serializers.ChoiceField(choices=ConsentSurface.choices)
    reason = serializers.CharField()
    created_at = serializers.DateTimeField()
    imported_at = serializers.DateTimeField(
        allow_null=True,
        help_text="When an import wrote this event (from an export: the file's word, recorded as the "
        "owner's decision); null when it was recorded here.",
    )

    class Meta:
        ref_name = "ConsentEvent"


def consent_set_from_api(
    request: Request, person: Person, change: dict, **scope: object
) -> ConsentEvent | None:
    """person_set_consent as every consent endpoint of the API asks it: `change`'s status and reason,
    set by the caller, recorded with surface “api”. `scope`: the audience; who decides, if not the owner."""
    return person_set_consent(
        person=person,
        status=change["status"],
        reason=change["reason"],
        actor=request.user,
        surface=ConsentSurface.API,
        **scope,
    )


def consent_change_input(ref_name: str, **fields: serializers.Field) -> type[serializers.Serializer]:
    """A consent change as the API takes it: `fields` (whose, for which audience), then the new status
    and its reason; named `ref_name` in the schema."""
    return named_serializer(
        ref_name,
        **fields,
        status=serializers.ChoiceField(choices=ConsentStatus.choices),
        reason=StrictCharField(allow_blank=True, max_length=2000, required=False, default=""),
    )


def consent_change_result(ref_name: str, **fields: serializers.Field) -> type[serializers.Serializer]:
    """The answer to a consent change: `fields`, then the recorded event, named `ref_name` in the schema."""
    event = ConsentEventOutputSerializer(
        allow_null=True, help_text="The recorded change; null when the status was already this."
    )
    return named_serializer(ref_name, **fields, event=event)


class PersonConsentApi(PeopleApi):
    InputSerializer = consent_change_input("ConsentChange")
    OutputSerializer = consent_change_result("ConsentChangeResult", person=PersonOutputSerializer())

    @operation(
        "people_consent",
        {
            200: OutputSerializer,
            400: VALIDATION_ERROR,
            403: error_response(
                "An agent token; or the person is linked to their own account and decides for themself: "
                "the owner may revoke or reset to pending, never grant (the message says which)."
            ),
            404: NOT_FOUND,
        },
        request=InputSerializer,
    )
    def post(self, request: Request, person_id) -> Response:
        """Set a person's consent (recorded in the audit trail with surface “api”)"""
        person = person_get(owner=request.user, person_id=person_id)
        event = consent_set_from_api(request, person, validated(self.InputSerializer(data=request.data)))
        return Response(
            {
                "person": person_output(person, for_agent=False),
                "event": None if event is None else ConsentEventOutputSerializer(event).data,
            }
        )


class PersonConsentEventListApi(PeopleApi):
    # The reasons in the audit trail are the owner's own notes: not for agents.
    permission_classes = [*APIView.permission_classes, OwnerOnly]

    @operation(
        "people_consent_events",
        {
            200: ConsentEventOutputSerializer(many=True),
            403: error_response("Agent tokens cannot read the audit trail."),
            404: NOT_FOUND,
        },
    )
    def get(self, request: Request, person_id) -> Response:
        """A person's consent history, newest first (owner only)"""
        person = person_get(owner=request.user, person_id=person_id)
        events = person_consent_events(person=person)
        return Response(ConsentEventOutputSerializer(events, many=True).data)
