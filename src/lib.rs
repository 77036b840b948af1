//! mrtr-gateway: a stateless reverse proxy that lets MCP servers written before the 2026-07-28
//! revision serve 2026-07-28 clients unchanged.
//!
//! # Layout
//! The modules stand in layers, bottom first: `protocol`, `defaults` → `mrtr`, `demo`, `schema` →
//! `config`, `logging`, `clock`, `readiness`, `body`, `server`, `healthcheck` → `outbound`, `telemetry`,
//! `capabilities`, `limits`, `tool_report` → `upstream` → `auth`, `legacy`, `subscriptions` →
//! `metrics` → `state_store`, `error` → `bridge` → `front`, `stdio_front` → `cluster` → `app`,
//! `admin` → `check`. Imports only point down. The README's `## Layout` section says what each owns and is
//! the list `tests/it/layering.rs` checks the code against.

pub mod admin;
pub mod app;
pub mod auth;
pub mod body;
pub mod bridge;
pub mod capabilities;
pub mod check;
pub mod clock;
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
pub mod outbound;
pub mod protocol;
pub mod readiness;
pub mod schema;
pub mod server;
pub mod state_store;
pub mod stdio_front;
pub mod subscriptions;
pub mod tasks;
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
