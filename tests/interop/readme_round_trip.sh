#!/usr/bin/env bash
# The README's round trip, run exactly as printed: takes the ```sh block that follows the
# `<!-- readme-round-trip` marker in README.md (the book's getting-started chapter carries the
# same block under the same marker, and the two must be equal), starts the gateway in front of
# its embedded demo as the README's quick start does (no upstream flag), on free ports, runs
# the block with bash with GW pointing at it, and checks the final answer is `Hello, Ada!`.
#
# Usage: readme_round_trip.sh GATEWAY_BIN
# Prints `CHECK PASS|FAIL readme round-trip - …` (the interop suite counts that line) and exits
# non-zero on failure. Every wait is bounded; the gateway is stopped by its own pid.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
READY_SECONDS="${READY_SECONDS:-90}"

fail() {
  printf 'CHECK FAIL readme round-trip - %s\n' "$1"
  exit 1
}

(($# == 1)) && [[ -x "$1" ]] || { echo "usage: readme_round_trip.sh GATEWAY_BIN" >&2; exit 64; }
GATEWAY="$(realpath "$1")"
for tool in curl jq; do
  command -v "$tool" >/dev/null || fail "the round trip needs $tool (Debian package $tool)"
done

# block FILE: the ```sh block after the marker line, exactly as printed.
block() {
  awk '/^<!-- readme-round-trip/ { marked = 1; next }
       marked && !inside && /^```sh$/ { inside = 1; next }
       inside && /^```$/ { exit }
       inside { print }' "$1"
}
BLOCK="$(block "$ROOT/README.md")"
[[ -n "$BLOCK" ]] || fail "README.md has no marked round-trip block"
[[ "$BLOCK" == "$(block "$ROOT/docs/src/getting-started.md")" ]] ||
  fail "the round trip in docs/src/getting-started.md differs from the README's"

LOG="$(mktemp)"
"$GATEWAY" --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0 >"$LOG" 2>&1 &
PID=$!
trap 'kill -TERM "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; rm -f "$LOG"' EXIT

re='^mrtr-gateway: bound front=(127\.0\.0\.1:[0-9]+) admin=(127\.0\.0\.1:[0-9]+)$'
FRONT="" ADMIN=""
deadline=$((SECONDS + READY_SECONDS))
while [[ -z "$FRONT" ]] && ((SECONDS < deadline)); do
  kill -0 "$PID" 2>/dev/null || fail "the gateway exited before it bound: $(tail -n 5 "$LOG")"
  while IFS= read -r line; do
    [[ "$line" =~ $re ]] && FRONT="${BASH_REMATCH[1]}" ADMIN="${BASH_REMATCH[2]}"
  done <"$LOG"
  [[ -n "$FRONT" ]] || sleep 0.1
done
[[ -n "$FRONT" ]] || fail "the gateway did not say where it bound within ${READY_SECONDS}s"
until [[ "$(curl -s -o /dev/null -m 2 -w '%{http_code}' "http://$ADMIN/readyz")" == 200 ]]; do
  ((SECONDS < deadline)) || fail "the gateway was not ready within ${READY_SECONDS}s"
  sleep 0.25
done

OUT="$(GW="$FRONT" timeout 60 bash -c "$BLOCK" 2>&1)" || fail "the block exited $?: $OUT"
printf '%s\n' "$OUT"
# The last answer: the retry's result, pretty-printed by jq.
LAST="$(printf '%s\n' "$OUT" | awk '/^\{/ { last = "" } { last = last $0 "\n" } END { printf "%s", last }')"
[[ "$(jq -r '.result.resultType' <<<"$LAST")" == complete ]] || fail "the retry did not complete: $LAST"
TEXT="$(jq -r '.result.content[0].text' <<<"$LAST")"
[[ "$TEXT" == "Hello, Ada!" ]] || fail "the retry answered '$TEXT', not 'Hello, Ada!'"
printf 'CHECK PASS readme round-trip - %s\n' "$TEXT"
