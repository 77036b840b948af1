# The default gathering against a real server (sourced by run.sh, after lib.sh; uses run.sh's
# py, ts, run_conformance and start_on_any_port and its GATEWAY, KEY_FILE, RUN_DIR, RESULTS).
#
# Every other gateway of the run is told up front that the fixture's multiple-inputs tool asks
# three questions at once (run.sh exports the mrtr.gather_expect hint below), so the checks that
# want them in one round do not depend on the machine's scheduling. This gateway is not told:
# it starts with no per-tool memory and gathers with the defaults (the idle gap, bounded by
# the window). On it run the conformance scenario that wants the three questions in one
# result, first (the fresh replica's first call of the tool), then both clients' check of the
# same tool (the replica now remembers the count). gather_report.py then reads the gateway's
# JSON debug log: how many questions each round carried and how far apart they came.

GATHER_HINT_VAR=MRTR_GATEWAY__MRTR__GATHER_EXPECT__TEST_INPUT_REQUIRED_RESULT_MULTIPLE_INPUTS
GATHER_TOOL=test_input_required_result_multiple_inputs
GATHER_SCENARIO=input-required-result-multiple-input-requests
# The default mrtr.gather_idle_ms (src/defaults.rs), named in the report.
GATHER_IDLE_MS=5

gathering_checks() {
  local p_gw p_gwa extra=() out url
  read -r -a extra <<<"${GATEWAY_EXTRA_ARGS:-}"
  if ! start_on_any_port gateway-defaults p_gw p_gwa env -u "$GATHER_HINT_VAR" "$GATEWAY" \
    --upstream "http://127.0.0.1:$P_FIXTURE/mcp" --state-key-file "$KEY_FILE" "${extra[@]}" \
    --log-level debug --log-format json; then
    record FAIL "FAIL harness gateway-defaults - not ready (logs in $RUN_DIR)"
    return 0
  fi
  url="http://127.0.0.1:$p_gw/mcp"
  run_conformance gateway-defaults "$url" "$RUN_DIR/conformance-gateway-defaults.txt" --scenarios "$GATHER_SCENARIO"
  py fixture-defaults fixture "$url" 2026-07-28 --only "$GATHER_TOOL"
  ts fixture-defaults fixture "$url" pin --only "$GATHER_TOOL"
  out="$("$PY_MODERN" "$HERE/gather_report.py" --label defaults --log "$RUN_DIR/gateway-defaults.log" \
    --tool "$GATHER_TOOL" --expect 3 --idle-ms "$GATHER_IDLE_MS" 2>&1)" ||
    record FAIL "FAIL harness gather-report - gather_report.py failed: $out"
  record_lines "$out"
}
