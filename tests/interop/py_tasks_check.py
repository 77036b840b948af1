"""Drive server-everything's legacy task tool through the gateway with a real Python client
(mcp==2.3.0) that speaks the tasks extension (`io.modelcontextprotocol/tasks`).

mcp 2.3.0 has no tasks client of its own, but its extension API does what one needs: a
`ClientExtension` declares the extension in every request's capabilities, a `ResultClaim`
takes the `CreateTaskResult` (`resultType: "task"`) a `tools/call` may answer and resolves it,
and requests with `name_param = "taskId"` carry the `Mcp-Name` header the extension requires.
The resolver here polls `tasks/get` at the task's `pollIntervalMs`, answers the
`inputRequests` of an `input_required` task through `tasks/update`, and returns the inlined
`result` of the `completed` task as the call's result.

Checks (one line each, `CHECK PASS|FAIL py <target> <label> <detail>`; exit 1 on a failure):
- `tools/list` through the gateway equals the direct listing (a legacy client with the same
  capabilities straight at the server): the same tool names, each tool's `execution` the same;
- `simulate-research-query#clear`: a task, its stages' own status messages seen on the way,
  no question, and a report on the topic the check made up (a random token in it);
- `#accept`: one question, the server's own text naming that topic, shown on every
  `tasks/get` under one key until answered, answered with an interpretation picked at random;
  the report names it;
- `#decline`: the same question declined; the report says the server used its default;
- `#no-extension`: a client that does not declare the extension is refused with -32021 and
  `data.requiredCapabilities` naming it.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import secrets
import shlex
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Literal

import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.extension import ClaimContext, ClientExtension, ResultClaim
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, Request, RequestParams, Result
from pydantic import ConfigDict

from client_checks import clip, describe_failure, innermost

EXTENSION = "io.modelcontextprotocol/tasks"
TOOL = "simulate-research-query"
STAGES = ("Gathering sources...", "Analyzing content...", "Synthesizing findings...", "Generating report...")
INTERPRETATIONS = ("programming", "snake", "comedy")
TERMINAL = ("completed", "failed", "cancelled")
MAX_POLLS = 600


class CreateTaskResult(Result):
    """The extension's flat `CreateTaskResult`."""

    model_config = ConfigDict(extra="allow")
    result_type: Literal["task"] = "task"
    task_id: str
    status: str
    status_message: str | None = None
    ttl_ms: int | None = None
    poll_interval_ms: int | None = None


class TaskParams(RequestParams):
    model_config = ConfigDict(extra="allow")
    task_id: str
    input_responses: dict[str, Any] | None = None


class GetTask(Request[TaskParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    name_param = "taskId"


class UpdateTask(Request[TaskParams, Literal["tasks/update"]]):
    method: Literal["tasks/update"] = "tasks/update"
    name_param = "taskId"


class AnyResult(Result):
    model_config = ConfigDict(extra="allow")


@dataclass
class TaskLog:
    """What one call saw of its task."""

    answer: dict[str, Any] | None
    created: dict[str, Any] = field(default_factory=dict)
    statuses: list[str] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)
    # Each question as first shown, by key, and how many polls showed it.
    questions: dict[str, dict[str, Any]] = field(default_factory=dict)
    shown: dict[str, int] = field(default_factory=dict)
    acks: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def saw(self, task: dict[str, Any]) -> None:
        status = task.get("status", "")
        if not self.statuses or self.statuses[-1] != status:
            self.statuses.append(status)
        message = task.get("statusMessage")
        if message and message not in self.messages:
            self.messages.append(message)


class TasksExtension(ClientExtension):
    """The tasks extension, resolved by polling; `log` records what the task showed."""

    identifier = EXTENSION

    def __init__(self, log: TaskLog) -> None:
        self.log = log

    def claims(self):
        return (ResultClaim(result_type="task", model=CreateTaskResult, resolve=self.resolve),)

    async def resolve(self, created: CreateTaskResult, ctx: ClaimContext) -> CallToolResult:
        log = self.log
        log.created = created.model_dump(by_alias=True, exclude_none=True)
        log.saw(log.created)
        pause = (created.poll_interval_ms or 500) / 1000
        for _ in range(MAX_POLLS):
            await asyncio.sleep(pause)
            got = await ctx.session.send_request(GetTask(params=TaskParams(task_id=created.task_id)), AnyResult)
            task = got.model_dump(by_alias=True, exclude_none=True)
            log.saw(task)
            if task.get("taskId") != created.task_id:
                log.problems.append(f"tasks/get answered another taskId: {clip(str(task.get('taskId')))}")
            if task.get("status") in TERMINAL:
                if task.get("status") != "completed":
                    raise RuntimeError(f"task ended {task.get('status')}: {clip(str(task.get('error')))}")
                return CallToolResult.model_validate(task.get("result") or {})
            requests = task.get("inputRequests") or {}
            if task.get("status") == "input_required" and requests:
                await self.answer(ctx, created.task_id, requests)
        raise RuntimeError(f"the task did not end after {MAX_POLLS} polls")

    async def answer(self, ctx: ClaimContext, task_id: str, requests: dict[str, Any]) -> None:
        log = self.log
        for key, request in requests.items():
            first = log.questions.setdefault(key, request)
            log.shown[key] = log.shown.get(key, 0) + 1
            if first != request:
                log.problems.append(f"question {key} changed between polls")
        if log.answer is None:
            return
        # Shown twice before it is answered: a question must stay until it is.
        if any(log.shown[key] < 2 for key in requests):
            return
        responses = {key: log.answer for key in requests}
        ack = await ctx.session.send_request(
            UpdateTask(params=TaskParams(task_id=task_id, input_responses=responses)), AnyResult
        )
        log.acks.append(ack.model_dump(by_alias=True, exclude_none=True))


async def elicit_unused(_ctx, _params):
    """Declares elicitation; a task's questions come through `tasks/get`, never here."""
    raise RuntimeError("an elicitation/create reached the client outside the task")


def gateway_client(args: argparse.Namespace, log: TaskLog | None) -> Client:
    extensions = [TasksExtension(log)] if log is not None else []
    return Client(args.url, mode="2026-07-28", extensions=extensions, elicitation_callback=elicit_unused,
                  read_timeout_seconds=args.timeout)


def direct_client(args: argparse.Namespace) -> Client:
    if args.direct_url:
        server: Any = args.direct_url
    else:
        argv = shlex.split(args.direct_command)
        server = StdioServerParameters(command=argv[0], args=argv[1:])
    return Client(server, mode="legacy", elicitation_callback=elicit_unused, read_timeout_seconds=args.timeout)


def listing(tools: list[types.Tool]) -> dict[str, Any]:
    return {t.name: (t.execution.model_dump(by_alias=True, exclude_none=True) if t.execution else None)
            for t in tools}


async def check_listing(args: argparse.Namespace) -> tuple[bool, str]:
    async with direct_client(args) as direct:
        want = listing((await direct.list_tools()).tools)
    async with gateway_client(args, TaskLog(answer=None)) as client:
        got = listing((await client.list_tools()).tools)
    if TOOL not in want:
        return False, f"the direct listing has no {TOOL}: {sorted(want)}"
    if got != want:
        missing, added = sorted(set(want) - set(got)), sorted(set(got) - set(want))
        changed = sorted(n for n in set(got) & set(want) if got[n] != want[n])
        return False, f"listings differ: missing {missing}, added {added}, execution changed {changed}"
    return True, f"{len(got)} tools as listed directly, execution kept ({TOOL}: {got[TOOL]})"


async def research(args: argparse.Namespace, ambiguous: bool, answer: dict[str, Any] | None):
    topic = f"python {secrets.token_hex(4)}"
    log = TaskLog(answer=answer)
    async with gateway_client(args, log) as client:
        result = await client.call_tool(TOOL, {"topic": topic, "ambiguous": ambiguous})
    text = "\n".join(getattr(block, "text", "") for block in result.content)
    return topic, log, text, bool(result.is_error)


def task_problems(log: TaskLog, text: str, is_error: bool, rounds: int) -> list[str]:
    problems = list(log.problems)
    if log.created.get("resultType") != "task" or not str(log.created.get("taskId", "")).startswith("t1."):
        problems.append(f"no sealed CreateTaskResult: {clip(str(log.created))}")
    if log.statuses[-1:] != ["completed"]:
        problems.append(f"statuses {log.statuses}")
    if not any(m in STAGES for m in log.messages):
        problems.append(f"none of the server's stage messages seen: {log.messages}")
    if is_error:
        problems.append(f"isError: {clip(text)}")
    if len(log.questions) != rounds:
        problems.append(f"{len(log.questions)} question(s), wanted {rounds}: {sorted(log.questions)}")
    if len(log.acks) != rounds or any(ack != {"resultType": "complete"} for ack in log.acks):
        problems.append(f"tasks/update acks {log.acks}, wanted {rounds} empty ack(s)")
    return problems


async def check_clear(args: argparse.Namespace) -> tuple[bool, str]:
    topic, log, text, is_error = await research(args, False, None)
    problems = task_problems(log, text, is_error, 0)
    if f"# Research Report: {topic}\n" not in text:
        problems.append(f"the report is not on {topic!r}: {clip(text)}")
    if problems:
        return False, "; ".join(problems)
    return True, f"completed as a task, statuses {log.statuses}, messages {log.messages}"


async def check_question(args: argparse.Namespace, answer: dict[str, Any], expect: str) -> tuple[bool, str]:
    topic, log, text, is_error = await research(args, True, answer)
    problems = task_problems(log, text, is_error, 1)
    asked = next(iter(log.questions.values()), {})
    message = (asked.get("params") or {}).get("message", "")
    if asked.get("method") != "elicitation/create" or f'The research query "{topic}"' not in message:
        problems.append(f"not the server's question on {topic!r}: {clip(str(asked))}")
    if "input_required" not in log.statuses:
        problems.append(f"never input_required: {log.statuses}")
    if expect.format(topic=topic) not in text:
        problems.append(f"the report lacks {expect.format(topic=topic)!r}: {clip(text)}")
    if problems:
        return False, "; ".join(problems)
    key = next(iter(log.questions))
    return True, f"asked once under {key} (shown on {log.shown[key]} polls), answered by tasks/update, statuses {log.statuses}"


async def check_accept(args: argparse.Namespace) -> tuple[bool, str]:
    choice = random.choice(INTERPRETATIONS)
    answer = {"action": "accept", "content": {"interpretation": choice}}
    return await check_question(args, answer, "# Research Report: {topic} (" + choice + ")")


async def check_decline(args: argparse.Namespace) -> tuple[bool, str]:
    default = "User declined - using default interpretation"
    return await check_question(args, {"action": "decline"}, "# Research Report: {topic} (" + default + ")")


async def check_no_extension(args: argparse.Namespace) -> tuple[bool, str]:
    try:
        async with gateway_client(args, None) as client:
            result = await client.call_tool(TOOL, {"topic": "python", "ambiguous": False})
    except Exception as raised:  # noqa: BLE001 - judged below: only the extension's refusal passes
        error = innermost(raised)
        if not isinstance(error, MCPError):
            return False, f"expected -32021, got {describe_failure(error)}"
        data = error.data or {}
        wanted = {"extensions": {EXTENSION: {}}}
        if error.code == -32021 and data.get("requiredCapabilities") == wanted:
            return True, f"refused: -32021 {clip(error.message)}, requiredCapabilities {data['requiredCapabilities']}"
        return False, f"refused otherwise: {error.code} {clip(error.message)} data={clip(str(data))}"
    return False, f"expected -32021, got a result: {clip(str(result))[:200]}"


CHECKS = {
    "tools-list": check_listing,
    f"{TOOL}#clear": check_clear,
    f"{TOOL}#accept": check_accept,
    f"{TOOL}#decline": check_decline,
    f"{TOOL}#no-extension": check_no_extension,
}


async def run_one(args: argparse.Namespace, label: str) -> bool:
    started = time.monotonic()
    try:
        ok, detail = await asyncio.wait_for(CHECKS[label](args), args.timeout)
    except Exception as error:  # noqa: BLE001 - any failure of the check is its verdict
        ok, detail = False, describe_failure(error)
    verdict = "PASS" if ok else "FAIL"
    print(f"CHECK {verdict} py {args.target} {label} {detail} ({time.monotonic() - started:.1f}s)", flush=True)
    return ok


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True, help="the gateway's MCP endpoint")
    direct = parser.add_mutually_exclusive_group(required=True)
    direct.add_argument("--direct-url", default="", help="server-everything's own endpoint (Streamable HTTP)")
    direct.add_argument("--direct-command", default="", help="the command starting server-everything over stdio")
    parser.add_argument("--target", required=True, help="label for the output lines")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per check")
    return parser.parse_args(argv)


async def main(argv: list[str]) -> int:
    args = parse_args(argv)
    results = [await run_one(args, label) for label in CHECKS]
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
