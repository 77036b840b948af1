#!/usr/bin/env bash
# Fuzzing in CI (fuzz/README.md, "In CI"): replays every input kept under
# fuzz/regressions/<target>/, then runs each target from its corpus for a bounded time
# (FUZZ_SECONDS, default 45). A crash, a hang or a failed replay fails the run; a new crash's
# input is written to fuzz/regressions/<target>/, to be committed with its fix.
set -euo pipefail
cd "$(dirname "$0")"

CARGO_FUZZ_VERSION=0.13.2
FUZZ_SECONDS="${FUZZ_SECONDS:-45}"
if [ "$(cargo fuzz --version 2>/dev/null)" != "cargo-fuzz $CARGO_FUZZ_VERSION" ]; then
  cargo install --locked "cargo-fuzz@$CARGO_FUZZ_VERSION"
fi
# libFuzzer's instrumentation flags are nightly-only; this lets the stable toolchain pass them.
export RUSTC_BOOTSTRAP=1
# No AddressSanitizer: the gateway forbids `unsafe`, so it would mostly cost speed.
cargo fuzz build -s none

shopt -s nullglob
mkdir -p target
for target in $(cargo fuzz list); do
  kept=(regressions/"$target"/*)
  if [ "${#kept[@]}" -gt 0 ]; then
    echo "== fuzz $target: replaying ${#kept[@]} kept input(s)"
    cargo fuzz run -s none "$target" "${kept[@]}"
  fi
  echo "== fuzz $target: ${FUZZ_SECONDS}s from corpus/$target"
  mkdir -p "regressions/$target"
  log="target/fuzz-$target.log"
  if ! cargo fuzz run -s none "$target" "corpus/$target" -- \
    -max_total_time="$FUZZ_SECONDS" -timeout=10 -print_final_stats=1 \
    -artifact_prefix="regressions/$target/" >"$log" 2>&1; then
    tail -n 40 "$log" >&2
    echo "fuzz target $target failed; its input is in fuzz/regressions/$target/" >&2
    exit 1
  fi
  # The final coverage line and the execution count.
  grep -E '^#[0-9]+[[:space:]]+DONE|^stat::number_of_executed_units' "$log"
done
