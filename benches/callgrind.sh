#!/usr/bin/env bash
# Instructions and allocations per plain call on each path of the proxy bench, under callgrind.
#
# Each path runs alone (`PROXY_BENCH_ONLY`) twice, with a short and a long run of sequential calls;
# the difference between the two, divided by the difference in calls, is what one call costs with
# start-up and warm-up taken out. Counted over every process of the run (the bench, and the peer
# when it is a path: `--trace-children`), so a path in another process is counted like the others.
# Allocations are the calls to malloc, calloc and realloc, as callgrind records them.
#
# Usage: benches/callgrind.sh [path...]      (default: direct relay gateway; `peer` needs
#        PROXY_BENCH_PEER, which benches/peer.sh sets)
# Env:   CALLGRIND_N_LO, CALLGRIND_N_HI (default 200 and 1200 calls).
set -euo pipefail
cd "$(dirname "$0")/.."

command -v valgrind >/dev/null || { echo "callgrind.sh: needs valgrind (Debian package valgrind)" >&2; exit 69; }
paths=("$@")
[[ ${#paths[@]} -gt 0 ]] || paths=(direct relay gateway)
lo=${CALLGRIND_N_LO:-200}
hi=${CALLGRIND_N_HI:-1200}
(( hi > lo )) || { echo "callgrind.sh: CALLGRIND_N_HI must exceed CALLGRIND_N_LO" >&2; exit 64; }

bin=$(cargo bench --bench proxy --no-run --message-format=json 2>/dev/null | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "proxy" and m.get("executable"):
        print(m["executable"])')
[[ -x "$bin" ]] || { echo "callgrind.sh: the proxy bench did not build" >&2; exit 70; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# Sums the instructions and allocation calls of every callgrind file given.
totals() {
  python3 - "$@" <<'PY'
import re, sys
ir = allocs = 0
for path in sys.argv[1:]:
    names, current = {}, None
    for line in open(path, errors="replace"):
        if line.startswith("totals:") or line.startswith("summary:"):
            if line.startswith("totals:"):
                ir += int(line.split()[1])
            continue
        # A function's name is given once, where its id first appears (as fn= or cfn=).
        m = re.match(r"(c?)fn=\((\d+)\)(?: (.*))?", line)
        if m:
            if m.group(3):
                names[m.group(2)] = m.group(3).strip()
            if m.group(1):
                current = names.get(m.group(2), "")
            continue
        if line.startswith("calls=") and current in ("malloc", "calloc", "realloc"):
            allocs += int(line[6:].split()[0])
print(ir, allocs)
PY
}

calc() { python3 -c "print($1)"; }

printf '%-8s %16s %16s\n' path "instr/call" "allocs/call"
declare -A per_ir
for path in "${paths[@]}"; do
  for n in "$lo" "$hi"; do
    mkdir -p "$work/$path-$n"
    PROXY_BENCH_ONLY=$path PROXY_BENCH_N=$n valgrind --tool=callgrind --trace-children=yes \
      --callgrind-out-file="$work/$path-$n/cg.%p" "$bin" >"$work/$path-$n/log" 2>&1 \
      || { echo "callgrind.sh: the $path run of $n calls failed:" >&2; tail -20 "$work/$path-$n/log" >&2; exit 70; }
    grep -q "^$path: $n calls" "$work/$path-$n/log" \
      || { echo "callgrind.sh: the $path run did not make its $n calls:" >&2; grep -a "calls" "$work/$path-$n/log" >&2; exit 70; }
  done
  read -r ir_lo al_lo < <(totals "$work/$path-$lo"/cg.*)
  read -r ir_hi al_hi < <(totals "$work/$path-$hi"/cg.*)
  per_ir[$path]=$(( (ir_hi - ir_lo) / (hi - lo) ))
  printf '%-8s %16d %16.1f\n' "$path" "${per_ir[$path]}" "$(calc "($al_hi - $al_lo) / ($hi - $lo)")"
done
if [[ -n "${per_ir[relay]:-}" && -n "${per_ir[gateway]:-}" ]]; then
  printf 'gateway/relay instructions per call: %.2f (target at most 1.25)\n' \
    "$(calc "${per_ir[gateway]} / ${per_ir[relay]}")"
fi
if [[ -n "${per_ir[peer]:-}" && -n "${per_ir[gateway]:-}" ]]; then
  printf 'peer/gateway instructions per call: %.2f\n' "$(calc "${per_ir[peer]} / ${per_ir[gateway]}")"
fi
