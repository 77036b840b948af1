//! A legacy session's requests are recorded like 2026-07-28 requests: each is counted in
//! `requests_total` under a fixed `legacy:` method label and its outcome, and, with tracing on,
//! is a span of its own parented by the client's `traceparent`.

use http::StatusCode;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use serde_json::json;

use super::everything;
use crate::common::harness::metric;
use crate::common::legacy_client::LegacyClient;
use crate::common::otlp::Collector;
use crate::common::{bounded, eventually, Harness, Setup, TestResult};

fn requests(h: &Harness, method: &str, outcome: &str) -> f64 {
    metric(&h.gateway, &format!("mrtr_gateway_requests_total{{method=\"{method}\",outcome=\"{outcome}\"}}"))
}

#[tokio::test]
async fn legacy_requests_are_counted_under_their_method_and_outcome() -> TestResult {
    let h = Harness::start().await?;
    let mut client = LegacyClient::new(h.gateway.url("/mcp"));
    client.initialize(everything()).await?;
    client.call_tool("echo", json!({"text": "hi"})).await?;
    let listed = client.post(&client.request_body("tools/list", json!({}))).await?;
    assert_eq!(listed.status, StatusCode::OK);
    assert_eq!(client.delete().await?, StatusCode::OK);
    // The session is gone: its id now meets a 404 of the relay, counted as such.
    let gone = client.post(&client.request_body("tools/list", json!({}))).await?;
    assert_eq!(gone.status, StatusCode::NOT_FOUND);
    assert_eq!(requests(&h, "legacy:initialize", "complete"), 1.0);
    assert_eq!(requests(&h, "legacy:tools/call", "complete"), 1.0);
    assert_eq!(requests(&h, "legacy:notification", "accepted"), 1.0, "notifications/initialized");
    assert_eq!(requests(&h, "legacy:delete", "complete"), 1.0);
    assert_eq!(requests(&h, "legacy:tools/list", "complete"), 1.0);
    assert_eq!(requests(&h, "legacy:tools/list", "session_not_found"), 1.0);
    h.stop().await
}

#[tokio::test]
async fn a_legacy_request_is_a_span_under_the_clients_context() -> TestResult {
    const TRACE: &str = "7af92f3577b34da6a3ce929d0e0e4739";
    const PARENT: &str = "33f067aa0ba902b7";
    let collector = Collector::spawn().await?;
    let setup = Setup::new().set("tracing", &format!("otlp_endpoint = {:?}", collector.endpoint()));
    let demo = mrtr_gateway::demo::spawn_loopback(mrtr_gateway::demo::DemoOptions::default())?;
    let (gateway, _) = setup.attach(&demo).await?;
    let mut client = LegacyClient::new(gateway.url("/mcp"));
    client.initialize(everything()).await?;
    let client = client.with_header("traceparent", &format!("00-{TRACE}-{PARENT}-01"));
    client.call_tool("echo", json!({"text": "hi"})).await?;
    bounded("the gateway to stop", gateway.shutdown()).await?;
    eventually("the legacy span is exported", || collector.spans().iter().any(|s| s.trace_id == TRACE))
        .await?;
    let spans = collector.spans();
    let span = spans.iter().find(|s| s.trace_id == TRACE).expect("a span of the trace");
    assert_eq!(
        (span.name.as_str(), span.kind, span.parent_id.as_str()),
        ("legacy:tools/call", SpanKind::Server, PARENT)
    );
    assert_eq!(span.attr("mrtr_gateway.outcome"), Some("complete"), "{span:#?}");
    demo.shutdown().await?;
    Ok(())
}
