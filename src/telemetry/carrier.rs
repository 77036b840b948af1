//! Where a trace context travels: W3C `traceparent`/`tracestate` HTTP headers, or the same two
//! keys in a JSON-RPC request's `params._meta` (SEP-414), read on the way in and written on the
//! way upstream.

use http::{HeaderMap, HeaderName, HeaderValue};
use opentelemetry::propagation::{Extractor, Injector};
use serde_json::{Map, Value};

/// The W3C trace context keys, the same in headers and in `_meta`.
pub(crate) const TRACEPARENT: &str = "traceparent";
pub(crate) const TRACESTATE: &str = "tracestate";

/// Reads the trace context headers of a request.
pub(super) struct Headers<'a>(pub(super) &'a HeaderMap);

/// Reads the trace context keys of a `params._meta` object.
pub(super) struct Meta<'a>(pub(super) &'a Map<String, Value>);

/// Collects what the propagator writes, for a header or a `_meta` key.
#[derive(Debug, Default, Clone)]
pub(crate) struct Written {
    pub(crate) traceparent: Option<String>,
    pub(crate) tracestate: Option<String>,
}

// === impl Headers ===

impl Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        [TRACEPARENT, TRACESTATE].into_iter().filter(|k| self.0.contains_key(*k)).collect()
    }
}

// === impl Meta ===

impl<'a> Meta<'a> {
    /// The `_meta` object of `params`, when there is one.
    pub(super) fn of(params: Option<&'a Value>) -> Option<Self> {
        params?.get("_meta")?.as_object().map(Meta)
    }
}

impl Extractor for Meta<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(Value::as_str)
    }

    fn keys(&self) -> Vec<&str> {
        [TRACEPARENT, TRACESTATE].into_iter().filter(|k| self.0.contains_key(*k)).collect()
    }
}

// === impl Written ===

impl Injector for Written {
    fn set(&mut self, key: &str, value: String) {
        match key {
            TRACEPARENT => self.traceparent = Some(value),
            TRACESTATE if !value.is_empty() => self.tracestate = Some(value),
            _ => {}
        }
    }
}

impl Written {
    /// As HTTP headers (a value that is not a valid header is left out).
    pub(crate) fn headers(&self) -> Vec<(HeaderName, HeaderValue)> {
        let pairs = [(TRACEPARENT, &self.traceparent), (TRACESTATE, &self.tracestate)];
        pairs
            .into_iter()
            .filter_map(|(name, value)| {
                let value = HeaderValue::from_str(value.as_deref()?).ok()?;
                Some((HeaderName::from_static(name), value))
            })
            .collect()
    }

    /// `params` with the context in its `_meta`, replacing any context already there. Params
    /// that are not an object are left as they are (JSON-RPC allows an array).
    pub(crate) fn in_meta(&self, params: Option<&Value>) -> Option<Value> {
        let mut params = params.cloned().unwrap_or_else(|| Value::Object(Map::new()));
        let Value::Object(map) = &mut params else { return Some(params) };
        let meta = map.entry("_meta").or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(meta) = meta {
            meta.remove(TRACESTATE);
            if let Some(tp) = &self.traceparent {
                meta.insert(TRACEPARENT.to_owned(), Value::String(tp.clone()));
            }
            if let Some(ts) = &self.tracestate {
                meta.insert(TRACESTATE.to_owned(), Value::String(ts.clone()));
            }
        }
        Some(params)
    }

    /// True when `params._meta` already carries a trace context (a client's, relayed).
    pub(crate) fn present_in(params: Option<&Value>) -> bool {
        Meta::of(params).is_some_and(|m| m.0.contains_key(TRACEPARENT) || m.0.contains_key(TRACESTATE))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn written() -> Written {
        Written { traceparent: Some("00-aa-bb-01".into()), tracestate: Some("k=v".into()) }
    }

    #[test]
    fn meta_is_added_or_replaced() {
        let p =
            json!({"name": "t", "_meta": {"progressToken": 1, "traceparent": "old", "tracestate": "x=y"}});
        let out = written().in_meta(Some(&p)).unwrap();
        assert_eq!(
            out["_meta"],
            json!({"progressToken": 1, "traceparent": "00-aa-bb-01", "tracestate": "k=v"})
        );
        let out = Written { tracestate: None, ..written() }.in_meta(None).unwrap();
        assert_eq!(out, json!({"_meta": {"traceparent": "00-aa-bb-01"}}));
    }

    #[test]
    fn array_params_are_left_alone() {
        let p = json!([1, 2]);
        assert_eq!(written().in_meta(Some(&p)).unwrap(), p);
    }

    #[test]
    fn headers_and_meta_are_read() {
        let mut h = HeaderMap::new();
        h.insert("traceparent", HeaderValue::from_static("00-aa-bb-01"));
        assert_eq!(Headers(&h).get(TRACEPARENT), Some("00-aa-bb-01"));
        assert_eq!(Headers(&h).keys(), vec![TRACEPARENT]);
        let p = json!({"_meta": {"tracestate": "k=v"}});
        let meta = Meta::of(Some(&p)).unwrap();
        assert_eq!(meta.get(TRACESTATE), Some("k=v"));
        assert!(Written::present_in(Some(&p)));
        assert!(!Written::present_in(Some(&json!({"_meta": {}}))));
        assert_eq!(written().headers().len(), 2);
    }
}
