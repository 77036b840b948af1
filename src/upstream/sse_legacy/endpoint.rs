//! The message endpoint a deprecated HTTP+SSE server announces in its first `endpoint` event:
//! a URL, usually relative (`/messages?session_id=…`), resolved against the stream's URL.
//!
//! It must stay on the stream's origin (scheme, host, port). The gateway sends it every client
//! message, with the configured extra headers (an API key, say): an endpoint elsewhere would
//! hand those to a host the operator never named, so it is refused.

use http::uri::{Authority, Scheme};
use http::Uri;

/// Why an announced endpoint is refused.
#[derive(Debug, thiserror::Error)]
pub enum EndpointError {
    #[error("the endpoint event is empty")]
    Empty,
    #[error("the endpoint {0:?} is not a valid URL")]
    Invalid(String),
    #[error("the endpoint {endpoint} is not on the stream's origin {origin}")]
    CrossOrigin { endpoint: String, origin: String },
}

/// Resolves `reference` against `base` (the SSE URL) and checks it stays on `base`'s origin.
pub(crate) fn resolve(base: &Uri, reference: &str) -> Result<Uri, EndpointError> {
    let reference = reference.trim();
    let reference = reference.split('#').next().unwrap_or_default();
    if reference.is_empty() {
        return Err(EndpointError::Empty);
    }
    let (Some(scheme), Some(authority)) = (base.scheme(), base.authority()) else {
        return Err(EndpointError::Invalid(base.to_string()));
    };
    let joined = if has_scheme(reference) {
        reference.to_owned()
    } else if reference.starts_with("//") {
        format!("{scheme}:{reference}")
    } else {
        format!("{scheme}://{authority}{}", join_path(base.path(), reference))
    };
    let uri: Uri = joined.parse().map_err(|_| EndpointError::Invalid(clip(reference)))?;
    if !same_origin(base, &uri) {
        return Err(EndpointError::CrossOrigin {
            endpoint: clip(&joined),
            origin: format!("{scheme}://{authority}"),
        });
    }
    Ok(uri)
}

/// `scheme:` at the start (RFC 3986: a letter, then letters, digits, `+`, `-`, `.`).
fn has_scheme(reference: &str) -> bool {
    let Some((head, _)) = reference.split_once(':') else { return false };
    let mut chars = head.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
}

/// The path and query of a relative reference against the base path (RFC 3986 §5.2).
fn join_path(base_path: &str, reference: &str) -> String {
    let (path, query) = match reference.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (reference, None),
    };
    let merged = if path.starts_with('/') {
        path.to_owned()
    } else if path.is_empty() {
        base_path.to_owned()
    } else {
        let dir = base_path.rsplit_once('/').map_or("", |(dir, _)| dir);
        format!("{dir}/{path}")
    };
    let mut out = remove_dots(&merged);
    if let Some(q) = query {
        out.push('?');
        out.push_str(q);
    }
    out
}

/// Removes `.` and `..` segments; `..` never climbs above the root.
fn remove_dots(path: &str) -> String {
    let mut segments: Vec<&str> = Vec::new();
    let ends_in_dir = path.ends_with("/.") || path.ends_with("/..") || path.ends_with('/');
    for segment in path.split('/').skip(1) {
        match segment {
            "." => {}
            ".." => {
                segments.pop();
            }
            s => segments.push(s),
        }
    }
    if ends_in_dir && segments.last().is_some_and(|s| !s.is_empty()) {
        segments.push("");
    }
    format!("/{}", segments.join("/"))
}

fn same_origin(a: &Uri, b: &Uri) -> bool {
    let (Some(sa), Some(sb), Some(aa), Some(ab)) = (a.scheme(), b.scheme(), a.authority(), b.authority())
    else {
        return false;
    };
    sa == sb && aa.host().eq_ignore_ascii_case(ab.host()) && port(sa, aa) == port(sb, ab)
}

fn port(scheme: &Scheme, authority: &Authority) -> Option<u16> {
    authority.port_u16().or(match scheme.as_str() {
        "http" => Some(80),
        "https" => Some(443),
        _ => None,
    })
}

/// At most 200 characters of a server-chosen string, for messages and logs.
fn clip(text: &str) -> String {
    text.chars().take(200).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> Uri {
        "http://127.0.0.1:3001/mcp/sse".parse().unwrap()
    }

    fn ok(reference: &str) -> String {
        resolve(&base(), reference).unwrap().to_string()
    }

    #[test]
    fn an_absolute_path_keeps_the_origin_and_the_query() {
        assert_eq!(ok("/messages?session_id=ab12"), "http://127.0.0.1:3001/messages?session_id=ab12");
    }

    #[test]
    fn a_relative_path_is_resolved_against_the_stream_directory() {
        assert_eq!(ok("messages?s=1"), "http://127.0.0.1:3001/mcp/messages?s=1");
        assert_eq!(ok("./messages"), "http://127.0.0.1:3001/mcp/messages");
        assert_eq!(ok("../messages/"), "http://127.0.0.1:3001/messages/");
        assert_eq!(ok("../../../x"), "http://127.0.0.1:3001/x");
        assert_eq!(ok("?session=9"), "http://127.0.0.1:3001/mcp/sse?session=9");
    }

    #[test]
    fn a_path_ending_in_a_dot_segment_names_a_directory() {
        assert_eq!(ok("sub/."), "http://127.0.0.1:3001/mcp/sub/");
        assert_eq!(ok("sub/.."), "http://127.0.0.1:3001/mcp/");
        assert_eq!(ok("sub/x"), "http://127.0.0.1:3001/mcp/sub/x");
    }

    #[test]
    fn a_refused_endpoint_is_named_in_at_most_200_characters() {
        let long = format!("/a b{}", "c".repeat(300));
        let Err(EndpointError::Invalid(named)) = resolve(&base(), &long) else { panic!("not refused") };
        assert_eq!(named, long.chars().take(200).collect::<String>());
    }

    #[test]
    fn an_absolute_url_on_the_same_origin_is_accepted() {
        assert_eq!(ok("http://127.0.0.1:3001/m?x=1"), "http://127.0.0.1:3001/m?x=1");
        assert_eq!(ok("//127.0.0.1:3001/m"), "http://127.0.0.1:3001/m");
        assert_eq!(ok("  /m#frag  "), "http://127.0.0.1:3001/m");
        let default_port: Uri = "http://Example.test/sse".parse().unwrap();
        assert_eq!(resolve(&default_port, "http://example.test:80/m").unwrap().path(), "/m");
        let default_tls_port: Uri = "https://Example.test/sse".parse().unwrap();
        assert_eq!(resolve(&default_tls_port, "https://example.test:443/m").unwrap().path(), "/m");
    }

    #[test]
    fn a_colon_in_a_path_is_no_scheme() {
        assert_eq!(ok("/messages:1"), "http://127.0.0.1:3001/messages:1");
        assert_eq!(
            ok("2v:messages"),
            "http://127.0.0.1:3001/mcp/2v:messages",
            "a scheme starts with a letter"
        );
    }

    #[test]
    fn another_origin_is_refused() {
        for reference in [
            "http://evil.test/messages",
            "//evil.test:3001/messages",
            "http://127.0.0.1:3002/messages",
            "https://127.0.0.1:3001/messages",
            "http://127.0.0.1:3001@evil.test/messages",
        ] {
            let err = resolve(&base(), reference).unwrap_err();
            assert!(matches!(err, EndpointError::CrossOrigin { .. }), "{reference}: {err}");
        }
    }

    #[test]
    fn empty_or_broken_endpoints_are_refused() {
        assert!(matches!(resolve(&base(), "  "), Err(EndpointError::Empty)));
        assert!(matches!(resolve(&base(), "/a b"), Err(EndpointError::Invalid(_))));
        assert!(matches!(
            resolve(&base(), "mailto:x@y"),
            Err(EndpointError::Invalid(_) | EndpointError::CrossOrigin { .. })
        ));
    }
}
