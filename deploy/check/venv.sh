# Sourced by deploy/check/run.sh and deploy/run/run.sh: the pinned check tools (requirements.txt:
# Helm's engine, kubernetes-validate, yamllint) in a venv kept in the user's cache folder under
# the digest of that file (DEPLOY_CHECK_VENV overrides it), so that a fresh clone reuses it and a
# change of pins installs a new one. Sets VENV; `install_tools` fills it once per set of pins.
# Needs ROOT (the repository) and a `log` function.
DIGEST="$(sha256sum "$ROOT/deploy/check/requirements.txt" | cut -c1-16)"
VENV="${DEPLOY_CHECK_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/mrtr-gateway/deploy-check-$DIGEST}"
PIP_TIMEOUT=600

install_tools() {
  local stamp="$VENV/.complete"
  if [[ -x "$VENV/bin/python" && -f "$stamp" ]]; then
    return
  fi
  log "installing the pinned check tools into $VENV (once per set of pins)"
  rm -rf "$VENV"
  mkdir -p "$(dirname "$VENV")"
  python3 -m venv "$VENV"
  timeout "$PIP_TIMEOUT" "$VENV/bin/pip" install --quiet --disable-pip-version-check \
    --no-deps --only-binary=:all: -r "$ROOT/deploy/check/requirements.txt"
  touch "$stamp"
}
