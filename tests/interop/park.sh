# Park and auto mode against the real servers and clients (sourced by run.sh, after lib.sh;
# uses run.sh's py, ts and start_on_any_port and its GATEWAY, KEY_FILE, RUN_DIR, RESULTS).
#
# Two replicas in park mode in front of the fixture, and two in auto mode in front of
# server-everything (its elicitation and sampling tools marked side-effecting, so they park
# while the others replay). Each pair shares the run's key file and sits behind a round-robin
# proxy of its own, so a call's rounds alternate between the replicas: a retry reaches the
# replica that does not hold its parked call and is forwarded to the owner over the internal
# listener. The pinned Python and TypeScript clients run their whole table through each proxy,
# and park_report.py then judges the proxy's log, the replicas' migration reports and their
# park-outcome metrics.

# The server-everything tools the auto pair parks (`mrtr.side_effecting`).
AUTO_SIDE_EFFECTING="trigger-elicitation-request,trigger-sampling-request"

# park_config FILE MODE INTERNAL_PORT: a replica's configuration: its mode, its internal
# listener on INTERNAL_PORT of loopback and the URL it advertises to the other replica.
park_config() {
  local file="$1" mode="$2" port="$3" effecting=""
  if [[ "$mode" == auto ]]; then
    effecting="side_effecting = [\"${AUTO_SIDE_EFFECTING//,/\", \"}\"]"
  fi
  printf '[mrtr]\nmode = "%s"\n%s\n[cluster]\nlisten = "127.0.0.1:%s"\nadvertise_url = "http://127.0.0.1:%s"\n' \
    "$mode" "$effecting" "$port" "$port" >"$file"
}

# start_park_pair LABEL MODE UPSTREAM_PORT: two replicas and their proxy. Sets PAIR_URL (the
# proxy's MCP endpoint), PAIR_ADMINS (the replicas' admin ports) and PAIR_LOG.
start_park_pair() {
  local label="$1" mode="$2" up="$3" internal_a internal_b rr extra=() name port var
  read -r -a extra <<<"${GATEWAY_EXTRA_ARGS:-}"
  read -r internal_a internal_b rr <<<"$(free_ports 3)"
  PAIR_ADMINS=() PAIR_FRONTS=()
  for name in a b; do
    var="internal_$name"
    port="${!var}"
    park_config "$RUN_DIR/gateway-$label-$name.toml" "$mode" "$port"
    start_on_any_port "gateway-$label-$name" PAIR_FRONT PAIR_ADMIN "$GATEWAY" \
      --config "$RUN_DIR/gateway-$label-$name.toml" --upstream "http://127.0.0.1:$up/mcp" \
      --state-key-file "$KEY_FILE" "${extra[@]}" || return 1
    PAIR_FRONTS+=("$PAIR_FRONT")
    PAIR_ADMINS+=("$PAIR_ADMIN")
  done
  PAIR_LOG="$RUN_DIR/round-robin-$label.log"
  start "round-robin-$label" "$PAIR_LOG" node "$HERE/round_robin_proxy.mjs" --listen "$rr" \
    --upstream "http://127.0.0.1:${PAIR_FRONTS[0]}/mcp" --upstream "http://127.0.0.1:${PAIR_FRONTS[1]}/mcp"
  wait_http "round-robin-$label" "$LAST_PID" "http://127.0.0.1:$rr/" . "$READY_SECONDS" || return 1
  PAIR_URL="http://127.0.0.1:$rr/mcp"
}

# pair_report LABEL TARGET PARKS: park_report.py's verdicts on the pair just run, counted.
pair_report() {
  local label="$1" target="$2" parks="$3" out
  out="$("$PY_MODERN" "$HERE/park_report.py" --pair "$label" --results "$RESULTS" \
    --target "py:$target" --target "ts:$target" --log "$PAIR_LOG" \
    --admin "${PAIR_ADMINS[0]}" --admin "${PAIR_ADMINS[1]}" --parks "$parks" 2>&1)" ||
    record FAIL "FAIL harness park-report-$label - park_report.py failed: $out"
  record_lines "$out"
}

park_checks() {
  if ! start_park_pair park park "$P_FIXTURE"; then
    record FAIL "FAIL harness park-pair - not ready (logs in $RUN_DIR)"
    return 0
  fi
  py fixture-park fixture "$PAIR_URL" 2026-07-28
  ts fixture-park fixture "$PAIR_URL" pin
  pair_report park fixture-park all
  if ! start_park_pair auto auto "$P_EVERYTHING"; then
    record FAIL "FAIL harness auto-pair - not ready (logs in $RUN_DIR)"
    return 0
  fi
  py everything-auto everything "$PAIR_URL" 2026-07-28
  ts everything-auto everything "$PAIR_URL" pin
  pair_report auto everything-auto "$AUTO_SIDE_EFFECTING"
}
