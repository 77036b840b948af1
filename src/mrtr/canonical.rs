//! Canonical JSON and the digests the replay core binds answers and states to.
//!
//! The journal matches a replayed upstream question to a recorded answer by digest, so the
//! digest must not depend on how a legacy server happened to order object keys or space its
//! JSON. Canonical form here: object keys sorted by their UTF-8 bytes, no whitespace, strings
//! escaped and numbers printed exactly as `serde_json` prints them. Values are streamed straight
//! into the hasher; no canonical copy of the document is built.
//!
//! Volatile fields are left out of the question digest: `_meta` (progress tokens, trace
//! context, our key hint), `elicitationId` (random per call in real servers) and `task`.

use std::fmt;
use std::io;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};
use sha2::{Digest as _, Sha256};

/// Top-level `params` fields that differ between two askings of the same question.
pub const VOLATILE_FIELDS: &[&str] = &["_meta", "elicitationId", "task"];

/// Errors from decoding a serialised digest.
#[derive(Debug, thiserror::Error)]
pub enum DigestError {
    #[error("digest is not unpadded base64url")]
    Base64,
    #[error("digest must be 43 base64url characters, got {0}")]
    Length(usize),
}

/// Length of a digest as unpadded base64url text.
const DIGEST_TEXT_LEN: usize = 43;

/// A SHA-256 digest; serialised as unpadded base64url (43 characters).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Digest(pub [u8; 32]);

/// Writes the canonical JSON form of `value`.
pub fn canonical_json(value: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    write_value(value, &mut out);
    out
}

/// Digest of one upstream question: canonical `{"method":…,"params":…}` with the volatile
/// top-level `params` fields removed. Absent or `null` params count as `{}`.
pub fn question_digest(method: &str, params: Option<&Value>) -> Digest {
    let mut hasher = Sha256::new();
    hasher.put(b"{\"method\":");
    write_str(method, &mut hasher);
    hasher.put(b",\"params\":");
    match params {
        Some(Value::Object(map)) => write_object(map, is_stable_field, &mut hasher),
        None | Some(Value::Null) => hasher.put(b"{}"),
        Some(other) => write_value(other, &mut hasher),
    }
    hasher.put(b"}");
    Digest(hasher.finalize().into())
}

/// Digest of a call's arguments. Absent, `null` and `{}` are the same call: clients differ in
/// whether they send an empty `arguments`.
pub fn arguments_digest(arguments: Option<&Value>) -> Digest {
    let mut hasher = Sha256::new();
    match arguments {
        None | Some(Value::Null) => hasher.put(b"{}"),
        Some(value) => write_value(value, &mut hasher),
    }
    Digest(hasher.finalize().into())
}

fn is_stable_field(key: &str) -> bool {
    !VOLATILE_FIELDS.contains(&key)
}

/// Where canonical bytes go: a buffer or straight into a hash.
trait Sink {
    fn put(&mut self, bytes: &[u8]);
}

impl Sink for Vec<u8> {
    fn put(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

impl Sink for Sha256 {
    fn put(&mut self, bytes: &[u8]) {
        self.update(bytes);
    }
}

/// Lets `serde_json`'s string escaper and number printer write into a [`Sink`].
struct SinkWriter<'a, S: Sink>(&'a mut S);

impl<S: Sink> io::Write for SinkWriter<'_, S> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.put(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn write_value<S: Sink>(value: &Value, sink: &mut S) {
    match value {
        Value::Null => sink.put(b"null"),
        Value::Bool(true) => sink.put(b"true"),
        Value::Bool(false) => sink.put(b"false"),
        Value::Number(n) => write_serde(n, sink),
        Value::String(s) => write_str(s, sink),
        Value::Array(items) => {
            sink.put(b"[");
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    sink.put(b",");
                }
                write_value(item, sink);
            }
            sink.put(b"]");
        }
        Value::Object(map) => write_object(map, |_| true, sink),
    }
}

fn write_object<S: Sink>(map: &Map<String, Value>, keep: impl Fn(&str) -> bool, sink: &mut S) {
    let mut entries: Vec<(&String, &Value)> = map.iter().filter(|(k, _)| keep(k)).collect();
    entries.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    sink.put(b"{");
    for (i, (key, value)) in entries.into_iter().enumerate() {
        if i > 0 {
            sink.put(b",");
        }
        write_str(key, sink);
        sink.put(b":");
        write_value(value, sink);
    }
    sink.put(b"}");
}

fn write_str<S: Sink>(s: &str, sink: &mut S) {
    write_serde(s, sink);
}

fn write_serde<S: Sink, T: Serialize + ?Sized>(value: &T, sink: &mut S) {
    // The sink never fails and strings and numbers always serialise, so there is no error to
    // report here.
    let _ = serde_json::to_writer(SinkWriter(sink), value);
}

// === impl Digest ===

impl Digest {
    /// Unpadded base64url text of the digest.
    pub fn to_base64(&self) -> String {
        URL_SAFE_NO_PAD.encode(self.0)
    }

    /// Parses unpadded base64url text of exactly 32 bytes.
    pub fn from_base64(text: &str) -> Result<Self, DigestError> {
        if text.len() != DIGEST_TEXT_LEN {
            return Err(DigestError::Length(text.len()));
        }
        let mut bytes = [0u8; 32];
        match URL_SAFE_NO_PAD.decode_slice(text, &mut bytes) {
            Ok(32) => Ok(Self(bytes)),
            _ => Err(DigestError::Base64),
        }
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Digest({})", self.to_base64())
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_base64())
    }
}

impl Serialize for Digest {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut buf = [0u8; DIGEST_TEXT_LEN];
        let len = URL_SAFE_NO_PAD.encode_slice(self.0, &mut buf).map_err(serde::ser::Error::custom)?;
        let text = std::str::from_utf8(&buf[..len]).map_err(serde::ser::Error::custom)?;
        serializer.serialize_str(text)
    }
}

impl<'de> Deserialize<'de> for Digest {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        Self::from_base64(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn canonical_form_sorts_keys_and_drops_whitespace() {
        let value: Value =
            serde_json::from_str(r#"{ "b": [1, {"z": null, "a": true}], "a": "x\n", "é": 1.5 }"#).unwrap();
        assert_eq!(
            String::from_utf8(canonical_json(&value)).unwrap(),
            r#"{"a":"x\n","b":[1,{"a":true,"z":null}],"é":1.5}"#
        );
    }

    #[test]
    fn question_digest_ignores_key_order_and_volatile_fields() {
        let a = json!({"message": "Name?", "requestedSchema": {"type": "object", "properties": {}}});
        let b = json!({
            "requestedSchema": {"properties": {}, "type": "object"},
            "_meta": {"progressToken": 7},
            "elicitationId": "e-123",
            "task": {"ttl": 5},
            "message": "Name?"
        });
        assert_eq!(
            question_digest("elicitation/create", Some(&a)),
            question_digest("elicitation/create", Some(&b))
        );
    }

    #[test]
    fn question_digest_separates_methods_and_params() {
        let params = json!({"message": "Name?"});
        let base = question_digest("elicitation/create", Some(&params));
        assert_ne!(base, question_digest("sampling/createMessage", Some(&params)));
        assert_ne!(base, question_digest("elicitation/create", Some(&json!({"message": "Name!"}))));
        // Volatile fields are removed only at the top level of params.
        let nested = json!({"message": "Name?", "x": {"_meta": 1}});
        assert_ne!(base, question_digest("elicitation/create", Some(&nested)));
    }

    #[test]
    fn absent_params_equal_empty_params() {
        let empty = question_digest("roots/list", Some(&json!({})));
        assert_eq!(empty, question_digest("roots/list", None));
        assert_eq!(empty, question_digest("roots/list", Some(&Value::Null)));
        assert_eq!(empty, question_digest("roots/list", Some(&json!({"_meta": {"a": 1}}))));
    }

    #[test]
    fn arguments_absent_null_and_empty_are_one_call() {
        let empty = arguments_digest(Some(&json!({})));
        assert_eq!(empty, arguments_digest(None));
        assert_eq!(empty, arguments_digest(Some(&Value::Null)));
        assert_ne!(empty, arguments_digest(Some(&json!({"a": 1}))));
        assert_eq!(
            arguments_digest(Some(&json!({"a": 1, "b": [2]}))),
            arguments_digest(Some(&json!({"b": [2], "a": 1})))
        );
    }

    #[test]
    fn digest_serde_is_unpadded_base64url() {
        let digest = arguments_digest(None);
        let text = serde_json::to_string(&digest).unwrap();
        assert_eq!(text.len(), 45);
        assert!(!text.contains('='));
        assert_eq!(serde_json::from_str::<Digest>(&text).unwrap(), digest);
        assert!(serde_json::from_str::<Digest>("\"AAAA\"").is_err());
        assert!(serde_json::from_str::<Digest>("\"not base64!\"").is_err());
    }

    #[test]
    fn digest_text_forms_agree() {
        let digest = Digest([0xfb; 32]);
        let text = URL_SAFE_NO_PAD.encode([0xfb; 32]);
        assert_eq!(digest.to_base64(), text);
        assert_eq!(digest.to_string(), text);
        assert_eq!(format!("{digest:?}"), format!("Digest({text})"));
        assert_eq!(serde_json::to_string(&digest).unwrap(), format!("\"{text}\""));
        assert_eq!(Digest::from_base64(&text).unwrap(), digest);
    }
}
