"""Drive the gateway's stdio front with the Python client's stdio transport (mcp==2.3.0).

The client launches `GATEWAY stdio --upstream-command COMMAND` itself, as a desktop
client launches a server, and speaks 2026-07-28 over the gateway's stdin/stdout. The
checks are checks.json's, judged as over HTTP: every message the client writes is seen
on its way to the gateway's stdin, so each retry of the call counts as one round, and
the questions of each round must be the legacy server's own (its text, unchanged).

Prints one line per check: `CHECK PASS|FAIL py <target> <label> <detail>`, and exits 1
if any check failed.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator

from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from client_checks import Recorder, run_and_report, select

CLIENT = "py"


class CountingWrite:
    """The client's write stream, telling the recorder about every message it carries."""

    def __init__(self, inner: Any, recorder: Recorder) -> None:
        self.inner = inner
        self.recorder = recorder

    async def send(self, item: Any, /) -> None:
        self.recorder.note_request(item.message.model_dump_json(by_alias=True, exclude_none=True))
        await self.inner.send(item)

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def __aenter__(self) -> "CountingWrite":
        await self.inner.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        return await self.inner.__aexit__(*exc)


@asynccontextmanager
async def counted_stdio(params: StdioServerParameters, recorder: Recorder) -> AsyncIterator[tuple[Any, Any]]:
    """stdio_client, with the write side counted."""
    async with stdio_client(params) as (read, write):
        yield read, CountingWrite(write, recorder)


def server_params(args: argparse.Namespace) -> StdioServerParameters:
    argv = ["stdio", "--upstream-command", args.upstream_command, "--state-key-file", args.state_key_file]
    return StdioServerParameters(command=args.gateway, args=argv)


async def run_check(args: argparse.Namespace, check) -> tuple[bool, str]:
    """One fresh client (so one fresh gateway process), one checked call, the check's verdict."""
    recorder = Recorder(answers=dict(check.answer))
    check = check.bind(recorder.token, "")
    check.prepare()
    client = Client(
        counted_stdio(server_params(args), recorder),
        mode="2026-07-28",
        elicitation_callback=recorder.on_elicit if "elicit" in check.needs else None,
        sampling_callback=recorder.on_sample if "sample" in check.needs else None,
        list_roots_callback=recorder.on_roots if "roots" in check.needs else None,
        logging_callback=recorder.on_log,
        log_level=check.log or None,
        read_timeout_seconds=args.timeout,
    )
    async with client:
        result = await client.call_tool(check.name, check.args, progress_callback=recorder.on_progress)
    text = "\n".join(getattr(block, "text", "") for block in result.content)
    problem = check.verify(recorder, text, bool(result.is_error), rounds_observable=True)
    return (problem is None, problem or check.success_detail(recorder))


async def run_one(args: argparse.Namespace, check) -> bool:
    """Run a check under a deadline and print its line."""
    run = run_check
    return await run_and_report(CLIENT, args.target, check, args.timeout, lambda: run(args, check))


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gateway", required=True, help="the mrtr-gateway executable")
    parser.add_argument("--upstream-command", required=True, help="the legacy stdio server, one command line")
    parser.add_argument("--state-key-file", required=True, help="a state key file for the gateway")
    parser.add_argument("--server", required=True, help="which checks.json server the command runs")
    parser.add_argument("--only", default="", help="comma-separated check labels or tool names (default: all)")
    parser.add_argument("--target", default="", help="label for the output lines (default: --server)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per check")
    args = parser.parse_args(argv)
    args.target = args.target or args.server
    return args


async def main(argv: list[str]) -> int:
    args = parse_args(argv)
    checks = [c for c in select(args.server, args.only) if c.kind != "prompt"]
    if not checks:
        print(f"no tool check named in --only={args.only!r}", file=sys.stderr)
        return 2
    results = [await run_one(args, check) for check in checks]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
