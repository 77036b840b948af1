"""Checks each rendered ServiceMonitor (a Prometheus Operator custom resource, for which the
Kubernetes API schemas have no entry) against the Service it must select: its selector matches
the Service's labels, each endpoint names one of the Service's ports, and its fields have the
types the CRD declares.

    python servicemonitor.py MANIFEST...
"""

import re
import sys
from pathlib import Path

import yaml

DURATION = re.compile(r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$")
ENDPOINT_KEYS = {"port", "path", "interval", "scrapeTimeout", "scheme", "honorLabels"}


def check(monitor: dict, services: list[dict]) -> list[str]:
    errors = []
    if monitor.get("apiVersion") != "monitoring.coreos.com/v1":
        errors.append(f"apiVersion {monitor.get('apiVersion')!r}")
    spec = monitor.get("spec") or {}
    wanted = (spec.get("selector") or {}).get("matchLabels") or {}
    if not wanted:
        errors.append("spec.selector.matchLabels is empty")
    selected = [s for s in services if wanted.items() <= (s["metadata"].get("labels") or {}).items()]
    if len(selected) != 1:
        return errors + [f"selects {len(selected)} Services, not 1"]
    ports = {p.get("name") for p in selected[0]["spec"]["ports"]}
    for i, ep in enumerate(spec.get("endpoints") or [None]):
        if not isinstance(ep, dict):
            errors.append("spec.endpoints is empty")
            continue
        if ep.get("port") not in ports:
            errors.append(f"endpoints[{i}].port {ep.get('port')!r} is not a port of the Service {sorted(ports)}")
        if unknown := set(ep) - ENDPOINT_KEYS:
            errors.append(f"endpoints[{i}] has unexpected keys {sorted(unknown)}")
        if not str(ep.get("path", "/metrics")).startswith("/"):
            errors.append(f"endpoints[{i}].path must start with /")
        if "interval" in ep and not DURATION.match(str(ep["interval"])):
            errors.append(f"endpoints[{i}].interval {ep['interval']!r} is not a duration")
    return errors


def main() -> None:
    failed = False
    for path in sys.argv[1:]:
        docs = [d for d in yaml.safe_load_all(Path(path).read_text()) if d]
        services = [d for d in docs if d["kind"] == "Service"]
        for monitor in (d for d in docs if d["kind"] == "ServiceMonitor"):
            errors = check(monitor, services)
            for e in errors:
                print(f"  FAILED: {Path(path).name}: ServiceMonitor {monitor['metadata']['name']}: {e}", file=sys.stderr)
            if not errors:
                print(f"  ok: {Path(path).name}: ServiceMonitor {monitor['metadata']['name']}")
            failed |= bool(errors)
    if failed:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
