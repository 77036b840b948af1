//! What the legacy relay sends upstream for a legacy (2025-era) client, and what it tells that
//! client when the upstream fails, against an upstream that records every request's headers.
//! Only `Content-Type`, `Accept`, `MCP-Protocol-Version`, `Last-Event-ID` and the trace context
//! pass: never the client's `Authorization` (validated by the gateway or not), its cookies or
//! any other header; the upstream gets the gateway's own configured credentials instead, on
//! every request (`initialize`, calls, answers, `DELETE`). An upstream error reaches the client
//! as a fixed message naming the cause, never the upstream's words.

use http::StatusCode;
use serde_json::{json, Value};

use super::legacy_rules::{token, with_jwt};
use crate::common::answers::NAME;
use crate::common::faulty::{tools, FaultyLegacy, UPSTREAM_SECRET};
use crate::common::harness::metric;
use crate::common::legacy_client::{LegacyClient, Raw};
use crate::common::{bounded, HarnessError, Setup, TestResult};

const UPSTREAM_KEY: &str = "upstream-key-for-legacy-9";
const UPSTREAM_BEARER: &str = "upstream-bearer-for-legacy-3";
/// What the client sends that must not pass: its cookie, and a header of its own.
const COOKIE: &str = "session=client-cookie-5e1";
const CUSTOM: (&str, &str) = ("x-client-secret", "client-header-8d2");
const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// A gateway in front of `upstream` with its own upstream credentials, checking HS256 tokens.
fn gateway_setup() -> Setup {
    with_jwt(Setup::new())
        .set("upstream", &format!("headers = {{ \"x-api-key\" = {UPSTREAM_KEY:?} }}"))
        .set("upstream", &format!("bearer_token = {UPSTREAM_BEARER:?}"))
}

/// A legacy client of `url` with a valid bearer, a cookie, a header of its own and a trace.
fn legacy_client(url: String) -> TestResult<LegacyClient> {
    Ok(LegacyClient::new(url)
        .with_bearer(&token("alice", "")?)
        .with_header("cookie", COOKIE)
        .with_header(CUSTOM.0, CUSTOM.1)
        .with_header("traceparent", TRACEPARENT))
}

fn message(raw: &Raw) -> String {
    let error = raw.messages.last().and_then(|m| m.pointer("/error/message"));
    error.and_then(Value::as_str).unwrap_or_default().to_owned()
}

#[tokio::test]
async fn a_legacy_clients_credentials_never_reach_the_upstream() -> TestResult {
    let upstream = FaultyLegacy::spawn().await?;
    let (gateway, _) = gateway_setup().attach_url(&upstream.url()).await?;
    let before = upstream.stats().requests_and_header("x-api-key").0; // the gateway's own session
    let mut client = legacy_client(gateway.url("/mcp"))?;
    client.initialize(json!({"elicitation": {}})).await?;
    // A call whose question the client answers in band: the answer is POSTed upstream too.
    let done = client.call_tool(tools::ASK, json!({})).await?;
    assert_eq!(done.pointer("/result/content/0/text"), Some(&json!(format!("Hello, {NAME}"))), "{done}");
    let listed = client.post(&client.request_body("tools/list", json!({}))).await?;
    assert_eq!(listed.status, StatusCode::OK, "{:?}", listed.messages);
    assert_eq!(client.delete().await?, StatusCode::OK);

    let stats = upstream.stats();
    assert!(stats.answers() >= 1 && stats.deletes() >= 1, "an answer and a DELETE went upstream");
    let relayed = stats.headers_since(before);
    assert!(
        relayed.len() >= 6,
        "initialize, initialized, the call, its answer, the list, DELETE: {relayed:?}"
    );
    let bearer = format!("Bearer {UPSTREAM_BEARER}");
    for headers in &relayed {
        let all =
            |name: &str| headers.get_all(name).iter().map(|v| v.to_str().unwrap_or("?")).collect::<Vec<_>>();
        // The gateway's own credentials, once each, every time.
        assert_eq!(all("x-api-key"), [UPSTREAM_KEY], "{headers:?}");
        assert_eq!(all("authorization"), [bearer.as_str()], "the client's bearer passed: {headers:?}");
        assert_eq!((all("cookie"), all(CUSTOM.0)), (vec![], vec![]), "{headers:?}");
        // What the allow-list does pass.
        assert_eq!(all("mcp-protocol-version"), ["2025-11-25"], "{headers:?}");
        assert_eq!(all("traceparent"), [TRACEPARENT], "{headers:?}");
    }
    bounded("the gateway to drain", gateway.shutdown()).await
}

#[tokio::test]
async fn without_auth_a_legacy_clients_authorization_is_dropped_too() -> TestResult {
    let upstream = FaultyLegacy::spawn().await?;
    let setup = Setup::new().set("upstream", &format!("headers = {{ \"x-api-key\" = {UPSTREAM_KEY:?} }}"));
    let (gateway, _) = setup.attach_url(&upstream.url()).await?;
    let mut client = legacy_client(gateway.url("/mcp"))?.with_bearer("client-token-never-forwarded");
    client.initialize(json!({})).await?;
    let ok =
        client.post(&client.request_body("tools/call", json!({"name": tools::OK, "arguments": {}}))).await?;
    assert!(serde_json::to_string(&ok.messages)?.contains("ok from s"), "{ok:?}");
    assert_eq!(client.delete().await?, StatusCode::OK);
    let stats = upstream.stats();
    for name in ["authorization", "cookie", CUSTOM.0] {
        assert_eq!(stats.header_values(name), Vec::<String>::new(), "{name} reached the upstream");
    }
    bounded("the gateway to drain", gateway.shutdown()).await
}

#[tokio::test]
async fn upstream_failures_reach_a_legacy_client_as_fixed_messages() -> TestResult {
    let mut upstream = FaultyLegacy::spawn().await?;
    let (gateway, _) = gateway_setup().attach_url(&upstream.url()).await?;
    let mut client = legacy_client(gateway.url("/mcp"))?;
    client.initialize(json!({})).await?;

    // An HTTP error whose body is the upstream's own text.
    let body = client.request_body("tools/call", json!({"name": tools::HTTP_500, "arguments": {}}));
    let refused = client.post(&body).await?;
    assert_eq!(refused.status, StatusCode::BAD_GATEWAY, "{:?}", refused.messages);
    assert_eq!(message(&refused), "the upstream server refused the request (HTTP 500 Internal Server Error)");
    assert_eq!(refused.messages.last().map(|m| m["error"]["code"].clone()), Some(json!(-32000)));
    let reason = |r: &str| format!("mrtr_gateway_legacy_refused_requests_total{{reason=\"{r}\"}}");
    assert_eq!(metric(&gateway, &reason("upstream_status")), 1.0);

    // The upstream gone: the connection refused.
    upstream.kill();
    let gone =
        client.post(&client.request_body("tools/call", json!({"name": tools::OK, "arguments": {}}))).await?;
    assert_eq!(gone.status, StatusCode::BAD_GATEWAY, "{:?}", gone.messages);
    assert_eq!(message(&gone), "the upstream server is unreachable");
    assert_eq!(metric(&gateway, &reason("upstream_unreachable")), 1.0);

    for raw in [&refused, &gone] {
        let text = serde_json::to_string(&raw.messages)?;
        if text.contains(UPSTREAM_SECRET) || text.contains("refused by") {
            return Err(HarnessError::Unexpected(format!("upstream text reached the client: {text}")));
        }
    }
    bounded("the gateway to drain", gateway.shutdown()).await
}
