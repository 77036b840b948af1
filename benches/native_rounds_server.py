"""A native 2026-07-28 MCP server for the rounds bench: the same questions, asked the new way.

The rounds bench compares mrtr-gateway in front of a legacy server with a legacy client answering
in-band. This server is the third point of comparison: what a legacy server's tools would cost
once ported to 2026-07-28 with the Python SDK (`mcp==2.3.0`), with no gateway in between. Its
tools answer `resultType: "input_required"` themselves, with `inputRequests` and a
`requestState` that the SDK seals (AES-GCM, under a key made at start-up), and finish when the
client retries with `inputResponses` and that state.

The tools carry the names, questions and schemas of the interop suite's legacy FastMCP fixture
(`tests/interop/legacy_fixture_server.py`), so one `ROUNDS_BENCH_TOOLS` list drives both:
- `test_input_required_result_elicitation`: one form elicitation (the name), one round;
- `test_input_required_result_multi_round`: the name, then a colour question that names the
  answer to the first, two rounds; the first answer rides the sealed state.

A request of an earlier protocol version gets a tool error: this server does not ask in-band.

Usage: native_rounds_server.py PORT
It serves Streamable HTTP at http://127.0.0.1:PORT/mcp and binds 127.0.0.1 only.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp_types import (
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    InputRequiredResult,
)

PROTOCOL = "2026-07-28"

mcp = MCPServer("mrtr-native-rounds", log_level="WARNING")

NAME_FIELD = {"name": {"type": "string", "description": "Your name"}}
COLOUR_FIELD = {"colour": {"type": "string", "description": "Favourite colour"}}


def require_form_elicitation(ctx: Context) -> None:
    """Refuse a call this server cannot ask: an older protocol, or no form elicitation declared."""
    if ctx.protocol_version != PROTOCOL:
        raise ToolError(f"this server asks only through {PROTOCOL} input_required results")
    caps = ctx.client_capabilities
    elicitation = caps.elicitation if caps is not None else None
    if elicitation is None or (elicitation.form is None and elicitation.url is not None):
        raise MCPError(
            code=MISSING_REQUIRED_CLIENT_CAPABILITY,
            message="this tool asks with a form elicitation, which the client did not declare",
            data={"requiredCapabilities": {"elicitation": {"form": {}}}},
        )


def form(message: str, properties: dict[str, Any]) -> ElicitRequest:
    """A form question with the legacy fixture's schema shape (every field required)."""
    schema = {"type": "object", "properties": properties, "required": list(properties)}
    return ElicitRequest(params=ElicitRequestFormParams(message=message, requested_schema=schema))


def ask(key: str, question: ElicitRequest, state: dict[str, Any]) -> InputRequiredResult:
    """One round: the question under `key`, and what the next round must know, to be sealed."""
    return InputRequiredResult(input_requests={key: question}, request_state=json.dumps(state))


def round_state(ctx: Context) -> dict[str, Any]:
    """The state this server minted for the previous round (the SDK has verified it), or {}."""
    if ctx.request_state is None:
        return {}
    state = json.loads(ctx.request_state)
    if not isinstance(state, dict):
        raise ToolError("requestState is not one this server minted")
    return state


def answered_field(ctx: Context, key: str, field: str) -> str:
    """The accepted value of one form field, or a word saying why there is none."""
    response = (ctx.input_responses or {}).get(key)
    if not isinstance(response, ElicitResult):
        raise ToolError(f"inputResponses has no elicitation answer under {key!r}")
    if response.action != "accept" or response.content is None:
        return f"<{response.action}>"
    return str(response.content.get(field, "<missing>"))


@mcp.tool()
async def test_input_required_result_elicitation(ctx: Context) -> str | InputRequiredResult:
    """Asks the user's name with one form elicitation."""
    require_form_elicitation(ctx)
    if round_state(ctx).get("asked") != "user_name":
        return ask("user_name", form("What is your name?", NAME_FIELD), {"asked": "user_name"})
    return f"Hello, {answered_field(ctx, 'user_name', 'name')}!"


@mcp.tool()
async def test_input_required_result_multi_round(ctx: Context) -> str | InputRequiredResult:
    """Asks two questions in sequence: the second exists only after the first."""
    require_form_elicitation(ctx)
    state = round_state(ctx)
    match state.get("asked"):
        case None:
            return ask("name", form("Step 1: what is your name?", NAME_FIELD), {"asked": "name"})
        case "name":
            name = answered_field(ctx, "name", "name")
            question = form(f"Step 2: {name}, what is your favourite colour?", COLOUR_FIELD)
            return ask("colour", question, {"asked": "colour", "name": name})
        case "colour":
            return f"{state.get('name', '<missing>')} likes {answered_field(ctx, 'colour', 'colour')}"
        case other:
            raise ToolError(f"requestState names an unknown round {other!r}")


def main() -> None:
    """Serve Streamable HTTP on 127.0.0.1:PORT/mcp until killed."""
    port = sys.argv[1] if len(sys.argv) > 1 else ""
    if not port.isdigit():
        sys.exit("usage: native_rounds_server.py PORT")
    mcp.run(transport="streamable-http", host="127.0.0.1", port=int(port))


if __name__ == "__main__":
    main()
