"""Keepsake's MCP server: the owner's agents reach their memories through MCP tools.

Two transports, one set of tools (`agents.mcpserver.server`):

- stdio: `python manage.py mcp`, authenticated by the agent token in KEEPSAKE_TOKEN;
- Streamable HTTP at `/mcp/` on the ordinary web server, authenticated by
  `Authorization: Bearer <agent token>` (`agents.mcpserver.http`, a plain Django view,
  so it works under `runserver` and gunicorn alike).

Only agent tokens are accepted: MCP is an agent surface, so every read goes through
the consent gate (`memories.retrieval.agent_visible_memories`) and every memory handed
out is written to the AccessLog with surface `mcp`.
"""
