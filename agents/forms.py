from __future__ import annotations

from django import forms
from django.contrib.auth.models import AbstractBaseUser

from agents.models import Agent, MemoryProposal
from agents.proposals import MAX_PROPOSAL_LENGTH
from agents.services import MAX_INSTRUCTIONS_LENGTH, MAX_MESSAGE_LENGTH
from memories.models import MemoryKind, Sensitivity
from people.models import Person


class AgentForm(forms.Form):
    name = forms.CharField(max_length=100, error_messages={"required": "Give the agent a name."})
    instructions = forms.CharField(
        max_length=MAX_INSTRUCTIONS_LENGTH,
        widget=forms.Textarea(attrs={"rows": 5}),
        help_text="What this agent is for, in your words. "
        "It only ever sees memories everyone in them consented to.",
        error_messages={"required": "Tell the agent what it is for."},
    )

    @classmethod
    def initial_for(cls, agent: Agent) -> dict:
        return {"name": agent.name, "instructions": agent.instructions}


class ChatForm(forms.Form):
    message = forms.CharField(
        max_length=MAX_MESSAGE_LENGTH,
        widget=forms.Textarea(attrs={"rows": 3, "placeholder": "Ask about your memories…"}),
        error_messages={
            "required": "Write a message first.",
            "max_length": f"Messages are at most {MAX_MESSAGE_LENGTH} characters.",
        },
    )
    conversation = forms.UUIDField(required=False, widget=forms.HiddenInput)


class ConsentRequestForm(forms.Form):
    person = forms.UUIDField()
    agent = forms.UUIDField()
    conversation = forms.UUIDField(required=False)


class MemoryProposalForm(forms.Form):
    """Edit a waiting memory proposal in place. An insight proposal only has its text and sensitivity."""

    text = forms.CharField(
        label="Memory",
        max_length=MAX_PROPOSAL_LENGTH,
        widget=forms.Textarea(attrs={"rows": 3}),
        error_messages={"required": "Write what to remember."},
    )
    kind = forms.ChoiceField(choices=MemoryKind.choices)
    sensitivity = forms.ChoiceField(choices=Sensitivity.choices)
    people = forms.ModelMultipleChoiceField(
        queryset=Person.objects.none(), required=False, widget=forms.CheckboxSelectMultiple
    )
    add_person = forms.ModelChoiceField(
        queryset=Person.objects.none(), required=False, label="Add someone", empty_label="— nobody —"
    )
    new_people = forms.MultipleChoiceField(
        required=False, widget=forms.CheckboxSelectMultiple, label="New people (added with consent pending)"
    )
    add_new_person = forms.CharField(max_length=200, required=False, label="Or a new person")

    def __init__(self, *args, owner: AbstractBaseUser, proposal: MemoryProposal, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        people = Person.objects.filter(owner=owner, is_self=False)
        self.fields["people"].queryset = people
        self.fields["add_person"].queryset = people
        # Checkboxes for the people on the proposal only; any of the owner's people validates.
        self.fields["people"].widget.choices = [
            (person.pk, person.display_name) for person in proposal.people.all()
        ]
        names = list(
            dict.fromkeys([*proposal.new_people, *(self.data.getlist("new_people") if self.is_bound else [])])
        )
        self.fields["new_people"].choices = [(name, name) for name in names]
        if proposal.is_insight:
            for name in ("kind", "people", "add_person", "new_people", "add_new_person"):
                del self.fields[name]

    @classmethod
    def initial_for(cls, proposal: MemoryProposal) -> dict:
        return {
            "text": proposal.text,
            "kind": proposal.kind,
            "sensitivity": proposal.sensitivity,
            "people": [person.pk for person in proposal.people.all()],
            "new_people": list(proposal.new_people),
        }

    def chosen_people(self) -> list[Person]:
        chosen = list(self.cleaned_data.get("people") or [])
        if self.cleaned_data.get("add_person") is not None:
            chosen.append(self.cleaned_data["add_person"])
        return chosen

    def chosen_new_names(self) -> list[str]:
        return [*(self.cleaned_data.get("new_people") or []), self.cleaned_data.get("add_new_person", "")]


class ProposalConfirmForm(forms.Form):
    # For an insight proposal: the warnings shown (their keys) and "I have checked these".
    confirmed = forms.MultipleChoiceField(required=False, widget=forms.MultipleHiddenInput)
    confirm = forms.BooleanField(required=False)

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        keys = self.data.getlist("confirmed") if self.is_bound else []
        self.fields["confirmed"].choices = [(key, key) for key in keys]

    @property
    def confirmed_warnings(self) -> list[str]:
        if not self.is_valid() or not self.cleaned_data["confirm"]:
            return []
        return list(self.cleaned_data["confirmed"])
