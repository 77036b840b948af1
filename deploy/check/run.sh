#!/usr/bin/env bash
# The deployment check (a step of .ci/run): renders and lints the Helm chart with Helm's own
# engine for every pattern under deploy/helm/mrtr-gateway/ci/, validates each rendered manifest
# and the plain manifests against the Kubernetes API schemas, lints every YAML file, validates
# the compose file, runs the gateway's --check-config with each deployment's exact flags,
# environment and configuration file, checks the Grafana dashboard's queries name real metrics,
# and checks the Prometheus rules with promtool, pinned to PROMTOOL_VERSION (Debian 12's package
# prometheus ships it). promtool is required: missing, it is installed when this runs as root with
# apt-get (saying so first), and otherwise the check fails at once saying what to install; a
# promtool of another version fails it too. No step is skipped.
#
# Its tools are pinned in requirements.txt and installed into a venv (venv.sh, which
# deploy/run/run.sh shares).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
HERE="$ROOT/deploy/check"
OUT="$ROOT/target/deploy-check"
KUBE_VERSION=1.34.0
PROMTOOL_VERSION=2.42.0

log() { printf 'deploy: %s\n' "$*" >&2; }
# shellcheck source=venv.sh
. "$HERE/venv.sh"

promtool_version() {
  promtool --version 2>&1 | sed -n 's/^promtool, version \([0-9.]*\).*/\1/p' | head -n 1
}

# promtool at PROMTOOL_VERSION, installed from Debian's package when root can, or the check fails.
require_promtool() {
  if ! command -v promtool >/dev/null; then
    if [[ "$(id -u)" != 0 ]] || ! command -v apt-get >/dev/null; then
      log "promtool is not installed, and the alert rules are checked with it (pinned: $PROMTOOL_VERSION)."
      log "Install it as root, then run deploy/check/run.sh again:"
      log "    sudo apt-get install --no-install-recommends prometheus    (Debian 12 ships promtool $PROMTOOL_VERSION)"
      log "This script does not run sudo itself."
      exit 1
    fi
    log "promtool is missing: installing the Debian package prometheus with apt-get (running as root)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null
    if ! command -v promtool >/dev/null; then
      log "apt-get installed prometheus, yet there is no promtool on PATH"
      exit 1
    fi
  fi
  local found
  found="$(promtool_version || true)"
  if [[ "$found" != "$PROMTOOL_VERSION" ]]; then
    log "promtool ${found:-of an unknown version} is installed; the rules check is pinned to $PROMTOOL_VERSION."
    log "Install that version (Debian 12: apt-get install prometheus), or move PROMTOOL_VERSION in"
    log "deploy/check/run.sh to the new version and check the rules with it."
    exit 1
  fi
}

require_promtool
install_tools
rm -rf "$OUT" && mkdir -p "$OUT"
cd "$ROOT"

log "helm lint + render (Helm $("$VENV/bin/python" -c 'from helm_python import _native as n; print(n.helm_sdk_version())'))"
"$VENV/bin/python" "$HERE/render.py" deploy/helm/mrtr-gateway "$OUT/rendered"

mapfile -t manifests < <(ls "$OUT"/rendered/*.yaml deploy/kubernetes/*.yaml)
log "kubernetes-validate --strict (Kubernetes $KUBE_VERSION): ${manifests[*]#"$ROOT"/}"
# It has no schema for the ServiceMonitor custom resource: servicemonitor.py checks that one.
if ! "$VENV/bin/kubernetes-validate" --strict --quiet -k "$KUBE_VERSION" "${manifests[@]}" >"$OUT/validate.log" 2>&1; then
  cat "$OUT/validate.log" >&2
  exit 1
fi
grep -v "Couldn't find schema for kind ServiceMonitor" "$OUT/validate.log" >&2 || true
"$VENV/bin/python" "$HERE/servicemonitor.py" "$OUT"/rendered/*.yaml

log "yamllint"
"$VENV/bin/yamllint" --strict -c "$HERE/yamllint.yaml" \
  deploy/compose deploy/kubernetes deploy/prometheus deploy/check/yamllint.yaml \
  deploy/helm/mrtr-gateway/Chart.yaml deploy/helm/mrtr-gateway/values.yaml deploy/helm/mrtr-gateway/ci \
  "$OUT/rendered"

log "the gateway's --check-config with each deployment's flags, environment and config file"
# The binary `cargo test` builds (tests/gateway-bin.sh), so CI compiles the dependencies once.
gateway="$("$ROOT/tests/gateway-bin.sh")"
"$VENV/bin/python" "$HERE/invocations.py" "$gateway" Dockerfile \
  deploy/compose/docker-compose.yml "${manifests[@]}"

for config in deploy/stdio/*/gateway.toml; do
  "$gateway" --config "$config" --check-config >/dev/null
  printf '  ok: %s\n' "$config"
done

log "Grafana dashboard queries name the gateway's metrics"
"$VENV/bin/python" "$HERE/dashboard.py" src/metrics.rs src deploy/grafana/*.json deploy/prometheus/*.yaml

log "promtool check rules (promtool $PROMTOOL_VERSION)"
promtool check rules deploy/prometheus/*.yaml
log "deployment check passed"
