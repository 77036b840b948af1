#!/usr/bin/env bash
# The proxy bench with a peer as its fourth path: `mcp-proxy` 0.6.0, another MCP proxy built on
# tower, in front of the same demo server. It is installed here, into target/tools/mcp-proxy
# (nothing global; never part of the tests or of CI), then the bench runs with
# PROXY_BENCH_PEER pointing at it.
#
# Usage: benches/peer.sh                  # cargo bench --bench proxy, four paths
#        benches/peer.sh callgrind         # benches/callgrind.sh on all four paths
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION="0.6.0"
ROOT="$PWD/target/tools/mcp-proxy"
BIN="$ROOT/bin/mcp-proxy"

# It prints no version of its own: the install leaves a stamp naming the one installed.
if ! [[ -x "$BIN" ]] || [[ "$(cat "$ROOT/installed-version" 2>/dev/null)" != "$VERSION" ]]; then
  echo "peer.sh: installing mcp-proxy $VERSION into target/tools/mcp-proxy" >&2
  # Only its metrics feature: the others (OAuth, OpenAPI, WebSocket, OpenTelemetry, discovery)
  # are not on a plain call's path and would only lengthen the build.
  cargo install --locked --root "$ROOT" --no-default-features --features metrics "mcp-proxy@$VERSION"
  echo "$VERSION" >"$ROOT/installed-version"
fi
export PROXY_BENCH_PEER="$BIN"
if [[ "${1:-}" == "callgrind" ]]; then
  exec benches/callgrind.sh direct relay gateway peer
fi
exec cargo bench --bench proxy
