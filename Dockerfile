# syntax=docker/dockerfile:1
# Multi-stage build: a full Rust toolchain compiles the gateway; the runtime image holds only
# the binary, runs as a non-root user, and has no shell.

FROM rust:1.88-slim-bookworm AS build
WORKDIR /src
# Dependencies first, so source edits do not refetch them.
COPY Cargo.toml Cargo.lock ./
RUN mkdir src benches && echo 'fn main() {}' > src/main.rs && touch src/lib.rs \
    && echo 'fn main() {}' > benches/state.rs && echo 'fn main() {}' > benches/proxy.rs \
    && cargo fetch --locked
COPY src ./src
COPY benches ./benches
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target,sharing=locked \
    cargo build --release --locked --bin mrtr-gateway \
    && install -D target/release/mrtr-gateway /out/mrtr-gateway \
    && /out/mrtr-gateway --version

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/mrtr-gateway /usr/local/bin/mrtr-gateway
COPY config/gateway.example.toml /etc/mrtr-gateway/gateway.example.toml
USER nonroot:nonroot
# 8080: MCP (2026-07-28) front. 9090: /metrics, /healthz, /readyz.
EXPOSE 8080 9090
ENV MRTR_GATEWAY__FRONT__LISTEN=0.0.0.0:8080 \
    MRTR_GATEWAY__ADMIN__LISTEN=0.0.0.0:9090 \
    MRTR_GATEWAY__LOG__FORMAT=json
ENTRYPOINT ["/usr/local/bin/mrtr-gateway"]
