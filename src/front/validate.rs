//! Validation of a 2026-07-28 request before it is dispatched: the per-request `_meta`
//! envelope (basic/index.mdx), the protocol version, and the HTTP headers that mirror the body
//! (`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`; transports/streamable-http.mdx), and in
//! [`params`] the `Mcp-Param-*` headers of a `tools/call`. The body is the source of truth; a
//! header that is missing or disagrees is `-32020`. A value the client sent is quoted in the
//! message (and so the log line) through [`quoted`]: control characters escaped, at most
//! [`defaults::MAX_QUOTED_CHARS`] characters of it.

pub(crate) use crate::protocol::quote::quoted;
use std::borrow::Cow;

use base64::Engine;
use http::{HeaderMap, HeaderName};
use serde_json::Value;

use crate::defaults;
use crate::error::FrontError;
use crate::protocol::methods::FrontMethod;
use crate::protocol::params::{string, Params, ParamsError, META};
use crate::protocol::{headers, meta, FRONT_SUPPORTED_VERSIONS};

mod params;

pub use params::check_params;

/// What the front needs from a request's `_meta`.
#[derive(Debug, Clone)]
pub struct RequestMeta {
    pub protocol_version: Cow<'static, str>,
    /// The raw `clientCapabilities` object.
    pub capabilities: Value,
    pub progress_token: Option<Value>,
}

/// A request's params as the front reads them: indexed (see [`crate::protocol::params`]), or
/// refused: absent (no `_meta`), not an object, or naming a member twice.
pub fn indexed_params(params: Option<Result<Params, ParamsError>>) -> Result<Params, FrontError> {
    match params {
        None => Err(missing_meta("params._meta")),
        Some(indexed) => Ok(indexed?),
    }
}

/// Validates the shape of `params._meta`; returns the envelope fields. The version itself is
/// checked by [`check_version`] after the headers, so that a header disagreeing with the body
/// is reported as a mismatch (-32020) before the version is judged (-32022).
pub fn request_meta(params: &Params) -> Result<RequestMeta, FrontError> {
    if params.get(META).is_none() {
        return Err(missing_meta("params._meta"));
    }
    if !params.meta_is_object() {
        return Err(FrontError::InvalidParams("params._meta must be an object".into()));
    }
    let version = match params.meta(meta::PROTOCOL_VERSION).map(string) {
        // A version the front speaks is borrowed from the list: no copy on every request.
        Some(Ok(v)) => match FRONT_SUPPORTED_VERSIONS.iter().find(|s| **s == v) {
            Some(known) => Cow::Borrowed(*known),
            None => Cow::Owned(v.into_owned()),
        },
        Some(Err(_)) => {
            return Err(FrontError::InvalidParams(format!(
                "_meta.{} must be a string",
                meta::PROTOCOL_VERSION
            )))
        }
        None => return Err(missing_meta(meta::PROTOCOL_VERSION)),
    };
    let capabilities = match params.meta(meta::CLIENT_CAPABILITIES) {
        Some(json) if json.starts_with('{') => tree(json)?,
        Some(_) => {
            return Err(FrontError::InvalidParams(format!(
                "_meta.{} must be an object",
                meta::CLIENT_CAPABILITIES
            )))
        }
        None => return Err(missing_meta(meta::CLIENT_CAPABILITIES)),
    };
    Ok(RequestMeta { protocol_version: version, capabilities, progress_token: progress_token(params)? })
}

/// Refuses protocol versions the front does not speak (-32022 with `data.supported`).
pub fn check_version(meta: &RequestMeta) -> Result<(), FrontError> {
    if FRONT_SUPPORTED_VERSIONS.contains(&meta.protocol_version.as_ref()) {
        Ok(())
    } else {
        // Named back to the client in the message and `data.requested`: bounded.
        Err(FrontError::UnsupportedVersion { requested: cut(&meta.protocol_version) })
    }
}

fn progress_token(params: &Params) -> Result<Option<Value>, FrontError> {
    match params.meta(meta::PROGRESS_TOKEN) {
        None | Some("null") => Ok(None),
        Some(json) if json.starts_with(['"', '-']) || json.starts_with(|c: char| c.is_ascii_digit()) => {
            Ok(Some(tree(json)?))
        }
        Some(_) => Err(FrontError::InvalidParams("_meta.progressToken must be a string or a number".into())),
    }
}

/// A `_meta` member's text as a tree (it was read as JSON when the params were indexed);
/// refused when no tree can hold it.
fn tree(json: &str) -> Result<Value, FrontError> {
    serde_json::from_str(json)
        .map_err(|e| FrontError::InvalidParams(format!("params._meta cannot be read: {e}")))
}

fn missing_meta(field: &str) -> FrontError {
    FrontError::InvalidParams(format!("missing required field {field}"))
}

/// Checks the mirrored headers against the body.
pub fn check_headers(
    map: &HeaderMap,
    method: &str,
    kind: FrontMethod,
    params: &Params,
    version: &str,
) -> Result<(), FrontError> {
    let header_version = header(map, &headers::PROTOCOL_VERSION)?;
    match header_version.as_deref() {
        None => return Err(mismatch("missing MCP-Protocol-Version header")),
        Some(v) if v != version => {
            return Err(mismatch(&format!(
                "MCP-Protocol-Version header {} does not match _meta {}",
                quoted(v),
                quoted(version)
            )))
        }
        Some(_) => {}
    }
    match header(map, &headers::METHOD)?.as_deref() {
        None => return Err(mismatch("missing Mcp-Method header")),
        Some(m) if m != method => {
            return Err(mismatch(&format!(
                "Mcp-Method header {} does not match method {}",
                quoted(m),
                quoted(method)
            )))
        }
        Some(_) => {}
    }
    let name_field = match kind {
        FrontMethod::Mrtr(m) => Some(m.target_field()),
        // The tasks extension routes its methods by task: `Mcp-Name` mirrors `params.taskId`.
        FrontMethod::Task(_) => Some("taskId"),
        _ => None,
    };
    if let Some(field) = name_field {
        let body_name = params.str(field).ok().flatten();
        match (header(map, &headers::NAME)?, body_name.as_deref()) {
            (None, _) => return Err(mismatch("missing Mcp-Name header")),
            (Some(h), Some(b)) if h == b => {}
            (Some(h), b) => {
                let body = b.map_or_else(|| "(absent)".to_owned(), quoted);
                return Err(mismatch(&format!(
                    "Mcp-Name header {} does not match params.{field} {body}",
                    quoted(&h)
                )));
            }
        }
    }
    Ok(())
}

/// At most [`defaults::MAX_QUOTED_CHARS`] characters of `text`, an ellipsis after a cut one.
fn cut(text: &str) -> String {
    match text.char_indices().nth(defaults::MAX_QUOTED_CHARS) {
        None => text.to_owned(),
        Some((end, _)) => format!("{}…", &text[..end]),
    }
}

fn mismatch(what: &str) -> FrontError {
    FrontError::HeaderMismatch(what.to_owned())
}

/// Reads one header, decoding the `=?base64?…?=` form; more than one value is a mismatch.
fn header<'a>(map: &'a HeaderMap, name: &HeaderName) -> Result<Option<Cow<'a, str>>, FrontError> {
    let mut values = map.get_all(name).iter();
    let Some(value) = values.next() else { return Ok(None) };
    if values.next().is_some() {
        return Err(mismatch(&format!("header {name} appears more than once")));
    }
    let text = value.to_str().map_err(|_| mismatch(&format!("header {name} is not visible ASCII")))?;
    decode_header_value(text)
        .map(Some)
        .ok_or_else(|| mismatch(&format!("header {name} has an invalid base64 value")))
}

/// Decodes a header value, honouring the `=?base64?{Base64(UTF-8)}?=` sentinel form.
pub fn decode_header_value(text: &str) -> Option<Cow<'_, str>> {
    match text.strip_prefix("=?base64?").and_then(|rest| rest.strip_suffix("?=")) {
        // Borrowed: every request has headers to compare, and a plain one needs no copy.
        None => Some(Cow::Borrowed(text)),
        Some(encoded) => {
            let bytes = base64::engine::general_purpose::STANDARD.decode(encoded).ok()?;
            String::from_utf8(bytes).ok().map(Cow::Owned)
        }
    }
}

#[cfg(test)]
mod tests;
