//! RFC 9728 protected-resource metadata: the document served at
//! `/.well-known/oauth-protected-resource` (and at that path suffixed with the resource's path
//! and the front path), and the `WWW-Authenticate` challenges that point clients to it. The
//! document is serialised once, at start.

use bytes::Bytes;
use http::HeaderValue;
use serde::Serialize;

use crate::config::ResourceConfig;

/// The well-known path prefix (RFC 9728 §3).
pub const WELL_KNOWN: &str = "/.well-known/oauth-protected-resource";

/// The metadata document and where it is served.
#[derive(Debug)]
pub(crate) struct Metadata {
    document: Bytes,
    paths: Vec<String>,
    /// The document's URL, for `resource_metadata="…"`.
    url: String,
}

#[derive(Serialize)]
struct Document<'a> {
    resource: String,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    authorization_servers: &'a [String],
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    scopes_supported: &'a [String],
    bearer_methods_supported: &'a [String],
}

// === impl Metadata ===

impl Metadata {
    /// The metadata of `cfg`, served also under `front_path`.
    pub(crate) fn new(cfg: &ResourceConfig, front_path: &str) -> Self {
        let uri: http::Uri = cfg.resource.parse().unwrap_or_default();
        let doc = Document {
            resource: cfg.resource.clone(),
            authorization_servers: &cfg.authorization_servers,
            scopes_supported: &cfg.scopes_supported,
            bearer_methods_supported: &cfg.bearer_methods_supported,
        };
        let document = Bytes::from(serde_json::to_vec(&doc).unwrap_or_default());
        let resource_path =
            if cfg.resource.ends_with(uri.path()) { uri.path().trim_end_matches('/') } else { "" };
        let url = format!(
            "{}://{}{WELL_KNOWN}{resource_path}",
            uri.scheme_str().unwrap_or("https"),
            uri.authority().map_or("", |a| a.as_str())
        );
        let mut paths = vec![WELL_KNOWN.to_owned()];
        for suffix in [resource_path, front_path.trim_end_matches('/')] {
            let path = format!("{WELL_KNOWN}{suffix}");
            if !paths.contains(&path) {
                paths.push(path);
            }
        }
        Self { document, paths, url }
    }

    /// The document, if `path` is one of its paths.
    pub(crate) fn document_at(&self, path: &str) -> Option<Bytes> {
        self.paths.iter().any(|p| p == path).then(|| self.document.clone())
    }

    pub(crate) fn url(&self) -> &str {
        &self.url
    }
}

/// The 401 challenge: no error code when no credentials were sent (RFC 6750 §3.1).
pub(crate) fn unauthorized_challenge(missing: bool, metadata_url: Option<&str>) -> HeaderValue {
    let mut c = String::from(r#"Bearer realm="mrtr-gateway""#);
    if !missing {
        c.push_str(r#", error="invalid_token""#);
    }
    if let Some(url) = metadata_url {
        c.push_str(&format!(r#", resource_metadata="{url}""#));
    }
    HeaderValue::from_str(&c).unwrap_or(HeaderValue::from_static(r#"Bearer realm="mrtr-gateway""#))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(resource: &str) -> ResourceConfig {
        ResourceConfig {
            resource: resource.into(),
            authorization_servers: vec!["https://as.test".into()],
            scopes_supported: vec![],
            bearer_methods_supported: vec!["header".into()],
        }
    }

    #[test]
    fn served_at_the_base_path_and_the_path_suffixed_forms() {
        let m = Metadata::new(&cfg("https://gw.test/mcp"), "/api/mcp");
        assert_eq!(m.url(), "https://gw.test/.well-known/oauth-protected-resource/mcp");
        for path in [
            WELL_KNOWN,
            "/.well-known/oauth-protected-resource/mcp",
            "/.well-known/oauth-protected-resource/api/mcp",
        ] {
            assert!(m.document_at(path).is_some(), "{path}");
        }
        assert!(m.document_at("/.well-known/oauth-protected-resource/other").is_none());
        let doc: serde_json::Value = serde_json::from_slice(&m.document_at(WELL_KNOWN).unwrap()).unwrap();
        assert_eq!(
            doc,
            serde_json::json!({"resource": "https://gw.test/mcp", "authorization_servers": ["https://as.test"],
                               "bearer_methods_supported": ["header"]})
        );
    }

    #[test]
    fn a_bare_origin_resource_keeps_its_spelling() {
        let m = Metadata::new(&cfg("https://gw.test"), "/mcp");
        assert_eq!(m.url(), "https://gw.test/.well-known/oauth-protected-resource");
        let doc: serde_json::Value = serde_json::from_slice(&m.document_at(WELL_KNOWN).unwrap()).unwrap();
        assert_eq!(doc["resource"], "https://gw.test");
    }

    #[test]
    fn challenges() {
        let url = Some("https://gw.test/.well-known/oauth-protected-resource/mcp");
        assert_eq!(
            unauthorized_challenge(true, url).to_str().unwrap(),
            r#"Bearer realm="mrtr-gateway", resource_metadata="https://gw.test/.well-known/oauth-protected-resource/mcp""#
        );
        assert_eq!(
            unauthorized_challenge(false, None).to_str().unwrap(),
            r#"Bearer realm="mrtr-gateway", error="invalid_token""#
        );
    }
}
