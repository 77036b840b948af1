//! A gateway reply, read whole: the HTTP status, and the JSON-RPC message (or, for an SSE
//! response, every event, the last being the response). Accessors fail with a message that shows
//! the reply, so a failing test says what the gateway actually sent.

use http::header::CONTENT_TYPE;
use http::{HeaderMap, StatusCode};
use serde_json::{Map, Value};

use super::{HarnessError, TestResult};

/// What the gateway answered.
#[derive(Debug)]
pub(crate) struct Reply {
    pub(crate) status: StatusCode,
    /// The `Content-Type` essence (`application/json`, `text/event-stream`, ...).
    pub(crate) content_type: String,
    /// The JSON-RPC message; for SSE the last event; for non-JSON a string of the text.
    pub(crate) body: Value,
    /// Every SSE event's data, in order (empty for a JSON reply).
    pub(crate) events: Vec<Value>,
    /// The response headers.
    pub(crate) headers: HeaderMap,
}

// === impl Reply ===

impl Reply {
    pub(super) fn parse(status: StatusCode, headers: &HeaderMap, bytes: &[u8]) -> TestResult<Self> {
        let content_type = headers
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .unwrap_or("")
            .trim()
            .to_owned();
        let text = String::from_utf8_lossy(bytes).into_owned();
        let (body, events) = match content_type.as_str() {
            "application/json" => (serde_json::from_str(&text)?, Vec::new()),
            "text/event-stream" => {
                let events = sse_events(&text)?;
                (events.last().cloned().unwrap_or(Value::Null), events)
            }
            _ => (Value::String(text), Vec::new()),
        };
        Ok(Self { status, content_type, body, events, headers: headers.clone() })
    }

    /// The `result` object; fails on an error reply.
    pub(crate) fn result(&self) -> TestResult<&Value> {
        self.body.get("result").ok_or_else(|| self.unexpected("a result"))
    }

    /// The questions and the state of an `input_required` result.
    pub(crate) fn input_required(&self) -> TestResult<(Map<String, Value>, String)> {
        let result = self.result()?;
        if result["resultType"] != "input_required" {
            return Err(self.unexpected("resultType input_required"));
        }
        let requests = result["inputRequests"].as_object().cloned();
        let state = result["requestState"].as_str().map(str::to_owned);
        match (requests, state) {
            (Some(requests), Some(state)) => Ok((requests, state)),
            _ => Err(self.unexpected("inputRequests and requestState")),
        }
    }

    /// The text of a complete result: a tool's first content block, a prompt's first message or
    /// a resource's first contents entry.
    pub(crate) fn text(&self) -> TestResult<String> {
        let result = self.result()?;
        if result["resultType"] != "complete" {
            return Err(self.unexpected("resultType complete"));
        }
        let text = result
            .pointer("/content/0/text")
            .or_else(|| result.pointer("/messages/0/content/text"))
            .or_else(|| result.pointer("/contents/0/text"))
            .and_then(Value::as_str);
        text.map(str::to_owned).ok_or_else(|| self.unexpected("a text result"))
    }

    /// The JSON-RPC error code; fails on a success reply.
    pub(crate) fn error_code(&self) -> TestResult<i64> {
        self.error()?["code"].as_i64().ok_or_else(|| self.unexpected("an integer error code"))
    }

    /// The JSON-RPC error object.
    pub(crate) fn error(&self) -> TestResult<&Value> {
        self.body.get("error").ok_or_else(|| self.unexpected("an error"))
    }

    /// Fails unless this is an error with `status` and `code`; returns the error message.
    pub(crate) fn expect_error(&self, status: StatusCode, code: i64) -> TestResult<String> {
        if self.status != status || self.error_code()? != code {
            return Err(self.unexpected(&format!("HTTP {status} with JSON-RPC error {code}")));
        }
        Ok(self.error()?["message"].as_str().unwrap_or_default().to_owned())
    }

    fn unexpected(&self, wanted: &str) -> HarnessError {
        HarnessError::Unexpected(format!("wanted {wanted}, got HTTP {} {}", self.status, self.body))
    }
}

/// The `data` of every event of an SSE body, parsed as JSON (events without data are skipped).
fn sse_events(text: &str) -> TestResult<Vec<Value>> {
    let mut events = Vec::new();
    for block in text.split("\n\n") {
        let data: Vec<&str> =
            block.lines().filter_map(|l| l.strip_prefix("data:")).map(str::trim_start).collect();
        if !data.is_empty() {
            events.push(serde_json::from_str(&data.join("\n"))?);
        }
    }
    Ok(events)
}
