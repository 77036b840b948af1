"""Drive a real Python MCP client (mcp==2.3.0) through a URL and check every answer.

Each check calls one tool (or prompt) with a fresh client whose elicitation,
sampling and roots callbacks answer with values unique to this run, and whose
HTTP client counts the call's POSTs (one per round), then asserts: the exact
rounds, and in each the exact questions of each kind, each one the legacy
server's own; the exact progress notes; a result that is not an error; and
content only those answers could have produced. So a check cannot pass on a
canned result, and a pinned 2026-07-28 client can only pass if something (the
gateway) translated the legacy server's pushes.

Prints one line per check: `CHECK PASS|FAIL py <target> <label> <detail>`, and
exits 1 if any check failed. `--expect-refusal` inverts the contract for the
negative check: the call must fail with the refusal checks.json names for the
server (a pinned client straight at a legacy server), and nothing else.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from client_checks import CHECKS, REFUSALS, Recorder, clip, describe_failure, refusal_problem, run_and_report, select

CLIENT = "py"
LEGACY_MODES = ("auto", "legacy")


def build_client(args: argparse.Namespace, recorder: Recorder, http: object, check) -> Client:
    """A client, over `http`, whose callbacks for the kinds the check needs answer through
    the recorder; it declares those capabilities only (a callback is a declaration). It asks
    for log messages at the check's level, if it names one, and records every one it gets."""
    needs = check.needs
    return Client(
        streamable_http_client(args.url, http_client=http),
        mode=args.mode,
        elicitation_callback=recorder.on_elicit if "elicit" in needs else None,
        sampling_callback=recorder.on_sample if "sample" in needs else None,
        list_roots_callback=recorder.on_roots if "roots" in needs else None,
        logging_callback=recorder.on_log,
        log_level=check.log or None,
        read_timeout_seconds=args.timeout,
    )


async def invoke(client: Client, check, progress) -> tuple[str, bool]:
    """Run one check's call; its flattened text content and whether it is an error."""
    if check.kind == "prompt":
        prompt = await client.get_prompt(check.name, check.args or None)
        return "\n".join(getattr(m.content, "text", "") for m in prompt.messages), False
    result = await client.call_tool(check.name, check.args, progress_callback=progress)
    text = "\n".join(getattr(block, "text", "") for block in result.content)
    return text, bool(result.is_error)


async def run_before(client: Client, check, recorder: Recorder) -> str | None:
    """The check's preparatory calls: each must succeed and ask nothing. Then the
    recorder starts afresh, so only the checked call is counted."""
    for call in check.before:
        result = await client.call_tool(call["name"], call.get("args", {}))
        text = "\n".join(getattr(block, "text", "") for block in result.content)
        if result.is_error:
            return f"before-call {call['name']} has isError: {clip(text)}"
        if recorder.questions or recorder.progress:
            return f"before-call {call['name']} asked {len(recorder.questions)} question(s)"
    recorder.call_posts = 0
    recorder.logs.clear()
    return None


async def run_check(args: argparse.Namespace, check) -> tuple[bool, str]:
    """One fresh client, its preparatory calls, one checked call, then the check's own verdict."""
    recorder = Recorder(answers=dict(check.answer))
    check = check.bind(recorder.token, args.dir)
    check.prepare()
    http = create_mcp_http_client()
    http.event_hooks = {"request": [recorder.on_http_request], "response": []}
    async with http:
        async with build_client(args, recorder, http, check) as client:
            problem = await run_before(client, check, recorder)
            if problem:
                return (False, problem)
            text, is_error = await invoke(client, check, recorder.on_progress)
    problem = check.verify(recorder, text, is_error, rounds_observable=args.mode not in LEGACY_MODES)
    return (problem is None, problem or check.success_detail(recorder))


async def run_refusal(args: argparse.Namespace, check) -> tuple[bool, str]:
    """The negative check: the same call must fail, with this server's refusal."""
    wanted = REFUSALS[args.server][CLIENT]
    try:
        ok, detail = await run_check(args, check)
    except Exception as error:  # noqa: BLE001 - judged below: only the expected refusal passes
        problem = refusal_problem(error, wanted, MCPError)
        return (problem is None, problem or f"refused as expected: {describe_failure(error)}")
    return (False, f"expected a refusal, got a result ({'ok' if ok else detail})")


async def run_one(args: argparse.Namespace, check) -> bool:
    """Run a check under a deadline and print its line."""
    run = run_refusal if args.expect_refusal else run_check
    return await run_and_report(CLIENT, args.target, check, args.timeout, lambda: run(args, check))


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="MCP endpoint, e.g. http://127.0.0.1:PORT/mcp")
    parser.add_argument("--server", required=True, choices=sorted(CHECKS), help="which legacy server is behind the URL")
    parser.add_argument("--mode", default="2026-07-28", help="2026-07-28 | auto | legacy")
    parser.add_argument("--only", default="", help="comma-separated check labels or tool names (default: all)")
    parser.add_argument("--target", default="", help="label for the output lines (default: --server)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per check")
    parser.add_argument("--expect-refusal", action="store_true", help="every call must fail")
    parser.add_argument("--dir", default="", help="the server's scratch folder, substituted for {dir} in checks.json")
    args = parser.parse_args(argv)
    args.target = args.target or args.server
    return args


async def main(argv: list[str]) -> int:
    args = parse_args(argv)
    checks = select(args.server, args.only, modern=args.mode not in LEGACY_MODES)
    if not checks:
        print(f"no check named in --only={args.only!r}", file=sys.stderr)
        return 2
    results = [await run_one(args, check) for check in checks]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
