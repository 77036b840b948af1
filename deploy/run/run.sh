#!/usr/bin/env bash
# The deployment run: starts the pods the Helm chart renders, with `podman kube play`, and proves
# on them what docs/src/deployment.md promises, where deploy/check/run.sh only renders and
# validates them. What it proves:
#
# - sidecar pattern (chart `pattern: sidecar`, ci/sidecar.yaml): the gateway and a legacy
#   server in one pod, the gateway reaching it on loopback. The legacy server is the gateway's
#   own image fronting its embedded demo server, which legacy clients get relayed as is (see
#   docs/src/both-eras.md): a 2025-11-25 Streamable HTTP server. A two-round conversation (the
#   demo's `greet` asks once) completes through the pod.
# - stdio pattern (chart `pattern: stdio`, ci/stdio.yaml): one container whose image holds the
#   gateway and @modelcontextprotocol/server-filesystem, built as
#   deploy/stdio/server-filesystem.Dockerfile builds it (see build_stdio_image). The gateway
#   spawns the server as its child, the same non-root user on the same read-only root; a
#   2026-07-28 client lists its tools and reads a file of /srv/data through the pod, a write is
#   refused with EROFS in the tool's result, and SIGTERM stops the pod with exit 0.
# - standalone pattern (ci/standalone.yaml, park mode, single use with Redis), two replicas
#   sharing one key ring in front of that legacy server: round one on replica A parks the call
#   there, the retry sent to replica B is forwarded to A and completes (each replica's
#   park_outcomes_total says which one did what), and Redis holds the consumed state.
# - SIGTERM: a call parked on A, then A's pod is stopped (SIGTERM, as a pod deletion does). A's
#   /readyz answers 503 while /healthz still answers 200, the retry sent to B completes by
#   replay (park_outcomes_total{outcome="fallback"} on B), and A exits 0 within the chart's
#   terminationGracePeriodSeconds.
# - every gateway container: the probes answer 200 where the chart points them, and the running
#   process is what the chart's securityContext asks (read-only root filesystem, the non-root
#   runAsUser and runAsGroup, no capabilities, no privilege escalation), read from the kernel.
#
# Images are built locally (no registry is reachable): the gateway image from the binary the
# tests build (tests/gateway-bin.sh; no release build here), debug info stripped, with the
# runtime of the Dockerfile's final stage (libc and libgcc from this Debian 12 host, a CA bundle,
# user 65532). What the manifests needed to run under podman 4.3 is listed in
# deploy/run/render.py; nothing else is changed. Every pod, container, volume and image it makes
# is removed on exit, failed or not; every wait is bounded (RUN_WAIT_SECONDS, default 60).
#
# Needs root, podman, runc, catatonit (podman's pod pause process), redis-server, curl, jq, and
# node and npm (the stdio image's runtime, and its install of the server from the lock file):
# as root it installs the missing Debian packages with apt-get, saying so first. Ports are free
# ones picked at start; all traffic stays on 127.0.0.1 (host network).
#
#   deploy/run/run.sh
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
HERE="$ROOT/deploy/run"
CHART="$ROOT/deploy/helm/mrtr-gateway"
WAIT="${RUN_WAIT_SECONDS:-60}"
RUN="run$$"
IMAGE="localhost/mrtr-gateway-deploy-run:$RUN"
STDIO_IMAGE="localhost/mrtr-gateway-deploy-run-stdio:$RUN"
STDIO_TEXT="served by server-filesystem in pod $RUN"
# Each tool and the Debian package that has it, in the same order.
TOOLS=(podman runc catatonit redis-server curl jq node npm)
PACKAGES=(podman runc catatonit redis-server curl jq nodejs npm)

log() { printf 'deploy-run: %s\n' "$*" >&2; }
fail() {
  log "FAIL: $*"
  exit 1
}
# shellcheck source=../check/venv.sh
. "$ROOT/deploy/check/venv.sh"

# Installs the packages of the missing tools only: a machine whose node and npm come from
# elsewhere (a NodeSource nodejs, which conflicts with Debian's npm) keeps them.
require_tools() {
  local missing=() packages=() i
  for i in "${!TOOLS[@]}"; do
    if ! command -v "${TOOLS[i]}" >/dev/null; then
      missing+=("${TOOLS[i]}")
      packages+=("${PACKAGES[i]}")
    fi
  done
  ((${#missing[@]} == 0)) && return
  if [[ "$(id -u)" != 0 ]] || ! command -v apt-get >/dev/null; then
    log "missing: ${missing[*]}. Install them as root, then run deploy/run/run.sh again:"
    log "    sudo apt-get install --no-install-recommends ${packages[*]}"
    log "(it runs pods with podman, which needs root here: run it as root)"
    exit 1
  fi
  log "missing: ${missing[*]}: installing ${packages[*]} with apt-get (running as root)"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
}

require_tools
[[ "$(id -u)" == 0 ]] || fail "podman runs pods here as root only: run deploy/run/run.sh as root"
install_tools
WORK="$(mktemp -d)"
# podman as the machine allows it: runc (crun cannot use hybrid cgroups), no default ulimits
# (raising RLIMIT_NOFILE is not permitted here).
printf '[containers]\ndefault_ulimits = []\n[engine]\nruntime = "runc"\n' >"$WORK/containers.conf"
export CONTAINERS_CONF="$WORK/containers.conf"
VOLUMES_BEFORE="$(podman volume ls -q)"
REDIS_PID=""
PLAYED=()

cleanup() {
  local rc=$? file volume ctr
  set +e
  if ((rc != 0)); then
    for ctr in $(podman ps -a --format '{{.Names}}' --filter "name=^$RUN-"); do
      log "the last lines of $ctr:"
      timeout 10 podman logs --tail 15 "$ctr" 2>&1 | grep -v 'level=error.*systemd' | sed 's/^/    /' >&2
    done
  fi
  for file in "${PLAYED[@]}"; do
    timeout "$WAIT" podman kube down "$file" >/dev/null 2>&1
  done
  for file in "${PLAYED[@]}"; do
    while read -r pod; do
      [[ -n "$pod" ]] && podman pod rm -f "$pod" >/dev/null 2>&1
    done < <(podman pod ps -q --filter "name=^$RUN-")
  done
  # kube play keeps a ConfigMap's or emptyDir's content as a named volume: remove the new ones.
  for volume in $(podman volume ls -q); do
    grep -qxF "$volume" <<<"$VOLUMES_BEFORE" || podman volume rm -f "$volume" >/dev/null 2>&1
  done
  podman rmi -f "$IMAGE" "$STDIO_IMAGE" >/dev/null 2>&1
  [[ -n "$REDIS_PID" ]] && kill "$REDIS_PID" 2>/dev/null && wait "$REDIS_PID" 2>/dev/null
  rm -rf "$WORK"
  ((rc == 0)) || log "failed (exit $rc); everything it started is removed"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- the image -------------------------------------------------------------------------------

# libs_of FILE ROOT: every library FILE loads, copied to the same path under ROOT.
libs_of() {
  local lib
  for lib in $(ldd "$1" | grep -o '/[^ ]*'); do
    mkdir -p "$2$(dirname "$lib")"
    cp -L "$lib" "$2$lib"
  done
}

# import ROOT IMAGE [--change ...]: ROOT as the image IMAGE, with the Dockerfile's final stage's
# user, path, CA bundle, entrypoint and environment, and any further changes.
import_image() {
  local root="$1" image="$2"
  shift 2
  tar -C "$root" -cf - . | podman import -q \
    --change 'USER=65532:65532' \
    --change 'ENV=SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt' \
    --change 'ENV=MRTR_GATEWAY__FRONT__LISTEN=0.0.0.0:8080' \
    --change 'ENV=MRTR_GATEWAY__ADMIN__LISTEN=0.0.0.0:9090' \
    --change 'ENV=MRTR_GATEWAY__LOG__FORMAT=json' \
    --change 'ENTRYPOINT=["/usr/local/bin/mrtr-gateway"]' "$@" - "$image" >/dev/null
}

build_image() {
  local bin root="$WORK/image"
  bin="$("$ROOT/tests/gateway-bin.sh")"
  mkdir -p "$root"/{usr/local/bin,etc/ssl/certs,etc/mrtr-gateway,home/nonroot,tmp}
  objcopy --strip-debug "$bin" "$root/usr/local/bin/mrtr-gateway"
  libs_of "$bin" "$root"
  cp /etc/ssl/certs/ca-certificates.crt "$root/etc/ssl/certs/"
  cp "$ROOT/config/gateway.example.toml" "$root/etc/mrtr-gateway/"
  printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' \
    >"$root/etc/passwd"
  printf 'root:x:0:\nnonroot:x:65532:\n' >"$root/etc/group"
  chmod 1777 "$root/tmp"
  chown 65532:65532 "$root/home/nonroot"
  import_image "$root" "$IMAGE" --change 'WORKDIR=/home/nonroot' \
    --change 'ENV=PATH=/usr/local/bin:/usr/bin:/bin'
  log "image $IMAGE from $(basename "$bin") ($("$bin" --version))"
}

# build_stdio_image: what deploy/stdio/server-filesystem.Dockerfile builds, from the same parts:
# the gateway image's root, Node (this host's; the Dockerfile's base is Node 20) and the
# /usr/bin/env its launcher's `#!/usr/bin/env node` needs, the server installed from its lock
# file with `npm ci --omit=dev`, the Dockerfile's gateway.toml, environment and working folder,
# and in /srv/data, the folder it serves, one file for the run to read through the pod.
build_stdio_image() {
  local root="$WORK/stdio-image" src="$ROOT/deploy/stdio/server-filesystem"
  cp -a "$WORK/image" "$root"
  mkdir -p "$root/usr/bin"
  cp -L "$(command -v node)" "$root/usr/bin/node"
  cp -L /usr/bin/env "$root/usr/bin/env"
  libs_of "$(command -v node)" "$root"
  libs_of /usr/bin/env "$root"
  mkdir -p "$root/opt/mcp" "$root/srv/data"
  cp "$src/package.json" "$src/package-lock.json" "$root/opt/mcp/"
  (cd "$root/opt/mcp" && timeout 600 npm ci --omit=dev --no-audit --no-fund --loglevel=error) ||
    fail "npm ci of deploy/stdio/server-filesystem failed"
  [[ -x "$root/opt/mcp/node_modules/.bin/mcp-server-filesystem" ]] || fail "npm ci installed no mcp-server-filesystem"
  cp "$src/gateway.toml" "$root/etc/mrtr-gateway/gateway.toml"
  printf '%s\n' "$STDIO_TEXT" >"$root/srv/data/hello.txt"
  import_image "$root" "$STDIO_IMAGE" --change 'WORKDIR=/srv/data' \
    --change 'ENV=HOME=/tmp' --change 'ENV=NODE_ENV=production' \
    --change 'ENV=PATH=/opt/mcp/node_modules/.bin:/usr/local/bin:/usr/bin:/bin' \
    --change 'CMD=["--config","/etc/mrtr-gateway/gateway.toml"]'
  log "image $STDIO_IMAGE: the gateway, node $(node --version) and @modelcontextprotocol/server-filesystem"
}

# --- ports, Redis, values --------------------------------------------------------------------

# free_ports N: N distinct free TCP ports on 127.0.0.1.
free_ports() {
  python3 -c 'import socket, sys
socks = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in socks: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))' "$1"
}

start_redis() {
  redis-server --bind 127.0.0.1 --port "$REDIS_PORT" --save '' --appendonly no \
    --loglevel warning >"$WORK/redis.log" 2>&1 &
  REDIS_PID=$!
  wait_for "Redis on $REDIS_PORT" redis_up
}
redis_up() { [[ "$(redis-cli -p "$REDIS_PORT" ping 2>/dev/null)" == PONG ]]; }

# values NAME: a values file layered over a ci/ example, as `helm install -f ci/X.yaml -f NAME`.
values() {
  cat >"$WORK/$1.values.yaml"
}

write_values() {
  local key
  key="k1:$(head -c 32 /dev/urandom | base64)"
  values sidecar <<EOF
image: {repository: ${IMAGE%:*}, tag: "$RUN", pullPolicy: Never}
ports: {mcp: $SIDECAR_MCP, admin: $SIDECAR_ADMIN}
stateKeys: {create: true, existingSecret: "", keys: ["$key"]}
legacy:
  image: {repository: ${IMAGE%:*}, tag: "$RUN", pullPolicy: Never}
  port: $LEGACY_MCP
  env:
    - {name: MRTR_GATEWAY__FRONT__LISTEN, value: "127.0.0.1:$LEGACY_MCP"}
    - {name: MRTR_GATEWAY__ADMIN__LISTEN, value: "127.0.0.1:$LEGACY_ADMIN"}
EOF
  values stdio <<EOF
image: {repository: ${STDIO_IMAGE%:*}, tag: "$RUN", pullPolicy: Never}
ports: {mcp: $STDIO_MCP, admin: $STDIO_ADMIN}
stateKeys: {create: true, existingSecret: "", keys: ["$key"]}
replicaCount: 1
EOF
  for replica in a b; do
    local mcp admin cluster
    if [[ $replica == a ]]; then
      mcp=$A_MCP admin=$A_ADMIN cluster=$A_CLUSTER
    else
      mcp=$B_MCP admin=$B_ADMIN cluster=$B_CLUSTER
    fi
    values "$replica" <<EOF
image: {repository: ${IMAGE%:*}, tag: "$RUN", pullPolicy: Never}
ports: {mcp: $mcp, admin: $admin}
park: {enabled: true, port: $cluster}
upstream: {url: "http://127.0.0.1:$LEGACY_MCP/mcp"}
stateKeys: {create: true, existingSecret: "", keys: ["$key"]}
autoscaling: {enabled: false}
replicaCount: 1
config:
  mrtr: {mode: park}
  state: {single_use: true, redis_url: "redis://127.0.0.1:$REDIS_PORT"}
EOF
  done
}

# play RELEASE PATTERN: renders the chart for the pattern with its values and plays it.
play() {
  local file="$WORK/$1.yaml"
  "$VENV/bin/python" "$HERE/render.py" "$CHART" "$file" "$RUN-$1" \
    "$CHART/ci/$2.yaml" "$WORK/$1.values.yaml" --facts "$WORK/$1"
  PLAYED+=("$file")
  timeout "$WAIT" podman kube play "$file" >"$WORK/$1.play.log" 2>&1 ||
    fail "podman kube play $1: $(grep -v 'level=error.*systemd' "$WORK/$1.play.log" | tail -n 5)"
}

# --- waits and requests ----------------------------------------------------------------------

# wait_for WHAT COMMAND...: runs COMMAND until it succeeds, at most WAIT seconds.
wait_for() {
  local what="$1" deadline=$((SECONDS + WAIT))
  shift
  until "$@"; do
    ((SECONDS < deadline)) || fail "$what: not within ${WAIT}s"
    sleep 0.5
  done
}

status() { curl -s -o /dev/null -m 5 -w '%{http_code}' "http://127.0.0.1:$1$2" || true; }
answers() { [[ "$(status "$1" "$2")" == "$3" ]]; }

META='"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}'
# call PORT BODY [TOOL]: a 2026-07-28 tools/call of TOOL (default greet), or with TOOL `-`, a
# tools/list; prints the JSON-RPC answer.
call() {
  local name="${3:-greet}" headers=(-H 'Mcp-Method: tools/list')
  [[ "$name" == - ]] || headers=(-H 'Mcp-Method: tools/call' -H "Mcp-Name: $name")
  curl -s -m 30 "http://127.0.0.1:$1/mcp" -H 'Content-Type: application/json' \
    -H 'Accept: application/json, text/event-stream' -H 'MCP-Protocol-Version: 2026-07-28' \
    "${headers[@]}" -d "$2"
}
first_round() {
  call "$1" '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"greet","arguments":{},'"$META"'}}'
}
# retry PORT FIRST: the retry of FIRST's round with the answer Ada.
retry() {
  local key state
  key="$(jq -r '.result.inputRequests | keys[0]' <<<"$2")"
  state="$(jq -r .result.requestState <<<"$2")"
  call "$1" '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"greet","arguments":{},
    "inputResponses":{"'"$key"'":{"action":"accept","content":{"name":"Ada"}}},
    "requestState":"'"$state"'",'"$META"'}}'
}
expect_question() {
  [[ "$(jq -r .result.resultType <<<"$2")" == input_required ]] || fail "$1: round one answered $2"
}
expect_hello() {
  [[ "$(jq -r '.result.content[0].text' <<<"$2")" == "Hello, Ada!" ]] || fail "$1: the retry answered $2"
}

# park_outcome PORT OUTCOME: mrtr_gateway_park_outcomes_total{outcome=OUTCOME} on that admin port.
park_outcome() {
  curl -s -m 5 "http://127.0.0.1:$1/metrics" |
    awk -v o="outcome=\"$2\"" '/^mrtr_gateway_park_outcomes_total\{/ && index($0, o) { n += $NF } END { print n + 0 }'
}
expect_outcome() {
  local got
  got="$(park_outcome "$2" "$3")"
  [[ "$got" == "$4" ]] || fail "$1: park_outcomes_total{outcome=\"$3\"} is $got, not $4"
}

# --- checks on the running pods --------------------------------------------------------------

# check_probes RELEASE: each probe the chart sets answers 200 at its path and port.
check_probes() {
  local container probe port path n=0
  while read -r container probe port path; do
    answers "$port" "$path" 200 || fail "$1: $container's $probe (GET :$port$path) answered $(status "$port" "$path")"
    n=$((n + 1))
  done <"$WORK/$1.probes"
  ((n >= 3)) || fail "$1: the chart set $n probes, expected startup, readiness and liveness"
  log "ok: $1: $n probes answer 200 as the chart sets them"
}

# check_security RELEASE: the gateway container's process, as the kernel sees it, against the
# chart's securityContext, which must ask for a read-only root and a non-root user.
check_security() {
  local ctr="$RUN-$1-mrtr-gateway-pod-0-mrtr-gateway" pid uid gid ctx
  ctx="$(jq -c '.' "$WORK/$1.security.json")"
  [[ "$(jq -r .readOnlyRootFilesystem <<<"$ctx")" == true ]] || fail "$1: the chart's securityContext does not set readOnlyRootFilesystem: $ctx"
  [[ "$(jq -r .runAsNonRoot <<<"$ctx")" == true ]] || fail "$1: the chart's securityContext does not set runAsNonRoot: $ctx"
  uid="$(jq -r .runAsUser <<<"$ctx")" gid="$(jq -r .runAsGroup <<<"$ctx")"
  [[ "$uid" =~ ^[1-9][0-9]*$ ]] || fail "$1: runAsUser is $uid, not a non-root uid"
  pid="$(podman inspect -f '{{.State.Pid}}' "$ctr")"
  [[ "$pid" =~ ^[1-9][0-9]*$ ]] || fail "$1: no running process in $ctr"
  awk '$1 == "Uid:" || $1 == "Gid:" { for (i = 2; i <= 5; i++) print $1, $i }' "/proc/$pid/status" |
    while read -r what id; do
      want=$([[ $what == Uid: ]] && echo "$uid" || echo "$gid")
      [[ "$id" == "$want" ]] || fail "$1: the gateway runs with $what $id, the chart asks $want"
    done
  grep -q '^CapEff:[[:space:]]*0*$' "/proc/$pid/status" || fail "$1: the gateway holds capabilities: $(grep CapEff "/proc/$pid/status")"
  grep -q '^NoNewPrivs:[[:space:]]*1$' "/proc/$pid/status" || fail "$1: privilege escalation is not blocked"
  # Field 5 is the mount point, 6 its options: the root must be mounted read-only.
  awk '$5 == "/" { print $6 }' "/proc/$pid/mountinfo" | grep -qE '(^|,)ro(,|$)' ||
    fail "$1: the gateway's root filesystem is writable"
  log "ok: $1: the gateway runs as $uid:$gid, read-only root, no capabilities, no new privileges"
}

# check_server RELEASE: the legacy stdio server the gateway spawned runs as its child, as the same
# non-root user, on the same read-only root.
check_server() {
  local pid child n=0 uids
  pid="$(podman inspect -f '{{.State.Pid}}' "$RUN-$1-mrtr-gateway-pod-0-mrtr-gateway")"
  for child in $(cat /proc/"$pid"/task/*/children 2>/dev/null); do
    tr '\0' ' ' <"/proc/$child/cmdline" | grep -q 'mcp-server-filesystem /srv/data' || continue
    uids="$(awk '$1 == "Uid:" || $1 == "Gid:" { print $2, $3, $4, $5 }' "/proc/$child/status" | tr '\n' ' ')"
    [[ "$uids" == "65532 65532 65532 65532 65532 65532 65532 65532 " ]] ||
      fail "$1: the stdio server (pid $child) runs with uid and gid $uids, not 65532"
    awk '$5 == "/" { print $6 }' "/proc/$child/mountinfo" | grep -qE '(^|,)ro(,|$)' ||
      fail "$1: the stdio server's root filesystem is writable"
    n=$((n + 1))
  done
  ((n >= 1)) || fail "$1: the gateway (pid $pid) has no mcp-server-filesystem child"
  log "ok: $1: the gateway spawned $n server process(es), each as 65532:65532 on the read-only root"
}

# stop_pod RELEASE: stops the release's pod in the background as a pod deletion does (SIGTERM,
# then SIGKILL after the chart's grace period); expect_clean_exit waits for it.
stop_pod() {
  STOPPING="$1"
  GRACE="$(jq -r .grace "$WORK/$1.security.json")"
  STOP_STARTED=$SECONDS
  timeout "$((GRACE + WAIT))" podman pod stop -t "$GRACE" "$RUN-$1-mrtr-gateway-pod-0" >"$WORK/stop.log" 2>&1 &
  STOPPER=$!
}

# expect_clean_exit WHAT: the pod stop_pod stopped is down, its gateway exited 0 within the grace
# period; sets TOOK to the seconds it took.
expect_clean_exit() {
  local code
  wait "$STOPPER" || fail "podman pod stop: $(cat "$WORK/stop.log")"
  TOOK=$((SECONDS - STOP_STARTED))
  code="$(podman inspect -f '{{.State.ExitCode}}' "$RUN-$STOPPING-mrtr-gateway-pod-0-mrtr-gateway")"
  [[ "$code" == 0 ]] || fail "$1 exited $code after SIGTERM, not 0"
  ((TOOK < GRACE)) || fail "$1 took ${TOOK}s to stop, the grace period is ${GRACE}s"
}

# --- the run ---------------------------------------------------------------------------------

started=$SECONDS
build_image
build_stdio_image
read -r SIDECAR_MCP SIDECAR_ADMIN LEGACY_MCP LEGACY_ADMIN A_MCP A_ADMIN A_CLUSTER B_MCP B_ADMIN B_CLUSTER REDIS_PORT \
  STDIO_MCP STDIO_ADMIN <<<"$(free_ports 13)"
start_redis
write_values

log "sidecar pattern: the gateway and a legacy server in one pod"
play sidecar sidecar
wait_for "sidecar: /readyz" answers "$SIDECAR_ADMIN" /readyz 200
check_probes sidecar
check_security sidecar
first="$(first_round "$SIDECAR_MCP")"
expect_question sidecar "$first"
expect_hello sidecar "$(retry "$SIDECAR_MCP" "$first")"
log "ok: sidecar: greet asked once, and the retry completed: Hello, Ada!"

log "stdio pattern: the gateway spawning a legacy stdio server (server-filesystem) in one container"
play stdio stdio
wait_for "stdio: /readyz" answers "$STDIO_ADMIN" /readyz 200
check_probes stdio
check_security stdio
listed="$(call "$STDIO_MCP" '{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{'"$META"'}}' -)"
jq -e '.result.tools | map(.name) | index("read_text_file")' <<<"$listed" >/dev/null ||
  fail "stdio: tools/list has no read_text_file: $(head -c 300 <<<"$listed")"
read_file() {
  call "$STDIO_MCP" '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"read_text_file",
    "arguments":{"path":"/srv/data/hello.txt"},'"$META"'}}' read_text_file
}
got="$(read_file)"
[[ "$(jq -r '.result.content[0].text' <<<"$got")" == "$STDIO_TEXT" ]] ||
  fail "stdio: read_text_file of /srv/data/hello.txt answered $(head -c 300 <<<"$got")"
check_server stdio
# The server's writes fail on the read-only root (EROFS), and the tool says so in a result.
got="$(call "$STDIO_MCP" '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"write_file",
  "arguments":{"path":"/srv/data/new.txt","content":"x"},'"$META"'}}' write_file)"
[[ "$(jq -r '.result.isError' <<<"$got")" == true && "$(jq -r '.result.content[0].text' <<<"$got")" == *EROFS* ]] ||
  fail "stdio: write_file on a read-only root answered $(head -c 300 <<<"$got")"
[[ "$(jq -r '.result.content[0].text' <<<"$(read_file)")" == "$STDIO_TEXT" ]] || fail "stdio: the server stopped serving after a failed write"
log "ok: stdio: tools/list and read_text_file through the pod; write_file refused by the read-only root (EROFS)"
stop_pod stdio
expect_clean_exit "the stdio pod"
log "ok: stdio: the gateway and its server stopped on SIGTERM, exit 0 in ${TOOK}s (grace ${GRACE}s)"

log "standalone pattern: two replicas, park mode, single use in Redis"
play a standalone
play b standalone
wait_for "replica a: /readyz" answers "$A_ADMIN" /readyz 200
wait_for "replica b: /readyz" answers "$B_ADMIN" /readyz 200
check_probes a
check_probes b
check_security a
check_security b

first="$(first_round "$A_MCP")"
expect_question "round one on a" "$first"
expect_outcome "round one on a" "$A_ADMIN" parked 1
expect_hello "retry on b" "$(retry "$B_MCP" "$first")"
expect_outcome "retry on b" "$B_ADMIN" forwarded 1
expect_outcome "retry on b" "$A_ADMIN" resumed 1
consumed="$(redis-cli -p "$REDIS_PORT" dbsize)"
((consumed >= 1)) || fail "single use: Redis records no consumed state"
log "ok: round one parked on a, the retry sent to b was forwarded to a and completed; Redis holds $consumed key(s)"

log "SIGTERM to replica a's pod in the middle of a conversation"
first="$(first_round "$A_MCP")"
expect_question "round one on a" "$first"
expect_outcome "round one on a" "$A_ADMIN" parked 2
# A call in flight on a when the signal comes: the demo's count_down, 8 steps of 500 ms, whose
# progress notifications show it running.
curl -s -N -m 30 "http://127.0.0.1:$A_MCP/mcp" -H 'Content-Type: application/json' \
  -H 'Accept: application/json, text/event-stream' -H 'MCP-Protocol-Version: 2026-07-28' \
  -H 'Mcp-Method: tools/call' -H 'Mcp-Name: count_down' \
  -d '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"count_down","arguments":{"steps":8,"delay_ms":500},"_meta":{"progressToken":"p","io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}' \
  >"$WORK/in-flight.out" 2>&1 &
in_flight=$!
wait_for "count_down running on a" grep -q 'notifications/progress' "$WORK/in-flight.out"
stop_pod a
wait_for "replica a draining: /readyz 503" answers "$A_ADMIN" /readyz 503
answers "$A_ADMIN" /healthz 200 || fail "replica a draining: /healthz answered $(status "$A_ADMIN" /healthz), not 200"
expect_hello "retry on b while a stops" "$(retry "$B_MCP" "$first")"
forwarded="$(park_outcome "$B_ADMIN" forwarded)" fallback="$(park_outcome "$B_ADMIN" fallback)"
wait "$in_flight" || fail "the call in flight on a when it got SIGTERM: curl failed: $(tail -c 300 "$WORK/in-flight.out")"
grep -q 'Done after 8 steps' "$WORK/in-flight.out" ||
  fail "the call in flight on a when it got SIGTERM was not drained: $(tail -c 300 "$WORK/in-flight.out")"
expect_clean_exit "replica a"
# a's listeners, its internal one too, stop with its readiness: the forward finds no owner, and
# b replays the chain from the journal, as docs/src/park-mode.md says of an owner that is gone.
[[ "$forwarded" == 1 && "$fallback" == 1 ]] ||
  fail "retry on b while a stops: forwarded $forwarded (want 1, the earlier retry), fallback $fallback (want 1)"
log "ok: a answered /readyz 503 and /healthz 200 while draining, finished the call in flight, exited 0 in ${TOOK}s (grace ${GRACE}s); b completed the retry by replay"

log "deployment run passed in $((SECONDS - started))s"
