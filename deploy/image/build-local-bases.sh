#!/usr/bin/env bash
# Builds local stand-ins for the two base images the Dockerfile names, from Debian packages
# only, for a machine that cannot pull from a public image registry:
#
#   docker.io/library/rust:<RUST>-slim-bookworm  Debian bookworm (debootstrap, minbase) with gcc,
#                                                libc6-dev and ca-certificates, plus this host's
#                                                Rust toolchain (`rustc --print sysroot`) copied
#                                                to /usr/local/rust, docs left out, and the
#                                                host's local CA certificates (to fetch crates
#                                                through a TLS-inspecting proxy)
#   gcr.io/distroless/cc-debian12:nonroot        no shell, no package manager: the files of
#                                                libc6, libgcc-s1 and the CA bundle from the same
#                                                bookworm tree, a passwd with `nonroot` (65532),
#                                                /tmp, and USER 65532:65532
#
# With `--stdio`, also the runtimes of the deploy/stdio/ examples:
#
#   docker.io/library/python:3.11-slim-bookworm  the same tree with Debian's python3 and venv
#   docker.io/library/node:20-bookworm-slim      the same tree with this host's node and npm
#
# Then `podman build --pull=never -t mrtr-gateway .` uses them. Needs root, debootstrap and
# buildah (Debian packages); takes a few minutes, mostly debootstrap, so CI does not run it.
#
#   deploy/image/build-local-bases.sh [--stdio] [WORKDIR]     # default: target/local-bases
#   DEBIAN_MIRROR=http://mirror.example/debian deploy/image/build-local-bases.sh
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
STDIO=false
if [[ "${1:-}" == "--stdio" ]]; then
  STDIO=true
  shift
fi
WORK="${1:-$ROOT/target/local-bases}"
SUITE=bookworm
SYSROOT="$(rustc --print sysroot)"
RUST="$(rustc --version | awk '{split($2, v, "."); print v[1] "." v[2]}')"
BUILD_BASE="docker.io/library/rust:$RUST-slim-bookworm"
RUNTIME_BASE="gcr.io/distroless/cc-debian12:nonroot"

log() { printf 'bases: %s\n' "$*" >&2; }

# An image already built is kept (REBUILD=1 rebuilds it).
have() {
  [[ "${REBUILD:-0}" != 1 ]] && buildah inspect --type image "$1" >/dev/null 2>&1 && log "keeping $1"
}

debian_tree() {
  local tree="$WORK/rootfs"
  if [[ ! -f "$tree/etc/debian_version" ]]; then
    rm -rf "$tree"
    log "debootstrap $SUITE into $tree"
    # shellcheck disable=SC2086 # an unset mirror means debootstrap's own default
    debootstrap --variant=minbase "$SUITE" "$tree" ${DEBIAN_MIRROR:-}
  fi
  if [[ ! -x "$tree/usr/bin/gcc" ]]; then
    chroot "$tree" apt-get install -y --no-install-recommends gcc libc6-dev ca-certificates
    chroot "$tree" apt-get clean
  fi
}

# Image builds fetch packages: trust what this host trusts (a proxy's own CA, say).
trust_host_cas() {
  if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
    buildah copy "$1" /usr/local/share/ca-certificates/ /usr/local/share/ca-certificates/ >/dev/null
    buildah run --isolation chroot "$1" -- update-ca-certificates >/dev/null
  fi
}

build_base() {
  local ctr
  have "$BUILD_BASE" && return
  log "building $BUILD_BASE (Rust from $SYSROOT)"
  ctr="$(buildah from scratch)"
  buildah copy "$ctr" "$WORK/rootfs/" / >/dev/null
  tar -C "$SYSROOT" --exclude=./share/doc -cf - . | buildah run --isolation chroot "$ctr" -- \
    sh -c 'mkdir -p /usr/local/rust /usr/local/cargo && tar -C /usr/local/rust -xf -'
  trust_host_cas "$ctr"
  buildah config --env CARGO_HOME=/usr/local/cargo \
    --env PATH=/usr/local/cargo/bin:/usr/local/rust/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --label org.opencontainers.image.description="local stand-in: Debian $SUITE + Rust $RUST" "$ctr"
  buildah run --isolation chroot "$ctr" -- cargo --version
  buildah commit --rm "$ctr" "$BUILD_BASE" >/dev/null
}

runtime_tree() {
  local tree="$WORK/runtime"
  rm -rf "$tree"
  mkdir -p "$tree"/{usr/lib,usr/lib64,usr/bin,etc/ssl/certs,home/nonroot,tmp}
  ln -s usr/lib "$tree/lib"
  ln -s usr/lib64 "$tree/lib64"
  ln -s usr/bin "$tree/bin"
  chroot "$WORK/rootfs" dpkg -L libc6 libgcc-s1 | sed 's|^/||' | while read -r path; do
    [[ -d "$WORK/rootfs/$path" && ! -L "$WORK/rootfs/$path" ]] || printf '%s\n' "$path"
  done | tar -C "$WORK/rootfs" --no-recursion -cf - -T - | tar -C "$tree" --keep-directory-symlink -xf -
  cp "$WORK/rootfs/etc/ssl/certs/ca-certificates.crt" "$tree/etc/ssl/certs/"
  printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' \
    >"$tree/etc/passwd"
  printf 'root:x:0:\nnonroot:x:65532:\n' >"$tree/etc/group"
  printf 'passwd: files\ngroup: files\nhosts: files dns\n' >"$tree/etc/nsswitch.conf"
  chmod 1777 "$tree/tmp"
  chown 65532:65532 "$tree/home/nonroot"
}

runtime_base() {
  local ctr
  have "$RUNTIME_BASE" && return
  log "building $RUNTIME_BASE"
  runtime_tree
  ctr="$(buildah from scratch)"
  buildah copy "$ctr" "$WORK/runtime/" / >/dev/null
  buildah config --user 65532:65532 --workingdir /home/nonroot \
    --env PATH=/usr/local/bin:/usr/bin:/bin --env SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
    --label org.opencontainers.image.description="local stand-in: libc6, libgcc-s1, CA bundle from Debian $SUITE" "$ctr"
  buildah commit --rm "$ctr" "$RUNTIME_BASE" >/dev/null
}

python_base() {
  local ctr name=docker.io/library/python:3.11-slim-bookworm
  have "$name" && return
  log "building $name (Debian's python3)"
  ctr="$(buildah from scratch)"
  buildah copy "$ctr" "$WORK/rootfs/" / >/dev/null
  buildah run --isolation chroot "$ctr" -- sh -c \
    'apt-get install -y --no-install-recommends python3 python3-venv >/dev/null && apt-get clean'
  trust_host_cas "$ctr"
  # pip trusts its own bundle unless told otherwise.
  buildah config --env PIP_CERT=/etc/ssl/certs/ca-certificates.crt "$ctr"
  buildah commit --rm "$ctr" "$name" >/dev/null
}

node_base() {
  local ctr name=docker.io/library/node:20-bookworm-slim
  have "$name" && return
  log "building $name (node $(node --version) from this host)"
  ctr="$(buildah from scratch)"
  buildah copy "$ctr" "$WORK/rootfs/" / >/dev/null
  buildah copy "$ctr" "$(command -v node)" /usr/local/bin/node >/dev/null
  buildah copy "$ctr" "$(dirname "$(readlink -f "$(command -v npm)")")/.." /usr/local/lib/node_modules/npm >/dev/null
  buildah run --isolation chroot "$ctr" -- sh -c \
    'ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm && ln -s ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx'
  trust_host_cas "$ctr"
  buildah config --env NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt "$ctr"
  buildah run --isolation chroot "$ctr" -- npm --version >/dev/null
  buildah commit --rm "$ctr" "$name" >/dev/null
}

mkdir -p "$WORK"
debian_tree
build_base
runtime_base
log "done: $BUILD_BASE and $RUNTIME_BASE"
if $STDIO; then
  python_base
  node_base
  log "done: the stdio examples' runtimes"
fi
