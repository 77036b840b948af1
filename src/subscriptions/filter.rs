//! The `notifications` filter of a `subscriptions/listen` request (patterns/subscriptions.mdx):
//! what the client asked for, what the upstream offers, the honoured subset the acknowledgement
//! reports, and which upstream notification a listener may receive.
//!
//! Every kind is opt-in: a listener gets a notification only when its honoured filter names it,
//! so a kind the client did not ask for, or one the upstream never declared, never reaches it.
//! The messages a listener gets are built here from the notification's kind and (for resource
//! updates) its URI only; nothing else the upstream put in it is passed on.

use serde_json::{json, Map, Value};

use super::ListenError;
use crate::protocol::jsonrpc::RequestId;
use crate::protocol::{meta, methods};

/// A set of notification kinds: a request's, an upstream's offer, or a listener's honoured one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    pub tools_list_changed: bool,
    pub prompts_list_changed: bool,
    pub resources_list_changed: bool,
    /// Resource URIs, each once, in the order first asked.
    pub resources: Vec<String>,
}

/// What the upstream declared at `initialize` that a listen stream can use.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Offer {
    pub tools_list_changed: bool,
    pub prompts_list_changed: bool,
    pub resources_list_changed: bool,
    /// `resources.subscribe`: `resources/subscribe` may be sent.
    pub subscribe: bool,
}

// === impl Filter ===

impl Filter {
    /// Reads `params.notifications` (required; unknown fields are ignored). At most `max_uris`
    /// distinct resource URIs.
    pub fn parse(params: Option<&Value>, max_uris: usize) -> Result<Self, ListenError> {
        let Some(Value::Object(n)) = params.and_then(|p| p.get("notifications")) else {
            return Err(ListenError::Invalid("params.notifications must be an object".into()));
        };
        let mut filter = Self {
            tools_list_changed: flag(n, "toolsListChanged")?,
            prompts_list_changed: flag(n, "promptsListChanged")?,
            resources_list_changed: flag(n, "resourcesListChanged")?,
            resources: Vec::new(),
        };
        match n.get("resourceSubscriptions") {
            None | Some(Value::Null) => {}
            Some(Value::Array(uris)) => {
                for uri in uris {
                    let Some(uri) = uri.as_str().filter(|u| !u.is_empty()) else {
                        return Err(ListenError::Invalid(
                            "params.notifications.resourceSubscriptions must hold non-empty strings".into(),
                        ));
                    };
                    if !filter.resources.iter().any(|u| u == uri) {
                        filter.resources.push(uri.to_owned());
                    }
                }
                if filter.resources.len() > max_uris {
                    return Err(ListenError::TooManyUris { limit: max_uris });
                }
            }
            Some(_) => {
                return Err(ListenError::Invalid(
                    "params.notifications.resourceSubscriptions must be an array".into(),
                ))
            }
        }
        Ok(filter)
    }

    /// The list-change kinds of this request that `offer` supports (resource URIs are honoured
    /// one by one, once subscribed upstream).
    pub fn honoured_lists(&self, offer: Offer) -> Self {
        Self {
            tools_list_changed: self.tools_list_changed && offer.tools_list_changed,
            prompts_list_changed: self.prompts_list_changed && offer.prompts_list_changed,
            resources_list_changed: self.resources_list_changed && offer.resources_list_changed,
            resources: Vec::new(),
        }
    }

    /// Whether a listener with this (honoured) filter may receive `method` about `uri`.
    pub fn wants(&self, method: &str, uri: Option<&str>) -> bool {
        match method {
            methods::TOOLS_LIST_CHANGED => self.tools_list_changed,
            methods::PROMPTS_LIST_CHANGED => self.prompts_list_changed,
            methods::RESOURCES_LIST_CHANGED => self.resources_list_changed,
            methods::RESOURCES_UPDATED => {
                uri.is_some_and(|uri| self.resources.iter().any(|s| covers(s, uri)))
            }
            _ => false,
        }
    }

    /// The `notifications` object of the acknowledgement: only the honoured kinds.
    fn to_json(&self) -> Value {
        let mut out = Map::new();
        for (on, key) in [
            (self.tools_list_changed, "toolsListChanged"),
            (self.prompts_list_changed, "promptsListChanged"),
            (self.resources_list_changed, "resourcesListChanged"),
        ] {
            if on {
                out.insert(key.into(), Value::Bool(true));
            }
        }
        if !self.resources.is_empty() {
            out.insert("resourceSubscriptions".into(), json!(self.resources));
        }
        Value::Object(out)
    }
}

// === impl Offer ===

impl Offer {
    /// Reads the flags of a legacy `initialize` result's `capabilities`; only `true` counts.
    pub fn from_capabilities(caps: &Value) -> Self {
        let on = |section: &str, flag: &str| {
            caps.get(section).and_then(|s| s.get(flag)) == Some(&Value::Bool(true))
        };
        Self {
            tools_list_changed: on("tools", "listChanged"),
            prompts_list_changed: on("prompts", "listChanged"),
            resources_list_changed: on("resources", "listChanged"),
            subscribe: on("resources", "subscribe"),
        }
    }
}

/// A subscription to `subscribed` covers an update of `uri` when it is the same resource or a
/// sub-resource of it (the schema allows a server to name one): `uri` continues it after a `/`.
fn covers(subscribed: &str, uri: &str) -> bool {
    match uri.strip_prefix(subscribed) {
        Some("") => true,
        Some(rest) => subscribed.ends_with('/') || rest.starts_with('/'),
        None => false,
    }
}

fn flag(n: &Map<String, Value>, key: &str) -> Result<bool, ListenError> {
    match n.get(key) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(ListenError::Invalid(format!("params.notifications.{key} must be a boolean"))),
    }
}

/// `notifications/subscriptions/acknowledged` with the honoured filter.
pub(super) fn acknowledgement(id: &RequestId, honoured: &Filter) -> Vec<u8> {
    let message = json!({
        "jsonrpc": "2.0",
        "method": methods::SUBSCRIPTIONS_ACKNOWLEDGED,
        "params": { "_meta": { meta::SUBSCRIPTION_ID: id }, "notifications": honoured.to_json() },
    });
    serde_json::to_vec(&message).unwrap_or_default()
}

/// The notification a listener gets: the kind, the URI of a resource update, and its
/// subscription id.
pub(super) fn tagged(id: &RequestId, method: &str, uri: Option<&str>) -> Vec<u8> {
    let mut params = Map::new();
    if let Some(uri) = uri {
        params.insert("uri".into(), json!(uri));
    }
    params.insert("_meta".into(), json!({ meta::SUBSCRIPTION_ID: id }));
    serde_json::to_vec(&json!({ "jsonrpc": "2.0", "method": method, "params": params })).unwrap_or_default()
}

/// The response that ends a listen stream gracefully (the gateway is shutting down).
pub(super) fn closing(id: &RequestId) -> Vec<u8> {
    let result = json!({ "resultType": "complete", "_meta": { meta::SUBSCRIPTION_ID: id } });
    serde_json::to_vec(&json!({ "jsonrpc": "2.0", "id": id, "result": result })).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(n: Value) -> Result<Filter, ListenError> {
        Filter::parse(Some(&json!({ "notifications": n })), 4)
    }

    #[test]
    fn a_filter_is_required_and_typed() {
        assert!(Filter::parse(Some(&json!({})), 4).is_err());
        assert!(parse(json!({"toolsListChanged": "yes"})).is_err());
        assert!(parse(json!({"resourceSubscriptions": "a"})).is_err());
        assert!(parse(json!({"resourceSubscriptions": [1]})).is_err());
        let f = parse(
            json!({"toolsListChanged": true, "taskIds": ["x"], "resourceSubscriptions": ["a", "a", "b"]}),
        )
        .unwrap();
        assert!(f.tools_list_changed && !f.prompts_list_changed);
        assert_eq!(f.resources, ["a", "b"]);
        let many = json!({"resourceSubscriptions": ["a", "b", "c", "d", "e"]});
        assert!(matches!(parse(many), Err(ListenError::TooManyUris { limit: 4 })));
    }

    #[test]
    fn only_offered_list_kinds_are_honoured() {
        let asked = parse(json!({"toolsListChanged": true, "promptsListChanged": true})).unwrap();
        let offer = Offer::from_capabilities(&json!({"tools": {"listChanged": true}, "prompts": {}}));
        let honoured = asked.honoured_lists(offer);
        assert!(
            honoured.tools_list_changed && !honoured.prompts_list_changed && !honoured.resources_list_changed
        );
        assert!(!offer.subscribe);
    }

    #[test]
    fn a_list_kind_is_honoured_only_when_both_asked_and_offered() {
        let every = json!({"tools": {"listChanged": true}, "prompts": {"listChanged": true},
            "resources": {"listChanged": true}});
        let all = Offer::from_capabilities(&every);
        let none = Offer::from_capabilities(&json!({}));
        let asked = parse(json!({"toolsListChanged": true, "promptsListChanged": true,
            "resourcesListChanged": true}))
        .unwrap();
        let kinds = |f: Filter| (f.tools_list_changed, f.prompts_list_changed, f.resources_list_changed);
        assert_eq!(kinds(asked.honoured_lists(all)), (true, true, true));
        assert_eq!(kinds(asked.honoured_lists(none)), (false, false, false));
        assert_eq!(kinds(Filter::default().honoured_lists(all)), (false, false, false));
    }

    #[test]
    fn exactly_max_uris_are_accepted() {
        let four = parse(json!({"resourceSubscriptions": ["a", "b", "c", "d"]})).unwrap();
        assert_eq!(four.resources.len(), 4);
    }

    #[test]
    fn each_list_kind_reaches_the_listeners_that_named_it() {
        let prompts = Filter { prompts_list_changed: true, ..Filter::default() };
        assert!(prompts.wants(methods::PROMPTS_LIST_CHANGED, None));
        assert!(!prompts.wants(methods::TOOLS_LIST_CHANGED, None));
        let resources = Filter { resources_list_changed: true, ..Filter::default() };
        assert!(resources.wants(methods::RESOURCES_LIST_CHANGED, None));
        assert!(!resources.wants(methods::PROMPTS_LIST_CHANGED, None));
    }

    #[test]
    fn a_listener_gets_only_what_its_filter_names() {
        let f = Filter { tools_list_changed: true, resources: vec!["file:///a".into()], ..Filter::default() };
        assert!(f.wants(methods::TOOLS_LIST_CHANGED, None));
        assert!(!f.wants(methods::PROMPTS_LIST_CHANGED, None));
        assert!(!f.wants(methods::RESOURCES_LIST_CHANGED, None));
        assert!(!f.wants(methods::MESSAGE, None));
        assert!(f.wants(methods::RESOURCES_UPDATED, Some("file:///a")));
        assert!(f.wants(methods::RESOURCES_UPDATED, Some("file:///a/b")));
        assert!(!f.wants(methods::RESOURCES_UPDATED, Some("file:///ab")));
        assert!(!f.wants(methods::RESOURCES_UPDATED, None));
    }

    #[test]
    fn messages_carry_the_subscription_id() {
        let id = RequestId::Number(7);
        let honoured =
            Filter { prompts_list_changed: true, resources: vec!["u".into()], ..Filter::default() };
        let ack: Value = serde_json::from_slice(&acknowledgement(&id, &honoured)).unwrap();
        assert_eq!(ack["params"]["_meta"][meta::SUBSCRIPTION_ID], 7);
        assert_eq!(
            ack["params"]["notifications"],
            json!({"promptsListChanged": true, "resourceSubscriptions": ["u"]})
        );
        let note: Value =
            serde_json::from_slice(&tagged(&id, methods::RESOURCES_UPDATED, Some("u"))).unwrap();
        assert_eq!(note["params"], json!({"uri": "u", "_meta": {meta::SUBSCRIPTION_ID: 7}}));
        let end: Value = serde_json::from_slice(&closing(&id)).unwrap();
        assert_eq!(end["id"], 7);
        assert_eq!(end["result"], json!({"resultType": "complete", "_meta": {meta::SUBSCRIPTION_ID: 7}}));
    }
}
