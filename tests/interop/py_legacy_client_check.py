"""Drive the pinned legacy Python MCP client (mcp==1.30.0) through a URL and check every answer.

The same table (checks.json) and verdicts as the 2026-07-28 check (py_client_check.py), for
a client of the 2025-era protocol: `initialize`, a session id, and every server request
(elicitation, sampling, roots) answered in-band by the client's callbacks inside its one
call. Run it against a legacy server directly and through the gateway: the gateway must let
it complete the same tools, with the same questions asked, and without replaying the call
(each call is POSTed once).

The client opens its GET stream at the same time as it sends `notifications/initialized`, so its
first call can reach a server before that stream does, and a server that sends a request on the
GET stream (server-everything's `roots/list`) then drops it and the call hangs, directly as
through a gateway. Each check waits for the answer to the GET before its first call: the race is
the client's own, and the checks are about what happens once the stream is open.

Prints one line per check: `CHECK PASS|FAIL py-legacy <target> <label> <detail>`, and exits 1
if any check failed.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import sys
from dataclasses import dataclass, field
from typing import Any

import httpx
from mcp import ClientSession, types
from mcp.client.streamable_http import streamablehttp_client
from mcp.shared._httpx_utils import create_mcp_http_client

from client_checks import Recorder, run_and_report, select

CLIENT = "py-legacy"
# How long a check waits for the server to answer the client's GET stream.
GET_STREAM_SECONDS = 10


@dataclass
class LegacyRecorder(Recorder):
    """The recorder's answers in this client's (1.x) types, whose fields are camelCase; it also
    tells when the server answered the client's GET stream."""

    get_answered: asyncio.Event = field(default_factory=asyncio.Event)

    async def on_http_response(self, response: httpx.Response) -> None:
        """httpx response hook: a GET's response head (a stream, or a refusal) has arrived."""
        if response.request.method == "GET":
            self.get_answered.set()

    async def on_elicit(self, _ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self._note("elicit", "elicitation/create", params)
        action = self.answers.get("elicit", "accept")
        answer: dict[str, Any] = {"action": action, "_meta": self.answer_meta()}
        schema = getattr(params, "requestedSchema", None)
        if action == "accept" and schema is not None:
            answer["content"] = self.form_answer(schema)
        return types.ElicitResult.model_validate(answer)

    async def on_sample(self, _ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        self._note("sample", "sampling/createMessage", params)
        text = types.TextContent(type="text", text=f"sampled-{self.token}")
        return types.CreateMessageResult(role="assistant", content=text, model="interop-model", stopReason="endTurn")


def http_factory(recorder: LegacyRecorder):
    """The client's httpx factory, with hooks that count the call's POSTs and see the GET answered."""

    def factory(headers=None, timeout=None, auth=None) -> httpx.AsyncClient:
        client = create_mcp_http_client(headers=headers, timeout=timeout, auth=auth)
        client.event_hooks = {"request": [recorder.on_http_request], "response": [recorder.on_http_response]}
        return client

    return factory


def session_for(streams, recorder: Recorder, needs: set[str], timeout: float) -> ClientSession:
    """A session whose callbacks for the kinds in `needs` answer through the recorder; a
    callback is what declares its capability."""
    read, write, _ = streams
    return ClientSession(
        read,
        write,
        read_timeout_seconds=datetime.timedelta(seconds=timeout),
        elicitation_callback=recorder.on_elicit if "elicit" in needs else None,
        sampling_callback=recorder.on_sample if "sample" in needs else None,
        list_roots_callback=recorder.on_roots if "roots" in needs else None,
    )


async def invoke(session: ClientSession, check, progress) -> tuple[str, bool]:
    """Run one check's call; its flattened text content and whether it is an error."""
    if check.kind == "prompt":
        prompt = await session.get_prompt(check.name, check.args or None)
        return "\n".join(getattr(m.content, "text", "") for m in prompt.messages), False
    result = await session.call_tool(check.name, check.args, progress_callback=progress)
    text = "\n".join(getattr(block, "text", "") for block in result.content)
    return text, bool(result.isError)


async def run_before(session: ClientSession, check, recorder: Recorder) -> str | None:
    """The check's preparatory calls: each must succeed and ask nothing."""
    for call in check.before:
        result = await session.call_tool(call["name"], call.get("args", {}))
        if result.isError:
            return f"before-call {call['name']} has isError"
        if recorder.questions or recorder.progress:
            return f"before-call {call['name']} asked {len(recorder.questions)} question(s)"
    recorder.call_posts = 0
    return None


async def run_check(args: argparse.Namespace, check) -> tuple[bool, str]:
    recorder = LegacyRecorder(answers=dict(check.answer))
    check = check.bind(recorder.token, args.dir)
    check.prepare()
    async with streamablehttp_client(args.url, httpx_client_factory=http_factory(recorder)) as streams:
        async with session_for(streams, recorder, check.needs, args.timeout) as session:
            await session.initialize()
            try:
                await asyncio.wait_for(recorder.get_answered.wait(), GET_STREAM_SECONDS)
            except TimeoutError:
                return (False, f"the client's GET stream got no answer within {GET_STREAM_SECONDS}s")
            problem = await run_before(session, check, recorder)
            if problem:
                return (False, problem)
            text, is_error = await invoke(session, check, recorder.on_progress)
    problem = check.verify(recorder, text, is_error, rounds_observable=False)
    return (problem is None, problem or check.success_detail(recorder))


async def run_one(args: argparse.Namespace, check) -> bool:
    """Run a check under a deadline and print its line."""
    run = run_check
    return await run_and_report(CLIENT, args.target, check, args.timeout, lambda: run(args, check))


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="MCP endpoint, e.g. http://127.0.0.1:PORT/mcp")
    parser.add_argument("--server", required=True, help="which legacy server is behind the URL (checks.json)")
    parser.add_argument("--only", default="", help="comma-separated check labels or tool names (default: all)")
    parser.add_argument("--target", default="", help="label for the output lines (default: --server)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per check")
    parser.add_argument("--dir", default="", help="the server's scratch folder, substituted for {dir}")
    args = parser.parse_args(argv)
    args.target = args.target or args.server
    return args


async def main(argv: list[str]) -> int:
    args = parse_args(argv)
    checks = select(args.server, args.only, modern=False)
    if not checks:
        print(f"no check named in --only={args.only!r}", file=sys.stderr)
        return 2
    results = [await run_one(args, check) for check in checks]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
