use serde_json::{json, Value};

use super::*;
use crate::front::validate::{check_headers, request_meta};

fn line(v: &Value) -> Vec<u8> {
    serde_json::to_vec(v).unwrap()
}

fn call(name: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": name, "arguments": {},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                  "io.modelcontextprotocol/clientCapabilities": {}}}})
}

/// The synthesised headers pass the HTTP front's own check against the body.
fn assert_front_accepts(message: &Value) {
    let Incoming::Forward { request, id } = incoming(line(message), "/mcp") else { panic!("not forwarded") };
    assert_eq!(id, message["id"].as_i64().map(RequestId::Number));
    assert_eq!(request.uri().path(), "/mcp");
    assert_eq!(request.method(), Method::POST);
    let method = message["method"].as_str().unwrap();
    let kind = FrontMethod::parse(method).unwrap();
    let params = crate::protocol::params::Params::of_value(&message["params"]).unwrap();
    let meta = request_meta(&params).unwrap();
    check_headers(request.headers(), method, kind, &params, &meta.protocol_version).unwrap();
}

#[test]
fn mirrored_headers_match_the_body() {
    assert_front_accepts(&call("echo"));
    assert_front_accepts(&call("grüße"));
    assert_front_accepts(&call(" padded "));
    assert_front_accepts(&call("=?base64?ZWNobw==?="));
    let mut read = call("x");
    read["method"] = json!("resources/read");
    read["params"]["uri"] = json!("file:///a b");
    assert_front_accepts(&read);
    let mut discover = call("x");
    discover["method"] = json!("server/discover");
    assert_front_accepts(&discover);
}

#[test]
fn a_cancellation_names_its_request() {
    let cancel = |id: Value| json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": id}});
    assert!(matches!(incoming(line(&cancel(json!(3))), "/mcp"), Incoming::Cancel(RequestId::Number(3))));
    assert!(matches!(incoming(line(&cancel(json!("a"))), "/mcp"), Incoming::Cancel(RequestId::String(_))));
    assert!(matches!(incoming(line(&cancel(json!(null))), "/mcp"), Incoming::Ignore));
}

#[test]
fn a_target_that_is_not_a_string_is_invalid_params() {
    let mut bad = call("x");
    bad["params"]["name"] = json!(5);
    let Incoming::Answer(bytes) = incoming(line(&bad), "/mcp") else { panic!("not answered") };
    let v: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(v["id"], 7);
    assert_eq!(v["error"]["code"], -32602);
}

#[test]
fn blank_and_malformed_lines() {
    assert!(matches!(incoming(b"  \r".to_vec(), "/mcp"), Incoming::Ignore));
    let Incoming::Forward { request, id } = incoming(b"{not json".to_vec(), "/mcp") else { panic!() };
    assert!(id.is_none());
    assert!(request.headers().get(headers::METHOD).is_none());
}

#[test]
fn header_safe_values_stay_plain() {
    assert_eq!(header_value("tools/call").unwrap(), "tools/call");
    assert_eq!(header_value("é").unwrap(), "=?base64?w6k=?=");
}
