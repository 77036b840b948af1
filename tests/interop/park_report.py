"""Verdicts on a pair of park-mode (or auto-mode) gateways behind the round-robin proxy.

After the real clients have run their checks through the proxy (`park.sh`), this reads what
the run left behind and prints one `PASS|FAIL <line>` per verdict, for run.sh to count:

- `proxy <pair> cross-replica-retries`: every retry carrying a requestState reached the other
  replica than the one whose answer carried it, and there were as many retries as the clients
  reported rounds (from their PASS lines in the results file);
- `report <pair> served`: how each replica's migration report (`GET /admin/tools`) says the
  retries were served. For a tool that parks (every tool in park mode; the side-effecting ones
  in auto mode), as many retries as its rounds went to its parked call (`park` or `forwarded`)
  and none was replayed; for any other tool, every retry was replayed and none parked. The
  report counts tools only: prompts (`kind: prompt` in checks.json) are left to the metrics;
- `metrics <pair> park-outcomes`: `mrtr_gateway_park_outcomes_total` over both replicas: every
  retry of a parked call resumed it (`resumed` equals the parking tools' rounds), at least one
  was forwarded to its owner across replicas, and none fell back to a replay or timed out.

Usage: park_report.py --pair NAME --results FILE --target py:T --target ts:T --log PROXY_LOG
           --admin PORT --admin PORT [--parks all | --parks tool,tool]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import urllib.request
from pathlib import Path

TIMEOUT = 10
CHECKS_FILE = Path(__file__).with_name("checks.json")
ROUNDS = re.compile(r"\brounds=(\d+)")
OUTCOME = re.compile(r'^mrtr_gateway_park_outcomes_total\{outcome="([a-z_]+)"\} (\d+(?:\.\d+)?)$')


def prompts(table: dict) -> set[str]:
    """The names of checks.json's prompt checks (the migration report counts tools only)."""
    rows = [row for rows in table.values() if isinstance(rows, list) for row in rows]
    return {row["name"] for row in rows if row.get("kind") == "prompt"}


def client_rounds(results: list[str], targets: list[str]) -> dict[str, int]:
    """Rounds per tool, summed over the PASS lines of `targets` (`py:T` or `ts:T`)."""
    rounds: dict[str, int] = {}
    for line in results:
        parts = line.split(maxsplit=4)
        if len(parts) < 4 or parts[0] != "PASS" or f"{parts[1]}:{parts[2]}" not in targets:
            continue
        match = ROUNDS.search(line)
        tool = parts[3].split("#", 1)[0]
        rounds[tool] = rounds.get(tool, 0) + (int(match.group(1)) if match else 0)
    return rounds


def crossing(log: list[str]) -> tuple[int, int]:
    """(retries, retries that crossed to the other replica) in the proxy's log."""
    retries = [line for line in log if line.startswith("rr-retry ")]
    crossed = [line for line in retries if re.search(r"sealed-by=(0 sent-to=1|1 sent-to=0)$", line)]
    return len(retries), len(crossed)


def served(reports: list[dict]) -> dict[str, dict[str, int]]:
    """Per tool, the runs each way of serving them, summed over the replicas' reports."""
    total: dict[str, dict[str, int]] = {}
    for report in reports:
        for entry in report.get("tools", []):
            counts = total.setdefault(entry["tool"], {})
            for way, n in entry.get("served", {}).items():
                counts[way] = counts.get(way, 0) + n
    return total


def outcomes(metrics: list[str]) -> dict[str, float]:
    """`mrtr_gateway_park_outcomes_total` by outcome, summed over the replicas' metrics."""
    total: dict[str, float] = {}
    for text in metrics:
        for line in text.splitlines():
            match = OUTCOME.match(line.strip())
            if match:
                total[match.group(1)] = total.get(match.group(1), 0.0) + float(match.group(2))
    return total


def served_problems(rounds: dict[str, int], ways: dict[str, dict[str, int]], parks) -> list[str]:
    """What the reports say against the clients' rounds; empty when every tool was served right."""
    problems = []
    for tool, n in sorted(rounds.items()):
        got = ways.get(tool, {})
        parked = got.get("park", 0) + got.get("forwarded", 0)
        replayed = got.get("replay", 0) + got.get("fallback", 0)
        if parks(tool) and (parked != n or replayed != 0):
            problems.append(f"{tool}: {n} round(s) but park+forwarded={parked} replay+fallback={replayed}")
        if not parks(tool) and (replayed != n or parked != 0):
            problems.append(f"{tool}: {n} round(s) but replay+fallback={replayed} park+forwarded={parked}")
    return problems


def outcome_problems(parking_rounds: int, seen: dict[str, float]) -> list[str]:
    problems = []
    if seen.get("resumed", 0) != parking_rounds:
        problems.append(f"resumed={seen.get('resumed', 0):g}, wanted {parking_rounds}")
    if parking_rounds and seen.get("forwarded", 0) < 1:
        problems.append("no retry was forwarded to its owner")
    for bad in ("fallback", "timed_out", "full"):
        if seen.get(bad, 0):
            problems.append(f"{bad}={seen[bad]:g}")
    return problems


def fetch(port: str, path: str) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=TIMEOUT) as answer:
        return answer.read().decode()


def verdict(ok: bool, line: str) -> str:
    return f"{'PASS' if ok else 'FAIL'} {line}"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pair", required=True)
    parser.add_argument("--results", required=True)
    parser.add_argument("--target", action="append", required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--admin", action="append", required=True)
    parser.add_argument("--parks", default="all")
    args = parser.parse_args(argv)
    with open(args.results) as f:
        rounds = client_rounds(f.read().splitlines(), args.target)
    with open(args.log) as f:
        retries, crossed = crossing(f.read().splitlines())
    total = sum(rounds.values())
    detail = f"retries={retries} crossed={crossed} client-rounds={total}"
    print(verdict(total > 0 and crossed == retries == total, f"proxy {args.pair} cross-replica-retries: {detail}"))
    parking = set(args.parks.split(","))
    parks = (lambda _tool: True) if args.parks == "all" else (lambda tool: tool in parking)
    try:
        ways = served([json.loads(fetch(port, "/admin/tools")) for port in args.admin])
        seen = outcomes([fetch(port, "/metrics") for port in args.admin])
    except (OSError, ValueError) as error:
        print(f"FAIL report {args.pair} served: the replicas' reports could not be read ({error})")
        return 1
    with open(CHECKS_FILE) as f:
        skipped = prompts(json.load(f))
    tools = {name: n for name, n in rounds.items() if name not in skipped}
    problems = served_problems(tools, ways, parks)
    detail = "; ".join(problems) or f"{len(tools)} tool(s), {sum(tools.values())} retries as configured"
    print(verdict(not problems, f"report {args.pair} served: {detail}"))
    parking_rounds = sum(n for tool, n in rounds.items() if parks(tool))
    problems = outcome_problems(parking_rounds, seen)
    shown = " ".join(f"{k}={v:g}" for k, v in sorted(seen.items()))
    print(verdict(not problems, f"metrics {args.pair} park-outcomes: {'; '.join(problems) or shown}"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
