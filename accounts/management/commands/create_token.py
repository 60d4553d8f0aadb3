from __future__ import annotations

from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from accounts.models import TokenKind
from accounts.services import access_token_create
from agents.selectors import agent_get_by_name, agent_list


class Command(BaseCommand):
    help = (
        "Create an API access token and print it (shown once). Owner tokens act as the user; "
        "agent tokens are bound to one of the user's agents and only read consent-gated memories."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--kind", choices=TokenKind.values, required=True)
        parser.add_argument("--agent", help="The agent's name (required with --kind agent).")
        parser.add_argument("--name", default="", help="A label to tell tokens apart.")

    def handle(self, *args: object, username: str, kind: str, agent: str | None, name: str, **options):
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"No user named “{username}”.")
        bound_agent = None
        if agent is not None:
            if kind != TokenKind.AGENT:
                raise CommandError("--agent only applies to --kind agent.")
            bound_agent = agent_get_by_name(owner=user, name=agent)
            if bound_agent is None:
                names = ", ".join(a.name for a in agent_list(owner=user)) or "none"
                raise CommandError(f"{username} has no agent named “{agent}” (agents: {names}).")
        elif kind == TokenKind.AGENT:
            raise CommandError("--kind agent needs --agent <name>.")
        try:
            _token, raw_token = access_token_create(owner=user, kind=kind, agent=bound_agent, name=name)
        except ValidationError as exc:
            raise CommandError("; ".join(exc.messages)) from exc
        # Only the token on stdout, so scripts can capture it: TOKEN=$(manage.py create_token ...)
        self.stdout.write(raw_token)
