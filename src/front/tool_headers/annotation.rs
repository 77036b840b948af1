//! The `x-mcp-header` annotations of one tool's `inputSchema` (transports/streamable-http.mdx,
//! "Custom Headers from Tool Parameters"): which arguments a `tools/call` must mirror into
//! `Mcp-Param-{Name}` headers, and why an annotation makes the whole tool invalid. Kept apart
//! from the catalogue so the spec's constraints are read in one place and tested without I/O.

use http::HeaderName;
use serde_json::{Map, Value};

use crate::protocol::headers;

/// The schema keyword that names a mirrored argument's header.
pub(crate) const KEYWORD: &str = "x-mcp-header";

/// Keywords whose value is data, not a schema: an `x-mcp-header` key inside them is not an
/// annotation.
const DATA_KEYWORDS: [&str; 4] = ["enum", "const", "default", "examples"];

/// Keywords whose value maps names to schemas (none of them a `properties` step).
const SCHEMA_MAPS: [&str; 4] = ["$defs", "definitions", "patternProperties", "dependentSchemas"];

/// One argument a `tools/call` mirrors into a header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderParam {
    /// `mcp-param-{name}`, lowercased (header names compare case-insensitively).
    pub header: HeaderName,
    /// The annotation as the server wrote it, for messages: `Mcp-Param-{name}`.
    pub name: Box<str>,
    /// The chain of `properties` keys from the schema root to the argument.
    pub path: Box<[Box<str>]>,
}

/// Why a tool's annotations are invalid; the tool is then left out of `tools/list`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AnnotationError {
    #[error("x-mcp-header at {at} is not a string")]
    NotAString { at: String },
    #[error("x-mcp-header at {at} is empty")]
    Empty { at: String },
    #[error("x-mcp-header {name:?} at {at} is not an HTTP field-name token")]
    NotAToken { name: String, at: String },
    #[error("x-mcp-header {name:?} at {at} repeats another annotation (names are case-insensitive)")]
    Duplicate { name: String, at: String },
    #[error("x-mcp-header {name:?} at {at} is on a property of type {ty}; only string, integer and boolean can be mirrored")]
    NotPrimitive { name: String, at: String, ty: String },
    #[error("x-mcp-header at {at} is not reachable from the schema root through `properties` alone")]
    Unreachable { at: String },
}

/// The mirrored arguments `schema` declares, or why its annotations make the tool invalid.
pub fn header_params(schema: &Value) -> Result<Vec<HeaderParam>, AnnotationError> {
    let mut found = Vec::new();
    walk(schema, Some(&mut Vec::new()), "", &mut found)?;
    Ok(found)
}

/// Visits one schema. `chain` is the `properties` path to it while it is statically reachable
/// (the root: empty), `None` once any other keyword was passed through.
fn walk(
    node: &Value,
    chain: Option<&mut Vec<Box<str>>>,
    at: &str,
    found: &mut Vec<HeaderParam>,
) -> Result<(), AnnotationError> {
    let Value::Object(schema) = node else { return Ok(()) };
    let mut chain = chain;
    if let Some(annotation) = schema.get(KEYWORD) {
        match chain.as_deref() {
            Some(path) if !path.is_empty() => found.push(param(annotation, schema, path, at, found)?),
            _ => return Err(AnnotationError::Unreachable { at: location(at) }),
        }
    }
    for (keyword, value) in schema {
        let here = format!("{at}/{keyword}");
        match keyword.as_str() {
            KEYWORD => {}
            k if DATA_KEYWORDS.contains(&k) => {}
            "properties" => properties(value, chain.as_deref_mut(), &here, found)?,
            k if SCHEMA_MAPS.contains(&k) => each_value(value, &here, found)?,
            _ => nested(value, &here, found)?,
        }
    }
    Ok(())
}

/// A `properties` map: each entry is one more step of the chain (if the chain still holds).
fn properties(
    value: &Value,
    mut chain: Option<&mut Vec<Box<str>>>,
    at: &str,
    found: &mut Vec<HeaderParam>,
) -> Result<(), AnnotationError> {
    let Value::Object(props) = value else { return Ok(()) };
    for (name, sub) in props {
        let here = format!("{at}/{}", escape(name));
        match chain.as_deref_mut() {
            Some(path) => {
                path.push(name.as_str().into());
                let result = walk(sub, Some(path), &here, found);
                path.pop();
                result?;
            }
            None => walk(sub, None, &here, found)?,
        }
    }
    Ok(())
}

fn each_value(value: &Value, at: &str, found: &mut Vec<HeaderParam>) -> Result<(), AnnotationError> {
    let Value::Object(map) = value else { return Ok(()) };
    for (name, sub) in map {
        walk(sub, None, &format!("{at}/{}", escape(name)), found)?;
    }
    Ok(())
}

/// Any other keyword's value: a schema, or an array of them (`allOf`, `prefixItems`, …).
fn nested(value: &Value, at: &str, found: &mut Vec<HeaderParam>) -> Result<(), AnnotationError> {
    match value {
        Value::Object(_) => walk(value, None, at, found),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                walk(item, None, &format!("{at}/{i}"), found)?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Checks one reachable annotation against the spec's constraints.
fn param(
    annotation: &Value,
    schema: &Map<String, Value>,
    path: &[Box<str>],
    at: &str,
    found: &[HeaderParam],
) -> Result<HeaderParam, AnnotationError> {
    let at = location(at);
    let Value::String(name) = annotation else { return Err(AnnotationError::NotAString { at }) };
    if name.is_empty() {
        return Err(AnnotationError::Empty { at });
    }
    if !name.bytes().all(is_tchar) {
        return Err(AnnotationError::NotAToken { name: name.clone(), at });
    }
    if !is_primitive(schema) {
        let ty = describe_type(schema);
        return Err(AnnotationError::NotPrimitive { name: name.clone(), at, ty });
    }
    let header = format!("{}{}", headers::PARAM_PREFIX, name.to_ascii_lowercase());
    let header = HeaderName::from_bytes(header.as_bytes())
        .map_err(|_| AnnotationError::NotAToken { name: name.clone(), at: at.clone() })?;
    if found.iter().any(|p| p.header == header) {
        return Err(AnnotationError::Duplicate { name: name.clone(), at });
    }
    Ok(HeaderParam { header, name: name.as_str().into(), path: path.into() })
}

/// True when the property holds one primitive type, or that type or `null` (the optional
/// argument a generated schema writes as `"type": ["integer", "null"]` or as an `anyOf` of the
/// two; a `null` value is an absent one, whose header is omitted).
fn is_primitive(schema: &Map<String, Value>) -> bool {
    let mut types = Vec::new();
    match schema.get("type") {
        Some(Value::String(t)) => types.push(t.as_str()),
        Some(Value::Array(list)) => types.extend(list.iter().map(|t| t.as_str().unwrap_or("?"))),
        Some(_) => return false,
        None => {
            let branches = schema.get("anyOf").or_else(|| schema.get("oneOf"));
            let Some(Value::Array(branches)) = branches else { return false };
            types.extend(branches.iter().map(|b| b.get("type").and_then(Value::as_str).unwrap_or("?")));
        }
    }
    types.retain(|t| *t != "null");
    match types.split_first() {
        Some((first, rest)) => {
            matches!(*first, "string" | "integer" | "boolean") && rest.iter().all(|t| t == first)
        }
        None => false,
    }
}

fn describe_type(schema: &Map<String, Value>) -> String {
    match schema.get("type") {
        Some(t) => t.to_string(),
        None if schema.contains_key("anyOf") || schema.contains_key("oneOf") => "a union".to_owned(),
        None => "none".to_owned(),
    }
}

/// RFC 9110 `tchar`: the characters of an HTTP field-name token.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// A JSON Pointer step (RFC 6901).
fn escape(name: &str) -> String {
    name.replace('~', "~0").replace('/', "~1")
}

fn location(at: &str) -> String {
    if at.is_empty() {
        "the schema root".to_owned()
    } else {
        at.to_owned()
    }
}

#[cfg(test)]
mod tests;
