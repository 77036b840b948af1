#!/usr/bin/env bash
# Prints the path of the gateway binary exactly as `cargo test` builds it for the integration
# tests (same profile, and the features the dev-dependencies add), building it first when it is
# not fresh. The interop suite and the deployment check run this binary, so that CI compiles
# the dependency tree once: a plain `cargo build` resolves it with other features and compiles
# about 50 crates a second time.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo test --locked --no-run --message-format=json-render-diagnostics |
  jq -r 'select(.reason == "compiler-artifact" and .target.name == "mrtr-gateway"
           and .target.kind == ["bin"] and .profile.test == false) | .executable' |
  tail -n 1 | grep .
