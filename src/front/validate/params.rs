//! `Mcp-Param-{Name}` headers against the `tools/call` arguments they mirror
//! (transports/streamable-http.mdx, "Server Behavior for Custom Headers"): a value in the body
//! needs its header, a header needs its value, and the two must match after the header's
//! `=?base64?…?=` form is decoded. Integers compare numerically. Every failure is `-32020`.

use http::HeaderMap;
use serde_json::{Number, Value};

use super::{header, mismatch};
use crate::error::FrontError;
use crate::front::tool_headers::HeaderParam;

/// The largest integer a JavaScript client holds exactly (2^53 - 1).
const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;

/// Checks every mirrored argument of a call against its header.
pub fn check_params(
    map: &HeaderMap,
    params: &[HeaderParam],
    arguments: Option<&Value>,
) -> Result<(), FrontError> {
    for param in params {
        let body = arguments.and_then(|a| at_path(a, &param.path)).filter(|v| !v.is_null());
        let value = header(map, &param.header)?;
        // Joined only for an error message: the path of a header that matches is not needed.
        let path = || param.path.join(".");
        match (value, body) {
            (None, None) => {}
            (None, Some(_)) => {
                return Err(mismatch(&format!(
                    "missing Mcp-Param-{} header: arguments.{} is present",
                    param.name,
                    path()
                )))
            }
            (Some(_), None) => {
                return Err(mismatch(&format!(
                    "Mcp-Param-{} header sent but arguments.{} is absent",
                    param.name,
                    path()
                )))
            }
            (Some(text), Some(body)) if !matches(&text, body) => {
                return Err(mismatch(&format!(
                    "Mcp-Param-{} header does not match arguments.{}",
                    param.name,
                    path()
                )))
            }
            (Some(_), Some(_)) => {}
        }
    }
    Ok(())
}

/// The argument at a chain of `properties` keys.
fn at_path<'a>(arguments: &'a Value, path: &[Box<str>]) -> Option<&'a Value> {
    path.iter().try_fold(arguments, |node, key| node.as_object()?.get(&**key))
}

/// A decoded header value against the body value it mirrors, by the body value's JSON type.
fn matches(text: &str, body: &Value) -> bool {
    match body {
        Value::String(s) => text == s,
        Value::Bool(b) => text == if *b { "true" } else { "false" },
        Value::Number(n) => same_number(text, n),
        _ => false,
    }
}

/// Numeric equality within the safe integer range (`42.0` equals `42`).
fn same_number(text: &str, body: &Number) -> bool {
    let Some(body) = body.as_f64() else { return false };
    let Ok(header) = text.parse::<f64>() else { return false };
    header.is_finite() && body.abs() <= MAX_SAFE_INTEGER && header == body
}

#[cfg(test)]
mod tests;
