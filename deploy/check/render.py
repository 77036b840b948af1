"""Renders and lints the Helm chart with Helm's own engine (helm-python-sdk) for every values file
under ci/, and writes each pattern's manifests to OUT/<pattern>.yaml; with --config-dir, also
each pattern's gateway.toml, so the gateway binary can check it.

    python render.py CHART OUT [--config-dir DIR]
"""

import sys
from pathlib import Path

import yaml
from helm_python import chart as helm

RELEASE = "demo"
NAMESPACE = "default"
KUBE_VERSION = "v1.34.0"


def lint(chart_dir: Path, values: dict, name: str) -> None:
    report = helm.lint(chart_dir, values, strict=True, namespace=NAMESPACE, kube_version=KUBE_VERSION)
    problems = [m for m in report.get("messages") or [] if m.get("severity", 0) >= 2]
    problems += [{"error": e} for e in report.get("errors") or []]
    for m in problems:
        print(f"  lint {name}: {m.get('path', '')} {m.get('error')}", file=sys.stderr)
    if problems:
        raise SystemExit(f"helm lint failed for {name}")


def main() -> None:
    chart_dir, out = Path(sys.argv[1]), Path(sys.argv[2])
    config_dir = Path(sys.argv[4]) if len(sys.argv) > 4 and sys.argv[3] == "--config-dir" else None
    out.mkdir(parents=True, exist_ok=True)
    chart = helm.Chart.load(chart_dir)
    files = sorted((chart_dir / "ci").glob("*.yaml"))
    if not files:
        raise SystemExit(f"no values files under {chart_dir / 'ci'}")
    for values_file in files:
        name = values_file.stem
        values = yaml.safe_load(values_file.read_text()) or {}
        lint(chart_dir, values, name)
        rendered = chart.render(values=values, name=RELEASE, namespace=NAMESPACE, is_install=True)
        docs = [m for path, m in sorted(rendered.items()) if path.endswith(".yaml") and m.strip()]
        manifests = [d for d in yaml.safe_load_all("\n---\n".join(docs)) if d]
        kinds = sorted(f"{m['kind']}" for m in manifests)
        (out / f"{name}.yaml").write_text("---\n" + "\n---\n".join(docs))
        print(f"  {name}: {len(manifests)} manifests: {', '.join(kinds)}")
        if config_dir:
            config_dir.mkdir(parents=True, exist_ok=True)
            maps = [m for m in manifests if m["kind"] == "ConfigMap"]
            (config_dir / f"{name}.toml").write_text(maps[0]["data"]["gateway.toml"])


if __name__ == "__main__":
    main()
