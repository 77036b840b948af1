//! The list results of a restricted legacy client, filtered by the same rules as a 2026-07-28
//! client's: a client that may not call a tool must not see it listed either.
//!
//! Only the responses to `tools/list`, `prompts/list`, `resources/list` and
//! `resources/templates/list` are parsed and rewritten; every other message, and every message
//! of a client the rules do not restrict, is relayed as the upstream sent it. Which responses
//! those are is known by their ids: the front reads the client's POST body once (for the rules
//! and rate limits) and hands the ids of its list requests here. A stream resumed with `GET` and
//! `Last-Event-ID` can replay a list response whose request the gateway no longer sees, so on it
//! any response whose result carries a list is filtered by that list's field.
//!
//! The rules themselves live in `crate::auth` (above this module's layer's neighbours in the
//! README's Layout list, and importing this module), so they reach here through [`ListFilter`].

use std::sync::Arc;

use prometheus::IntCounter;
use serde_json::value::RawValue;
use serde_json::Value;

use super::body::LegacyBody;
use crate::protocol::{methods, RequestId};

/// Leaves out of a list result what the client may not use.
pub trait ListFilter: Send + Sync {
    /// Removes from `result`, the result of the list `method`, the items the client may not
    /// use; returns how many it removed.
    fn retain_listed(&self, method: &str, result: &mut Value) -> usize;
}

/// The list methods, and the field of their result that holds the list.
const LISTS: [(&str, &str); 4] = [
    (methods::TOOLS_LIST, "tools"),
    (methods::PROMPTS_LIST, "prompts"),
    (methods::RESOURCES_LIST, "resources"),
    (methods::RESOURCES_TEMPLATES_LIST, "resourceTemplates"),
];

/// What one relayed response body goes through: the filter, and which responses it applies to.
pub struct Lists {
    filter: Arc<dyn ListFilter>,
    pending: Pending,
    /// Counts a list result too large to filter, which the client never gets.
    pub(super) too_large: Option<IntCounter>,
}

/// The filter of one list request's result.
pub(super) struct ListOf {
    filter: Arc<dyn ListFilter>,
    method: &'static str,
}

/// The responses to filter.
#[derive(Debug)]
enum Pending {
    /// The responses to these requests of the POST, with their methods; done when empty.
    Ids(Vec<(RequestId, &'static str)>),
    /// Any response whose result carries a list (a resumed stream).
    Any,
}

// === impl Lists ===

impl Lists {
    /// For a POST of `body`: `None` when it holds no list request (the response is relayed
    /// untouched).
    pub fn for_post(filter: Arc<dyn ListFilter>, body: &LegacyBody) -> Option<Self> {
        let LegacyBody::Messages(messages) = body else { return None };
        let ids: Vec<_> = messages
            .iter()
            .filter_map(|m| {
                let method = list_method(m.get("method")?.as_str()?)?;
                let id = serde_json::from_value::<RequestId>(m.get("id")?.clone()).ok()?;
                Some((id, method))
            })
            .collect();
        (!ids.is_empty()).then(|| Self { filter, pending: Pending::Ids(ids), too_large: None })
    }

    /// For a stream resumed with `Last-Event-ID`.
    pub fn for_resumed(filter: Arc<dyn ListFilter>) -> Self {
        Self { filter, pending: Pending::Any, too_large: None }
    }

    /// Counts in `counter` each list result too large to filter.
    pub(super) fn counting(self, counter: IntCounter) -> Self {
        Self { too_large: Some(counter), ..self }
    }

    /// The filter of the result of the client's request `id`, if it is one to filter.
    pub(super) fn of_request(&self, id: &RequestId) -> Option<ListOf> {
        let Pending::Ids(ids) = &self.pending else { return None };
        let method = ids.iter().find(|(i, _)| i == id).map(|(_, m)| *m)?;
        Some(ListOf { filter: self.filter.clone(), method })
    }

    /// True once every response to filter has gone by: the rest passes untouched.
    pub(super) fn is_done(&self) -> bool {
        matches!(&self.pending, Pending::Ids(ids) if ids.is_empty())
    }

    /// The ids still waiting for their response.
    pub(super) fn waiting(&self) -> &[(RequestId, &'static str)] {
        match &self.pending {
            Pending::Ids(ids) => ids,
            Pending::Any => &[],
        }
    }

    /// Filters `message` (one JSON-RPC message, or a batch of them) in place when it holds a
    /// response to filter; returns whether it did, so the caller re-encodes only then.
    pub(super) fn filter_message(&mut self, message: &mut Value) -> bool {
        let Value::Array(items) = message else { return self.filter_one(message) };
        // Every item of a batch, not just up to the first filtered one.
        let mut any = false;
        for item in items {
            any |= self.filter_one(item);
        }
        any
    }

    fn filter_one(&mut self, message: &mut Value) -> bool {
        if message.get("method").is_some() {
            return false;
        }
        let id = message.get("id").and_then(|id| serde_json::from_value::<RequestId>(id.clone()).ok());
        let Some(result) = message.get_mut("result") else { return false };
        match (&mut self.pending, id) {
            (Pending::Ids(ids), Some(id)) => {
                let Some(at) = ids.iter().position(|(i, _)| *i == id) else { return false };
                let (_, method) = ids.swap_remove(at);
                self.filter.retain_listed(method, result);
                true
            }
            (Pending::Ids(_), None) => false,
            (Pending::Any, _) => {
                let mut any = false;
                for (method, field) in LISTS {
                    if result.get(field).is_some_and(Value::is_array) {
                        self.filter.retain_listed(method, result);
                        any = true;
                    }
                }
                any
            }
        }
    }
}

// === impl ListOf ===

impl ListOf {
    /// `raw` filtered; untouched when it is not a JSON object.
    pub(super) fn apply(&self, raw: Box<RawValue>) -> Box<RawValue> {
        let Ok(mut result) = serde_json::from_str::<Value>(raw.get()) else { return raw };
        if self.filter.retain_listed(self.method, &mut result) == 0 {
            return raw;
        }
        RawValue::from_string(result.to_string()).unwrap_or(raw)
    }
}

impl std::fmt::Debug for Lists {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lists").field("pending", &self.pending).finish_non_exhaustive()
    }
}

/// The list method `method` names, as a fixed string.
fn list_method(method: &str) -> Option<&'static str> {
    LISTS.iter().find(|(m, _)| *m == method).map(|(m, _)| *m)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// Hides every item whose name starts with `secret`.
    struct NoSecrets;

    impl ListFilter for NoSecrets {
        fn retain_listed(&self, method: &str, result: &mut Value) -> usize {
            let field = LISTS.iter().find(|(m, _)| *m == method).map_or("", |(_, f)| *f);
            let Some(Value::Array(items)) = result.get_mut(field) else { return 0 };
            let before = items.len();
            items.retain(|i| !i["name"].as_str().unwrap_or_default().starts_with("secret"));
            before - items.len()
        }
    }

    fn body(v: Value) -> LegacyBody {
        LegacyBody::parse(v.to_string().as_bytes())
    }

    fn tools(id: Value) -> Value {
        json!({"jsonrpc": "2.0", "id": id, "result": {"tools": [{"name": "echo"}, {"name": "secret_x"}]}})
    }

    #[test]
    fn only_list_requests_are_waited_for() {
        let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "x"}});
        assert!(Lists::for_post(Arc::new(NoSecrets), &body(call.clone())).is_none());
        let list = json!({"jsonrpc": "2.0", "id": "l", "method": "tools/list"});
        let note = json!({"jsonrpc": "2.0", "method": "tools/list"});
        let lists = Lists::for_post(Arc::new(NoSecrets), &body(json!([call, list, note]))).unwrap();
        assert_eq!(lists.waiting(), &[(RequestId::String("l".into()), methods::TOOLS_LIST)]);
    }

    #[test]
    fn the_response_to_a_list_request_is_filtered_once() {
        let list = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/list"});
        let mut lists = Lists::for_post(Arc::new(NoSecrets), &body(list)).unwrap();
        let mut other = tools(json!(8));
        assert!(!lists.filter_message(&mut other), "another id passes untouched");
        let mut request = json!({"jsonrpc": "2.0", "id": 7, "method": "roots/list"});
        assert!(!lists.filter_message(&mut request), "a server request with the same id is no response");
        let mut mine = tools(json!(7));
        assert!(lists.filter_message(&mut mine));
        assert_eq!(mine["result"]["tools"], json!([{"name": "echo"}]));
        assert!(lists.is_done());
    }

    #[test]
    fn a_seam_call_filters_its_own_result() {
        let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
        let lists = Lists::for_post(Arc::new(NoSecrets), &body(list)).unwrap();
        assert!(lists.of_request(&RequestId::Number(3)).is_none());
        let of = lists.of_request(&RequestId::Number(2)).unwrap();
        let raw = RawValue::from_string(tools(json!(2))["result"].to_string()).unwrap();
        assert_eq!(of.apply(raw).get(), r#"{"tools":[{"name":"echo"}]}"#);
        let plain = RawValue::from_string(r#"{"tools": [{"name": "echo"}]}"#.into()).unwrap();
        assert_eq!(of.apply(plain).get(), r#"{"tools": [{"name": "echo"}]}"#, "nothing hidden: as it came");
    }

    #[test]
    fn a_resumed_stream_filters_any_list_result_and_a_batch_item_by_item() {
        let mut lists = Lists::for_resumed(Arc::new(NoSecrets));
        let mut batch = json!([tools(json!(1)), {"jsonrpc": "2.0", "id": 2, "result": {"content": []}}]);
        assert!(lists.filter_message(&mut batch));
        assert_eq!(batch[0]["result"]["tools"], json!([{"name": "echo"}]));
        assert_eq!(batch[1]["result"], json!({"content": []}));
        assert!(!lists.is_done(), "a resumed stream is filtered to its end");
    }
}
