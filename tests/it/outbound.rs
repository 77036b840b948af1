//! The outbound clients count their connections: the legacy relay's count on the upstream's
//! bound (`upstream_connections`, capped by `upstream.max_connections`), not on a client of its
//! own that nothing bounds.

use std::time::Duration;

use crate::common::harness::metric;
use crate::common::legacy_client::LegacyClient;
use crate::common::{eventually, Harness, TestResult};

const CONNECTIONS: &str = "mrtr_gateway_upstream_connections";

#[tokio::test]
async fn a_legacy_clients_stream_holds_a_connection_of_the_upstreams_bound() -> TestResult {
    let h = Harness::start().await?;
    // The readiness probe's session settles first: its connections are the baseline.
    eventually("the probe's connections settle", || metric(&h.gateway, CONNECTIONS) >= 1.0).await?;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = metric(&h.gateway, CONNECTIONS);
    let mut client = LegacyClient::new(h.gateway.url("/mcp"));
    client.initialize(super::everything()).await?;
    // The relayed GET stream stays open, and so does the upstream connection under it.
    let stream = client.open_get().await?;
    eventually("the relay's stream is counted on the upstream's bound", || {
        metric(&h.gateway, CONNECTIONS) > before
    })
    .await?;
    drop(stream);
    drop(client);
    h.stop().await
}
