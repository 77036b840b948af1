"""The Python client (mcp==2.3.0, pinned to 2026-07-28) lists and calls tools that legacy servers
write in ways it rejects, through the gateway's repairs.

The client launches `GATEWAY stdio --upstream-command "python3 stdio_server.py --schema"`:
the scripted legacy server lists a tool whose inputSchema has a `$schema` but no `type` (as
server-gitlab's do, which makes this client reject the whole tools/list when it talks to the
server directly), one whose schema is not JSON Schema, one whose outputSchema has no `type`,
and one whose name has a space. Through the gateway the list validates, the repaired tools are
called by the names the client sees, and a structured result is checked against its schema.

Prints one line per check: `CHECK PASS|FAIL py schema <label> <detail>`, and exits 1 if any
check failed.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from mcp import Client
from mcp.client.stdio import StdioServerParameters


def report(label: str, ok: bool, detail: str) -> bool:
    print(f"CHECK {'PASS' if ok else 'FAIL'} py schema {label} {detail}", flush=True)
    return ok


async def checks(args: argparse.Namespace) -> list[bool]:
    argv = ["stdio", "--upstream-command", args.upstream_command, "--state-key-file", args.state_key_file]
    client = Client(StdioServerParameters(command=args.gateway, args=argv), mode="2026-07-28",
                    read_timeout_seconds=args.timeout)
    results = []
    async with client:
        listed = await client.list_tools()
        tools = {tool.name: tool for tool in listed.tools}
        untyped = tools.get("untyped")
        results.append(report("list-validates", untyped is not None and "broken_schema" not in tools,
                              f"{len(tools)} tools, untyped listed: {untyped is not None}, "
                              f"broken_schema listed: {'broken_schema' in tools}"))
        schema = untyped.input_schema if untyped else {}
        if not isinstance(schema, dict):
            schema = schema.model_dump(by_alias=True)
        results.append(report("type-added", schema.get("type") == "object", f"inputSchema.type={schema.get('type')!r}"))
        found = await client.call_tool("untyped", {"query": "notes"})
        text = found.content[0].text if found.content else ""
        results.append(report("repaired-tool-called", text == "found notes" and not found.is_error, repr(text)))
        searched = await client.call_tool("_.search_20files", {})
        text = searched.content[0].text if searched.content else ""
        results.append(report("encoded-name-called", text == "searched", repr(text)))
        weather = await client.call_tool("weather", {"valid": True})
        results.append(report("structured-result-valid", weather.structured_content == {"temp": 21.5},
                              repr(weather.structured_content)))
        refused = await client.call_tool("weather", {"valid": False})
        text = refused.content[0].text if refused.content else ""
        results.append(report("structured-result-refused", bool(refused.is_error) and "structured_content_invalid" in text,
                              repr(text)))
    return results


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gateway", required=True, help="the mrtr-gateway executable")
    parser.add_argument("--upstream-command", required=True, help="the legacy stdio server, one command line")
    parser.add_argument("--state-key-file", required=True, help="a state key file for the gateway")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per request")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    try:
        results = asyncio.run(checks(args))
    except Exception as e:  # the client refusing the list is the failure this catches
        report("list-validates", False, f"{type(e).__name__}: {e}".replace("\n", " ")[:300])
        return 1
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
