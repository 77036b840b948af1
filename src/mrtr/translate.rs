//! Translation between legacy server→client requests and 2026-07-28 embedded input requests.
//!
//! Upstream, a legacy server pushes `elicitation/create`, `sampling/createMessage` or
//! `roots/list` as full JSON-RPC requests. Downstream, SEP-2322 embeds the same questions as
//! `{method, params}` in `inputRequests`, without `_meta`, `task` or `elicitationId` (removed in
//! 2026-07-28). Answers travel the other way and must take the result shape of the version the
//! upstream negotiated: a 2025-06-18 server knows only single-block sampling content and form
//! elicitation; a 2025-03-26 or 2024-11-05 server knows no elicitation at all. Nothing is
//! guessed: an unknown method, elicitation mode or a result the upstream version cannot express
//! is an error.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::mrtr::canonical::VOLATILE_FIELDS;
use crate::protocol::methods::{ELICITATION_CREATE, ROOTS_LIST, SAMPLING_CREATE_MESSAGE};
pub use crate::protocol::LegacyVersion;

/// Errors from translating a question or an answer.
#[derive(Debug, thiserror::Error)]
pub enum TranslateError {
    #[error("`{0}` is not a request MRTR can embed")]
    UnknownMethod(String),
    #[error("`{method}` params must be a JSON object")]
    ParamsNotObject { method: &'static str },
    #[error("elicitation mode `{0}` is unknown (expected `form` or `url`)")]
    UnknownMode(String),
    #[error("`{method}` params need a string `{field}`")]
    MissingField { method: &'static str, field: &'static str },
    #[error("protocol {0} has no elicitation; the upstream cannot receive an elicitation result")]
    NoElicitation(&'static str),
    #[error("protocol {version} takes one sampling content block, the answer has {count}")]
    ContentBlocks { version: &'static str, count: usize },
    #[error("protocol {version} has no sampling content block of type `{block}`")]
    BlockType { version: &'static str, block: String },
    #[error("a URL-elicitation-required error must list URL-mode elicitations in `data.elicitations`: {0}")]
    UrlRequired(&'static str),
}

/// The three kinds of input a legacy server can ask for. Serialised as one letter in state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum InputKind {
    #[serde(rename = "e")]
    Elicitation,
    #[serde(rename = "s")]
    Sampling,
    #[serde(rename = "r")]
    Roots,
}

// === impl InputKind ===

impl InputKind {
    /// The kind of a pushed request's method; `None` for anything else.
    pub fn from_method(method: &str) -> Option<Self> {
        match method {
            ELICITATION_CREATE => Some(Self::Elicitation),
            SAMPLING_CREATE_MESSAGE => Some(Self::Sampling),
            ROOTS_LIST => Some(Self::Roots),
            _ => None,
        }
    }

    /// The method name.
    pub fn method(self) -> &'static str {
        match self {
            Self::Elicitation => ELICITATION_CREATE,
            Self::Sampling => SAMPLING_CREATE_MESSAGE,
            Self::Roots => ROOTS_LIST,
        }
    }

    /// The prefix of keys the gateway mints for this kind (`elicitation-3`).
    pub fn key_prefix(self) -> &'static str {
        match self {
            Self::Elicitation => "elicitation",
            Self::Sampling => "sampling",
            Self::Roots => "roots",
        }
    }
}

/// Classifies a pushed legacy request and translates it (see [`to_input_request`]).
pub fn input_request(method: &str, params: Option<&Value>) -> Result<(InputKind, Value), TranslateError> {
    let kind = InputKind::from_method(method)
        .ok_or_else(|| TranslateError::UnknownMethod(method.chars().take(64).collect()))?;
    Ok((kind, to_input_request(kind, params)?))
}

/// Turns a pushed legacy request into the 2026-07-28 `{method, params}` of an `inputRequests`
/// entry.
pub fn to_input_request(kind: InputKind, params: Option<&Value>) -> Result<Value, TranslateError> {
    let method = kind.method();
    let params = match params {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(map)) => stable_fields(map),
        Some(_) => return Err(TranslateError::ParamsNotObject { method }),
    };
    let params = match kind {
        InputKind::Elicitation => elicitation_params(params)?,
        InputKind::Sampling | InputKind::Roots => params,
    };
    let mut request = Map::with_capacity(2);
    request.insert("method".to_owned(), Value::String(method.to_owned()));
    // A 2026 `roots/list` has optional params; an empty object says nothing.
    if !(params.is_empty() && kind == InputKind::Roots) {
        request.insert("params".to_owned(), Value::Object(params));
    }
    Ok(Value::Object(request))
}

/// The URL elicitations a legacy `-32042` error lists in `data.elicitations`, each as the
/// params of the `elicitation/create` it stands for (2025-11-25 elicitation page: every one
/// "MUST" be URL mode). An empty or missing list, or an entry of another mode, is an error:
/// there is nothing the client could be asked. Each entry is checked as a question when it is
/// asked ([`to_input_request`] wants its `message` and `url`).
pub fn url_elicitations(data: Option<&Value>) -> Result<Vec<Value>, TranslateError> {
    let list = match data.and_then(|d| d.get("elicitations")) {
        Some(Value::Array(list)) if !list.is_empty() => list,
        Some(Value::Array(_)) => return Err(TranslateError::UrlRequired("the list is empty")),
        _ => return Err(TranslateError::UrlRequired("there is no list")),
    };
    list.iter()
        .map(|entry| match entry {
            Value::Object(e) if e.get("mode").and_then(Value::as_str) == Some("url") => Ok(entry.clone()),
            Value::Object(_) => Err(TranslateError::UrlRequired("an entry is not in URL mode")),
            _ => Err(TranslateError::UrlRequired("an entry is not an object")),
        })
        .collect()
}

fn stable_fields(map: &Map<String, Value>) -> Map<String, Value> {
    map.iter()
        .filter(|(k, _)| !VOLATILE_FIELDS.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

fn elicitation_params(mut params: Map<String, Value>) -> Result<Map<String, Value>, TranslateError> {
    match params.get("mode") {
        None => Ok(params),
        Some(Value::String(mode)) if mode == "form" => Ok(params),
        Some(Value::String(mode)) if mode == "url" => {
            let mut url_params = Map::with_capacity(3);
            url_params.insert("mode".to_owned(), Value::String("url".to_owned()));
            for field in ["message", "url"] {
                match params.remove(field) {
                    Some(value @ Value::String(_)) => url_params.insert(field.to_owned(), value),
                    _ => return Err(TranslateError::MissingField { method: ELICITATION_CREATE, field }),
                };
            }
            Ok(url_params)
        }
        Some(other) => Err(TranslateError::UnknownMode(mode_text(other))),
    }
}

fn mode_text(mode: &Value) -> String {
    match mode {
        Value::String(s) => s.chars().take(32).collect(),
        other => other.to_string().chars().take(32).collect(),
    }
}

/// Turns a validated 2026-07-28 answer into the result the upstream's version expects.
pub fn to_legacy_result(
    kind: InputKind,
    answer: Value,
    version: LegacyVersion,
) -> Result<Value, TranslateError> {
    match kind {
        InputKind::Elicitation if !version.has_elicitation() => {
            Err(TranslateError::NoElicitation(version.as_str()))
        }
        InputKind::Elicitation => Ok(without_null_content(answer)),
        InputKind::Sampling if !version.has_2025_11_features() => single_block(answer, version),
        InputKind::Sampling | InputKind::Roots => Ok(answer),
    }
}

/// Legacy SDKs validate `content` as an optional object: `null` would fail there, absence not.
fn without_null_content(mut answer: Value) -> Value {
    if let Some(object) = answer.as_object_mut() {
        if object.get("content").is_some_and(Value::is_null) {
            object.remove("content");
        }
    }
    answer
}

/// Before 2025-11-25 a sampling result holds exactly one text, image or audio block.
fn single_block(mut answer: Value, version: LegacyVersion) -> Result<Value, TranslateError> {
    let Some(content) = answer.get_mut("content") else {
        return Ok(answer);
    };
    if let Value::Array(blocks) = content {
        if blocks.len() != 1 {
            return Err(TranslateError::ContentBlocks { version: version.as_str(), count: blocks.len() });
        }
        let block = blocks.swap_remove(0);
        *content = block;
    }
    match content.get("type").and_then(Value::as_str) {
        Some("text" | "image" | "audio") => Ok(answer),
        other => Err(TranslateError::BlockType {
            version: version.as_str(),
            block: other.unwrap_or("").chars().take(32).collect(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn form_elicitation_loses_only_volatile_fields() {
        let params = json!({
            "message": "Name?",
            "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}},
            "_meta": {"dev.mrtr-gateway/inputKey": "user_name"},
            "task": {"ttl": 1000},
            "elicitationId": "e1"
        });
        let request = to_input_request(InputKind::Elicitation, Some(&params)).unwrap();
        assert_eq!(
            request,
            json!({"method": "elicitation/create", "params": {
                "message": "Name?",
                "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}}
            }})
        );
        let with_mode = json!({"mode": "form", "message": "m", "requestedSchema": {}});
        let request = to_input_request(InputKind::Elicitation, Some(&with_mode)).unwrap();
        assert_eq!(request["params"]["mode"], "form");
    }

    #[test]
    fn url_elicitation_keeps_mode_message_url() {
        let params = json!({"mode": "url", "message": "Open", "url": "https://example.com/a",
                            "elicitationId": "5fda", "extra": 1});
        let request = to_input_request(InputKind::Elicitation, Some(&params)).unwrap();
        assert_eq!(
            request["params"],
            json!({"mode": "url", "message": "Open", "url": "https://example.com/a"})
        );
        let missing = json!({"mode": "url", "message": "Open"});
        assert!(matches!(
            to_input_request(InputKind::Elicitation, Some(&missing)),
            Err(TranslateError::MissingField { field: "url", .. })
        ));
    }

    #[test]
    fn url_required_data_lists_url_elicitations_only() {
        let entry =
            json!({"mode": "url", "elicitationId": "e", "url": "https://a.example/x", "message": "m"});
        let data = json!({"elicitations": [entry]});
        assert_eq!(url_elicitations(Some(&data)).unwrap(), vec![data["elicitations"][0].clone()]);
        // Each refusal says what is wrong with the list (the log line carries it).
        for (bad, why) in [
            (json!({}), "there is no list"),
            (json!({"elicitations": []}), "the list is empty"),
            (json!({"elicitations": {"mode": "url"}}), "there is no list"),
            (json!({"elicitations": [{"mode": "form", "message": "m"}]}), "an entry is not in URL mode"),
            (
                json!({"elicitations": [{"message": "no mode", "url": "https://a.example"}]}),
                "an entry is not in URL mode",
            ),
            (json!({"elicitations": ["https://a.example"]}), "an entry is not an object"),
        ] {
            let refused = url_elicitations(Some(&bad));
            assert!(matches!(refused, Err(TranslateError::UrlRequired(r)) if r == why), "{bad}: {refused:?}");
        }
        assert!(url_elicitations(None).is_err());
    }

    #[test]
    fn unknown_modes_methods_and_shapes_are_errors() {
        let params = json!({"mode": "telepathy", "message": "m"});
        assert!(matches!(
            to_input_request(InputKind::Elicitation, Some(&params)),
            Err(TranslateError::UnknownMode(m)) if m == "telepathy"
        ));
        assert!(matches!(
            to_input_request(InputKind::Sampling, Some(&json!([1]))),
            Err(TranslateError::ParamsNotObject { .. })
        ));
        assert!(matches!(
            input_request("tools/call", None),
            Err(TranslateError::UnknownMethod(m)) if m == "tools/call"
        ));
        assert_eq!(InputKind::from_method("roots/list"), Some(InputKind::Roots));
    }

    #[test]
    fn roots_request_without_params_has_none() {
        let request = to_input_request(InputKind::Roots, Some(&json!({"_meta": {"x": 1}}))).unwrap();
        assert_eq!(request, json!({"method": "roots/list"}));
        let sampling = json!({"messages": [], "maxTokens": 5, "task": {}, "_meta": {}});
        let request = to_input_request(InputKind::Sampling, Some(&sampling)).unwrap();
        assert_eq!(request["params"], json!({"messages": [], "maxTokens": 5}));
        // Only an empty roots request loses its params: other kinds keep even an empty object,
        // and roots keep params that say something.
        let request = to_input_request(InputKind::Sampling, Some(&json!({}))).unwrap();
        assert_eq!(request, json!({"method": "sampling/createMessage", "params": {}}));
        let request = to_input_request(InputKind::Roots, Some(&json!({"cursor": "c"}))).unwrap();
        assert_eq!(request, json!({"method": "roots/list", "params": {"cursor": "c"}}));
    }

    #[test]
    fn sampling_content_follows_the_upstream_version() {
        let answer = json!({"role": "assistant", "model": "m",
                            "content": [{"type": "text", "text": "Paris"}]});
        let new = to_legacy_result(InputKind::Sampling, answer.clone(), LegacyVersion::V2025_11_25);
        assert_eq!(new.unwrap(), answer);
        for version in [LegacyVersion::V2025_06_18, LegacyVersion::V2025_03_26, LegacyVersion::V2024_11_05] {
            let old = to_legacy_result(InputKind::Sampling, answer.clone(), version).unwrap();
            assert_eq!(old["content"], json!({"type": "text", "text": "Paris"}));
        }
    }

    #[test]
    fn answers_an_old_upstream_cannot_take_are_errors() {
        let two = json!({"role": "assistant", "model": "m",
                         "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]});
        assert!(matches!(
            to_legacy_result(InputKind::Sampling, two, LegacyVersion::V2025_06_18),
            Err(TranslateError::ContentBlocks { count: 2, .. })
        ));
        let tool = json!({"role": "assistant", "model": "m",
                          "content": {"type": "tool_use", "id": "1", "name": "t", "input": {}}});
        assert!(matches!(
            to_legacy_result(InputKind::Sampling, tool, LegacyVersion::V2025_06_18),
            Err(TranslateError::BlockType { .. })
        ));
        assert!(matches!(
            to_legacy_result(
                InputKind::Elicitation,
                json!({"action": "decline"}),
                LegacyVersion::V2025_03_26
            ),
            Err(TranslateError::NoElicitation("2025-03-26"))
        ));
        assert!(matches!(
            to_legacy_result(
                InputKind::Elicitation,
                json!({"action": "decline"}),
                LegacyVersion::V2024_11_05
            ),
            Err(TranslateError::NoElicitation("2024-11-05"))
        ));
    }

    #[test]
    fn null_elicitation_content_is_dropped() {
        let answer = json!({"action": "decline", "content": null});
        let legacy = to_legacy_result(InputKind::Elicitation, answer, LegacyVersion::V2025_11_25).unwrap();
        assert_eq!(legacy, json!({"action": "decline"}));
    }

    #[test]
    fn versions_round_trip() {
        for v in crate::protocol::LEGACY_VERSIONS {
            assert_eq!(LegacyVersion::parse(v).map(LegacyVersion::as_str), Some(*v));
        }
        assert_eq!(
            crate::protocol::LEGACY_VERSIONS,
            ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"]
        );
        assert_eq!(LegacyVersion::parse("2024-10-07"), None);
    }
}
