//! Client capabilities across the two protocol eras.
//!
//! A 2026-07-28 client declares its capabilities on every request; a legacy server learns them
//! once, at `initialize`, and decides from them which tools exist. The gateway therefore opens
//! (or leases) an upstream session declaring exactly what the current client declared, in the
//! shape of the upstream's version, and pools sessions by [`ClientCaps::fingerprint`]. When the
//! upstream then asks for something the client did not declare, the gateway must answer the
//! client with `-32021` and `data.requiredCapabilities` (never send an `inputRequests` entry the
//! client cannot serve); [`ClientCaps::required_for`] and [`ClientCaps::missing`] decide that.

use serde_json::{json, Map, Value};

use crate::mrtr::translate::LegacyVersion;
use crate::protocol::methods::{ELICITATION_CREATE, ROOTS_LIST, SAMPLING_CREATE_MESSAGE};

const FORM: u8 = 1 << 0;
const URL: u8 = 1 << 1;
const SAMPLING: u8 = 1 << 2;
const SAMPLING_TOOLS: u8 = 1 << 3;
const SAMPLING_CONTEXT: u8 = 1 << 4;
const ROOTS: u8 = 1 << 5;

/// The capability an upstream request of `method` needs, as the `capability` label of
/// `capability_denials_total` names it.
pub fn label(method: &str) -> &'static str {
    match method {
        ELICITATION_CREATE => "elicitation",
        SAMPLING_CREATE_MESSAGE => "sampling",
        ROOTS_LIST => "roots",
        _ => "other",
    }
}

/// Errors in declared capabilities or in an upstream request's needs.
#[derive(Debug, thiserror::Error)]
pub enum CapsError {
    #[error("clientCapabilities must be a JSON object")]
    NotAnObject,
    #[error("clientCapabilities.{0} must be a JSON object")]
    FieldNotObject(&'static str),
    #[error("`{0}` is not a request that needs a client capability")]
    UnknownMethod(String),
    #[error("elicitation mode `{0}` is unknown")]
    UnknownMode(String),
}

/// The input-related capabilities a 2026-07-28 client declared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ClientCaps {
    bits: u8,
}

/// The capabilities an upstream request needs (same bits as [`ClientCaps`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Required {
    bits: u8,
}

// === impl ClientCaps ===

impl ClientCaps {
    /// Reads `_meta["io.modelcontextprotocol/clientCapabilities"]`. Unknown members
    /// (`experimental`, `extensions`) do not concern input and are ignored.
    pub fn from_modern(caps: &Value) -> Result<Self, CapsError> {
        let caps = caps.as_object().ok_or(CapsError::NotAnObject)?;
        let mut bits = 0;
        if let Some(elicitation) = member(caps, "elicitation")? {
            let form = sub_member(elicitation, "form", "elicitation.form")?;
            let url = sub_member(elicitation, "url", "elicitation.url")?;
            // `elicitation: {}` declares form mode only.
            if form || !url {
                bits |= FORM;
            }
            if url {
                bits |= URL;
            }
        }
        if let Some(sampling) = member(caps, "sampling")? {
            bits |= SAMPLING;
            if sub_member(sampling, "tools", "sampling.tools")? {
                bits |= SAMPLING_TOOLS;
            }
            if sub_member(sampling, "context", "sampling.context")? {
                bits |= SAMPLING_CONTEXT;
            }
        }
        if member(caps, "roots")?.is_some() {
            bits |= ROOTS;
        }
        Ok(Self { bits })
    }

    /// A stable one-byte summary, used as a session pool key.
    pub fn fingerprint(&self) -> u8 {
        self.bits
    }

    /// The capabilities whose [`Self::fingerprint`] is `bits` (unknown bits dropped): how a
    /// retry forwarded between replicas carries them.
    pub fn from_fingerprint(bits: u8) -> Self {
        Self { bits: bits & (FORM | URL | SAMPLING | SAMPLING_TOOLS | SAMPLING_CONTEXT | ROOTS) }
    }

    /// The `capabilities` to declare in a legacy `initialize` of `version`.
    pub fn legacy_initialize(&self, version: LegacyVersion) -> Value {
        let mut caps = Map::new();
        if let Some(elicitation) = self.legacy_elicitation(version) {
            caps.insert("elicitation".to_owned(), elicitation);
        }
        if self.has(SAMPLING) {
            let sampling = match version {
                LegacyVersion::V2025_11_25 => {
                    self.sub_objects(&[(SAMPLING_TOOLS, "tools"), (SAMPLING_CONTEXT, "context")])
                }
                LegacyVersion::V2025_06_18 | LegacyVersion::V2025_03_26 | LegacyVersion::V2024_11_05 => {
                    json!({})
                }
            };
            caps.insert("sampling".to_owned(), sampling);
        }
        if self.has(ROOTS) {
            // No `listChanged`: a 2026 client has no way to say its roots changed.
            caps.insert("roots".to_owned(), json!({}));
        }
        Value::Object(caps)
    }

    fn legacy_elicitation(&self, version: LegacyVersion) -> Option<Value> {
        match version {
            LegacyVersion::V2025_11_25 if self.has(FORM) || self.has(URL) => {
                Some(self.sub_objects(&[(FORM, "form"), (URL, "url")]))
            }
            // 2025-06-18 knows form elicitation only; 2025-03-26 and 2024-11-05 none.
            LegacyVersion::V2025_06_18 if self.has(FORM) => Some(json!({})),
            _ => None,
        }
    }

    /// What an upstream request needs, from its method and params.
    pub fn required_for(method: &str, params: Option<&Value>) -> Result<Required, CapsError> {
        let field = |name: &str| params.and_then(|p| p.get(name));
        let bits = match method {
            ELICITATION_CREATE => match field("mode") {
                None | Some(Value::Null) => FORM,
                Some(Value::String(mode)) if mode == "form" => FORM,
                Some(Value::String(mode)) if mode == "url" => URL,
                Some(other) => return Err(CapsError::UnknownMode(clip(&other.to_string()))),
            },
            SAMPLING_CREATE_MESSAGE => {
                sampling_needs(field("tools"), field("toolChoice"), field("includeContext"))
            }
            ROOTS_LIST => ROOTS,
            other => return Err(CapsError::UnknownMethod(clip(other))),
        };
        Ok(Required { bits })
    }

    /// `data.requiredCapabilities` for `-32021` when `required` is not fully declared.
    pub fn missing(&self, required: &Required) -> Option<Value> {
        let missing = Self { bits: required.bits & !self.bits };
        if missing.bits == 0 {
            return None;
        }
        let mut caps = Map::new();
        if missing.has(FORM) || missing.has(URL) {
            // `{}` alone means form mode, so a missing form mode is spelled `{}`.
            let value = match (missing.has(FORM), missing.has(URL)) {
                (true, false) => json!({}),
                _ => missing.sub_objects(&[(FORM, "form"), (URL, "url")]),
            };
            caps.insert("elicitation".to_owned(), value);
        }
        if missing.bits & (SAMPLING | SAMPLING_TOOLS | SAMPLING_CONTEXT) != 0 {
            let value = missing.sub_objects(&[(SAMPLING_TOOLS, "tools"), (SAMPLING_CONTEXT, "context")]);
            caps.insert("sampling".to_owned(), value);
        }
        if missing.has(ROOTS) {
            caps.insert("roots".to_owned(), json!({}));
        }
        Some(Value::Object(caps))
    }

    fn has(&self, bit: u8) -> bool {
        self.bits & bit != 0
    }

    fn sub_objects(&self, members: &[(u8, &str)]) -> Value {
        let map = members
            .iter()
            .filter(|(bit, _)| self.has(*bit))
            .map(|(_, name)| ((*name).to_owned(), json!({})))
            .collect();
        Value::Object(map)
    }
}

// === impl Required ===

impl Required {
    /// Both needs at once, for a round that asks several questions.
    pub fn union(self, other: Self) -> Self {
        Self { bits: self.bits | other.bits }
    }
}

fn sampling_needs(tools: Option<&Value>, choice: Option<&Value>, context: Option<&Value>) -> u8 {
    let present = |v: Option<&Value>| v.is_some_and(|v| !v.is_null());
    let mut bits = SAMPLING;
    if present(tools) || present(choice) {
        bits |= SAMPLING_TOOLS;
    }
    if matches!(context.and_then(Value::as_str), Some("thisServer" | "allServers")) {
        bits |= SAMPLING_CONTEXT;
    }
    bits
}

/// A declared capability member; absent and `null` are both "not declared".
fn member<'a>(
    caps: &'a Map<String, Value>,
    name: &'static str,
) -> Result<Option<&'a Map<String, Value>>, CapsError> {
    match caps.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(map)) => Ok(Some(map)),
        Some(_) => Err(CapsError::FieldNotObject(name)),
    }
}

fn sub_member(parent: &Map<String, Value>, name: &str, path: &'static str) -> Result<bool, CapsError> {
    match parent.get(name) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Object(_)) => Ok(true),
        Some(_) => Err(CapsError::FieldNotObject(path)),
    }
}

fn clip(text: &str) -> String {
    text.chars().take(64).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use LegacyVersion::*;

    fn caps(value: Value) -> ClientCaps {
        ClientCaps::from_modern(&value).unwrap()
    }

    #[test]
    fn legacy_initialize_table() {
        let all = json!({"elicitation": {"form": {}, "url": {}}, "sampling": {"tools": {}, "context": {}}, "roots": {}});
        let cases = [
            (json!({}), V2025_11_25, json!({})),
            (json!({"elicitation": {}}), V2025_11_25, json!({"elicitation": {"form": {}}})),
            (json!({"elicitation": {"url": {}}}), V2025_11_25, json!({"elicitation": {"url": {}}})),
            (
                all.clone(),
                V2025_11_25,
                json!({"elicitation": {"form": {}, "url": {}}, "sampling": {"tools": {}, "context": {}}, "roots": {}}),
            ),
            (json!({"sampling": {}, "roots": {}}), V2025_11_25, json!({"sampling": {}, "roots": {}})),
            (all.clone(), V2025_06_18, json!({"elicitation": {}, "sampling": {}, "roots": {}})),
            (json!({"elicitation": {"url": {}}}), V2025_06_18, json!({})),
            (all.clone(), V2025_03_26, json!({"sampling": {}, "roots": {}})),
            (json!({"elicitation": {}}), V2025_03_26, json!({})),
            (all, V2024_11_05, json!({"sampling": {}, "roots": {}})),
            (json!({"elicitation": {}}), V2024_11_05, json!({})),
        ];
        for (declared, version, expected) in cases {
            let got = caps(declared.clone()).legacy_initialize(version);
            assert_eq!(got, expected, "{declared} for {version:?}");
        }
    }

    #[test]
    fn malformed_capabilities_name_the_field() {
        let cases = [
            (json!([]), "clientCapabilities must be a JSON object"),
            (json!({"sampling": true}), "clientCapabilities.sampling"),
            (json!({"elicitation": {"url": 1}}), "clientCapabilities.elicitation.url"),
            (json!({"roots": "yes"}), "clientCapabilities.roots"),
        ];
        for (declared, message) in cases {
            let err = ClientCaps::from_modern(&declared).unwrap_err();
            assert!(err.to_string().contains(message), "{declared}: {err}");
        }
        // Members that do not concern input are ignored; null is "not declared".
        assert_eq!(
            caps(json!({"experimental": {}, "extensions": {"x/y": {}}, "roots": null})),
            ClientCaps::default()
        );
    }

    #[test]
    fn fingerprints_are_stable_and_distinct() {
        let declared = [
            json!({}),
            json!({"elicitation": {}}),
            json!({"elicitation": {"url": {}}}),
            json!({"elicitation": {"form": {}, "url": {}}}),
            json!({"sampling": {}}),
            json!({"sampling": {"tools": {}}}),
            json!({"sampling": {"context": {}}}),
            json!({"roots": {}}),
        ];
        let prints: Vec<u8> = declared.iter().map(|d| caps(d.clone()).fingerprint()).collect();
        assert_eq!(prints, [0, 1, 2, 3, 4, 12, 20, 32]);
        assert_eq!(
            caps(json!({"elicitation": {}})).fingerprint(),
            caps(json!({"elicitation": {"form": {}}})).fingerprint()
        );
    }

    #[test]
    fn required_and_missing_table() {
        let cases = [
            ("elicitation/create", json!({"message": "m"}), json!({}), Some(json!({"elicitation": {}}))),
            ("elicitation/create", json!({"mode": "form"}), json!({"elicitation": {}}), None),
            (
                "elicitation/create",
                json!({"mode": "url", "url": "u"}),
                json!({"elicitation": {}}),
                Some(json!({"elicitation": {"url": {}}})),
            ),
            ("elicitation/create", json!({"mode": "url"}), json!({"elicitation": {"url": {}}}), None),
            ("sampling/createMessage", json!({"messages": []}), json!({}), Some(json!({"sampling": {}}))),
            ("sampling/createMessage", json!({"messages": []}), json!({"sampling": {}}), None),
            (
                "sampling/createMessage",
                json!({"tools": []}),
                json!({"sampling": {}}),
                Some(json!({"sampling": {"tools": {}}})),
            ),
            (
                "sampling/createMessage",
                json!({"toolChoice": {"mode": "auto"}}),
                json!({}),
                Some(json!({"sampling": {"tools": {}}})),
            ),
            (
                "sampling/createMessage",
                json!({"includeContext": "thisServer"}),
                json!({"sampling": {}}),
                Some(json!({"sampling": {"context": {}}})),
            ),
            ("sampling/createMessage", json!({"includeContext": "none"}), json!({"sampling": {}}), None),
            (
                "sampling/createMessage",
                json!({"tools": [], "includeContext": "allServers"}),
                json!({"sampling": {"tools": {}, "context": {}}}),
                None,
            ),
            ("roots/list", json!({}), json!({"sampling": {}}), Some(json!({"roots": {}}))),
            ("roots/list", json!({}), json!({"roots": {}}), None),
        ];
        for (method, params, declared, expected) in cases {
            let required = ClientCaps::required_for(method, Some(&params)).unwrap();
            assert_eq!(
                caps(declared.clone()).missing(&required),
                expected,
                "{method} {params} with {declared}"
            );
        }
    }

    #[test]
    fn union_and_unknown_requests() {
        let form = ClientCaps::required_for("elicitation/create", None).unwrap();
        let roots = ClientCaps::required_for("roots/list", None).unwrap();
        let missing = caps(json!({})).missing(&form.union(roots)).unwrap();
        assert_eq!(missing, json!({"elicitation": {}, "roots": {}}));
        assert!(matches!(ClientCaps::required_for("tools/call", None), Err(CapsError::UnknownMethod(_))));
        assert!(matches!(
            ClientCaps::required_for("elicitation/create", Some(&json!({"mode": "x"}))),
            Err(CapsError::UnknownMode(_))
        ));
    }

    #[test]
    fn each_request_is_counted_under_the_capability_it_needs() {
        assert_eq!(label("elicitation/create"), "elicitation");
        assert_eq!(label("sampling/createMessage"), "sampling");
        assert_eq!(label("roots/list"), "roots");
        assert_eq!(label("tools/call"), "other");
    }

    #[test]
    fn a_fingerprint_gives_back_the_capabilities_it_was_taken_from() {
        let all = json!({"elicitation": {"form": {}, "url": {}}, "sampling": {"tools": {}, "context": {}}, "roots": {}});
        let declared = [
            json!({}),
            json!({"elicitation": {}}),
            json!({"elicitation": {"url": {}}}),
            json!({"sampling": {"tools": {}}}),
            json!({"sampling": {"context": {}}}),
            json!({"roots": {}}),
            all.clone(),
        ];
        for d in declared {
            let declared = caps(d.clone());
            assert_eq!(ClientCaps::from_fingerprint(declared.fingerprint()), declared, "{d}");
        }
        // Bits that no capability uses, as a newer replica might send, are dropped.
        assert_eq!(ClientCaps::from_fingerprint(u8::MAX), caps(all));
        assert_eq!(ClientCaps::from_fingerprint(0b1100_0000), ClientCaps::default());
    }

    #[test]
    fn a_need_asked_twice_in_one_round_is_still_needed() {
        let form = ClientCaps::required_for("elicitation/create", None).unwrap();
        assert_eq!(form.union(form), form);
        assert_eq!(caps(json!({})).missing(&form.union(form)), Some(json!({"elicitation": {}})));
    }

    #[test]
    fn refusals_name_what_was_asked_clipped_to_64_characters() {
        let unknown = |method: &str| ClientCaps::required_for(method, None).unwrap_err().to_string();
        assert_eq!(unknown("tools/call"), "`tools/call` is not a request that needs a client capability");
        assert_eq!(
            unknown(&"x".repeat(100)),
            format!("`{}` is not a request that needs a client capability", "x".repeat(64))
        );
        let mode = ClientCaps::required_for("elicitation/create", Some(&json!({"mode": 7}))).unwrap_err();
        assert_eq!(mode.to_string(), "elicitation mode `7` is unknown");
    }
}
