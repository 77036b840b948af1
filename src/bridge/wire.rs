//! What a forwarded retry and its answer look like on the wire between replicas: JSON, with the
//! request as the front validated it (the principal it authenticated, the capabilities it read)
//! and the owner's reply as the bridge produced it. The owner's errors travel as the JSON-RPC
//! object and HTTP status it would have sent its own client, which already carry no upstream
//! or internal detail.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::{MrtrRequest, Reply};
use crate::capabilities::ClientCaps;
use crate::protocol::jsonrpc::ErrorObject;
use crate::protocol::methods::FrontMethod;

/// The path of the internal listener that takes forwarded retries.
pub const RESUME_PATH: &str = "/internal/park/resume";

/// A forwarded retry.
#[derive(Debug, Serialize, Deserialize)]
pub struct WireRequest {
    pub principal: String,
    pub caps: u8,
    pub method: String,
    pub target: String,
    pub params: Value,
    pub state: String,
    #[serde(default)]
    pub responses: Option<Map<String, Value>>,
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
    /// The retry `req`, whose state is `state`.
    pub fn new(req: &MrtrRequest, state: &str) -> Self {
        Self {
            principal: req.principal.to_string(),
            caps: req.caps.fingerprint(),
            method: req.method.name().to_owned(),
            target: req.target.clone(),
            params: req.upstream_params.clone(),
            state: state.to_owned(),
            responses: req.responses.clone(),
        }
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
        })
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
            upstream_params: json!({"name": "greeting", "arguments": {"style": "formal"}}),
            state: Some("v1.x".into()),
            responses: json!({"elicitation-1": {"action": "accept"}}).as_object().cloned(),
        };
        let text = serde_json::to_string(&WireRequest::new(&req, "v1.x")).unwrap();
        let back = serde_json::from_str::<WireRequest>(&text).unwrap().into_request().unwrap();
        assert_eq!(
            (back.principal.as_ref(), back.caps, back.method),
            ("alice", caps, MrtrMethod::PromptsGet)
        );
        assert_eq!(
            (back.upstream_params, back.state, back.responses),
            (req.upstream_params, req.state, req.responses)
        );
    }

    #[test]
    fn only_mrtr_methods_are_accepted() {
        let wire = WireRequest {
            principal: String::new(),
            caps: 0,
            method: "tools/list".into(),
            target: String::new(),
            params: Value::Null,
            state: String::new(),
            responses: None,
        };
        assert!(wire.into_request().is_none());
    }
}
