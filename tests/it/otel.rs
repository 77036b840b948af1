//! OpenTelemetry tracing end to end: a gateway exporting to an in-test OTLP collector, in front
//! of a legacy server that keeps the headers it was sent. The spans must link up (the front
//! span under the client's span, rounds under the front span, exchanges under the rounds), the
//! upstream must see the exchange span as its parent, and the attributes must name the call
//! without carrying its arguments. A task's span starts under the request that created it and
//! ends with the task, its upstream exchanges under it.

use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use serde_json::json;

use super::form_only;
use crate::common::answers::NAME;
use crate::common::faulty::{tools, FaultyLegacy};
use crate::common::otlp::{Collector, Exported};
use crate::common::sse_legacy::{same_origin, SseLegacy};
use crate::common::stdio::{fixture_command, serial};
use crate::common::{answer_all, bounded, eventually, Client, Setup, TestResult};
use mrtr_gateway::app::Gateway;
use mrtr_gateway::config::Config;

const PLAIN_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PLAIN_PARENT: &str = "00f067aa0ba902b7";
const ROUNDS_TRACE: &str = "5cf92f3577b34da6a3ce929d0e0e4737";
const FIRST_PARENT: &str = "11f067aa0ba902b7";
const RETRY_PARENT: &str = "22f067aa0ba902b7";
/// A context only in `_meta` of a request whose header carries another: the header wins.
const LOSING_TRACE: &str = "6df92f3577b34da6a3ce929d0e0e4738";
/// Planted in a call's arguments: no span may carry it.
const ARGUMENT_MARKER: &str = "argument-value-never-traced";

fn traceparent(trace: &str, parent: &str) -> String {
    format!("00-{trace}-{parent}-01")
}

/// A gateway in front of `upstream` exporting every trace to `collector`.
fn traced(collector: &Collector) -> Setup {
    Setup::new()
        .set("tracing", &format!("otlp_endpoint = {:?}", collector.endpoint()))
        .set("tracing", "service_name = \"gateway-under-test\"")
}

fn one<'a>(spans: &'a [Exported], what: &str, pick: impl Fn(&Exported) -> bool) -> &'a Exported {
    let found: Vec<_> = spans.iter().filter(|s| pick(s)).collect();
    assert_eq!(found.len(), 1, "{what}: {found:#?}\nall spans: {spans:#?}");
    found[0]
}

fn children<'a>(spans: &'a [Exported], parent: &Exported, kind: SpanKind) -> Vec<&'a Exported> {
    spans.iter().filter(|s| s.parent_id == parent.span_id && s.kind == kind).collect()
}

/// The front span of the request whose parent was `parent`, its round, and the round's exchange.
fn chain<'a>(spans: &'a [Exported], trace: &str, parent: &str) -> (&'a Exported, &'a Exported, &'a Exported) {
    let front = one(spans, "front span", |s| s.kind == SpanKind::Server && s.parent_id == parent);
    assert_eq!(front.trace_id, trace);
    let rounds = children(spans, front, SpanKind::Internal);
    assert_eq!(rounds.len(), 1, "one round under the front span: {spans:#?}");
    let exchanges = children(spans, rounds[0], SpanKind::Client);
    assert_eq!(exchanges.len(), 1, "one exchange under the round: {spans:#?}");
    for span in [front, rounds[0], exchanges[0]] {
        assert_eq!(span.trace_id, trace, "{span:#?}");
        assert_eq!(span.service, "gateway-under-test");
    }
    (front, rounds[0], exchanges[0])
}

#[tokio::test]
async fn spans_link_the_client_the_rounds_and_the_upstream() -> TestResult {
    let collector = Collector::spawn().await?;
    let upstream = FaultyLegacy::spawn().await?;
    let (gateway, client) = traced(&collector).attach_url(&upstream.url()).await?;

    let plain = client
        .call_tool(tools::OK, json!({"note": ARGUMENT_MARKER}))
        .header("traceparent", &traceparent(PLAIN_TRACE, PLAIN_PARENT))
        .send()
        .await?;
    assert!(plain.text()?.starts_with("ok from s"), "{:?}", plain.text());
    let call = || client.call_tool(tools::ASK, json!({})).caps(form_only());
    let first = call()
        .header("traceparent", &traceparent(ROUNDS_TRACE, FIRST_PARENT))
        .meta("traceparent", json!(traceparent(LOSING_TRACE, FIRST_PARENT)));
    let (requests, state) = first.send().await?.input_required()?;
    // The retry carries its context in `_meta` alone (SEP-414).
    let retry = call().state(&state).responses(answer_all(&requests));
    let done = retry.meta("traceparent", json!(traceparent(ROUNDS_TRACE, RETRY_PARENT))).send().await?;
    assert_eq!(done.text()?, format!("Hello, {NAME}"));
    // Shutting down flushes the exporter's queue.
    bounded("the gateway to stop", gateway.shutdown()).await?;

    let spans = collector.spans();
    let (front, round, exchange) = chain(&spans, PLAIN_TRACE, PLAIN_PARENT);
    assert_eq!(front.name, "tools/call ok");
    for (key, value) in [
        ("mcp.method.name", "tools/call"),
        ("gen_ai.tool.name", "ok"),
        ("gen_ai.operation.name", "execute_tool"),
        ("mcp.protocol.version", "2026-07-28"),
        ("jsonrpc.request.id", "1"),
        ("mrtr_gateway.outcome", "complete"),
        ("http.response.status_code", "200"),
    ] {
        assert_eq!(front.attr(key), Some(value), "front span {key}: {front:#?}");
    }
    assert_eq!(round.attr("mrtr_gateway.round"), Some("0"));
    assert_eq!(round.attr("mrtr_gateway.outcome"), Some("complete"));
    assert_eq!(exchange.name, "tools/call ok");
    assert_eq!(exchange.attr("mcp.method.name"), Some("tools/call"));
    assert_eq!(exchange.attr("server.address"), Some("127.0.0.1"));
    // The upstream session's id is exported as a fingerprint of the id that served the call,
    // never as the id itself.
    let session = upstream.stats().last_session_of(tools::OK).expect("the upstream served the call");
    let fingerprint = mrtr_gateway::logging::fingerprint(session.as_bytes());
    assert_eq!(exchange.attr("mcp.session.id"), Some(fingerprint.as_str()), "{exchange:#?}");
    assert!(exchange.attr("jsonrpc.request.id").is_some(), "{exchange:#?}");
    // The tool's first call listed the upstream's tools (for its header annotations): an
    // exchange of the front request itself, outside any round.
    let listed = children(&spans, front, SpanKind::Client);
    assert_eq!(listed.len(), 1, "{listed:#?}");
    assert_eq!(listed[0].attr("mcp.method.name"), Some("tools/list"));

    let (first, first_round, first_exchange) = chain(&spans, ROUNDS_TRACE, FIRST_PARENT);
    // The chain declares other capabilities, so another catalogue key: its first call lists too.
    let listed_again = children(&spans, first, SpanKind::Client);
    assert_eq!(listed_again.len(), 1, "{listed_again:#?}");
    assert_eq!(listed_again[0].attr("mcp.method.name"), Some("tools/list"));
    assert_eq!(first.attr("mrtr_gateway.outcome"), Some("input_required"));
    assert_eq!(first_round.attr("mrtr_gateway.outcome"), Some("input_required"));
    assert_eq!(first_round.attr("mrtr_gateway.next_round"), Some("1"));
    let (retry, retry_round, retry_exchange) = chain(&spans, ROUNDS_TRACE, RETRY_PARENT);
    assert_eq!(retry.attr("mrtr_gateway.outcome"), Some("complete"));
    assert_eq!(retry_round.attr("mrtr_gateway.round"), Some("1"));
    assert!(spans.iter().all(|s| s.trace_id != LOSING_TRACE), "the header's context wins over _meta's");

    // Each exchange's context reached the upstream as its `traceparent`, and nothing else did.
    let mut seen = upstream.stats().header_values("traceparent");
    seen.sort();
    let mut expected: Vec<String> = [listed[0], exchange, listed_again[0], first_exchange, retry_exchange]
        .iter()
        .map(|e| traceparent(&e.trace_id, &e.span_id))
        .collect();
    expected.sort();
    assert_eq!(seen, expected);
    for span in &spans {
        assert!(
            span.attributes.iter().all(|(_, v)| !v.contains(ARGUMENT_MARKER)),
            "arguments are never traced: {span:#?}"
        );
    }
    let _ = (first, retry_round, retry_exchange);
    Ok(())
}

#[tokio::test]
async fn a_failed_upstream_call_marks_its_spans_with_the_error_code() -> TestResult {
    let collector = Collector::spawn().await?;
    let upstream = FaultyLegacy::spawn().await?;
    let (gateway, client) = traced(&collector).attach_url(&upstream.url()).await?;
    let reply = client
        .call_tool("no_such_tool", json!({}))
        .header("traceparent", &traceparent(PLAIN_TRACE, PLAIN_PARENT))
        .send()
        .await?;
    let code = reply.error_code()?;
    bounded("the gateway to stop", gateway.shutdown()).await?;
    let spans = collector.spans();
    let (front, _, exchange) = chain(&spans, PLAIN_TRACE, PLAIN_PARENT);
    assert_eq!(front.attr("rpc.response.status_code"), Some(code.to_string().as_str()), "{front:#?}");
    assert_eq!(front.attr("error.type"), Some(code.to_string().as_str()));
    assert_eq!(front.attr("mrtr_gateway.outcome"), Some("upstream_error"));
    assert!(exchange.attr("rpc.response.status_code").is_some(), "{exchange:#?}");
    Ok(())
}

#[tokio::test]
async fn with_tracing_off_nothing_is_exported_and_no_context_goes_upstream() -> TestResult {
    let collector = Collector::spawn().await?;
    let upstream = FaultyLegacy::spawn().await?;
    let (gateway, client) = Setup::new().attach_url(&upstream.url()).await?;
    let reply = client
        .call_tool(tools::OK, json!({}))
        .header("traceparent", &traceparent(PLAIN_TRACE, PLAIN_PARENT))
        .send()
        .await?;
    assert!(reply.text()?.starts_with("ok from s"));
    bounded("the gateway to stop", gateway.shutdown()).await?;
    assert!(collector.spans().is_empty(), "{:#?}", collector.spans());
    assert_eq!(upstream.stats().header_values("traceparent"), Vec::<String>::new());
    assert_eq!(upstream.stats().header_values("tracestate"), Vec::<String>::new());
    Ok(())
}

#[tokio::test]
async fn a_dead_collector_costs_requests_nothing_and_shutdown_still_ends() -> TestResult {
    // A port nothing listens on: bind one, then let it go.
    let addr = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
    let upstream = FaultyLegacy::spawn().await?;
    let setup = Setup::new().set("tracing", &format!("otlp_endpoint = \"http://{addr}\""));
    let (gateway, client) = setup.attach_url(&upstream.url()).await?;
    for _ in 0..3 {
        assert!(client.call_tool(tools::OK, json!({})).send().await?.text()?.starts_with("ok from s"));
    }
    // The spans were still made and propagated (three calls, and the tool list fetched before
    // the first), whatever became of their export.
    assert_eq!(upstream.stats().header_values("traceparent").len(), 4);
    bounded("the gateway to stop", gateway.shutdown()).await
}

/// Over Streamable HTTP the context goes as headers: into `_meta` only where the client's own
/// context is, to replace it, so a request without one reaches the upstream as sent.
#[tokio::test]
async fn a_streamable_http_upstream_gets_the_context_in_meta_only_in_place_of_the_clients() -> TestResult {
    let collector = Collector::spawn().await?;
    let upstream = FaultyLegacy::spawn().await?;
    let (gateway, client) = traced(&collector).attach_url(&upstream.url()).await?;
    let call = || {
        client
            .call_tool(tools::META, json!({}))
            .header("traceparent", &traceparent(PLAIN_TRACE, PLAIN_PARENT))
    };
    let without = call().meta("progressToken", json!(7)).send().await?;
    let without: serde_json::Value = serde_json::from_str(&without.text()?)?;
    let replaced = call().meta("traceparent", json!(traceparent(LOSING_TRACE, PLAIN_PARENT))).send().await?;
    let replaced: serde_json::Value = serde_json::from_str(&replaced.text()?)?;
    bounded("the gateway to stop", gateway.shutdown()).await?;
    assert_eq!(without, json!({"progressToken": 7}), "no context added to _meta");
    let headers = upstream.stats().header_values("traceparent");
    let sent = headers.last().map(String::as_str);
    assert_eq!(
        replaced["traceparent"].as_str(),
        sent,
        "the exchange's context, as in its header: {replaced}"
    );
    assert!(!replaced.to_string().contains(LOSING_TRACE), "the client's context is never relayed");
    Ok(())
}

#[tokio::test]
async fn a_stdio_upstream_gets_the_exchange_span_in_meta() -> TestResult {
    let _serial = serial().await;
    let collector = Collector::spawn().await?;
    let toml = traced(&collector).toml_with("url", "http://unused.invalid/mcp");
    let toml = toml.replace("url = \"http://unused.invalid/mcp\"", &fixture_command(&[]));
    let gateway = Gateway::start(Config::from_toml(&toml)?).await?;
    eventually("the stdio upstream to answer initialize", || gateway.ready.is_ready()).await?;
    let client = Client::new(gateway.url("/mcp"));
    let reply = client
        .call_tool("meta", json!({}))
        .header("traceparent", &traceparent(PLAIN_TRACE, PLAIN_PARENT))
        .meta("progressToken", json!(7))
        .send()
        .await?;
    let meta: serde_json::Value = serde_json::from_str(&reply.text()?)?;
    bounded("the gateway to stop", gateway.shutdown()).await?;
    let spans = collector.spans();
    let (_, _, exchange) = chain(&spans, PLAIN_TRACE, PLAIN_PARENT);
    assert_eq!(meta["traceparent"], traceparent(&exchange.trace_id, &exchange.span_id), "{meta}");
    assert_eq!(meta["progressToken"], 7, "the request's own _meta keys pass through: {meta}");
    assert_eq!(exchange.attr("network.transport"), Some("pipe"));
    assert_eq!(exchange.attr("server.address"), None);
    Ok(())
}

#[tokio::test]
async fn an_http_sse_upstream_gets_the_exchange_span_in_meta() -> TestResult {
    let collector = Collector::spawn().await?;
    let server = SseLegacy::spawn("2024-11-05", same_origin).await?;
    let setup = traced(&collector).set("upstream", "request_timeout_ms = 3000");
    let gateway = Gateway::start(Config::from_toml(&setup.toml_with("sse_url", &server.url()))?).await?;
    eventually("the SSE upstream to answer initialize", || gateway.ready.is_ready()).await?;
    let client = Client::new(gateway.url("/mcp"));
    // A stale context in the client's `_meta` is replaced by the exchange's, never relayed.
    let reply = client
        .call_tool("meta", json!({}))
        .header("traceparent", &traceparent(PLAIN_TRACE, PLAIN_PARENT))
        .meta("traceparent", json!(traceparent(LOSING_TRACE, PLAIN_PARENT)))
        .send()
        .await?;
    let meta: serde_json::Value = serde_json::from_str(&reply.text()?)?;
    bounded("the gateway to stop", gateway.shutdown()).await?;
    let spans = collector.spans();
    let (_, _, exchange) = chain(&spans, PLAIN_TRACE, PLAIN_PARENT);
    assert_eq!(meta["traceparent"], traceparent(&exchange.trace_id, &exchange.span_id), "{meta}");
    assert_eq!(exchange.attr("network.transport"), Some("tcp"));
    assert_eq!(exchange.attr("server.address"), Some("127.0.0.1"));
    Ok(())
}

const TASK_TRACE: &str = "7ef92f3577b34da6a3ce929d0e0e4739";
const TASK_PARENT: &str = "33f067aa0ba902b7";

#[tokio::test]
async fn a_tasks_span_outlives_its_request_and_holds_its_exchanges() -> TestResult {
    let _serial = serial().await;
    let collector = Collector::spawn().await?;
    let tracing = format!("[tracing]\notlp_endpoint = {:?}", collector.endpoint());
    let gw = super::tasks::TaskGateway::start_with(&[], &tracing).await?;
    let created = gw
        .client
        .call_tool("count_job", json!({}))
        .caps(super::tasks::with_extension())
        .header("traceparent", &traceparent(TASK_TRACE, TASK_PARENT))
        .send()
        .await?;
    let task_id = created.result()?["taskId"].as_str().unwrap_or_default().to_owned();
    assert_eq!(gw.until(&task_id, "completed").await?["status"], "completed");
    gw.stop().await?;

    let spans = collector.spans();
    let front =
        one(&spans, "the creating request", |s| s.kind == SpanKind::Server && s.parent_id == TASK_PARENT);
    let task = one(&spans, "the task span", |s| s.name == "mrtr task tools/call");
    assert_eq!((task.trace_id.as_str(), task.parent_id.as_str()), (TASK_TRACE, front.span_id.as_str()));
    assert_eq!(task.attr("gen_ai.tool.name"), Some("count_job"));
    assert_eq!(task.attr("mrtr_gateway.outcome"), Some("completed"));
    let exchanges: Vec<_> =
        children(&spans, task, SpanKind::Client).iter().filter_map(|s| s.attr("mcp.method.name")).collect();
    assert!(exchanges.contains(&"tasks/result"), "the task's tasks/result is its child: {spans:#?}");
    Ok(())
}
