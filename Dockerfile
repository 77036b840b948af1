# mrtr-gateway container image.
#
# Two stages: a Rust toolchain compiles the gateway (dependencies in a layer of their own, so a
# source edit rebuilds only the crate); the runtime holds the binary, a commented configuration
# example and nothing else: no shell, no package manager, non-root (65532), and it writes no
# file, so it runs with a read-only root filesystem.
#
#   docker build -t mrtr-gateway:0.1.0 .          # or: podman build, buildah bud
#   docker run --rm -p 8080:8080 -p 9090:9090 --read-only mrtr-gateway:0.1.0
#
# With no flag it fronts the embedded demo server. Flags, `--config FILE` and
# MRTR_GATEWAY__SECTION__KEY variables configure it (see README, Configuration).
# On a machine that cannot pull these bases, deploy/image/build-local-bases.sh builds local
# stand-ins under the same names.

ARG RUST_VERSION=1.95
ARG BUILD_IMAGE=docker.io/library/rust:${RUST_VERSION}-slim-bookworm
ARG RUNTIME_IMAGE=gcr.io/distroless/cc-debian12:nonroot

FROM ${BUILD_IMAGE} AS build
WORKDIR /src
# The dependency layer: the manifest and lock file with placeholder sources (the library, the
# binary and each declared bench), built once and reused until Cargo.toml or Cargo.lock change.
COPY Cargo.toml Cargo.lock ./
RUN mkdir -p src benches \
    && echo 'fn main() {}' > src/main.rs && touch src/lib.rs \
    && for bench in $(sed -n '/^\[\[bench\]\]/{n;s/^name = "\(.*\)"/\1/p}' Cargo.toml); do \
         echo 'fn main() {}' > "benches/$bench.rs"; done \
    && cargo build --locked --release --bin mrtr-gateway \
    && rm -rf src target/release/.fingerprint/mrtr-gateway-* target/release/deps/*mrtr_gateway*
COPY src ./src
# The version baked into the binary is Cargo.toml's; the label below must say the same.
ARG VERSION=0.1.0
RUN cargo build --locked --release --bin mrtr-gateway \
    && install -D -m 0555 target/release/mrtr-gateway /out/mrtr-gateway \
    && test "$(/out/mrtr-gateway --version)" = "mrtr-gateway ${VERSION}"

FROM ${RUNTIME_IMAGE}
ARG VERSION=0.1.0
ARG REVISION=unknown
LABEL org.opencontainers.image.title="mrtr-gateway" \
      org.opencontainers.image.description="Stateless reverse proxy that lets legacy MCP servers serve 2026-07-28 clients unchanged" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /out/mrtr-gateway /usr/local/bin/mrtr-gateway
COPY config/gateway.example.toml /etc/mrtr-gateway/gateway.example.toml
USER 65532:65532
# 8080: the MCP (2026-07-28) front. 9090: the admin listener (/metrics, /healthz, /readyz).
EXPOSE 8080 9090
ENV MRTR_GATEWAY__FRONT__LISTEN=0.0.0.0:8080 \
    MRTR_GATEWAY__ADMIN__LISTEN=0.0.0.0:9090 \
    MRTR_GATEWAY__LOG__FORMAT=json
# The binary is its own probe: GET /healthz on the admin port over loopback, no shell needed.
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
    CMD ["/usr/local/bin/mrtr-gateway", "healthcheck"]
ENTRYPOINT ["/usr/local/bin/mrtr-gateway"]
