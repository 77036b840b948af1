#!/usr/bin/env bash
# The project's test command: every Rust unit and integration test, then the interop suite
# (real SDK clients and legacy servers, and the official conformance suite) against the gateway
# binary those tests ran. Pinned third-party packages are installed locally under tests/interop/
# (npm into node_modules, pip into venvs). The system packages are redis-server, which the
# single-use state tests start on loopback, and jq, which the README's round trip uses. When
# one is missing, a root user gets Debian's package installed (the script says so first);
# anyone else is told what to install, and the run stops before building anything.
set -euo pipefail
cd "$(dirname "$0")/.."

# require COMMAND PACKAGE WHY: the Debian package PACKAGE provides COMMAND, which WHY.
require() {
  local command="$1" package="$2" why="$3"
  command -v "$command" >/dev/null && return 0
  if [[ "$(id -u)" != 0 ]]; then
    cat >&2 <<MSG
tests/run.sh: $command is not installed, and $why.
Install it as root, then run tests/run.sh again:
    sudo apt-get install $package    (Debian, Ubuntu)
or put any $command binary on PATH. This script does not run sudo itself.
MSG
    exit 1
  fi
  if ! command -v apt-get >/dev/null; then
    cat >&2 <<MSG
tests/run.sh: $command is not installed, and $why.
There is no apt-get here: install $package with this system's package manager, then run
tests/run.sh again.
MSG
    exit 1
  fi
  echo "== $command is missing: installing the Debian package $package with apt-get (running as root)"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$package"
  if ! command -v "$command" >/dev/null; then
    echo "tests/run.sh: apt-get installed $package, yet there is no $command on PATH" >&2
    exit 1
  fi
}

require redis-server redis-server "the single-use state tests start one"
require jq jq "the README's round trip, run by the interop suite, uses it"

echo "== cargo test"
cargo test --locked

# The binary the integration tests just ran, as `cargo test` built it: a `cargo build` here
# would compile about 50 crates again, because without the dev-dependencies Cargo resolves
# their shared dependencies with other features (tokio without test-util, for one).
echo "== interop suite"
gateway="$(tests/gateway-bin.sh)"
exec tests/interop/run.sh "$gateway"
