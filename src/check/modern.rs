//! The server as a 2026-07-28 client sees it through the embedded gateway: `server/discover`,
//! the lists, and the tried calls, each retried with its answers until it completes (the MRTR
//! rounds), twice, so that the report can say whether the questions stay the same. The client
//! declares the tasks extension, so a call the gateway serves as a task is followed to its end
//! ([`super::tasks`]).

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use http::HeaderValue;
use serde_json::{json, Map, Value};

use super::answers::question;
use super::calls::TriedCall;
use super::http::Http;
use super::lists::{self, Items, Lister};
use super::report::{GatewayRun, ListError, Outcome, Question, Side};
use crate::protocol::{headers, meta, methods, MODERN_VERSION};

/// A 2026-07-28 client of the embedded gateway.
pub(super) struct Modern<'a> {
    http: &'a Http,
    url: String,
    capabilities: Value,
    next_id: AtomicI64,
    /// Most rounds a call is retried for before the check gives up on it.
    max_rounds: u32,
    /// Longest a call's task is followed.
    task_wait: Duration,
}

/// What the gateway side saw of the server.
pub(super) struct ModernView {
    pub side: Side,
    pub items: Items,
}

/// A JSON-RPC request's outcome: its result, or why there is none.
type Answer = Result<Value, String>;

// === impl Modern ===

impl<'a> Modern<'a> {
    pub(super) fn new(
        http: &'a Http,
        url: String,
        capabilities: Value,
        (max_rounds, task_wait): (u32, Duration),
    ) -> Self {
        Self { http, url, capabilities, next_id: AtomicI64::new(1), max_rounds, task_wait }
    }

    /// `server/discover` and the lists its capabilities offer.
    pub(super) async fn view(&self) -> ModernView {
        let discovered = self.request(methods::DISCOVER, None, json!({})).await;
        let discovered = match discovered {
            Ok(result) => result,
            Err(message) => {
                let side = Side {
                    protocol_version: MODERN_VERSION.to_owned(),
                    errors: vec![ListError { list: "initialize", message }],
                    ..Side::default()
                };
                return ModernView { side, items: Items::default() };
            }
        };
        let capabilities = discovered.get("capabilities").cloned().unwrap_or_else(|| json!({}));
        let (items, errors) = lists::read_all(self, &capabilities).await;
        let server_info = discovered.pointer(&format!("/_meta/{}", meta::SERVER_INFO.replace('/', "~1")));
        let side = Side {
            protocol_version: MODERN_VERSION.to_owned(),
            server_info: server_info.cloned().unwrap_or(Value::Null),
            capabilities,
            counts: items.counts(),
            errors,
        };
        ModernView { side, items }
    }

    /// One run of `call`: retried with its answers until it completes, fails, or asked more
    /// rounds than the gateway allows.
    pub(super) async fn call(&self, call: &TriedCall) -> GatewayRun {
        let mut rounds = Vec::new();
        let mut retry = Map::new();
        for _ in 0..=self.max_rounds {
            let mut params = json!({"name": call.tool, "arguments": call.arguments});
            params.as_object_mut().into_iter().for_each(|p| p.extend(retry.clone()));
            let result = match self.request(methods::TOOLS_CALL, Some(&call.tool), params).await {
                Ok(result) => result,
                Err(e) => return GatewayRun { outcome: Outcome::Error, rounds, error: Some(e), task: false },
            };
            match result.get("resultType").and_then(Value::as_str) {
                Some("input_required") => {
                    let (questions, next) = answer_round(call, &result);
                    rounds.push(questions);
                    retry = next;
                }
                Some("task") => {
                    return super::tasks::follow(self, call, &result, rounds, self.task_wait).await
                }
                Some("complete") | None => {
                    return GatewayRun {
                        outcome: super::outcome_of(&result),
                        rounds,
                        error: None,
                        task: false,
                    };
                }
                Some(other) => {
                    let error = Some(format!("unexpected resultType {other:?}"));
                    return GatewayRun { outcome: Outcome::Error, rounds, error, task: false };
                }
            }
        }
        let error = Some(format!("still asking after {} rounds", self.max_rounds + 1));
        GatewayRun { outcome: Outcome::Error, rounds, error, task: false }
    }

    /// Sends `method(params)` with the 2026-07-28 envelope; `name` is the `Mcp-Name` header.
    pub(super) async fn request(
        &self,
        method: &'static str,
        name: Option<&str>,
        mut params: Value,
    ) -> Answer {
        let envelope = json!({meta::PROTOCOL_VERSION: MODERN_VERSION, meta::CLIENT_CAPABILITIES: self.capabilities,
            meta::CLIENT_INFO: {"name": "mrtr-gateway-check", "version": env!("CARGO_PKG_VERSION")}});
        if let Some(p) = params.as_object_mut() {
            p.insert("_meta".to_owned(), envelope);
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let mut list = vec![
            (headers::PROTOCOL_VERSION, HeaderValue::from_static(MODERN_VERSION)),
            (headers::METHOD, HeaderValue::from_static(method)),
        ];
        if let Some(name) = name {
            let value =
                HeaderValue::from_str(name).map_err(|_| format!("{name:?} cannot travel in Mcp-Name"))?;
            list.push((headers::NAME, value));
        }
        let message = self.http.post(&self.url, &list, body.to_string().into_bytes()).await?;
        match (message.get("result"), message.get("error")) {
            (Some(result), _) => Ok(result.clone()),
            (None, Some(error)) => Err(format!(
                "JSON-RPC error {}: {}",
                error.get("code").unwrap_or(&Value::Null),
                error.get("message").and_then(Value::as_str).unwrap_or_default()
            )),
            (None, None) => Err("an answer with neither result nor error".to_owned()),
        }
    }
}

impl Lister for Modern<'_> {
    async fn page(&self, method: &'static str, cursor: Option<&str>) -> Result<Value, String> {
        self.request(method, None, lists::params(cursor)).await
    }
}

/// The questions of an `input_required` result, sorted, and the retry's fields: the answers
/// by key and the state echoed.
fn answer_round(call: &TriedCall, result: &Value) -> (Vec<Question>, Map<String, Value>) {
    let empty = Map::new();
    let requests = result.get("inputRequests").and_then(Value::as_object).unwrap_or(&empty);
    let (questions, responses) = answer_requests(call, requests);
    let mut retry = Map::new();
    retry.insert("inputResponses".to_owned(), Value::Object(responses));
    if let Some(state) = result.get("requestState") {
        retry.insert("requestState".to_owned(), state.clone());
    }
    (questions, retry)
}

/// The questions of a set of `inputRequests`, sorted, and the answers by key (a question the
/// check does not answer is left out).
pub(super) fn answer_requests(
    call: &TriedCall,
    requests: &Map<String, Value>,
) -> (Vec<Question>, Map<String, Value>) {
    let mut questions = Vec::new();
    let mut responses = Map::new();
    for (key, request) in requests {
        let method = request.get("method").and_then(Value::as_str).unwrap_or_default();
        let params = request.get("params");
        questions.push(question(method, params));
        if let Some(answer) = call.answers.answer(method, params) {
            responses.insert(key.clone(), answer);
        }
    }
    questions.sort();
    (questions, responses)
}
