"""Callbacks and verdicts for the Python client check; the table is checks.json.

A `Recorder` answers the legacy server's questions (through the client's
callbacks) with values derived from a per-check random token, remembers each
question with its kind and the round it was asked in, and counts the call's
POSTs (the first call plus one retry per `input_required` round). A `Check`
(one entry of checks.json, shared with the TypeScript check) names a call, how
the callbacks answer, and what must then be true: the exact rounds and, per
round and kind, the exact questions (each matched by a fragment of the legacy
server's own question), the exact number of progress notes, a result that is
not an error, and fragments of the result only the token-bearing answers can
produce. A check may also name capabilities to declare without being asked
(`declare`), files and repositories to create first under the server's scratch
folder `{dir}` (`setup`), tool calls to make first with the same client
(`before`: each must succeed and ask nothing), and fragments the result must
not contain (`absent`). A 2026-07-28 client sets no log level unless the check
names one (`log`), and must then receive exactly the log messages `logs` names
(each matched by a fragment of its own); without `log` it must receive none.
`modern` checks need the gateway's 2026-07-28 translation (a legacy client has
no per-request log level, and gets the upstream's -32042 as an error), so only
a 2026-07-28 client runs them.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import subprocess
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Awaitable, Callable, NamedTuple

from mcp import types

MAX_DETAIL = 200
KINDS = ("elicit", "sample", "roots")
CALL_METHODS = ("tools/call", "prompts/get")
# The key under which every elicitation answer carries the check's token.
ANSWER_META = "dev.mrtr-interop/answer"


# === Recorder ===


class Question(NamedTuple):
    kind: str  # elicit | sample | roots
    round: int  # call POSTs sent when it was asked: 1 = the first call's round
    text: str  # the request as JSON: {"method": ..., "params": ...}


@dataclass
class Recorder:
    """Answers the callbacks with token-derived values and records every question."""

    token: str = field(default_factory=lambda: secrets.token_hex(4))
    answers: dict[str, str] = field(default_factory=dict)  # kind -> action, e.g. {"elicit": "decline"}
    questions: list[Question] = field(default_factory=list)
    call_posts: int = 0
    progress: int = 0
    logs: list[str] = field(default_factory=list)  # each log message's params, as JSON
    answer_sent: bool = False  # some POST carried answer_token (the client sent the answer's _meta)

    @property
    def answer_token(self) -> str:
        return f"answer-{self.token}"

    @property
    def counts(self) -> dict[str, int]:
        return {kind: sum(q.kind == kind for q in self.questions) for kind in KINDS}

    def _note(self, kind: str, method: str, params: Any) -> None:
        dumped = params.model_dump(mode="json", by_alias=True, exclude_none=True) if params is not None else None
        self.questions.append(Question(kind, self.call_posts, json.dumps({"method": method, "params": dumped})))

    def note_request(self, body: bytes | str) -> None:
        """Count a POST that carries the call (the first one or a retry)."""
        text = body.decode(errors="replace") if isinstance(body, bytes) else str(body)
        if self.answer_token in text:
            self.answer_sent = True
        try:
            message = json.loads(body)
        except (TypeError, ValueError):
            return
        for item in message if isinstance(message, list) else [message]:
            if isinstance(item, dict) and item.get("method") in CALL_METHODS:
                self.call_posts += 1

    async def on_http_request(self, request: Any) -> None:
        """httpx request hook: every POST the client sends passes through here."""
        if request.method == "POST":
            self.note_request(request.content)

    def answer_meta(self) -> dict[str, str]:
        return {ANSWER_META: self.answer_token}

    async def on_elicit(self, _ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self._note("elicit", "elicitation/create", params)
        action = self.answers.get("elicit", "accept")
        answer: dict[str, Any] = {"action": action, "_meta": self.answer_meta()}
        if action == "accept" and getattr(params, "mode", "form") != "url":
            answer["content"] = self.form_answer(params.requested_schema)
        return types.ElicitResult.model_validate(answer)

    async def on_sample(self, _ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        self._note("sample", "sampling/createMessage", params)
        text = types.TextContent(type="text", text=f"sampled-{self.token}")
        return types.CreateMessageResult(role="assistant", content=text, model="interop-model", stop_reason="endTurn")

    async def on_roots(self, _ctx: Any) -> types.ListRootsResult:
        self._note("roots", "roots/list", None)
        root = types.Root(uri=f"file:///interop/{self.token}", name=f"root-{self.token}")
        return types.ListRootsResult(roots=[root])

    async def on_progress(self, _progress: float, _total: float | None, _message: str | None) -> None:
        self.progress += 1

    async def on_log(self, params: types.LoggingMessageNotificationParams) -> None:
        self.logs.append(json.dumps(params.model_dump(mode="json", by_alias=True, exclude_none=True)))

    def form_answer(self, schema: dict[str, Any]) -> dict[str, Any]:
        """Fill the required fields (all fields if none is required) from the token."""
        properties: dict[str, Any] = schema.get("properties", {})
        wanted = schema.get("required") or list(properties)
        return {name: self._field_value(name, properties.get(name, {})) for name in wanted}

    def _field_value(self, name: str, spec: dict[str, Any]) -> Any:
        kind = spec.get("type", "string")
        if kind == "boolean":
            return True
        if kind in ("integer", "number"):
            return spec.get("default", 42)
        if "enum" in spec:
            return spec["enum"][0]
        return f"{name}-{self.token}"


# === Check ===


def match_questions(wanted: dict[str, list[str]], asked: list[Question], where: str) -> str | None:
    """Per kind: exactly as many questions as fragments, each fragment in its own question."""
    for kind in KINDS:
        texts = [q.text for q in asked if q.kind == kind]
        fragments = wanted.get(kind, [])
        if len(texts) != len(fragments):
            return f"{where}: {len(texts)} {kind} question(s), wanted {len(fragments)}"
        for fragment in fragments:
            hit = next((t for t in texts if fragment in t), None)
            if hit is None:
                return f"{where}: no {kind} question containing {fragment!r}"
            texts.remove(hit)
    return None


def match_logs(fragments: list[str], logs: list[str], asked: bool) -> str | None:
    """Without a log level, no log message at all; with one, exactly as many as fragments,
    each fragment in its own message."""
    if not asked:
        return f"{len(logs)} log message(s) without a log level, first: {clip(logs[0])}" if logs else None
    if len(logs) != len(fragments):
        return f"{len(logs)} log message(s), wanted {len(fragments)}: {clip(' | '.join(logs))}"
    left = list(logs)
    for fragment in fragments:
        hit = next((text for text in left if fragment in text), None)
        if hit is None:
            return f"no log message containing {fragment!r}: {clip(' | '.join(logs))}"
        left.remove(hit)
    return None


@dataclass(frozen=True)
class Check:
    """One call, how the callbacks answer it, and the facts that must hold after it."""

    name: str
    args: dict[str, Any] = field(default_factory=dict)
    kind: str = "tool"
    variant: str = ""
    answer: dict[str, str] = field(default_factory=dict)
    rounds: tuple[dict[str, list[str]], ...] | list[dict[str, list[str]]] = ()
    progress: int = 0
    expect: tuple[str, ...] | list[str] = ()
    absent: tuple[str, ...] | list[str] = ()
    declare: tuple[str, ...] | list[str] = ()
    setup: tuple[dict[str, str], ...] | list[dict[str, str]] = ()
    before: tuple[dict[str, Any], ...] | list[dict[str, Any]] = ()
    modern: bool = False
    log: str = ""
    logs: tuple[str, ...] | list[str] = ()

    @property
    def label(self) -> str:
        return f"{self.name}#{self.variant}" if self.variant else self.name

    @property
    def needs(self) -> set[str]:
        """The kinds of question this check expects, and those it declares without being
        asked: the only capabilities its client declares."""
        return {kind for wanted in self.rounds for kind in wanted} | set(self.declare)

    def bind(self, token: str, scratch: str = "") -> Check:
        """Substitute this run's token (and the server's scratch folder) into the
        arguments, setup steps and expectations."""
        folder = json.dumps(scratch)[1:-1]

        def sub(value: Any) -> Any:
            text = json.dumps(value).replace("{token}", token)
            if "{dir}" in text and not scratch:
                raise ValueError(f"check {self.label} needs the server's scratch folder (--dir)")
            return json.loads(text.replace("{dir}", folder))

        return replace(
            self,
            args=sub(self.args),
            rounds=tuple(sub(list(self.rounds))),
            expect=tuple(sub(list(self.expect))),
            absent=tuple(sub(list(self.absent))),
            setup=tuple(sub(list(self.setup))),
            before=tuple(sub(list(self.before))),
            logs=tuple(sub(list(self.logs))),
        )

    def prepare(self) -> None:
        """Run the setup steps: write a file, or `git init` a repository."""
        for step in self.setup:
            if "write" in step:
                path = Path(step["write"])
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(step["text"])
            elif "git_init" in step:
                subprocess.run(["git", "init", "--quiet", step["git_init"]], check=True, timeout=30, capture_output=True)
            else:
                raise ValueError(f"unknown setup step {step!r}")

    def verify(self, recorder: Recorder, text: str, is_error: bool, rounds_observable: bool) -> str | None:
        """The first broken expectation, or None.

        rounds_observable: the client speaks 2026-07-28, so each round is a
        retry POST; otherwise (a legacy session) the server asks inside the one
        call, and only the questions per kind are compared.
        """
        if is_error:
            return f"result has isError: {clip(text)}"
        if rounds_observable:
            got = recorder.call_posts - 1
            if got != len(self.rounds):
                return f"{got} input_required round(s), wanted {len(self.rounds)}"
            for number, wanted in enumerate(self.rounds, start=1):
                asked = [q for q in recorder.questions if q.round == number]
                problem = match_questions(wanted, asked, f"round {number}")
                if problem:
                    return problem
            stray = [q for q in recorder.questions if not 1 <= q.round <= len(self.rounds)]
            if stray:
                return f"{len(stray)} question(s) outside any round, first: {clip(stray[0].text)}"
            problem = match_logs(list(self.logs), recorder.logs, bool(self.log))
            if problem:
                return problem
        else:
            if recorder.call_posts != 1:
                return f"the call was sent {recorder.call_posts}x, wanted once"
            merged: dict[str, list[str]] = {}
            for wanted in self.rounds:
                for kind, fragments in wanted.items():
                    merged.setdefault(kind, []).extend(fragments)
            problem = match_questions(merged, recorder.questions, "the call")
            if problem:
                return problem
        if recorder.progress != self.progress:
            return f"{recorder.progress} progress note(s), wanted {self.progress}"
        # The answer token is expected back only if the client put it on the wire.
        for fragment in self.expect:
            if recorder.answer_token in fragment and not recorder.answer_sent:
                continue
            if fragment not in text:
                return f"result lacks {fragment!r}: {clip(text)}"
        for fragment in self.absent:
            if fragment in text:
                return f"result contains {fragment!r}: {clip(text)}"
        return None

    def success_detail(self, recorder: Recorder) -> str:
        rounds = max(recorder.call_posts - 1, 0)
        counts = {**recorder.counts, "progress": recorder.progress, "logs": len(recorder.logs)}
        used = ",".join(f"{k}={v}" for k, v in counts.items() if v)
        token = ",answer-token" if recorder.answer_sent else ""
        return f"ok (rounds={rounds}{',' + used if used else ''}{token})"


CHECKS_FILE = Path(__file__).with_name("checks.json")


def load_table(path: Path = CHECKS_FILE) -> tuple[dict[str, tuple[Check, ...]], dict[str, dict[str, str]]]:
    """The check table and the expected refusals, shared with the TypeScript client check."""
    table = json.loads(path.read_text())
    checks = {
        server: tuple(Check(**entry) for entry in entries) for server, entries in table.items() if not server.startswith("_")
    }
    return checks, table["_refusals"]


CHECKS, REFUSALS = load_table()


def select(server: str, only: str, modern: bool = True) -> list[Check]:
    """The server's checks, filtered by a comma-separated list of labels or tool names;
    without `modern` (a legacy session), the checks only a 2026-07-28 client can run are left
    out."""
    names = {n.strip() for n in only.split(",") if n.strip()}
    picked = [c for c in CHECKS[server] if not names or c.label in names or c.name in names]
    return [c for c in picked if modern or not c.modern]


def clip(text: str) -> str:
    """One line, bounded, for the output."""
    flat = " ".join(text.split())
    return flat if len(flat) <= MAX_DETAIL else flat[:MAX_DETAIL] + "..."


def innermost(error: BaseException) -> BaseException:
    """The real error inside task-group wrappers."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return error


def describe_failure(error: BaseException) -> str:
    """The innermost message of an error (task groups wrap the real one)."""
    error = innermost(error)
    return clip(f"{type(error).__name__}: {error}")


def refusal_problem(error: BaseException, wanted: str, error_type: type[BaseException]) -> str | None:
    """None if the error is the expected refusal (its type, and its message holds `wanted`)."""
    inner = innermost(error)
    message = getattr(inner, "message", None) or str(inner)
    if isinstance(inner, error_type) and wanted in message:
        return None
    return f"refused, but not with {error_type.__name__} {wanted!r}: {describe_failure(error)}"


async def run_and_report(
    client: str, target: str, check: Check, timeout: float, run: Callable[[], Awaitable[tuple[bool, str]]]
) -> bool:
    """Run one check under a deadline of `timeout` seconds and print its CHECK line; every
    failure (a timeout, any exception) becomes a FAIL line naming it."""
    try:
        ok, detail = await asyncio.wait_for(run(), timeout)
    except TimeoutError:
        ok, detail = False, f"no answer within {timeout:.0f}s"
    except Exception as error:  # noqa: BLE001 - every failure becomes a FAIL line
        ok, detail = False, describe_failure(error)
    print(f"CHECK {'PASS' if ok else 'FAIL'} {client} {target} {check.label} {detail}", flush=True)
    return ok
