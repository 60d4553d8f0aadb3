from __future__ import annotations

from django import forms

from agents.models import Agent
from agents.services import MAX_INSTRUCTIONS_LENGTH, MAX_MESSAGE_LENGTH


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
