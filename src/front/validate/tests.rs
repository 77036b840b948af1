use http::HeaderValue;
use serde_json::json;

use super::*;
use crate::protocol::methods::MrtrMethod;

fn params() -> Value {
    json!({"name": "greet", "_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
        "progressToken": 7}})
}

fn idx(params: &Value) -> Params {
    Params::of_value(params).unwrap()
}

fn headers(list: &[(&'static str, &str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (k, v) in list {
        map.append(*k, HeaderValue::from_str(v).unwrap());
    }
    map
}

const CALL: FrontMethod = FrontMethod::Mrtr(MrtrMethod::ToolsCall);

#[test]
fn meta_is_extracted() {
    let m = request_meta(&idx(&params())).unwrap();
    assert_eq!(m.protocol_version, "2026-07-28");
    assert_eq!(m.capabilities, json!({"elicitation": {}}));
    assert_eq!(m.progress_token, Some(json!(7)));
}

#[test]
fn missing_meta_fields_are_invalid_params() {
    for p in [
        json!({"name": "x"}),
        json!({"_meta": null}),
        json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}),
        json!({"_meta": {"io.modelcontextprotocol/clientCapabilities": {}}}),
    ] {
        let e = request_meta(&idx(&p)).unwrap_err();
        assert_eq!((e.code(), e.status().as_u16()), (-32602, 400), "{p:?}");
    }
}

#[test]
fn unsupported_version_is_32022() {
    let p = json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2025-11-25",
        "io.modelcontextprotocol/clientCapabilities": {}}});
    let m = request_meta(&idx(&p)).unwrap();
    let e = check_version(&m).unwrap_err();
    assert_eq!(e.code(), -32022);
    assert!(matches!(&e, FrontError::UnsupportedVersion { requested } if requested == "2025-11-25"), "{e:?}");
    // A header that disagrees with that body is a mismatch first.
    let h = headers(&[("mcp-protocol-version", "2026-07-28"), ("mcp-method", "tools/list")]);
    let kind = FrontMethod::Relay(crate::protocol::methods::RelayMethod::ToolsList);
    assert_eq!(check_headers(&h, "tools/list", kind, &idx(&p), "2025-11-25").unwrap_err().code(), -32020);
}

#[test]
fn matching_headers_pass() {
    let h = headers(&[
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", "greet"),
    ]);
    check_headers(&h, "tools/call", CALL, &idx(&params()), "2026-07-28").unwrap();
}

#[test]
fn header_failures_are_32020() {
    let p = params();
    let cases = [
        headers(&[("mcp-method", "tools/call"), ("mcp-name", "greet")]),
        headers(&[
            ("mcp-protocol-version", "2025-11-25"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "greet"),
        ]),
        headers(&[("mcp-protocol-version", "2026-07-28"), ("mcp-name", "greet")]),
        headers(&[
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/list"),
            ("mcp-name", "greet"),
        ]),
        headers(&[("mcp-protocol-version", "2026-07-28"), ("mcp-method", "tools/call")]),
        headers(&[
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "other"),
        ]),
        headers(&[
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "greet"),
            ("mcp-name", "greet"),
        ]),
    ];
    for h in cases {
        let e = check_headers(&h, "tools/call", CALL, &idx(&p), "2026-07-28").unwrap_err();
        assert_eq!((e.code(), e.status().as_u16()), (-32020, 400), "{h:?}");
    }
}

#[test]
fn base64_header_values_are_decoded() {
    assert_eq!(decode_header_value("=?base64?w6nDqQ==?=").as_deref(), Some("éé"));
    assert_eq!(decode_header_value("plain").as_deref(), Some("plain"));
    assert_eq!(decode_header_value("=?base64?%%%?="), None);
    let p = json!({"name": "éé"});
    let h = headers(&[
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", "=?base64?w6nDqQ==?="),
    ]);
    check_headers(&h, "tools/call", CALL, &idx(&p), "2026-07-28").unwrap();
}

/// A 300 KB `Mcp-Name`, or one whose base64 form decodes to control characters, is quoted in
/// the message (which is also the log line's `error`) cut short and escaped.
#[test]
fn a_quoted_client_value_is_bounded_and_escaped() {
    let huge = "n".repeat(300 * 1024);
    let h =
        headers(&[("mcp-protocol-version", "2026-07-28"), ("mcp-method", "tools/call"), ("mcp-name", &huge)]);
    let message =
        check_headers(&h, "tools/call", CALL, &idx(&params()), "2026-07-28").unwrap_err().to_string();
    let limit = crate::defaults::MAX_QUOTED_CHARS;
    assert!(message.len() < 2 * limit + 100, "{} bytes: {}", message.len(), &message[..200]);
    assert!(message.contains(&format!("\"{}…\"", "n".repeat(limit))), "{message}");
    assert!(message.ends_with("params.name \"greet\""), "{message}");

    // "\x1b[2J\nforged log line" as the header's base64 form.
    let escape = base64::engine::general_purpose::STANDARD.encode("\u{1b}[2J\nforged log line");
    let h = headers(&[
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", &format!("=?base64?{escape}?=")),
    ]);
    let message =
        check_headers(&h, "tools/call", CALL, &idx(&params()), "2026-07-28").unwrap_err().to_string();
    assert!(!message.chars().any(char::is_control), "{message:?}");
    assert!(message.contains(r#""\u{1b}[2J\nforged log line""#), "{message}");

    let long = json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "v".repeat(100_000),
        "io.modelcontextprotocol/clientCapabilities": {}}});
    let e = check_version(&request_meta(&idx(&long)).unwrap()).unwrap_err();
    assert!(e.to_string().len() < limit + 100, "{e}");
    let cut = format!("{}…", "v".repeat(limit));
    assert!(matches!(&e, FrontError::UnsupportedVersion { requested } if *requested == cut), "{e:?}");
}

#[test]
fn quoting_cuts_on_the_escaped_form_and_at_a_character_boundary() {
    let limit = crate::defaults::MAX_QUOTED_CHARS;
    assert_eq!(quoted("greet"), "\"greet\"");
    assert_eq!(quoted(&"é".repeat(limit)), format!("\"{}\"", "é".repeat(limit)));
    assert_eq!(quoted(&"é".repeat(limit + 1)), format!("\"{}…\"", "é".repeat(limit)));
    // Each newline takes two characters escaped.
    assert_eq!(quoted(&"\n".repeat(limit)), format!("\"{}…\"", "\\n".repeat(limit / 2)));
    assert_eq!(quoted(""), "\"\"");
}

/// The tasks extension's methods name their task in `Mcp-Name`, mirrored from `params.taskId`.
#[test]
fn a_task_method_mirrors_its_task_id() {
    let kind = FrontMethod::Task(crate::protocol::methods::TaskMethod::Get);
    let p = json!({"taskId": "task-1"});
    let sent = |name: Option<&str>| {
        let mut list = vec![("mcp-protocol-version", "2026-07-28"), ("mcp-method", "tasks/get")];
        list.extend(name.map(|n| ("mcp-name", n)));
        check_headers(&headers(&list), "tasks/get", kind, &idx(&p), "2026-07-28")
    };
    sent(Some("task-1")).unwrap();
    for name in [None, Some("task-2")] {
        let e = sent(name).unwrap_err();
        assert_eq!(e.code(), -32020, "{name:?}");
        assert!(e.to_string().contains("Mcp-Name"), "{e}");
    }
}
