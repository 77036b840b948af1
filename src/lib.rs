//! mrtr-gateway: a stateless reverse proxy that lets MCP servers written before the 2026-07-28
//! revision serve 2026-07-28 clients unchanged.
//!
//! # Layout
//! - [`protocol`]: JSON-RPC envelopes, method names, `_meta` keys, versions (shared vocabulary).
//! - [`mrtr`]: the sealed replay core — state codec, key ring, journal, replay decisions and
//!   translation of embedded requests. Pure functions, no I/O, no clock of its own.
//! - [`capabilities`]: 2026-07-28 client capabilities ↔ legacy `initialize` capabilities, and the
//!   capability each legacy server request needs.
//! - [`upstream`]: the legacy client — one session seam over Streamable HTTP and stdio, the pool.
//! - [`bridge`]: drives one front request against a leased upstream session and turns server
//!   requests into `input_required` rounds.
//! - [`front`]: the 2026-07-28 Streamable HTTP surface (validation, dispatch, responses).
//! - [`legacy`]: 2025-era clients on the same endpoint, relayed as transparent sessions.
//! - [`stdio_front`]: the same front served on stdin/stdout (`mrtr-gateway stdio`).
//! - [`demo`]: a real legacy Streamable HTTP server used as the embedded default and in tests.
//! - [`config`]: TOML + environment + CLI, validated into typed settings.
//! - [`metrics`], [`admin`]: Prometheus metrics and the admin listener.
//! - [`tool_report`]: the per-tool migration report behind `GET /admin/tools`.
//! - [`error`]: the front-facing error model (JSON-RPC code, HTTP status, metric label).
//! - [`auth`]: the principal of a request (anonymous, or a JWT's issuer and subject, checked
//!   against static or JWKS keys), the RFC 9728 metadata, and what the principal may call.
//! - [`limits`]: token-bucket rate limits per principal and per tool.
//! - [`state_store`]: single-use `requestState`, recorded in Redis across replicas.
//! - [`subscriptions`]: `subscriptions/listen`, bridged onto upstream sessions that listen.
//! - [`healthcheck`]: `mrtr-gateway healthcheck`, the image's shell-free probe of `/healthz`.
//! - [`telemetry`]: OpenTelemetry spans of front requests, rounds and upstream exchanges,
//!   exported over OTLP when configured.
//! - [`server`]: the accept loop (TLS, connection cap, graceful drain); [`app`] wires it all.

pub mod admin;
pub mod app;
pub mod auth;
pub mod bridge;
pub mod capabilities;
pub mod cluster;
pub mod config;
pub mod defaults;
pub mod demo;
pub mod error;
pub mod front;
pub mod healthcheck;
pub mod legacy;
pub mod limits;
pub mod logging;
pub mod metrics;
pub mod mrtr;
pub mod protocol;
pub mod server;
pub mod state_store;
pub mod stdio_front;
pub mod subscriptions;
pub mod telemetry;
pub mod tool_report;
pub mod upstream;

/// Completes on SIGTERM or SIGINT (Ctrl-C): the gateway then drains and exits.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! { _ = ctrl_c => {}, _ = term => {} }
}
