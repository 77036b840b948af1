//! `subscriptions/listen` bridged onto the demo's list changes and `resources/subscribe`: the
//! acknowledgement first with the honoured subset, every notification tagged with its
//! subscription id, only the kinds asked for, one upstream session per principal, upstream
//! unsubscribe after the last listener of a URI, the bounds, client close and shutdown.

use http::StatusCode;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use serde_json::{json, Value};

use crate::common::client::Call;
use crate::common::{bounded, eventually, Client, Harness, HarnessError, Setup, TestResult};

const COUNTER: &str = "demo://counter";
const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

/// The SSE messages of one open listen stream, read as they come.
pub(crate) struct Events {
    body: Incoming,
    buffer: String,
}

impl Events {
    /// Opens `subscriptions/listen` with `filter` as request `id`; the stream must be SSE.
    pub(crate) async fn open(client: &Client, id: i64, filter: Value) -> TestResult<Self> {
        Self::open_call(listen_call(client, id, filter)).await
    }

    /// Opens the listen request `call` (see [`listen_call`]); the stream must be SSE.
    pub(crate) async fn open_call(call: Call<'_>) -> TestResult<Self> {
        let response = call.open().await?;
        if response.status() != StatusCode::OK || response.headers()["content-type"] != "text/event-stream" {
            let status = response.status();
            let body = response.into_body().collect().await?.to_bytes();
            return Err(HarnessError::Unexpected(format!(
                "listen answered {status}: {}",
                String::from_utf8_lossy(&body)
            )));
        }
        Ok(Self { body: response.into_body(), buffer: String::new() })
    }

    /// The next message; `None` when the stream ended.
    pub(crate) async fn next(&mut self) -> TestResult<Option<Value>> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let event: String = self.buffer.drain(..end + 2).collect();
                let data: String =
                    event.lines().filter_map(|l| l.strip_prefix("data: ")).collect::<Vec<_>>().join("\n");
                if data.is_empty() {
                    continue;
                }
                return Ok(Some(serde_json::from_str(&data)?));
            }
            match bounded("the next listen event", self.body.frame()).await? {
                Some(frame) => {
                    if let Ok(data) = frame?.into_data() {
                        self.buffer.push_str(&String::from_utf8_lossy(&data));
                    }
                }
                None => return Ok(None),
            }
        }
    }

    /// The next message, which must exist.
    pub(crate) async fn message(&mut self) -> TestResult<Value> {
        self.next().await?.ok_or_else(|| HarnessError::Unexpected("the listen stream ended".into()))
    }
}

/// `subscriptions/listen` with `filter` as request `id`, to send or open.
pub(crate) fn listen_call(client: &Client, id: i64, filter: Value) -> Call<'_> {
    client.request("subscriptions/listen").id(json!(id)).param("notifications", filter)
}

async fn bump(client: &Client) -> TestResult {
    let reply = client.call_tool("bump_counter", json!({})).send().await?;
    assert!(reply.text()?.starts_with("demo://counter is now"), "{:?}", reply.body);
    Ok(())
}

#[tokio::test]
async fn the_acknowledgement_comes_first_with_the_honoured_subset() -> TestResult {
    let h = Harness::start().await?;
    let asked = json!({"toolsListChanged": true, "promptsListChanged": true, "resourcesListChanged": true,
        "resourceSubscriptions": [COUNTER, "demo://no-such-resource"]});
    let mut events = Events::open(&h.client, 41, asked).await?;
    let ack = events.message().await?;
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    assert_eq!(ack["params"]["_meta"][SUBSCRIPTION_ID], 41);
    // The demo declares resource list changes and subscriptions, not tool or prompt list changes;
    // it refuses to subscribe to a resource it does not have.
    assert_eq!(
        ack["params"]["notifications"],
        json!({"resourcesListChanged": true, "resourceSubscriptions": [COUNTER]})
    );
    assert_eq!(h.demo.stats.subscribes(), 1);
    drop(events);
    h.stop().await
}

#[tokio::test]
async fn notifications_are_tagged_and_only_the_kinds_asked_for_arrive() -> TestResult {
    let h = Harness::start().await?;
    let mut updates = Events::open(&h.client, 1, json!({"resourceSubscriptions": [COUNTER]})).await?;
    let mut lists = Events::open(&h.client, 5, json!({"resourcesListChanged": true})).await?;
    assert_eq!(updates.message().await?["method"], "notifications/subscriptions/acknowledged");
    assert_eq!(lists.message().await?["method"], "notifications/subscriptions/acknowledged");
    // Each bump sends an update and then a list change upstream: a listener that asked for one
    // kind sees only that kind, bump after bump.
    for _ in 0..2 {
        bump(&h.client).await?;
        let update = updates.message().await?;
        assert_eq!(update["method"], "notifications/resources/updated", "{update}");
        assert_eq!(update["params"], json!({"uri": COUNTER, "_meta": {SUBSCRIPTION_ID: 1}}));
        let list = lists.message().await?;
        assert_eq!(list["method"], "notifications/resources/list_changed", "{list}");
        assert_eq!(list["params"], json!({"_meta": {SUBSCRIPTION_ID: 5}}));
    }
    let delivered = "mrtr_gateway_listen_notifications_total{method=\"notifications/resources/updated\"}";
    assert_eq!(h.metric(delivered), 2.0);
    drop((updates, lists));
    h.stop().await
}

#[tokio::test]
async fn one_upstream_session_serves_a_principal_and_the_last_listener_unsubscribes() -> TestResult {
    let h = Harness::start().await?;
    let sessions_before = h.demo.stats.initializes();
    let filter = json!({"resourceSubscriptions": [COUNTER]});
    let mut first = Events::open(&h.client, 1, filter.clone()).await?;
    let mut second = Events::open(&h.client, 2, filter).await?;
    first.message().await?;
    second.message().await?;
    // The listening session is an idle pooled one taken out of the pool, or a new one.
    assert!(h.demo.stats.initializes() - sessions_before <= 1, "at most one handshake for both listeners");
    assert_eq!(h.metric("mrtr_gateway_listen_upstream_sessions"), 1.0, "one upstream session for both");
    assert_eq!(h.demo.stats.subscribes(), 1, "one resources/subscribe for the URI");
    bump(&h.client).await?;
    assert_eq!(first.message().await?["params"]["_meta"][SUBSCRIPTION_ID], 1);
    assert_eq!(second.message().await?["params"]["_meta"][SUBSCRIPTION_ID], 2);
    drop(first);
    let gone = "mrtr_gateway_listen_streams_ended_total{reason=\"client_closed\"}";
    eventually("the first listener to be noticed gone", || h.metric(gone) == 1.0).await?;
    assert_eq!(h.demo.stats.unsubscribes(), 0, "the URI still has a listener");
    drop(second);
    let stats = h.demo.stats.clone();
    eventually("the last listener's URI to be unsubscribed", || stats.unsubscribes() == 1).await?;
    eventually("the listen session to be deleted upstream", || stats.deletes() >= 1).await?;
    eventually("no listener left", || h.metric("mrtr_gateway_listen_streams") == 0.0).await?;
    h.stop().await
}

#[tokio::test]
async fn listeners_are_bounded_per_principal_with_a_clear_error() -> TestResult {
    let h = Setup::new().set("subscriptions", "max_per_principal = 1").start().await?;
    let mut open = Events::open(&h.client, 1, json!({"toolsListChanged": true})).await?;
    open.message().await?;
    let refused = h.client.request("subscriptions/listen").param("notifications", json!({})).send().await?;
    let message = refused.expect_error(StatusCode::TOO_MANY_REQUESTS, -32000)?;
    assert!(
        message.contains("too many subscriptions/listen streams") && message.contains("limit is 1"),
        "{message}"
    );
    drop(open);
    eventually("the slot to be given back", || h.metric("mrtr_gateway_listen_streams") == 0.0).await?;
    let mut again = Events::open(&h.client, 3, json!({})).await?;
    assert_eq!(again.message().await?["params"]["notifications"], json!({}));
    drop(again);
    h.stop().await
}

#[tokio::test]
async fn a_malformed_filter_is_invalid_params() -> TestResult {
    let h = Harness::start().await?;
    let missing = h.client.request("subscriptions/listen").send().await?;
    missing.expect_error(StatusCode::BAD_REQUEST, -32602)?;
    let typed =
        h.client.request("subscriptions/listen").param("notifications", json!({"toolsListChanged": 1}));
    typed.send().await?.expect_error(StatusCode::BAD_REQUEST, -32602)?;
    h.stop().await
}

#[tokio::test]
async fn shutdown_ends_a_listen_stream_with_the_graceful_response() -> TestResult {
    let h = Harness::start().await?;
    let mut events = Events::open(&h.client, 9, json!({"resourceSubscriptions": [COUNTER]})).await?;
    events.message().await?;
    let Harness { demo, gateway, .. } = h;
    let stopping = tokio::spawn(gateway.shutdown());
    let last = events.message().await?;
    assert_eq!(last["id"], 9);
    assert_eq!(last["result"], json!({"resultType": "complete", "_meta": {SUBSCRIPTION_ID: 9}}));
    assert!(events.next().await?.is_none(), "the stream ends after the response");
    bounded("the gateway to drain", stopping).await?.map_err(|e| HarnessError::Unexpected(e.to_string()))?;
    bounded("the demo to stop", demo.shutdown()).await??;
    Ok(())
}

#[tokio::test]
async fn discover_carries_the_flags_the_upstream_declared() -> TestResult {
    let h = Harness::start().await?;
    let caps = h.client.request("server/discover").send().await?.result()?["capabilities"].clone();
    assert_eq!(caps["resources"], json!({"subscribe": true, "listChanged": true}));
    assert_eq!(caps["tools"], json!({"listChanged": false}));
    let off = Setup::new().set("subscriptions", "enabled = false").start().await?;
    let caps = off.client.request("server/discover").send().await?.result()?["capabilities"].clone();
    assert_eq!(caps["resources"], json!({}));
    let refused = off.client.request("subscriptions/listen").param("notifications", json!({})).send().await?;
    refused.expect_error(StatusCode::NOT_FOUND, -32601)?;
    off.stop().await?;
    h.stop().await
}

#[tokio::test]
async fn a_stdio_upstream_listens_through_its_own_process() -> TestResult {
    let _serial = crate::common::stdio::serial().await;
    let gw = crate::common::stdio::StdioGateway::start(&["--subscriptions"], &[], &[]).await?;
    let mut first = Events::open(
        &gw.client,
        1,
        json!({"toolsListChanged": true, "resourceSubscriptions": ["file:///a"]}),
    )
    .await?;
    let ack = first.message().await?;
    assert_eq!(
        ack["params"]["notifications"],
        json!({"toolsListChanged": true, "resourceSubscriptions": ["file:///a"]})
    );
    // The fixture answers a second subscription (same principal, so the same process) with an
    // update of the URIs it already holds and a tool list change.
    let mut second = Events::open(&gw.client, 2, json!({"resourceSubscriptions": ["file:///b"]})).await?;
    assert_eq!(
        second.message().await?["params"]["notifications"],
        json!({"resourceSubscriptions": ["file:///b"]})
    );
    let update = first.message().await?;
    assert_eq!(update["params"], json!({"uri": "file:///a", "_meta": {SUBSCRIPTION_ID: 1}}));
    let change = first.message().await?;
    assert_eq!(change["method"], "notifications/tools/list_changed");
    assert_eq!(change["params"]["_meta"][SUBSCRIPTION_ID], 1);
    let sessions = crate::common::harness::metric(&gw.gateway, "mrtr_gateway_listen_upstream_sessions");
    assert_eq!(sessions, 1.0, "one listening process for both");
    let children = crate::common::stdio::python_children();
    drop((first, second));
    let stopped = || crate::common::stdio::python_children() == children - 1;
    eventually("the listening process to be stopped", stopped).await?;
    gw.stop().await
}

#[tokio::test]
async fn an_http_sse_upstream_listens_on_its_event_stream() -> TestResult {
    let upstream =
        crate::common::sse_legacy::SseLegacy::spawn("2024-11-05", crate::common::sse_legacy::same_origin)
            .await?;
    let (gateway, client) = upstream.gateway().await?;
    let mut first = Events::open(&client, 1, json!({"resourceSubscriptions": ["file:///a"]})).await?;
    assert_eq!(
        first.message().await?["params"]["notifications"],
        json!({"resourceSubscriptions": ["file:///a"]})
    );
    // The second subscription of the same session makes the fixture announce the first URI.
    let mut second = Events::open(&client, 2, json!({"resourceSubscriptions": ["file:///b"]})).await?;
    second.message().await?;
    let update = first.message().await?;
    assert_eq!(update["params"], json!({"uri": "file:///a", "_meta": {SUBSCRIPTION_ID: 1}}));
    drop((first, second));
    bounded("the gateway to drain", gateway.shutdown()).await
}
