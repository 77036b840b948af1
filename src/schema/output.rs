//! Tool `outputSchema`s compiled into validators, and the check of a call's `structuredContent`
//! against one.
//!
//! Compiling a schema costs far more than checking a value against it, and a client lists the
//! same tools again and again, so each distinct schema is compiled once: compiled validators
//! (and compile failures, so a broken schema is not compiled on every listing) are kept by the
//! SHA-256 of the schema's JSON text, at most [`defaults::SCHEMA_MAX_VALIDATORS`] of them; past
//! that an arbitrary one makes room. A result without `structuredContent` costs nothing here.
//! The text a client gets for a refused result ([`refused_result`]) is here too, so that a
//! call and a task say the same.

use std::collections::HashMap;
use std::sync::Arc;

use jsonschema::Validator;
use parking_lot::Mutex;
use serde_json::Value;
use sha2::{Digest as _, Sha256};

use crate::defaults;
use crate::protocol::quote::quoted;
use crate::schema::Refusal;

/// One tool's compiled `outputSchema`.
pub struct OutputSchema {
    validator: Validator,
}

/// A compiled schema, or the compiler's message (for the log).
type Outcome = Result<Arc<OutputSchema>, Arc<str>>;

/// Compiled schemas by digest; failures are kept too.
pub(crate) struct Compiled {
    by_digest: Mutex<HashMap<[u8; 32], Outcome>>,
    max: usize,
}

// === impl OutputSchema ===

impl OutputSchema {
    /// Checks a `structuredContent` value; the error names the first place it breaks the
    /// schema, in the validator's words, which may quote the value: for the log only.
    pub fn check(&self, structured: &Value) -> Result<(), String> {
        self.validator.validate(structured).map_err(|e| {
            let at = e.instance_path().as_str();
            format!("at {:?}: {e}", if at.is_empty() { "/" } else { at })
        })
    }

    /// Checks a whole tool result held as a value: only a result that is not an error and
    /// carries `structuredContent` is checked (a 2026-07-28 client checks no `outputSchema`
    /// against an error result). The error is [`Self::check`]'s, for the log only.
    pub fn check_result(&self, result: &Value) -> Result<(), String> {
        if result.get("isError").and_then(Value::as_bool) == Some(true) {
            return Ok(());
        }
        result.get("structuredContent").map_or(Ok(()), |structured| self.check(structured))
    }
}

/// The text of the error result that replaces a result of `tool` whose `structuredContent`
/// breaks its `outputSchema`: the tool and the reason, never the value.
pub fn refused_result(tool: &str) -> String {
    let refusal = Refusal::StructuredContentInvalid;
    format!(
        "mrtr-gateway refused the result of tool {}: {} ({})",
        quoted(tool),
        refusal.describe(),
        refusal.as_str()
    )
}

impl std::fmt::Debug for OutputSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OutputSchema")
    }
}

// === impl Compiled ===

impl Default for Compiled {
    fn default() -> Self {
        Self { by_digest: Mutex::default(), max: defaults::SCHEMA_MAX_VALIDATORS }
    }
}

impl Compiled {
    /// The validator of `schema`, compiled on its first sight.
    pub(crate) fn get(&self, schema: &Value) -> Outcome {
        let digest: [u8; 32] = Sha256::digest(schema.to_string().as_bytes()).into();
        if let Some(found) = self.by_digest.lock().get(&digest) {
            return found.clone();
        }
        // Compiled outside the lock: another listing may compile the same schema meanwhile,
        // which costs time, never a wrong answer.
        let compiled = compile(schema);
        let mut map = self.by_digest.lock();
        if map.len() >= self.max {
            if let Some(evicted) = map.keys().next().copied() {
                map.remove(&evicted);
            }
        }
        map.insert(digest, compiled.clone());
        compiled
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.by_digest.lock().len()
    }
}

/// Compiles `schema` in its own dialect (`$schema`, 2020-12 when absent) after checking it
/// against that dialect's meta-schema. No `$ref` is fetched: one must resolve inside `schema`.
fn compile(schema: &Value) -> Outcome {
    match jsonschema::validator_for(schema) {
        Ok(validator) => Ok(Arc::new(OutputSchema { validator })),
        Err(e) => Err(Arc::from(e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_schema_is_compiled_once_and_checks_values() {
        let compiled = Compiled::default();
        let schema =
            json!({"type": "object", "properties": {"temp": {"type": "number"}}, "required": ["temp"]});
        let first = compiled.get(&schema).unwrap();
        let again = compiled.get(&schema).unwrap();
        assert!(Arc::ptr_eq(&first, &again));
        assert_eq!(compiled.len(), 1);
        assert!(first.check(&json!({"temp": 21.5})).is_ok());
        let why = first.check(&json!({"temp": "warm"})).unwrap_err();
        assert!(why.contains("/temp"), "{why}");
        // A whole result: an error result and one without structuredContent pass unchecked.
        assert!(first.check_result(&json!({"structuredContent": {"temp": 3}})).is_ok());
        assert!(first.check_result(&json!({"structuredContent": {"temp": "warm"}})).is_err());
        assert!(first.check_result(&json!({"structuredContent": {}, "isError": true})).is_ok());
        assert!(first.check_result(&json!({"content": []})).is_ok());
    }

    #[test]
    fn a_refused_result_names_the_tool_and_the_reason_only() {
        let m = refused_result(&"w".repeat(100));
        assert!(m.contains("structured_content_invalid") && !m.contains(&"w".repeat(65)), "{m}");
    }

    #[test]
    fn broken_and_unresolvable_schemas_fail_and_are_remembered() {
        let compiled = Compiled::default();
        assert!(compiled.get(&json!({"type": 12})).is_err());
        assert!(compiled.get(&json!({"$ref": "https://schemas.example/x.json"})).is_err());
        assert!(compiled.get(&json!({"$ref": "#/$defs/missing"})).is_err());
        assert_eq!(compiled.len(), 3);
        let draft7 = json!({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"});
        assert!(compiled.get(&draft7).is_ok());
    }

    #[test]
    fn the_cache_is_bounded() {
        let compiled = Compiled { by_digest: Mutex::default(), max: 2 };
        for i in 0..5 {
            assert!(compiled.get(&json!({"type": "object", "title": format!("t{i}")})).is_ok());
        }
        assert_eq!(compiled.len(), 2);
    }
}
