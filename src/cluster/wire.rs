//! What a forwarded retry and its answer look like on the wire between replicas: JSON, with the
//! request as the front validated it (the principal it authenticated, the capabilities it read)
//! and the owner's reply as the bridge produced it. The owner's errors travel as the JSON-RPC
//! object and HTTP status it would have sent its own client, which already carry no upstream
//! or internal detail.
//!
//! The owner answers a stream of lines ([`WireFrame`]), its head sent before it runs the call:
//! each notification the client may see, in order, then the reply. A retry whose client asked
//! for progress or logs says so (its `progressToken` and log level); without either the stream
//! is the reply alone. An owner that predates streams answers the reply alone, once the call
//! ended, which reads as the same stream's last line.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::bridge::{MrtrRequest, Notes, Reply};
use crate::capabilities::ClientCaps;
use crate::protocol::jsonrpc::ErrorObject;
use crate::protocol::log_level::LogLevel;
use crate::protocol::methods::FrontMethod;
use crate::protocol::params::JsonText;

/// The path of the internal listener that takes forwarded retries.
pub const RESUME_PATH: &str = "/internal/park/resume";

/// A forwarded retry.
#[derive(Debug, Serialize, Deserialize)]
pub struct WireRequest {
    pub principal: String,
    pub caps: u8,
    pub method: String,
    pub target: String,
    pub params: JsonText,
    pub state: String,
    #[serde(default)]
    pub responses: Option<Map<String, Value>>,
    /// The client's `progressToken`: the owner relays progress under it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress_token: Option<Value>,
    /// The client's `_meta` log level: the owner relays logs at or above it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log_level: Option<String>,
}

/// One line of the owner's answer: a notification for the client, or the reply (the last).
/// Not a serde `untagged` enum: that buffers its input, which a reply's raw result cannot be
/// read from.
#[derive(Debug)]
pub enum WireFrame {
    Note(Value),
    Reply(WireReply),
}

/// A notification line.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct NoteLine {
    note: Value,
}

/// The owner's answer.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WireReply {
    Complete(Box<RawValue>),
    InputRequired {
        requests: Map<String, Value>,
        state: String,
        round: u32,
    },
    Error {
        error: ErrorObject,
        status: u16,
    },
    /// The owner does not hold the call (expired, or it restarted): replay it.
    NotHeld,
}

// === impl WireRequest ===

impl WireRequest {
    /// The retry `req`, whose state is `state`, asking for what `notes` relays.
    pub fn new(req: &MrtrRequest, state: &str, notes: Option<&Notes>) -> Self {
        Self {
            progress_token: notes.and_then(|n| n.progress_token.clone()),
            log_level: notes.and_then(|n| n.log_level).map(|l| l.as_str().to_owned()),
            principal: req.principal.to_string(),
            caps: req.caps.fingerprint(),
            method: req.method.name().to_owned(),
            target: req.target.clone(),
            params: req.upstream_params.clone(),
            state: state.to_owned(),
            responses: req.responses.clone(),
        }
    }

    /// Whether the client asked for notifications: then the owner answers a stream.
    pub fn wants_notes(&self) -> bool {
        self.progress_token.is_some() || self.log_level.is_some()
    }

    /// What the client asked to see, relayed into `tx` (an unknown level relays no log).
    pub fn notes(&self, tx: tokio::sync::mpsc::Sender<Value>) -> Notes {
        let log_level = self.log_level.as_deref().and_then(LogLevel::parse);
        Notes { progress_token: self.progress_token.clone(), log_level, tx }
    }

    /// The bridge request it carries; `None` for a method that is not an MRTR one.
    pub fn into_request(self) -> Option<MrtrRequest> {
        let FrontMethod::Mrtr(method) = FrontMethod::parse(&self.method)? else { return None };
        Some(MrtrRequest {
            principal: self.principal.into(),
            caps: ClientCaps::from_fingerprint(self.caps),
            method,
            target: self.target,
            upstream_params: self.params,
            state: Some(self.state),
            responses: self.responses,
            // The replica the client reached checks the result it relays.
            output: None,
        })
    }
}

// === impl WireFrame ===

impl WireFrame {
    /// One line, without its newline.
    pub fn parse(line: &[u8]) -> Result<Self, serde_json::Error> {
        match serde_json::from_slice::<NoteLine>(line) {
            Ok(NoteLine { note }) => Ok(Self::Note(note)),
            Err(_) => serde_json::from_slice(line).map(Self::Reply),
        }
    }

    /// The line, with its newline.
    pub fn to_line(&self) -> Result<Vec<u8>, serde_json::Error> {
        let mut line = match self {
            Self::Note(note) => serde_json::to_vec(&NoteLine { note: note.clone() }),
            Self::Reply(reply) => serde_json::to_vec(reply),
        }?;
        line.push(b'\n');
        Ok(line)
    }
}

// === impl WireReply ===

impl From<Reply> for WireReply {
    fn from(reply: Reply) -> Self {
        match reply {
            Reply::Complete(raw) => Self::Complete(raw),
            Reply::InputRequired { requests, state, round } => Self::InputRequired { requests, state, round },
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;
    use crate::protocol::methods::MrtrMethod;

    #[test]
    fn a_request_survives_the_trip() {
        let caps = ClientCaps::from_fingerprint(0b10_0001);
        let req = MrtrRequest {
            principal: Arc::from("alice"),
            caps,
            method: MrtrMethod::PromptsGet,
            target: "greeting".into(),
            upstream_params: RawValue::from_string(
                r#"{"name":"greeting","arguments":{"style": "formal"}}"#.into(),
            )
            .unwrap()
            .into(),
            state: Some("v1.x".into()),
            responses: json!({"elicitation-1": {"action": "accept"}}).as_object().cloned(),
            output: None,
        };
        let text = serde_json::to_string(&WireRequest::new(&req, "v1.x", None)).unwrap();
        assert!(!text.contains("progress_token") && !text.contains("log_level"), "{text}");
        let back = serde_json::from_str::<WireRequest>(&text).unwrap().into_request().unwrap();
        assert_eq!(
            (back.principal.as_ref(), back.caps, back.method),
            ("alice", caps, MrtrMethod::PromptsGet)
        );
        // The params travel as their text, spacing and all.
        assert_eq!(back.upstream_params.as_str(), req.upstream_params.as_str());
        assert_eq!((back.state, back.responses), (req.state, req.responses));
    }

    #[test]
    fn only_mrtr_methods_are_accepted() {
        let wire = WireRequest {
            principal: String::new(),
            caps: 0,
            method: "tools/list".into(),
            target: String::new(),
            params: RawValue::from_string("null".into()).unwrap().into(),
            state: String::new(),
            responses: None,
            progress_token: None,
            log_level: None,
        };
        assert!(wire.into_request().is_none());
    }

    #[test]
    fn notes_travel_as_lines_and_a_bare_reply_is_a_last_line() {
        let note = WireFrame::Note(json!({"method": "notifications/progress"})).to_line().unwrap();
        assert_eq!(note.last(), Some(&b'\n'));
        assert!(matches!(WireFrame::parse(&note[..note.len() - 1]).unwrap(), WireFrame::Note(_)));
        // A bare reply, as an owner that predates the lines sends it, is a reply line.
        let raw = RawValue::from_string(r#"{"content":[]}"#.into()).unwrap();
        let done = serde_json::to_vec(&WireReply::Complete(raw)).unwrap();
        let WireFrame::Reply(WireReply::Complete(back)) = WireFrame::parse(&done).unwrap() else { panic!() };
        assert_eq!(back.get(), r#"{"content":[]}"#);
        assert!(WireFrame::parse(br#"{"note": 1, "extra": 2}"#).is_err());
        let (tx, _rx) = tokio::sync::mpsc::channel(1);
        let notes = Notes { progress_token: Some(json!("tok")), log_level: Some(LogLevel::Warning), tx };
        let req = MrtrRequest {
            principal: Arc::from("alice"),
            caps: ClientCaps::from_fingerprint(0),
            method: MrtrMethod::ToolsCall,
            target: "t".into(),
            upstream_params: RawValue::from_string("{}".into()).unwrap().into(),
            state: None,
            responses: None,
            output: None,
        };
        let wire = WireRequest::new(&req, "v1.x", Some(&notes));
        assert!(wire.wants_notes());
        let (tx, _rx) = tokio::sync::mpsc::channel(1);
        let back = wire.notes(tx);
        assert_eq!((back.progress_token, back.log_level), (Some(json!("tok")), Some(LogLevel::Warning)));
    }
}
