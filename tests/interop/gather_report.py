"""What the default gathering did, read from a gateway's JSON debug log (gathering.sh).

Each round the gateway gathers logs `first unanswered question: gathering`, then `question
gathered` with the questions open so far (`open`) and the gap since the previous one
(`since_last_us`). Grouped by request id, that shows how many questions each round carried and
how far apart they came. Prints one line for run.sh to count:
`PASS|FAIL gathering <label> rounds: ...`: PASS when every round of `--tool` carried
`--expect` questions, with the gaps observed (largest and median) beside the idle gap the
round waited for each.

Usage: gather_report.py --label NAME --log GATEWAY_LOG --tool NAME --expect N --idle-ms MS
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

START = "first unanswered question: gathering"
GATHERED = "question gathered"


def rounds(lines: list[str], tool: str) -> tuple[list[int], list[int]]:
    """(questions per round of `tool`, in order; every gap between questions, in µs)."""
    per_request: dict[str, int] = {}
    order: list[str] = []
    gaps: list[int] = []
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        message = entry.get("fields", {}).get("message")
        span = entry.get("span", {})
        if message not in (START, GATHERED) or f'"mcp-name": "{tool}"' not in span.get("headers", ""):
            continue
        request = span.get("request_id", "")
        if message == START:
            per_request[request] = 1
            order.append(request)
        elif request in per_request:
            per_request[request] = max(per_request[request], int(entry["fields"].get("open", 0)))
            gaps.append(int(entry["fields"].get("since_last_us", 0)))
    return [per_request[r] for r in order], gaps


def summary(counts: list[int], gaps: list[int], expect: int, idle_ms: int) -> tuple[bool, str]:
    ok = bool(counts) and all(n == expect for n in counts)
    spread = f"largest {max(gaps)} µs, median {int(statistics.median(gaps))} µs" if gaps else "none"
    return ok, (
        f"{len(counts)} round(s) gathered, questions per round {counts}, wanted {expect} each; "
        f"gaps between questions: {spread} (the idle gap is {idle_ms} ms)"
    )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--label", required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--tool", required=True)
    parser.add_argument("--expect", type=int, required=True)
    parser.add_argument("--idle-ms", type=int, required=True)
    args = parser.parse_args(argv)
    with open(args.log, errors="replace") as f:
        counts, gaps = rounds(f.read().splitlines(), args.tool)
    ok, detail = summary(counts, gaps, args.expect, args.idle_ms)
    print(f"{'PASS' if ok else 'FAIL'} gathering {args.label} rounds: {detail}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
