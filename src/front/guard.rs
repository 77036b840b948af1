//! HTTP-level checks that come before any JSON is read: the `Origin` allow-list (DNS-rebinding
//! protection, transports/streamable-http.mdx: an invalid `Origin` gets 403), the content type,
//! and what the client accepts.

use http::header::{ACCEPT, CONTENT_TYPE, ORIGIN};
use http::{HeaderMap, Uri};

use crate::config::OriginPolicy;
use crate::error::FrontError;

/// Accepts requests without `Origin`, loopback origins, and configured ones.
pub fn check_origin(headers: &HeaderMap, policy: &OriginPolicy) -> Result<(), FrontError> {
    let Some(origin) = headers.get(ORIGIN) else { return Ok(()) };
    let origin = origin.to_str().map_err(|_| FrontError::ForbiddenOrigin("(not ASCII)".into()))?;
    let allowed = match policy {
        OriginPolicy::Any => true,
        OriginPolicy::LoopbackAnd(list) => {
            is_loopback_origin(origin) || list.iter().any(|o| o == origin.trim_end_matches('/'))
        }
    };
    if allowed {
        Ok(())
    } else {
        Err(FrontError::ForbiddenOrigin(origin.to_owned()))
    }
}

fn is_loopback_origin(origin: &str) -> bool {
    let Ok(uri) = origin.parse::<Uri>() else { return false };
    if !matches!(uri.scheme_str(), Some("http" | "https")) {
        return false;
    }
    match uri.host() {
        Some("localhost") => true,
        Some(host) => {
            let host = host.trim_start_matches('[').trim_end_matches(']');
            host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
        }
        None => false,
    }
}

/// Requires a JSON body.
pub fn check_content_type(headers: &HeaderMap) -> Result<(), FrontError> {
    let ct = headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
    let essence = ct.split(';').next().unwrap_or("").trim();
    if essence.eq_ignore_ascii_case("application/json") {
        Ok(())
    } else {
        Err(FrontError::UnsupportedMediaType(format!("Content-Type must be application/json, got {ct:?}")))
    }
}

/// What the client accepts: JSON must be acceptable; SSE is used only when accepted too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Accepts {
    pub sse: bool,
}

/// The `Accept` value the SDK clients send, recognised before any parsing: it is on nearly
/// every request, and [`media_ranges`] gives it the same answer.
const SDK_ACCEPT: &[u8] = b"application/json, text/event-stream";

/// Reads `Accept`; an absent header accepts anything.
pub fn accepts(headers: &HeaderMap) -> Result<Accepts, FrontError> {
    let Some(value) = headers.get(ACCEPT) else { return Ok(Accepts { sse: false }) };
    if value.as_bytes() == SDK_ACCEPT {
        return Ok(Accepts { sse: true });
    }
    media_ranges(value.to_str().unwrap_or("").as_bytes())
}

/// One pass over the media ranges of an `Accept` value, by bytes.
fn media_ranges(value: &[u8]) -> Result<Accepts, FrontError> {
    let (mut json, mut sse) = (false, false);
    for range in value.split(|&b| b == b',') {
        let media = range.split(|&b| b == b';').next().unwrap_or_default().trim_ascii();
        let is = |t: &str| media.eq_ignore_ascii_case(t.as_bytes());
        json |= is("application/json") || is("application/*") || is("*/*");
        sse |= is("text/event-stream");
    }
    if !json {
        return Err(FrontError::NotAcceptable("Accept must include application/json".into()));
    }
    Ok(Accepts { sse })
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

    fn with(name: http::HeaderName, value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(name, HeaderValue::from_str(value).unwrap());
        h
    }

    #[test]
    fn origins() {
        let policy = OriginPolicy::LoopbackAnd(vec!["https://app.example".into()]);
        assert!(check_origin(&HeaderMap::new(), &policy).is_ok());
        for ok in ["http://localhost:3000", "http://127.0.0.1", "http://[::1]:8080", "https://app.example/"] {
            assert!(check_origin(&with(ORIGIN, ok), &policy).is_ok(), "{ok}");
        }
        for bad in ["https://evil.example", "http://localhost.evil.example", "null", "http://10.0.0.1"] {
            let e = check_origin(&with(ORIGIN, bad), &policy).unwrap_err();
            assert_eq!(e.status().as_u16(), 403, "{bad}");
        }
        assert!(check_origin(&with(ORIGIN, "https://evil.example"), &OriginPolicy::Any).is_ok());
    }

    #[test]
    fn content_type_and_accept() {
        assert!(check_content_type(&with(CONTENT_TYPE, "application/json; charset=utf-8")).is_ok());
        assert_eq!(check_content_type(&with(CONTENT_TYPE, "text/plain")).unwrap_err().status().as_u16(), 415);
        assert_eq!(
            accepts(&with(ACCEPT, "application/json, text/event-stream")).unwrap(),
            Accepts { sse: true }
        );
        assert_eq!(media_ranges(SDK_ACCEPT).unwrap(), Accepts { sse: true }, "the shortcut's answer");
        assert_eq!(
            accepts(&with(ACCEPT, "Application/JSON;q=0.9 , text/event-stream")).unwrap(),
            Accepts { sse: true }
        );
        assert_eq!(accepts(&with(ACCEPT, "application/json")).unwrap(), Accepts { sse: false });
        assert_eq!(accepts(&with(ACCEPT, "text/event-stream")).unwrap_err().status().as_u16(), 406);
        for wildcard in ["application/*", "*/*", "text/html;q=0.9, */*;q=0.1", "APPLICATION/JSON"] {
            assert_eq!(accepts(&with(ACCEPT, wildcard)).unwrap(), Accepts { sse: false }, "{wildcard}");
        }
        assert_eq!(accepts(&HeaderMap::new()).unwrap(), Accepts { sse: false }, "no Accept accepts JSON");
    }
}
