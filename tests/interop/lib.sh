# Process, port and tally helpers for run.sh (sourced, not executed).
#
# Every process the run starts is recorded by its own pid in STARTED_PIDS and
# stopped by that pid alone in stop_started, so nothing else on the machine
# is touched. Every wait is bounded.

STARTED_PIDS=()
PASSED=0
FAILED=0

say() { printf '%s\n' "$*"; }

# start NAME LOGFILE CMD...: run CMD in the background, record its pid, and
# leave it in LAST_PID for the caller.
start() {
  local name="$1" logfile="$2"
  shift 2
  "$@" >"$logfile" 2>&1 &
  local pid=$!
  STARTED_PIDS+=("$pid")
  LAST_PID=$pid
  say "started $name (pid $pid): log $logfile"
}

# stop_started: TERM every recorded pid, give them 5 s, then KILL survivors.
stop_started() {
  local pid waited=0
  ((${#STARTED_PIDS[@]})) || return 0
  for pid in "${STARTED_PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  while ((waited < 50)); do
    local alive=0
    for pid in "${STARTED_PIDS[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    ((alive)) || break
    sleep 0.1
    waited=$((waited + 1))
  done
  for pid in "${STARTED_PIDS[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  for pid in "${STARTED_PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  STARTED_PIDS=()
}

# free_ports N: N distinct free loopback ports (bound then released at once),
# for third-party servers that must be told a port. The gateways bind port 0
# and say what they bound (start_on_any_port), so no one can take theirs.
free_ports() {
  python3 - "$1" <<'EOF'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
for s in socks:
    s.close()
EOF
}

# start_on_any_port NAME FRONT_VAR ADMIN_VAR CMD...: start a gateway command
# with both listeners on port 0, wait (bounded) for the line it prints once
# bound ("mrtr-gateway: bound front=ADDR admin=ADDR"), and set the variables
# named FRONT_VAR and ADMIN_VAR to the two ports; then wait for /readyz.
start_on_any_port() {
  local name="$1" front_var="$2" admin_var="$3" log="$RUN_DIR/$1.log"
  shift 3
  start "$name" "$log" "$@" --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0
  local pid="$LAST_PID" deadline=$((SECONDS + READY_SECONDS)) ports=""
  while ((SECONDS < deadline)); do
    ports="$(bound_ports "$log")"
    [[ -n "$ports" ]] && break
    if ! kill -0 "$pid" 2>/dev/null; then
      say "FATAL: $name (pid $pid) exited before it bound"
      return 1
    fi
    sleep 0.1
  done
  if [[ -z "$ports" ]]; then
    say "FATAL: $name did not say where it bound within ${READY_SECONDS}s"
    return 1
  fi
  local front admin
  read -r front admin <<<"$ports"
  printf -v "$front_var" '%s' "$front"
  printf -v "$admin_var" '%s' "$admin"
  wait_http "$name" "$pid" "http://127.0.0.1:$admin/readyz" 200 "$READY_SECONDS"
}

# bound_ports LOGFILE: "FRONT ADMIN" from the gateway's bound line, once that
# line is complete (read only succeeds on a line that ends in a newline, so a
# line still being written is not taken), else nothing. The log may not exist
# yet: the started process creates it after the fork.
bound_ports() {
  local l re='^mrtr-gateway: bound front=127\.0\.0\.1:([0-9]+) admin=127\.0\.0\.1:([0-9]+)$'
  [[ -f "$1" ]] || return 0
  while IFS= read -r l; do
    if [[ "$l" =~ $re ]]; then
      printf '%s %s\n' "${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}"
      return 0
    fi
  done <"$1"
}

# wait_http NAME PID URL EXPECT SECONDS: poll URL until its HTTP status matches
# the EXPECT pattern ("200", or "." for any answer), while PID stays alive.
wait_http() {
  local name="$1" pid="$2" url="$3" expect="$4" seconds="$5"
  local deadline=$((SECONDS + seconds)) code
  while ((SECONDS < deadline)); do
    if ! kill -0 "$pid" 2>/dev/null; then
      say "FATAL: $name (pid $pid) exited before it was ready"
      return 1
    fi
    code="$(curl -s -o /dev/null -m 2 -w '%{http_code}' "$url" || true)"
    if [[ "$code" != "000" && "$code" =~ ^$expect ]]; then
      say "ready: $name ($url answered $code)"
      return 0
    fi
    sleep 0.25
  done
  say "FATAL: $name not ready within ${seconds}s ($url)"
  return 1
}

# record VERDICT LINE: count one test and keep its line for the matrix.
record() {
  if [[ "$1" == PASS ]]; then PASSED=$((PASSED + 1)); else FAILED=$((FAILED + 1)); fi
  printf '%s\n' "$2" >>"$RESULTS"
}

# record_lines TEXT: echo a report's output and record each of its `PASS …` and
# `FAIL …` lines.
record_lines() {
  local line
  printf '%s\n' "$1"
  while read -r line; do
    case "$line" in
      PASS\ *) record PASS "$line" ;;
      FAIL\ *) record FAIL "$line" ;;
    esac
  done <<<"$1"
}

# run_checks LABEL SECONDS CMD...: run a client check program under a wall
# clock, echo its output, and count its CHECK lines. A program that fails
# without any FAIL line (a crash, a timeout) counts as one failed test.
run_checks() {
  local label="$1" seconds="$2" out rc=0 fails
  shift 2
  out="$(timeout "$seconds" "$@" 2>>"$RUN_DIR/checks.stderr")" || rc=$?
  printf '%s\n' "$out"
  while read -r word verdict rest; do
    [[ "$word" == CHECK ]] && record "$verdict" "$verdict $rest"
  done <<<"$out"
  fails="$(grep -c '^CHECK FAIL' <<<"$out" || true)"
  if ((rc != 0 && fails == 0)); then
    record FAIL "FAIL harness $label - exited $rc without a failing check (see $RUN_DIR/checks.stderr)"
    say "HARNESS FAIL $label: exit $rc"
  fi
}
