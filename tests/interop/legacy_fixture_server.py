"""A legacy (2025-11-25) MCP server that serves the conformance suite's fixtures.

It is built on FastMCP 1.x and asks its questions the old way: server->client
requests (`elicitation/create`, `sampling/createMessage`, `roots/list`) sent in
the middle of a call. It contains no 2026-07-28 code path, so every
`input_required` round a 2026 client sees is the gateway's translation.

Two tools carry what a 2025-11-25 server may put in an inputSchema for newer
clients: `test_header_params` annotates arguments with `x-mcp-header` (the
gateway checks a call's `Mcp-Param-*` headers against them), and
`json_schema_2020_12_tool` lists a JSON Schema 2020-12 schema.

One opt-in hint is used: a pushed request may carry
`_meta["dev.mrtr-gateway/inputKey"]`, which the gateway honours as the
`inputRequests` key. Conformance hard-codes the key `user_name` for the basic
elicitation, so that question carries the hint.

Usage: legacy_fixture_server.py PORT   (or FIXTURE_PORT in the environment)
It binds 127.0.0.1 only.
       legacy_fixture_server.py --stdio  (the same fixtures over stdio, for a
                                          gateway that spawns it)
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import weakref
from typing import Annotated, Any

from mcp import types
from mcp.server.fastmcp import Context, FastMCP
from mcp.server.fastmcp.prompts.base import Message, UserMessage
from mcp.shared.message import ServerMessageMetadata
from pydantic import Field

import fixture_media

INPUT_KEY_META = "dev.mrtr-gateway/inputKey"

mcp = FastMCP("mrtr-legacy-fixture", host="127.0.0.1", log_level="WARNING")

LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
# The level each legacy session asked for with logging/setLevel (none: send all).
session_log_levels: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()


# FastMCP 1.x has no public hook for logging/setLevel; registering it on the
# low-level server also makes initialize declare the logging capability.
@mcp._mcp_server.set_logging_level()
async def set_log_level(level: types.LoggingLevel) -> None:
    """Remember the session's threshold, as a legacy server must."""
    session_log_levels[mcp._mcp_server.request_context.session] = level


async def log(ctx: Context, level: types.LoggingLevel, message: str) -> None:
    """Send a log notification unless the session's threshold is above it."""
    threshold = session_log_levels.get(ctx.session)
    if threshold is None or LOG_LEVELS.index(level) >= LOG_LEVELS.index(threshold):
        await ctx.log(level, message)


# --- legacy questions, asked the 2025 way --------------------------------------


async def ask_form(
    ctx: Context, message: str, properties: dict[str, Any], key: str | None = None
) -> types.ElicitResult:
    """Push `elicitation/create` on the call's own stream, with an optional key hint."""
    raw: dict[str, Any] = {
        "message": message,
        "requestedSchema": {
            "type": "object",
            "properties": properties,
            "required": list(properties),
        },
    }
    if key is not None:
        raw["_meta"] = {INPUT_KEY_META: key}
    request = types.ElicitRequest(params=types.ElicitRequestFormParams.model_validate(raw))
    return await ctx.session.send_request(
        types.ServerRequest(request),
        types.ElicitResult,
        metadata=ServerMessageMetadata(related_request_id=ctx.request_id),
    )


async def ask_sampling(ctx: Context, prompt: str) -> str:
    """Push `sampling/createMessage` tied to the current call; return the sampled text."""
    result = await ctx.session.create_message(
        messages=[types.SamplingMessage(role="user", content=types.TextContent(type="text", text=prompt))],
        max_tokens=100,
        related_request_id=ctx.request_id,
    )
    content = result.content
    return content.text if isinstance(content, types.TextContent) else str(content)


async def ask_roots(ctx: Context) -> list[str]:
    """Ask `roots/list`; FastMCP 1.x sends it on the standalone GET stream."""
    result = await ctx.session.list_roots()
    return [str(root.uri) for root in result.roots]


def answered_field(result: types.ElicitResult, field: str) -> str:
    """The accepted value of one form field, or a word saying why there is none."""
    if result.action != "accept" or result.content is None:
        return f"<{result.action}>"
    return str(result.content.get(field, "<missing>"))


def client_has(ctx: Context, capability: str) -> bool:
    """Whether the client declared a capability at initialize (the legacy check)."""
    params = ctx.session.client_params
    if params is None:
        return False
    return getattr(params.capabilities, capability, None) is not None


# --- input_required-result fixtures (asked the legacy way) ---------------------

NAME_FIELD = {"name": {"type": "string", "description": "Your name"}}


@mcp.tool()
async def test_input_required_result_elicitation(ctx: Context) -> str:
    """Asks the user's name with elicitation/create."""
    answer = await ask_form(ctx, "What is your name?", NAME_FIELD, key="user_name")
    return f"Hello, {answered_field(answer, 'name')}!"


@mcp.tool()
async def test_input_required_result_sampling(ctx: Context) -> str:
    """Asks the client's model a question with sampling/createMessage."""
    text = await ask_sampling(ctx, "What is the capital of France?")
    return f"The model answered: {text}"


@mcp.tool()
async def test_input_required_result_list_roots(ctx: Context) -> str:
    """Lists the client's roots with roots/list."""
    roots = await ask_roots(ctx)
    return f"Client roots: {', '.join(roots) or '<none>'}"


@mcp.tool()
async def test_input_required_result_request_state(ctx: Context) -> str:
    """Asks a confirmation; the answer only reaches it through the carried state."""
    fields = {"ok": {"type": "boolean", "description": "Confirm"}}
    answer = await ask_form(ctx, "Please confirm to continue.", fields)
    return f"state-ok: confirmed={answered_field(answer, 'ok')}"


@mcp.tool()
async def test_input_required_result_multiple_inputs(ctx: Context) -> str:
    """Asks elicitation, sampling and roots at once (they are outstanding together)."""
    answer, sampled, roots = await asyncio.gather(
        ask_form(ctx, "What is your name?", NAME_FIELD),
        ask_sampling(ctx, "Say hello."),
        ask_roots(ctx),
    )
    name = answered_field(answer, "name")
    return f"name={name}; model={sampled}; roots={','.join(roots)}"


@mcp.tool()
async def test_input_required_result_multi_round(ctx: Context) -> str:
    """Asks two questions in sequence: the second exists only after the first."""
    first = await ask_form(ctx, "Step 1: what is your name?", NAME_FIELD)
    name = answered_field(first, "name")
    colour_field = {"colour": {"type": "string", "description": "Favourite colour"}}
    second = await ask_form(ctx, f"Step 2: {name}, what is your favourite colour?", colour_field)
    return f"{name} likes {answered_field(second, 'colour')}"


@mcp.tool()
async def test_input_required_result_tampered_state(ctx: Context) -> str:
    """Asks a question; integrity of the carried state is the gateway's job."""
    answer = await ask_form(ctx, "What is your name?", NAME_FIELD)
    return f"Hello, {answered_field(answer, 'name')}!"


@mcp.tool()
async def test_input_required_result_capabilities(ctx: Context) -> str:
    """Asks only through the capabilities the client declared at initialize."""
    if client_has(ctx, "elicitation"):
        answer = await ask_form(ctx, "What is your name?", NAME_FIELD)
        return f"Hello, {answered_field(answer, 'name')}!"
    if client_has(ctx, "sampling"):
        return f"The model answered: {await ask_sampling(ctx, 'What is your name?')}"
    return "The client declared neither elicitation nor sampling."


@mcp.tool()
async def test_missing_capability(ctx: Context) -> str:
    """Samples whether or not the client declared sampling (as careless servers do)."""
    return f"The model answered: {await ask_sampling(ctx, 'Say anything.')}"


@mcp.tool()
async def test_streaming_elicitation(ctx: Context) -> str:
    """Reports progress, then elicits: the push must never leak to a 2026 stream."""
    await ctx.report_progress(1, 2, "asking")
    answer = await ask_form(ctx, "What is your name?", NAME_FIELD)
    return f"Hello, {answered_field(answer, 'name')}!"


@mcp.tool()
async def test_logging_tool(ctx: Context) -> str:
    """Logs unconditionally; a 2026 front must drop logs nobody asked for."""
    await log(ctx, "info", "test_logging_tool ran")
    return "logged"


@mcp.prompt()
async def test_input_required_result_prompt(ctx: Context) -> list[Message]:
    """A prompt that needs context from the user before it can be rendered."""
    fields = {"context": {"type": "string", "description": "Prompt context"}}
    answer = await ask_form(ctx, "What context should the prompt use?", fields)
    return [UserMessage(f"Prompt with context: {answered_field(answer, 'context')}")]


# --- 2025-era server fixtures ----------------------------------------------------


@mcp.tool()
async def test_simple_text() -> str:
    """Tests simple text content response."""
    return "This is a simple text response for testing."


@mcp.tool()
async def test_image_content() -> list[types.ContentBlock]:
    """Tests image content response."""
    return [fixture_media.image_content()]


@mcp.tool()
async def test_audio_content() -> list[types.ContentBlock]:
    """Tests audio content response."""
    return [fixture_media.audio_content()]


@mcp.tool()
async def test_embedded_resource() -> list[types.ContentBlock]:
    """Tests embedded resource content response."""
    return [
        fixture_media.embedded_text("test://embedded-resource", "text/plain", "This is an embedded resource content.")
    ]


@mcp.tool()
async def test_multiple_content_types() -> list[types.ContentBlock]:
    """Tests a response with text, image and resource content."""
    payload = json.dumps({"test": "data", "value": 123})
    return [
        types.TextContent(type="text", text="Multiple content types test:"),
        fixture_media.image_content(),
        fixture_media.embedded_text("test://mixed-content-resource", "application/json", payload),
    ]


@mcp.tool()
async def test_error_handling() -> str:
    """Always fails, so the result carries isError: true."""
    raise RuntimeError("This tool intentionally returns an error for testing")


@mcp.tool()
async def test_tool_with_progress(ctx: Context) -> str:
    """Reports progress 0, 50, 100 against the caller's progress token."""
    for step in (0, 50, 100):
        await ctx.report_progress(step, 100, f"Completed step {step} of 100")
        if step < 100:
            await asyncio.sleep(0.05)
    meta = ctx.request_context.meta
    return str(meta.progressToken if meta is not None else "")


@mcp.tool()
async def test_tool_with_logging(ctx: Context) -> str:
    """Emits three log messages while it runs."""
    for line in ("Tool execution started", "Tool processing data", "Tool execution completed"):
        await log(ctx, "info", line)
        await asyncio.sleep(0.05)
    return "Tool with logging executed successfully"


@mcp.tool()
async def test_sampling(prompt: str, ctx: Context) -> str:
    """Tests server-initiated sampling."""
    return f"LLM response: {await ask_sampling(ctx, prompt)}"


@mcp.tool()
async def test_elicitation(message: str, ctx: Context) -> str:
    """Tests server-initiated elicitation."""
    fields = {"response": {"type": "string", "description": "User's response"}}
    answer = await ask_form(ctx, message, fields)
    content = json.dumps(answer.content or {})
    return f"User response: action={answer.action}, content={content}"


def mirrored(header: str, description: str) -> Any:
    """A tool argument the client mirrors into the `Mcp-Param-{header}` HTTP header."""
    return Field(description=description, json_schema_extra={"x-mcp-header": header})


@mcp.tool()
async def test_header_params(
    region: Annotated[str, mirrored("Region", "Where the query runs")],
    query: str,
    priority: Annotated[int | None, mirrored("Priority", "Queue priority")] = None,
) -> str:
    """Runs a query in a region; the region and priority travel in headers too."""
    return f"region={region}; query={query}; priority={priority}"


# The JSON Schema 2020-12 features a 2025-11-25 server may use in an inputSchema. A tool's
# arguments are still checked against its signature; the schema it lists is this one.
JSON_SCHEMA_2020_12 = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}


@mcp.tool()
async def json_schema_2020_12_tool(
    name: str | None = None,
    address: dict[str, str] | None = None,
    contactMethod: str | None = None,  # noqa: N803 - the schema names it so
    phone: str | None = None,
    email: str | None = None,
) -> str:
    """Tool with JSON Schema 2020-12 features."""
    given = {"name": name, "address": address, "contactMethod": contactMethod, "phone": phone, "email": email}
    return f"called with {json.dumps({k: v for k, v in given.items() if v is not None})}"


mcp._tool_manager.get_tool("json_schema_2020_12_tool").parameters = JSON_SCHEMA_2020_12


@mcp.resource("test://static-text", mime_type="text/plain")
def static_text() -> str:
    """A static text resource for testing."""
    return "This is the content of the static text resource."


@mcp.resource("test://static-binary", mime_type="image/png")
def static_binary() -> bytes:
    """A static binary resource (image) for testing."""
    return fixture_media.PNG_BYTES


@mcp.resource("test://watched-resource", mime_type="text/plain")
def watched_resource() -> str:
    """A resource other scenarios subscribe to; its content never changes here."""
    return "Watched resource content."


@mcp.resource("test://template/{id}/data", mime_type="application/json")
def template_data(id: str) -> str:  # noqa: A002 - the URI template names it `id`
    """A resource template with parameter substitution."""
    return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})


@mcp.prompt()
def test_simple_prompt() -> str:
    """A simple prompt without arguments."""
    return "This is a simple prompt for testing."


@mcp.prompt()
def test_prompt_with_arguments(arg1: str, arg2: str) -> str:
    """A prompt with required arguments."""
    return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"


@mcp.prompt()
def test_prompt_with_embedded_resource(resourceUri: str) -> list[Message]:  # noqa: N803
    """A prompt that includes an embedded resource."""
    resource = fixture_media.embedded_text(resourceUri, "text/plain", "Embedded resource content for testing.")
    return [UserMessage(resource), UserMessage("Please process the embedded resource above.")]


@mcp.prompt()
def test_prompt_with_image() -> list[Message]:
    """A prompt that includes image content."""
    return [UserMessage(fixture_media.image_content()), UserMessage("Please analyze the image above.")]


@mcp.completion()
async def complete(
    ref: types.PromptReference | types.ResourceTemplateReference,
    argument: types.CompletionArgument,
    context: types.CompletionContext | None,
) -> types.Completion:
    """Offers the values this fixture knows for prompt and template arguments."""
    known = {"arg1": ["hello", "help"], "arg2": ["world"], "id": ["1", "42"]}
    values = [v for v in known.get(argument.name, []) if v.startswith(argument.value)]
    return types.Completion(values=values, total=len(values), hasMore=False)


def main() -> None:
    """Serve Streamable HTTP on 127.0.0.1:PORT/mcp until killed, or stdio with --stdio."""
    if sys.argv[1:] == ["--stdio"]:
        mcp.run(transport="stdio")
        return
    port = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("FIXTURE_PORT", "")
    if not port.isdigit():
        sys.exit("usage: legacy_fixture_server.py PORT | --stdio (or set FIXTURE_PORT)")
    mcp.settings.port = int(port)
    mcp.run(transport="streamable-http")


if __name__ == "__main__":
    main()
