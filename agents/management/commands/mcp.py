from __future__ import annotations

import os

from django.core.management.base import BaseCommand, CommandError
from django.db import OperationalError

from agents.mcpserver.auth import McpAuthError, mcp_token_authenticate
from agents.mcpserver.server import serve_stdio
from config.embedded import NOT_RUNNING_HELP

TOKEN_VARIABLE = "KEEPSAKE_TOKEN"


class Command(BaseCommand):
    help = (
        f"Serve Keepsake's MCP tools over stdio (for Claude Desktop, Claude Code and other MCP "
        f"clients), as the agent whose token is in the {TOKEN_VARIABLE} environment variable. "
        "Every result is consent-gated and written to the access log."
    )

    def handle(self, *args: object, **options: object) -> None:
        raw_token = os.environ.get(TOKEN_VARIABLE)
        try:
            token = mcp_token_authenticate(raw_token=raw_token)
        except McpAuthError as exc:
            raise CommandError(f"{TOKEN_VARIABLE}: {exc}") from exc
        except OperationalError as exc:
            raise CommandError(f"Cannot reach the database ({exc}).\n{NOT_RUNNING_HELP}") from exc
        # stderr only: stdout carries the protocol.
        self.stderr.write(
            f"Keepsake MCP server (stdio) for {token.owner.get_username()}'s agent “{token.agent.name}”."
        )
        serve_stdio(raw_token=raw_token)
