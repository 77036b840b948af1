#!/usr/bin/env bash
# `mrtr-gateway check` against four real legacy stdio servers: server-everything,
# server-filesystem, mcp-server-git and the FastMCP fixture, each with a few tool
# calls to try (check_report.py holds them, and every expected field of the JSON
# reports, exact counts included). The check starts each server itself, once
# directly and once behind its embedded gateway.
#
#   check_report.sh GATEWAY_BIN RUN_DIR
#
# Writes RUN_DIR/check-<server>.json (the report), .txt (the readable report) and
# .stderr (progress), and prints `CHECK PASS|FAIL check-command <server> <field> ...`
# lines for run.sh to count. Exits 1 when a field differs. Its scratch folder (the
# filesystem server's directory, the git server's repository) is removed on exit.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
GATEWAY="$(realpath "$1")"
RUN_DIR="$2"
CHECK_SECONDS="${CHECK_SECONDS:-60}"
PY_LEGACY="$HERE/.venv-legacy/bin/python"
EVERYTHING_JS="$HERE/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
FILESYSTEM_JS="$HERE/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"

SCRATCH="$(realpath "$(mktemp -d "${TMPDIR:-/tmp}/mrtr-check.XXXXXX")")"
trap 'rm -rf -- "$SCRATCH"' EXIT
mkdir -p "$SCRATCH/fs" "$SCRATCH/git"
printf 'hello\n' >"$SCRATCH/fs/a.txt"
git init --quiet "$SCRATCH/git"

FAILED=0

# check_one SERVER DIR COMMAND...: runs the check of COMMAND in DIR, then verifies its report.
check_one() {
  local server="$1" dir="$2" status=0
  shift 2
  local calls="$RUN_DIR/check-$server.calls.json" report="$RUN_DIR/check-$server.json"
  python3 "$HERE/check_report.py" calls "$server" "$SCRATCH" >"$calls"
  rm -f -- "$report"
  (cd "$dir" && timeout "$((CHECK_SECONDS * 5))" "$GATEWAY" check --calls "$calls" --json "$report" -- "$@" \
    >"$RUN_DIR/check-$server.txt" 2>"$RUN_DIR/check-$server.stderr") || status=$?
  python3 "$HERE/check_report.py" verify "$server" "$report" "$status" || FAILED=1
}

check_one everything "$SCRATCH" node "$EVERYTHING_JS" stdio
check_one filesystem "$SCRATCH" node "$FILESYSTEM_JS" "$SCRATCH/fs"
check_one git "$SCRATCH/git" "$PY_LEGACY" -m mcp_server_git --repository .
check_one fixture "$SCRATCH" "$PY_LEGACY" "$HERE/legacy_fixture_server.py" --stdio
exit "$FAILED"
