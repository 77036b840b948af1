#!/usr/bin/env bash
# Mutation testing of one module of the library, independent of the CI run.
#
# Installs the pinned cargo-mutants into target/tools (nothing global), then mutates one module
# and judges each mutant by the library's unit tests only, one at a time. The default module is
# the sealed-state core (src/mrtr), exactly as .cargo/mutants.toml says. Any other module is
# mutated without that file (its globs would be added to the module's, not replaced), so the
# one other thing it sets, `--lib` on every cargo command, is passed here instead.
# Results per module, with each survivor and what became of it, are in tests/MUTANTS.md.
#
# Usage: tests/mutants.sh [MODULE] [extra cargo-mutants arguments]
#        tests/mutants.sh --list-modules       # each module with its number of mutants
#   tests/mutants.sh                                   # every mutant of src/mrtr (hours on 2 cores)
#   tests/mutants.sh auth --sharding round-robin --shard 0/4   # a deterministic quarter of src/auth
#   tests/mutants.sh bridge --in-place --shard 0/6 --sharding round-robin
#   tests/mutants.sh bridge --integration 'it::park it::state' --baseline=skip --re 'NAME'
#        judges by the integration tests these filters select, for the survivors of a
#        unit-test run in a module the integration suite covers
# Results are written to mutants.out/ under the target directory.
set -euo pipefail
cd "$(dirname "$0")/.."

# The modules, in one place. `X` mutates src/X.rs and src/X/**/*.rs, whichever exist; `mrtr`
# is the default and takes its files from .cargo/mutants.toml.
MODULES=(mrtr auth bridge front legacy upstream subscriptions capabilities error)

VERSION="27.1.0"
ROOT="$PWD/target/tools"
BIN="$ROOT/bin/cargo-mutants"

if ! [[ -x "$BIN" ]] || [[ "$("$BIN" mutants --version 2>/dev/null)" != "cargo-mutants $VERSION" ]]; then
  echo "mutants: installing cargo-mutants $VERSION into target/tools" >&2
  cargo install --locked --root "$ROOT" "cargo-mutants@$VERSION"
fi

# The cargo-mutants arguments that select MODULE's files.
select_module() {
  local module="$1"
  if [[ "$module" == "mrtr" ]]; then
    return
  fi
  local found=0
  printf '%s\n' --no-config --cargo-arg=--lib
  if [[ -f "src/$module.rs" ]]; then
    printf '%s\n' --file "src/$module.rs"
    found=1
  fi
  if [[ -d "src/$module" ]]; then
    printf '%s\n' --file "src/$module/**/*.rs"
    found=1
  fi
  if ((found == 0)); then
    echo "mutants: src/$module.rs and src/$module/ are both missing" >&2
    return 1
  fi
}

module_args() {
  local args
  args="$(select_module "$1")" || exit 2
  if [[ -n "$args" ]]; then
    mapfile -t selected <<<"$args"
  else
    selected=()
  fi
}

if [[ "${1:-}" == "--list-modules" ]]; then
  for module in "${MODULES[@]}"; do
    module_args "$module"
    count="$("$BIN" mutants --list "${selected[@]}" | wc -l)"
    printf '%-14s %5d\n' "$module" "$count"
  done
  exit 0
fi

module="mrtr"
if [[ $# -gt 0 && "$1" != -* ]]; then
  module="$1"
  shift
  if ! printf '%s\n' "${MODULES[@]}" | grep -qx -- "$module"; then
    echo "mutants: unknown module '$module'; one of: ${MODULES[*]}" >&2
    exit 2
  fi
fi
module_args "$module"

# `--integration 'FILTER...'` judges by the integration tests the filters select (the unit tests
# then run only where a filter names them): for the survivors of a unit-test run, which every
# unit test has already let through.
judges=()
# Longest a mutant's tests may run: the unit tests take about 5 s, the whole integration suite
# about 90 s on 2 cores. A mutant that hangs one test while others fail is caught either way, so
# the bound only needs to clear a slow healthy run (about 3 times one).
test_timeout=120
args=()
while [[ $# -gt 0 ]]; do
  if [[ "$1" == "--integration" ]]; then
    [[ $# -ge 2 && -n "$2" ]] || { echo "mutants: --integration needs test filters, such as 'it::park'" >&2; exit 2; }
    judges=(--cargo-arg=--test=integration --cargo-test-arg=--)
    test_timeout=300
    for filter in $2; do
      judges+=("--cargo-test-arg=$filter")
    done
    shift 2
  else
    args+=("$1")
    shift
  fi
done
set -- "${args[@]}"

# By default mutants are built in a copy of the tree (which rebuilds the dependencies once: the
# copy does not keep target/'s timestamps). `--in-place` mutates this tree itself, one mutant at a
# time, restoring each file afterwards, and reuses target/ as it is.
where=(--copy-target=true --jobs 1)
for arg in "$@"; do
  if [[ "$arg" == "--in-place" ]]; then
    where=()
  fi
done

# Mutants are judged by their tests' outcomes alone, so they are built without debug info:
# each mutant's build links much faster (on 2 cores, about 18 s instead of 25-45 s, and the
# baseline about 170 s instead of 260 s). Set CARGO_PROFILE_DEV_DEBUG to keep it.
export CARGO_PROFILE_DEV_DEBUG="${CARGO_PROFILE_DEV_DEBUG:-0}"

exec "$BIN" mutants "${where[@]}" "${selected[@]}" "${judges[@]}" \
  --timeout "$test_timeout" \
  --build-timeout 1500 \
  --output target \
  "$@"
