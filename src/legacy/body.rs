//! A legacy client's POST body as the front's authorization rules and rate limits see it: its
//! JSON-RPC messages, parsed once for both. The relay itself forwards the bytes untouched; this
//! view only decides whether they are forwarded.
//!
//! Every request in it (a message with a `method` and an `id`; one message or each of a batch)
//! is what a 2026-07-28 request is to the front: it is checked against the rules and takes a
//! rate-limit token. Notifications and the client's answers to server requests take none.

use serde_json::Value;

use crate::protocol::{methods, RequestId};

/// The messages of one legacy POST (or the nothing of a GET or DELETE).
#[derive(Debug)]
pub enum LegacyBody {
    /// No body (GET, DELETE), or only whitespace.
    Empty,
    /// Bytes that are not JSON; the upstream would refuse them, the rules refuse them first.
    NotJson,
    /// One message, or each message of a batch.
    Messages(Vec<Value>),
}

/// One request of a legacy body, as the rate limits see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LegacyRequest<'a> {
    pub method: &'a str,
    /// The tool of a `tools/call`, for its tool's limit.
    pub tool: Option<&'a str>,
}

// === impl LegacyBody ===

impl LegacyBody {
    pub fn parse(bytes: &[u8]) -> Self {
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Self::Empty;
        }
        match serde_json::from_slice::<Value>(bytes) {
            Ok(Value::Array(items)) => Self::Messages(items),
            Ok(one) => Self::Messages(vec![one]),
            Err(_) => Self::NotJson,
        }
    }

    /// The requests of the body: messages with a method and an id (not notifications, not the
    /// client's responses).
    pub fn requests(&self) -> impl Iterator<Item = LegacyRequest<'_>> {
        let messages = match self {
            Self::Messages(m) => m.as_slice(),
            Self::Empty | Self::NotJson => &[],
        };
        messages.iter().filter(|m| m.get("id").is_some()).filter_map(|m| {
            let method = m.get("method")?.as_str()?;
            let tool =
                (method == methods::TOOLS_CALL).then(|| m.get("params")?.get("name")?.as_str()).flatten();
            Some(LegacyRequest { method, tool })
        })
    }
}

/// The first level of a legacy body, read once and borrowed: what it is recorded under, and
/// the id of its request when it is one request (not a batch, a notification or a response).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LegacyHead {
    /// The `method` label it is recorded under in `requests_total`, its log line and its span:
    /// `legacy:` and the JSON-RPC method when it is one the legacy protocol defines, else its
    /// kind (`get`, `delete`, `notification`, `response`, `batch`, `other`, `invalid`). A
    /// fixed set, so no client text becomes a label.
    pub label: &'static str,
    /// The id of its one request: what a relayed stream cut at the call's deadline answers.
    pub id: Option<RequestId>,
}

/// The label of a legacy request; see [`LegacyHead::label`].
pub fn label(http_method: &http::Method, bytes: &[u8]) -> &'static str {
    LegacyHead::read(http_method, bytes).label
}

// === impl LegacyHead ===

impl LegacyHead {
    pub fn read(http_method: &http::Method, bytes: &[u8]) -> Self {
        /// An id that is not a request id (null, an object) still makes the message a request.
        #[derive(serde::Deserialize)]
        #[serde(untagged)]
        enum Id {
            Valid(RequestId),
            Other(serde::de::IgnoredAny),
        }
        #[derive(serde::Deserialize)]
        struct Head<'a> {
            #[serde(borrow, default)]
            method: Option<std::borrow::Cow<'a, str>>,
            #[serde(default)]
            id: Option<Id>,
        }
        let label = |label| Self { label, id: None };
        match *http_method {
            http::Method::GET => return label("legacy:get"),
            http::Method::DELETE => return label("legacy:delete"),
            _ => {}
        }
        if bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[') {
            return label("legacy:batch");
        }
        match serde_json::from_slice::<Head<'_>>(bytes) {
            Ok(Head { method: None, .. }) => label("legacy:response"),
            Ok(Head { method: Some(_), id: None }) => label("legacy:notification"),
            Ok(Head { method: Some(m), id: Some(id) }) => Self {
                label: request_label(&m),
                id: match id {
                    Id::Valid(id) => Some(id),
                    Id::Other(_) => None,
                },
            },
            Err(_) => label("legacy:invalid"),
        }
    }
}

fn request_label(method: &str) -> &'static str {
    match method {
        methods::INITIALIZE => "legacy:initialize",
        methods::PING => "legacy:ping",
        methods::TOOLS_LIST => "legacy:tools/list",
        methods::TOOLS_CALL => "legacy:tools/call",
        methods::PROMPTS_LIST => "legacy:prompts/list",
        methods::PROMPTS_GET => "legacy:prompts/get",
        methods::RESOURCES_LIST => "legacy:resources/list",
        methods::RESOURCES_TEMPLATES_LIST => "legacy:resources/templates/list",
        methods::RESOURCES_READ => "legacy:resources/read",
        methods::RESOURCES_SUBSCRIBE => "legacy:resources/subscribe",
        methods::RESOURCES_UNSUBSCRIBE => "legacy:resources/unsubscribe",
        methods::COMPLETION_COMPLETE => "legacy:completion/complete",
        "logging/setLevel" => "legacy:logging/setLevel",
        _ => "legacy:other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn requests(body: &str) -> Vec<(String, Option<String>)> {
        let parsed = LegacyBody::parse(body.as_bytes());
        parsed.requests().map(|r| (r.method.to_owned(), r.tool.map(str::to_owned))).collect()
    }

    #[test]
    fn requests_are_the_messages_with_a_method_and_an_id() {
        let call = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo"}}"#;
        let ping = r#"{"jsonrpc":"2.0","id":"p","method":"ping"}"#;
        let note = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
        let answer = r#"{"jsonrpc":"2.0","id":7,"result":{}}"#;
        let echo = ("tools/call".to_owned(), Some("echo".to_owned()));
        assert_eq!(requests(call), vec![echo.clone()]);
        let batch = format!("[{call},{ping},{note},{answer}]");
        assert_eq!(requests(&batch), vec![echo, ("ping".to_owned(), None)]);
        assert!(requests(note).is_empty() && requests(answer).is_empty());
        assert!(matches!(LegacyBody::parse(b"  "), LegacyBody::Empty));
        assert!(matches!(LegacyBody::parse(b"{not json"), LegacyBody::NotJson));
    }

    #[test]
    fn a_legacy_request_is_labelled_by_a_fixed_name() {
        let label = |method: http::Method, body: &str| label(&method, body.as_bytes());
        let post = http::Method::POST;
        assert_eq!(label(http::Method::GET, ""), "legacy:get");
        assert_eq!(label(http::Method::DELETE, ""), "legacy:delete");
        assert_eq!(
            label(post.clone(), r#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#),
            "legacy:tools/call"
        );
        for method in [
            "initialize",
            "ping",
            "tools/list",
            "tools/call",
            "prompts/list",
            "prompts/get",
            "resources/list",
            "resources/templates/list",
            "resources/read",
            "resources/subscribe",
            "resources/unsubscribe",
            "completion/complete",
            "logging/setLevel",
        ] {
            let body = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"{method}"}}"#);
            assert_eq!(label(post.clone(), &body), format!("legacy:{method}"));
        }
        assert_eq!(label(post.clone(), r#"{"id":1,"method":"evil/\u0041\nname"}"#), "legacy:other");
        assert_eq!(label(post.clone(), r#"{"method":"notifications/initialized"}"#), "legacy:notification");
        assert_eq!(label(post.clone(), r#"{"jsonrpc":"2.0","id":7,"result":{}}"#), "legacy:response");
        assert_eq!(label(post.clone(), r#" [{"id":1,"method":"ping"}]"#), "legacy:batch");
        assert_eq!(label(post, "{not json"), "legacy:invalid");
    }

    #[test]
    fn the_head_holds_the_id_of_one_request_only() {
        let id = |body: &str| LegacyHead::read(&http::Method::POST, body.as_bytes()).id;
        assert_eq!(id(r#"{"jsonrpc":"2.0","id":7,"method":"tools/call"}"#), Some(RequestId::Number(7)));
        assert_eq!(id(r#"{"id":"a","method":"ping"}"#), Some(RequestId::String("a".to_owned())));
        // A response, a batch, a notification or an id that is not one: nothing to answer.
        for body in [r#"{"id":7,"result":{}}"#, r#"[{"id":7,"method":"ping"}]"#, r#"{"method":"x"}"#] {
            assert_eq!(id(body), None, "{body}");
        }
        let odd = LegacyHead::read(&http::Method::POST, br#"{"id":{"x":1},"method":"ping"}"#);
        assert_eq!(odd, LegacyHead { label: "legacy:ping", id: None });
        assert_eq!(LegacyHead::read(&http::Method::GET, b"").id, None);
    }
}
