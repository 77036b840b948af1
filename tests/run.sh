#!/usr/bin/env bash
# The project's test command: every Rust unit and integration test, then the interop suite
# (real SDK clients and legacy servers, and the official conformance suite) against the built
# gateway. Pinned third-party packages are installed locally under tests/interop/ (npm into
# node_modules, pip into venvs). The one system package is Debian's redis-server, which the
# single-use state tests start on loopback: installed here when it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v redis-server >/dev/null; then
  echo "== redis-server (Debian package, for the single-use state tests)"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server
fi

echo "== cargo test"
cargo test --locked

echo "== interop suite"
cargo build --locked --bin mrtr-gateway
exec tests/interop/run.sh "$PWD/target/debug/mrtr-gateway"
