#!/usr/bin/env bash
# Mutation testing of the sealed-state core (src/mrtr), independent of the CI run.
#
# Installs the pinned cargo-mutants into target/tools (nothing global), then runs it as
# .cargo/mutants.toml says: only src/mrtr is mutated and only the library's unit tests judge
# each mutant, one at a time.
# Mutants found to be equivalent are listed, with the reason, in src/mrtr/MUTANTS.md.
#
# Usage: tests/mutants.sh [extra cargo-mutants arguments]
#   tests/mutants.sh                                   # every mutant (hours on 2 cores)
#   tests/mutants.sh --sharding round-robin --shard 0/25   # a deterministic 1/25th
#   tests/mutants.sh --in-place --shard 0/50 --sharding round-robin
# Results are written to mutants.out/ under the target directory.
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION="27.1.0"
ROOT="$PWD/target/tools"
BIN="$ROOT/bin/cargo-mutants"

if ! [[ -x "$BIN" ]] || [[ "$("$BIN" mutants --version 2>/dev/null)" != "cargo-mutants $VERSION" ]]; then
  echo "mutants: installing cargo-mutants $VERSION into target/tools" >&2
  cargo install --locked --root "$ROOT" "cargo-mutants@$VERSION"
fi

# By default mutants are built in a copy of the tree (which rebuilds the dependencies once: the
# copy does not keep target/'s timestamps). `--in-place` mutates this tree itself, one mutant at a
# time, restoring each file afterwards, and reuses target/ as it is.
where=(--copy-target=true --jobs 1)
for arg in "$@"; do
  if [[ "$arg" == "--in-place" ]]; then
    where=()
  fi
done

exec "$BIN" mutants "${where[@]}" \
  --timeout 120 \
  --build-timeout 1500 \
  --output target \
  "$@"
