#!/usr/bin/env bash
# The project's test command: every Rust unit and integration test, then the interop suite
# (real SDK clients and legacy servers, and the official conformance suite) against the built
# gateway. Pinned third-party packages are installed locally under tests/interop/ (npm into
# node_modules, pip into venvs); nothing is installed globally.
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== cargo test"
cargo test --locked

echo "== interop suite"
cargo build --locked --bin mrtr-gateway
exec tests/interop/run.sh "$PWD/target/debug/mrtr-gateway"
