"""Callbacks and verdicts for the Python client check; the table is checks.json.

A `Recorder` answers the legacy server's questions (through the client's
callbacks) with values derived from a per-check random token and remembers each
question. A `Check` (one entry of checks.json, shared with the TypeScript check)
names a call and what must then be true: how many questions of each kind
reached the callbacks, a fragment of the legacy server's question, and
fragments of the result that only the token-bearing answers can produce.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from mcp import types

MAX_DETAIL = 200


# === Recorder ===


@dataclass
class Recorder:
    """Answers the callbacks with token-derived values and records every question."""

    token: str = field(default_factory=lambda: secrets.token_hex(4))
    questions: list[str] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=lambda: {"elicit": 0, "sample": 0, "roots": 0, "progress": 0})

    def _note(self, kind: str, params: Any) -> None:
        self.counts[kind] += 1
        if params is not None:
            self.questions.append(json.dumps(params.model_dump(mode="json", by_alias=True)))

    async def on_elicit(self, _ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self._note("elicit", params)
        if getattr(params, "mode", "form") == "url":
            return types.ElicitResult(action="accept")
        return types.ElicitResult(action="accept", content=self.form_answer(params.requested_schema))

    async def on_sample(self, _ctx: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        self._note("sample", params)
        text = types.TextContent(type="text", text=f"sampled-{self.token}")
        return types.CreateMessageResult(role="assistant", content=text, model="interop-model", stop_reason="endTurn")

    async def on_roots(self, _ctx: Any) -> types.ListRootsResult:
        self._note("roots", None)
        root = types.Root(uri=f"file:///interop/{self.token}", name=f"root-{self.token}")
        return types.ListRootsResult(roots=[root])

    async def on_progress(self, _progress: float, _total: float | None, _message: str | None) -> None:
        self.counts["progress"] += 1

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


@dataclass(frozen=True)
class Check:
    """One call and the facts that must hold after it."""

    name: str
    args: dict[str, Any] = field(default_factory=dict)
    kind: str = "tool"
    calls: dict[str, int] = field(default_factory=dict)
    question: str = ""
    expect: tuple[str, ...] | list[str] = ()

    def bind(self, token: str) -> Check:
        """Substitute this run's token into the arguments and expectations."""
        args = json.loads(json.dumps(self.args).replace("{token}", token))
        sub = lambda text: text.replace("{token}", token)  # noqa: E731
        return replace(self, args=args, question=sub(self.question), expect=tuple(map(sub, self.expect)))

    def verify(self, recorder: Recorder, text: str) -> str | None:
        """The first broken expectation, or None."""
        for kind, minimum in self.calls.items():
            if recorder.counts[kind] < minimum:
                return f"{kind} callback ran {recorder.counts[kind]}x, wanted >= {minimum}"
        if self.question and not any(self.question in q for q in recorder.questions):
            return f"no question containing {self.question!r} reached the callbacks"
        for fragment in self.expect:
            if fragment not in text:
                return f"result lacks {fragment!r}: {clip(text)}"
        return None

    def success_detail(self, recorder: Recorder) -> str:
        used = ",".join(f"{k}={v}" for k, v in recorder.counts.items() if v)
        return f"ok ({used or 'no callbacks'})"


CHECKS_FILE = Path(__file__).with_name("checks.json")


def load_checks(path: Path = CHECKS_FILE) -> dict[str, tuple[Check, ...]]:
    """The check table, shared with the TypeScript client check."""
    table = json.loads(path.read_text())
    return {
        server: tuple(Check(**{**entry, "calls": entry.get("calls", {})}) for entry in entries)
        for server, entries in table.items()
        if not server.startswith("_")
    }


CHECKS = load_checks()


def select(server: str, only: str) -> list[Check]:
    """The server's checks, filtered by a comma-separated list of names."""
    names = {n.strip() for n in only.split(",") if n.strip()}
    return [c for c in CHECKS[server] if not names or c.name in names]


def clip(text: str) -> str:
    """One line, bounded, for the output."""
    flat = " ".join(text.split())
    return flat if len(flat) <= MAX_DETAIL else flat[:MAX_DETAIL] + "..."


def describe_failure(error: BaseException) -> str:
    """The innermost message of an error (task groups wrap the real one)."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return clip(f"{type(error).__name__}: {error}")
