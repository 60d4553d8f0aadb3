"""REST API for linked people (SPEC §4 "Linked people", §6).

- `people/{id}/link-invite/` POST: the owner invites their person to link their own
  account (single use, 14 days, shown once; it replaces the person's open invitation).
- `links/{token}/accept/` POST: accept; every refused token is one 404 naming nobody.
- `people/{id}/link/` DELETE: either side unlinks — the journal's owner with their
  person's id, or the linked person with the id of the entry about them (found only
  through linked_person_get: anyone else's person is a 404).
- `me/consents/` GET: every journal that links the caller, each entry about them and
  each audience with its status and how many of the owner's memories they are in —
  counts only, never a memory. POST `{person, audience, status, reason}`: decide, as
  the person themself.

Between people only: agent tokens get 404 everywhere here.
"""

from __future__ import annotations

from django.http import Http404
from django.urls import reverse
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response

from accounts.api_errors import VALIDATION_ERROR, error_response
from accounts.authentication import AgentTokensNotFound
from config.api_inputs import StrictCharField, validated
from config.api_views import api_base, operation
from linked.selectors import (
    LinkedAudience,
    linked_audience_label,
    linked_consents_for_user,
    linked_person_audiences,
    linked_person_get,
)
from linked.services import LinkInvalid, person_link_accept, person_link_invite_create, person_unlink
from people.apis import NOT_FOUND as PERSON_NOT_FOUND
from people.apis import consent_change_input, consent_change_result, consent_set_from_api
from people.models import ConsentActor, ConsentStatus, Person
from people.selectors import person_get
from people.services import person_is_linked

NOT_FOUND = error_response(
    "Unknown, not yours and not linked to you, or an agent token: always the same answer."
)


# Every linking endpoint is between people only: agent tokens get 404, as if it did not exist.
LinkApi = api_base("LinkApi", "people", AgentTokensNotFound)


class PersonLinkInviteApi(LinkApi):
    class OutputSerializer(serializers.Serializer):
        id = serializers.UUIDField()
        url = serializers.URLField(help_text="The link page to send to the person. Shown once.")
        token = serializers.CharField(help_text="Shown once: only its hash is stored.")
        expires_at = serializers.DateTimeField()

        class Meta:
            ref_name = "PersonLinkInvite"

    @operation(
        "people_link_invite",
        {
            201: OutputSerializer,
            400: VALIDATION_ERROR,
            404: PERSON_NOT_FOUND,
        },
        request=None,
    )
    def post(self, request: Request, person_id) -> Response:
        """Invite the person to link their own account (single use, 14 days); then they decide

        A new invitation replaces the person's open one: the old link stops working. Refused (400) when
        the person is already linked, or is Self.
        """
        person = person_get(owner=request.user, person_id=person_id)
        invite, token = person_link_invite_create(person=person, by=request.user)
        url = request.build_absolute_uri(reverse("person_link", args=[token]))
        data = {"id": invite.pk, "url": url, "token": token, "expires_at": invite.expires_at}
        return Response(self.OutputSerializer(data).data, status=status.HTTP_201_CREATED)


class LinkAcceptApi(LinkApi):
    class OutputSerializer(serializers.Serializer):
        person = serializers.UUIDField(help_text="The linked person: use it with me/consents/.")
        display_name = serializers.CharField(help_text="How the journal's owner names you.")
        owner = serializers.CharField(help_text="The journal owner's username.")

        class Meta:
            ref_name = "PersonLinkAccepted"

    @operation(
        "links_accept",
        {
            201: OutputSerializer,
            404: error_response(
                "The link cannot be used: unknown, already used, withdrawn or replaced by a newer one, "
                "expired, for a person already linked, or in your own journal — one answer for all, "
                "naming nobody. Nothing changed. Agent tokens get a 404 too: linking is between people."
            ),
        },
        request=None,
    )
    def post(self, request: Request, token: str) -> Response:
        """Accept a link invitation: from now on you decide your own consent in that journal"""
        try:
            person = person_link_accept(token=token, user=request.user)
        except LinkInvalid as refused:
            # The same status and words whatever the reason (SPEC §4), as the link page's.
            return Response({"detail": " ".join(refused.messages)}, status=status.HTTP_404_NOT_FOUND)
        owner = person.owner.get_username()
        data = {"person": person.pk, "display_name": person.display_name, "owner": owner}
        return Response(self.OutputSerializer(data).data, status=status.HTTP_201_CREATED)


class LinkedAudienceSerializer(serializers.Serializer):
    audience = serializers.CharField(help_text="`agents` or `circle:<circle id>`.")
    label = serializers.CharField(help_text="“<owner>'s agents”, or the circle's name.")
    status = serializers.ChoiceField(choices=ConsentStatus.choices)
    reason = serializers.CharField()
    updated_at = serializers.DateTimeField(allow_null=True)
    updated_by = serializers.ChoiceField(choices=ConsentActor.choices, help_text="`self` is you.")
    memory_count = serializers.IntegerField(
        help_text="How many of the owner's memories you are in, for this audience (for a circle: of those "
        "shared into it). A count only: never a memory."
    )

    class Meta:
        ref_name = "LinkedAudience"


class LinkedConsentRequestSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    agent = serializers.CharField(allow_null=True, help_text="The name of the owner's agent that asked.")
    reason = serializers.CharField()
    created_at = serializers.DateTimeField()

    class Meta:
        ref_name = "LinkedConsentRequest"


class LinkedPersonSerializer(serializers.Serializer):
    person = serializers.UUIDField()
    display_name = serializers.CharField(help_text="How the journal's owner names you.")
    audiences = LinkedAudienceSerializer(many=True)
    consent_requests = LinkedConsentRequestSerializer(
        many=True, help_text="Pending requests from the owner's agents about you."
    )

    class Meta:
        ref_name = "LinkedPerson"


class LinkedJournalSerializer(serializers.Serializer):
    owner = serializers.CharField(help_text="The journal owner's username.")
    people = LinkedPersonSerializer(many=True)

    class Meta:
        ref_name = "LinkedJournal"


def _audience_output(linked: LinkedAudience, person: Person) -> dict:
    consent = linked.consent
    return {
        "audience": consent.audience,
        "label": linked_audience_label(consent=consent, owner=person.owner),
        "status": consent.status,
        "reason": consent.reason,
        "updated_at": consent.updated_at,
        "updated_by": consent.updated_by,
        "memory_count": linked.memory_count,
    }


class PersonLinkApi(LinkApi):
    @operation(
        "people_link_destroy",
        {
            204: None,
            404: NOT_FOUND,
            409: error_response("The owner's person is not linked to an account."),
        },
    )
    def delete(self, request: Request, person_id) -> Response:
        """Unlink (either side): the person's last choices stay and the owner decides again"""
        try:
            person = person_get(owner=request.user, person_id=person_id)
        except Http404:
            person = linked_person_get(user=request.user, person_id=person_id)
        if not person_is_linked(person):
            return Response(
                {"detail": f"{person.display_name} is not linked to an account."},
                status=status.HTTP_409_CONFLICT,
            )
        person_unlink(person=person, by=request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


class MyConsentsApi(LinkApi):
    class OutputSerializer(serializers.Serializer):
        results = LinkedJournalSerializer(many=True)

        class Meta:
            ref_name = "MyConsents"

    InputSerializer = consent_change_input(
        "MyConsentChange",
        person=serializers.UUIDField(help_text="The entry about you (from GET me/consents/)."),
        audience=StrictCharField(
            max_length=100, help_text="`agents`, or `circle:<circle id>` for one of the owner's circles."
        ),
    )

    ChangedSerializer = consent_change_result(
        "MyConsentChangeResult", person=serializers.UUIDField(), consent=LinkedAudienceSerializer()
    )

    @operation("me_consents_list", {200: OutputSerializer, 404: NOT_FOUND})
    def get(self, request: Request) -> Response:
        """The journals that link me: each entry about me and each audience (counts only)"""
        journals = [
            {
                "owner": journal.owner.get_username(),
                "people": [
                    {
                        "person": entry.person.pk,
                        "display_name": entry.person.display_name,
                        "audiences": [_audience_output(linked, entry.person) for linked in entry.audiences],
                        "consent_requests": [
                            {
                                "id": consent_request.pk,
                                "agent": consent_request.agent.name if consent_request.agent else None,
                                "reason": consent_request.reason,
                                "created_at": consent_request.created_at,
                            }
                            for consent_request in entry.pending_requests
                        ],
                    }
                    for entry in journal.people
                ],
            }
            for journal in linked_consents_for_user(user=request.user)
        ]
        return Response(self.OutputSerializer({"results": journals}).data)

    @operation(
        "me_consents_set",
        {200: ChangedSerializer, 400: VALIDATION_ERROR, 404: NOT_FOUND},
        request=InputSerializer,
    )
    def post(self, request: Request) -> Response:
        """Decide, as the person themself, one audience of an entry about me (surface “api”)"""
        change = validated(self.InputSerializer(data=request.data))
        person = linked_person_get(user=request.user, person_id=change["person"])
        audience = change["audience"].strip().lower()
        if audience not in linked_person_audiences(person=person):
            owner = person.owner.get_username()
            unknown = f"Unknown audience: {owner}'s journal has 'agents' and {owner}'s circles only."
            return Response({"audience": [unknown]}, status=status.HTTP_400_BAD_REQUEST)
        event = consent_set_from_api(request, person, change, audience=audience, actor_kind=ConsentActor.SELF)
        entry = next(
            entry
            for journal in linked_consents_for_user(user=request.user)
            for entry in journal.people
            if entry.person.pk == person.pk
        )
        linked = next(linked for linked in entry.audiences if linked.consent.audience == audience)
        return Response(
            self.ChangedSerializer(
                {
                    "person": person.pk,
                    "consent": _audience_output(linked, entry.person),
                    "event": event,
                }
            ).data
        )
