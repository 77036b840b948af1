//! Binding the gateway's listeners, and what a failed bind tells the operator: which listener,
//! which address, why, and how to move it (the flag, the configuration key and the environment
//! variable, from the one table in `src/config/cli.rs`). A newcomer whose port 8080 is taken
//! learns from one line that `--listen` exists.

use std::fmt;
use std::net::SocketAddr;

use tokio::net::TcpListener;

use crate::config::{cli, env_name};

/// One of the gateway's listeners.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listener {
    /// The 2026-07-28 front (`front.listen`).
    Front,
    /// `/metrics`, `/healthz`, `/readyz` (`admin.listen`).
    Admin,
    /// Retries forwarded by other replicas (`cluster.listen`).
    Cluster,
}

/// A listener that could not take its address.
#[derive(Debug, thiserror::Error)]
#[error("cannot listen on {addr} for the {listener}: {source}; {}", hint(*.listener, .source))]
pub struct BindError {
    pub listener: Listener,
    pub addr: SocketAddr,
    #[source]
    pub source: std::io::Error,
}

// === impl Listener ===

impl Listener {
    /// The configuration key of its address.
    pub fn key(self) -> &'static str {
        match self {
            Self::Front => "front.listen",
            Self::Admin => "admin.listen",
            Self::Cluster => "cluster.listen",
        }
    }
}

impl fmt::Display for Listener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Front => "MCP front",
            Self::Admin => "admin listener",
            Self::Cluster => "internal listener",
        })
    }
}

/// How to move the listener: its flag, when it has one, its key and its environment variable.
fn hint(listener: Listener, source: &std::io::Error) -> String {
    let key = listener.key();
    let how = match cli::flag_for(key) {
        Some(flag) => format!("{flag}, the configuration key {key} or {}", env_name(key)),
        None => format!("the configuration key {key} or {}", env_name(key)),
    };
    let why = match source.kind() {
        std::io::ErrorKind::AddrInUse => "another process is listening there",
        _ => "this process cannot listen there",
    };
    format!("{why}: choose another address with {how}")
}

/// Binds `addr` for `listener`.
pub(super) async fn bind(listener: Listener, addr: SocketAddr) -> Result<TcpListener, BindError> {
    TcpListener::bind(addr).await.map_err(|source| BindError { listener, addr, source })
}

/// The address `tcp` bound (the port the system picked for port 0).
pub(super) fn local(
    listener: Listener,
    tcp: &TcpListener,
    addr: SocketAddr,
) -> Result<SocketAddr, BindError> {
    tcp.local_addr().map_err(|source| BindError { listener, addr, source })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_taken_address_names_the_listener_and_how_to_move_it() {
        let taken = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = taken.local_addr().unwrap();
        let front = bind(Listener::Front, addr).await.unwrap_err().to_string();
        assert!(front.starts_with(&format!("cannot listen on {addr} for the MCP front: ")), "{front}");
        assert!(
            front.ends_with(
                "another process is listening there: choose another address with --listen, \
                 the configuration key front.listen or MRTR_GATEWAY__FRONT__LISTEN"
            ),
            "{front}"
        );
        let admin = bind(Listener::Admin, addr).await.unwrap_err().to_string();
        assert!(admin.contains("for the admin listener: "), "{admin}");
        assert!(admin
            .ends_with("--admin-listen, the configuration key admin.listen or MRTR_GATEWAY__ADMIN__LISTEN"));
        let cluster = bind(Listener::Cluster, addr).await.unwrap_err().to_string();
        assert!(
            cluster.ends_with("with the configuration key cluster.listen or MRTR_GATEWAY__CLUSTER__LISTEN")
        );
    }
}
