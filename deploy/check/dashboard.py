"""Checks that every `mrtr_gateway_*` series a Grafana dashboard or a Prometheus rule file queries
is one the gateway registers (read from its source), with a histogram's `_bucket`, `_sum` and
`_count` series, and that every label a query selects or groups by belongs to the metrics it
names (or is a scrape label). A renamed metric or label then fails here, not on a blank panel.

    python dashboard.py METRICS_RS SOURCE_DIR FILE...
"""

import json
import re
import sys
from pathlib import Path

import yaml

PREFIX = "mrtr_gateway_"
SCRAPE_LABELS = {"job", "instance", "pod", "namespace", "container", "service", "endpoint", "le"}
REGISTERED = re.compile(r'(counter|histogram|gauge)\(\s*&\w+,\s*"(\w+)",\s*"[^"]*"(?:,\s*&\[([^\]]*)\])?')
POOL = re.compile(r'(IntGauge::new|Opts::new)\(\s*"(\w+)",\s*"[^"]*",?\s*\)(?:,\s*&\[([^\]]*)\])?')
SERIES = re.compile(r"\b(" + PREFIX + r"\w+)")
LABELS_USED = re.compile(r"(?:by|without|on|ignoring)\s*\(([^)]*)\)|\{([^}]*)\}")


def registered(metrics_rs: Path, sources_dir: Path) -> dict[str, set[str]]:
    """Series name -> label names, from the registration calls."""
    found: dict[str, set[str]] = {}
    sources = [metrics_rs.read_text()] + [p.read_text() for p in sources_dir.rglob("*.rs")]
    for text in sources:
        for kind, name, labels in REGISTERED.findall(text) + POOL.findall(text):
            names = set(re.findall(r'"(\w+)"', labels or ""))
            full = PREFIX + name
            if kind == "histogram":
                for suffix in ("_bucket", "_sum", "_count"):
                    found[full + suffix] = names | ({"le"} if suffix == "_bucket" else set())
            else:
                found[full] = names
    return found


def queries(path: Path) -> list[str]:
    if path.suffix == ".json":
        out = []

        def walk(node):
            if isinstance(node, dict):
                for k, v in node.items():
                    if k in ("expr", "definition") and isinstance(v, str):
                        out.append(v)
                    elif isinstance(v, dict) and k == "query" and isinstance(v.get("query"), str):
                        out.append(v["query"])
                    else:
                        walk(v)
            elif isinstance(node, list):
                for v in node:
                    walk(v)

        walk(json.loads(path.read_text()))
        return out
    doc = yaml.safe_load(path.read_text())
    return [r["expr"] for g in doc["groups"] for r in g["rules"]]


def main() -> None:
    known = registered(Path(sys.argv[1]), Path(sys.argv[2]))
    if len(known) < 10:
        raise SystemExit(f"found only {len(known)} registered series: the registration pattern changed")
    errors = []
    for name in sys.argv[3:]:
        path = Path(name)
        exprs = queries(path)
        for expr in exprs:
            names = set(SERIES.findall(expr))
            for series in names - known.keys():
                errors.append(f"{path.name}: unknown series {series} in: {expr.strip()}")
            allowed = SCRAPE_LABELS.union(*(known.get(s, set()) for s in names))
            for group, selector in LABELS_USED.findall(expr):
                used = re.findall(r"(\w+)\s*(?:=~|!~|!=|=)", selector) if selector else re.findall(r"\w+", group)
                for label in set(used) - allowed:
                    errors.append(f"{path.name}: label {label} is not a label of {sorted(names)} in: {expr.strip()}")
        print(f"  ok: {path.name}: {len(exprs)} queries" if not errors else f"  checked {path.name}")
    for e in errors:
        print(f"  FAILED: {e}", file=sys.stderr)
    if errors:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
