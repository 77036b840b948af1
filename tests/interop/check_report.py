"""The calls and the expected JSON reports of `mrtr-gateway check` against the interop suite's
real legacy servers (check_report.sh runs the checks).

    check_report.py calls SERVER SCRATCH          prints the calls file for SERVER
    check_report.py verify SERVER REPORT STATUS   compares a report and its exit status

`verify` prints one line per field: `CHECK PASS|FAIL check-command <server> <field> <detail>`.
Every count is exact: the numbers were read off each server's own listing (the legacy Python
SDK's `list_tools`, `list_prompts`, `list_resources`, `list_resource_templates` against the
pinned versions), not off the check, so a check that miscounts fails here.
"""

import json
import sys

NOT_OFFERED = "not offered through the gateway"
# The gateway serves legacy task tools as tasks of the 2026-07-28 tasks extension, which it
# declares; each tool's `execution` is kept, since it means what it says.
EXTENSIONS = ("capability", "extensions", "added", "offered through the gateway only", False)


def counts(tools, prompts=None, resources=None, templates=None):
    return {"tools": tools, "prompts": prompts, "resources": resources, "resource_templates": templates}


def call(tool, direct_questions, rounds, verdict, outcome="complete", tasks=None):
    """A call that completes both ways, asking as many questions directly as its rounds through
    the gateway hold, the same in both runs; `tasks` are the gateway's counts of the tool's tasks
    (both runs), for a tool it serves as a task."""
    as_task = tasks is not None
    return {"tool": tool, "direct": (outcome, direct_questions), "gateway": [(outcome, rounds, as_task)] * 2,
            "stable": True, "verdict": verdict, "park_advised": False, "tasks": tasks}


def tasks(created, completed, input_rounds, failed=0, cancelled=0):
    return {"created": created, "completed": completed, "failed": failed, "cancelled": cancelled,
            "input_rounds": input_rounds}


EXPECTED = {
    "everything": {
        "status": 0, "ok": True, "breaks": 0,
        "server": "mcp-servers/everything",
        "direct": counts(17, 4, 7, 2), "gateway": counts(17, 4, 7, 2),
        # Its 2025-11-25 `tasks` capability becomes the extension.
        "differences": sorted([EXTENSIONS,
                               ("capability", "logging", "missing", NOT_OFFERED, False),
                               ("capability", "tasks", "missing", NOT_OFFERED, False)]),
        "needs_tasks": [{"tool": "simulate-research-query", "task_support": "required", "through_gateway": True}],
        "calls": [
            call("echo", 0, 0, "plain"),
            call("get-sum", 0, 0, "plain"),
            call("trigger-elicitation-request", 1, 1, "in-band friendly"),
            call("trigger-sampling-request", 1, 1, "in-band friendly"),
            call("get-roots-list", 1, 1, "in-band friendly"),
            # Its one question inside the task, directly on the legacy task's tasks/result, and
            # through the gateway a task of the extension with one input round per run.
            call("simulate-research-query", 1, 1, "task", tasks=tasks(2, 2, 2)),
        ],
    },
    "filesystem": {
        "status": 0, "ok": True, "breaks": 0,
        "server": "secure-filesystem-server",
        "direct": counts(14), "gateway": counts(14),
        "differences": [EXTENSIONS],
        "needs_tasks": [],
        "calls": [
            call("list_allowed_directories", 0, 0, "plain"),
            call("list_directory", 0, 0, "plain"),
            call("read_text_file", 0, 0, "plain"),
        ],
    },
    "git": {
        "status": 0, "ok": True, "breaks": 0,
        "server": "mcp-git",
        "direct": counts(12), "gateway": counts(12),
        "differences": [EXTENSIONS],
        "needs_tasks": [],
        "calls": [call("git_status", 0, 0, "plain"), call("git_branch", 0, 0, "plain")],
    },
    "fixture": {
        "status": 0, "ok": True, "breaks": 0,
        "server": "mrtr-legacy-fixture",
        "direct": counts(23, 5, 3, 1), "gateway": counts(23, 5, 3, 1),
        "differences": sorted([EXTENSIONS, ("capability", "logging", "missing", NOT_OFFERED, False)]),
        "needs_tasks": [],
        "calls": [
            call("test_simple_text", 0, 0, "plain"),
            call("test_elicitation", 1, 1, "in-band friendly"),
            call("test_sampling", 1, 1, "in-band friendly"),
            call("test_input_required_result_multi_round", 2, 2, "in-band friendly"),
            # Three questions at once: one round (run.sh sets mrtr.gather_expect for this tool).
            call("test_input_required_result_multiple_inputs", 3, 1, "in-band friendly"),
            call("test_input_required_result_list_roots", 1, 1, "in-band friendly"),
        ],
    },
}


def calls_file(server, scratch):
    """The calls each server is tried with (paths inside the check's scratch folder)."""
    arguments = {
        "everything": {"echo": {"message": "hello"}, "get-sum": {"a": 2, "b": 3},
                       "trigger-sampling-request": {"prompt": "Say hi", "maxTokens": 20},
                       "simulate-research-query": {"topic": "python", "ambiguous": True}},
        "filesystem": {"list_directory": {"path": f"{scratch}/fs"},
                       "read_text_file": {"path": f"{scratch}/fs/a.txt"}},
        "git": {"git_status": {"repo_path": f"{scratch}/git"},
                "git_branch": {"repo_path": f"{scratch}/git", "branch_type": "local"}},
        "fixture": {"test_elicitation": {"message": "Who are you?"}, "test_sampling": {"prompt": "Say hi"}},
    }[server]
    tried = [c["tool"] for c in EXPECTED[server]["calls"]]
    return {"calls": [{"tool": t, "arguments": arguments.get(t, {})} for t in tried]}


def verify(server, report, status):
    want = EXPECTED[server]
    results = []

    def check(field, got, expected):
        ok = got == expected
        detail = f"{got!r}" if ok else f"got {got!r}, wanted {expected!r}"
        results.append(("PASS" if ok else "FAIL", field, detail[:600]))

    check("exit-status", status, want["status"])
    check("version", report.get("version"), 1)
    check("transport", report.get("transport"), "stdio")
    check("ok", report.get("ok"), want["ok"])
    check("breaks", report.get("breaks"), want["breaks"])
    for side, version in (("direct", "2025-11-25"), ("gateway", "2026-07-28")):
        got = report.get(side, {})
        check(f"{side}.protocol_version", got.get("protocol_version"), version)
        check(f"{side}.server", (got.get("server_info") or {}).get("name"), want["server"])
        check(f"{side}.counts", got.get("counts"), want[side])
        check(f"{side}.errors", got.get("errors"), [])
    differences = sorted((d["kind"], d["name"], d["change"], d["detail"], d["breaks"])
                         for d in report.get("differences", []))
    check("differences", differences, want["differences"])
    check("needs_tasks", report.get("needs_tasks"), want["needs_tasks"])
    for empty in ("repairs", "refusals", "sensitive", "invalid_schemas"):
        check(empty, report.get(empty), [])
    calls = report.get("calls", [])
    check("calls", [c["tool"] for c in calls], [c["tool"] for c in want["calls"]])
    for got, expected in zip(calls, want["calls"]):
        summary = {
            "tool": got["tool"],
            "direct": (got["direct"]["outcome"], len(got["direct"]["questions"])),
            "gateway": [(run["outcome"], len(run["rounds"]), run.get("task")) for run in got["gateway"]],
            "stable": got["stable"],
            "verdict": got["verdict"],
            "park_advised": got["park_advised"],
            "tasks": got.get("tasks"),
        }
        check(f"call.{got['tool']}", summary, expected)
    for verdict, field, detail in results:
        print(f"CHECK {verdict} check-command {server} {field} {detail}")
    return all(v == "PASS" for v, _, _ in results)


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "calls":
        print(json.dumps(calls_file(sys.argv[2], sys.argv[3])))
        return 0
    if len(sys.argv) == 5 and sys.argv[1] == "verify":
        server, path, status = sys.argv[2], sys.argv[3], int(sys.argv[4])
        try:
            with open(path) as f:
                report = json.load(f)
        except (OSError, ValueError) as e:
            print(f"CHECK FAIL check-command {server} report no JSON report ({e}); exit status {status}")
            return 1
        return 0 if verify(server, report, status) else 1
    print(__doc__, file=sys.stderr)
    return 64


if __name__ == "__main__":
    sys.exit(main())
