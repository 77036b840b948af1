//! Every HTTP client the gateway opens towards another server, built in one place: the upstream
//! pool and the legacy relay (Streamable HTTP and HTTP+SSE), the JWKS fetcher, the OTLP
//! exporter and the forwarder of retries to other replicas.
//!
//! Why one factory: each of these had grown its own connector, and so its own idea of a connect
//! timeout, TLS trust and connection bound, and two had none. A client made here always has a
//! connect timeout, TCP without Nagle, the trust it asked for (`tls.rs`) and a [`Bound`]
//! (`limit.rs`) that counts its open connections on a gauge and caps them, so no entrance can
//! open connections without limit on a client's behalf. Clients towards one destination share
//! one bound: the legacy relay counts against the upstream's `upstream.max_connections`.

pub mod limit;
pub mod tls;

use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use prometheus::core::Collector;
use prometheus::{IntGaugeVec, Opts};

pub use limit::{Bound, LimitError, LimitedConnector, LimitedIo};
pub use tls::TlsError;

use crate::config::tls::TlsSettings;

/// A client made by [`client`]: `http://` and `https://` over bounded connections.
pub type HttpsClient = Client<HttpsConnector<LimitedConnector>, Full<Bytes>>;

/// What a client trusts for `https://` destinations.
#[derive(Debug, Clone, Copy)]
pub enum Trust<'a> {
    /// `http://` only: no roots are loaded (a minimal image may have none).
    PlainOnly,
    /// `https://` verified against these settings; `http://` stays plain.
    Verified(&'a TlsSettings),
    /// As `Verified`, but where no root can be loaded, `http://` only, with a warning (a key
    /// source on loopback in a minimal image).
    VerifiedIfRoots(&'a TlsSettings),
}

/// How one client reaches its destinations.
#[derive(Debug, Clone)]
pub struct ClientSpec<'a> {
    /// The client's name in log lines (`upstream`, `jwks`, `otlp`, `forward`).
    pub name: &'static str,
    pub connect_timeout: Duration,
    pub trust: Trust<'a>,
    pub bound: &'a Bound,
    /// How long an idle keep-alive connection is kept (hyper's default when `None`).
    pub idle_timeout: Option<Duration>,
    /// Idle connections kept per host (hyper's default when `None`).
    pub max_idle_per_host: Option<usize>,
}

/// `outbound_connections{client}`: the connections each client other than the upstream's holds
/// open (the upstream's and the legacy relay's are `upstream_connections`).
#[derive(Debug, Clone)]
pub struct OutboundMetrics {
    connections: IntGaugeVec,
}

// === impl OutboundMetrics ===

impl OutboundMetrics {
    /// The series, registered nowhere yet.
    pub fn detached() -> Result<Self, prometheus::Error> {
        let opts =
            Opts::new("outbound_connections", "Connections open by outbound client (jwks, otlp, forward).");
        Ok(Self { connections: IntGaugeVec::new(opts, &["client"])? })
    }

    /// Every series to register.
    pub fn collectors(&self) -> Vec<Box<dyn Collector>> {
        vec![Box::new(self.connections.clone())]
    }

    /// A bound of `max_open` connections for the client `name` (a fixed name), counted on its
    /// gauge.
    pub fn bound(&self, name: &'static str, max_open: usize, permit_wait: Duration) -> Bound {
        let gauge = self.connections.with_label_values(&[name]);
        Bound::new(max_open, crate::defaults::MAX_CONNECTING, permit_wait, gauge)
    }
}

/// The TCP connector every client starts from.
pub fn tcp(connect_timeout: Duration) -> HttpConnector {
    let mut tcp = HttpConnector::new();
    tcp.set_connect_timeout(Some(connect_timeout));
    tcp.set_nodelay(true);
    tcp.enforce_http(false);
    tcp
}

/// The bounded TCP connector of `bound`, for a client that drives its connections itself.
pub fn connector(connect_timeout: Duration, bound: &Bound) -> LimitedConnector {
    LimitedConnector::new(tcp(connect_timeout), bound)
}

/// Builds a client; the TLS configuration is built here, once, never per connection.
pub fn client(spec: &ClientSpec<'_>) -> Result<HttpsClient, TlsError> {
    let config = match spec.trust {
        Trust::PlainOnly => tls::plain_only()?,
        Trust::Verified(settings) => tls::client_config(settings)?,
        Trust::VerifiedIfRoots(settings) => match tls::client_config(settings) {
            Err(TlsError::NoRoots) => {
                tracing::warn!(client = spec.name, "no trust roots: only http:// destinations will work");
                tls::plain_only()?
            }
            other => other?,
        },
    };
    let mut builder = Client::builder(TokioExecutor::new());
    if let Some(idle) = spec.idle_timeout {
        builder.pool_idle_timeout(idle);
    }
    if let Some(max) = spec.max_idle_per_host {
        builder.pool_max_idle_per_host(max);
    }
    let connector = connector(spec.connect_timeout, spec.bound);
    Ok(builder.build(tls::https_connector(connector, config)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus::IntGauge;
    use tokio::io::AsyncWriteExt;
    use tokio::net::TcpListener;

    /// A client's requests count on its bound's gauge, and past the bound they wait, then fail.
    #[tokio::test]
    async fn a_client_counts_its_connections_and_stops_at_its_bound() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        // A server that answers nothing keeps every connection it accepts open.
        let held = tokio::spawn(async move {
            let mut open = Vec::new();
            while let Ok((mut s, _)) = listener.accept().await {
                let _ = s.flush().await;
                open.push(s);
            }
        });
        let gauge = IntGauge::new("open", "open").unwrap();
        let bound = Bound::new(1, 1, Duration::from_millis(100), gauge.clone());
        let spec = ClientSpec {
            name: "test",
            connect_timeout: Duration::from_secs(1),
            trust: Trust::PlainOnly,
            bound: &bound,
            idle_timeout: None,
            max_idle_per_host: None,
        };
        let client = client(&spec).unwrap();
        let uri: http::Uri = format!("http://{addr}/").parse().unwrap();
        let first = tokio::spawn(client.get(uri.clone()));
        for _ in 0..200 {
            if gauge.get() == 1 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!((gauge.get(), bound.open()), (1, 1));
        let second = tokio::time::timeout(Duration::from_secs(5), client.get(uri)).await;
        let error = second.expect("the second request waited past the permit wait").unwrap_err();
        let chain = crate::logging::chain(&error);
        assert!(chain.contains("no connection became free"), "{chain}");
        first.abort();
        held.abort();
    }
}
