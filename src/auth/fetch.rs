//! Fetching the issuer's documents: a JWKS, or an OpenID discovery document and then the JWKS it
//! names. One keep-alive client over rustls (the platform's roots and `auth.jwks_ca_file`), built
//! once; every fetch is bounded in time and size, and a failure says which step failed without
//! echoing the body.

use std::time::Duration;

use bytes::Bytes;
use http::header::ACCEPT;
use http::{Request, StatusCode, Uri};
use http_body_util::{BodyExt, Full, Limited};
use serde::Deserialize;

use super::keys::{parse_jwks, JwksError, Key};
use crate::config::tls::TlsSettings;
use crate::config::KeySource;
use crate::defaults as d;
use crate::outbound::{self, Bound, TlsError, Trust};

/// Why keys could not be fetched (logged and counted; never shown to a client).
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("GET {url}: {source}")]
    Request { url: String, source: hyper_util::client::legacy::Error },
    #[error("GET {url}: HTTP {status}")]
    Status { url: String, status: StatusCode },
    #[error("GET {url}: reading the body: {reason}")]
    Body { url: String, reason: String },
    #[error("GET {url}: no answer within {0:?}", .timeout)]
    Timeout { url: String, timeout: Duration },
    #[error("discovery document of {issuer}: {reason}")]
    Discovery { issuer: String, reason: String },
    #[error("JWKS {url}: {source}")]
    Jwks { url: String, source: JwksError },
}

impl FetchError {
    /// A fixed label for the failure counter.
    pub(crate) fn label(&self) -> &'static str {
        match self {
            Self::Request { .. } => "connect",
            Self::Status { .. } => "status",
            Self::Body { .. } => "body",
            Self::Timeout { .. } => "timeout",
            Self::Discovery { .. } => "discovery",
            Self::Jwks { .. } => "jwks",
        }
    }
}

/// Fetches the keys of one source.
pub(crate) struct Fetcher {
    client: outbound::HttpsClient,
    source: KeySource,
    timeout: Duration,
}

#[derive(Deserialize)]
struct Discovery {
    issuer: String,
    jwks_uri: String,
}

// === impl Fetcher ===

impl Fetcher {
    pub(crate) fn new(
        source: KeySource,
        timeout: Duration,
        ca_file: Option<std::path::PathBuf>,
        bound: &Bound,
    ) -> Result<Self, TlsError> {
        let roots = TlsSettings { ca_file, ..TlsSettings::platform() };
        let spec = outbound::ClientSpec {
            name: "jwks",
            connect_timeout: timeout,
            trust: Trust::VerifiedIfRoots(&roots),
            bound,
            idle_timeout: None,
            max_idle_per_host: None,
        };
        Ok(Self { client: outbound::client(&spec)?, source, timeout })
    }

    /// The current keys of the source.
    pub(crate) async fn fetch(&self) -> Result<Vec<Key>, FetchError> {
        let jwks = match &self.source {
            KeySource::Jwks(url) => url.clone(),
            KeySource::Discovery(issuer) => self.jwks_uri(issuer).await?,
        };
        let body = self.get(&jwks).await?;
        parse_jwks(&body).map_err(|source| FetchError::Jwks { url: jwks.to_string(), source })
    }

    /// Reads `{issuer}/.well-known/openid-configuration` for its `jwks_uri`.
    async fn jwks_uri(&self, issuer: &str) -> Result<Uri, FetchError> {
        let fail = |reason: String| FetchError::Discovery { issuer: issuer.to_owned(), reason };
        let url = format!("{}/.well-known/openid-configuration", issuer.trim_end_matches('/'));
        let url: Uri = url.parse().map_err(|_| fail("not a URL".into()))?;
        let body = self.get(&url).await?;
        let doc: Discovery = serde_json::from_slice(&body).map_err(|e| fail(format!("not JSON: {e}")))?;
        if doc.issuer.trim_end_matches('/') != issuer.trim_end_matches('/') {
            return Err(fail(format!("it names another issuer, {:?}", doc.issuer)));
        }
        crate::config::fetch_url("jwks_uri", &doc.jwks_uri).map_err(|e| fail(e.to_string()))
    }

    async fn get(&self, url: &Uri) -> Result<Bytes, FetchError> {
        let text = url.to_string();
        tokio::time::timeout(self.timeout, self.get_unbounded(url, &text))
            .await
            .map_err(|_| FetchError::Timeout { url: text.clone(), timeout: self.timeout })?
    }

    async fn get_unbounded(&self, url: &Uri, text: &str) -> Result<Bytes, FetchError> {
        let req = Request::get(url.clone()).header(ACCEPT, "application/json").body(Full::new(Bytes::new()));
        let req = req.map_err(|e| FetchError::Body { url: text.to_owned(), reason: e.to_string() })?;
        let resp = self
            .client
            .request(req)
            .await
            .map_err(|source| FetchError::Request { url: text.to_owned(), source })?;
        if resp.status() != StatusCode::OK {
            return Err(FetchError::Status { url: text.to_owned(), status: resp.status() });
        }
        let body = Limited::new(resp.into_body(), d::JWKS_MAX_BYTES).collect().await;
        body.map(|b| b.to_bytes())
            .map_err(|e| FetchError::Body { url: text.to_owned(), reason: e.to_string() })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::test_support::KeyServer;
    use super::*;

    const DISCOVERY: &str = "/.well-known/openid-configuration";

    fn fetcher(source: KeySource) -> Fetcher {
        let timeout = Duration::from_secs(10);
        let gauge = prometheus::IntGauge::new("jwks", "open").unwrap();
        let bound = Bound::new(4, 1, timeout, gauge);
        Fetcher::new(source, timeout, None, &bound).unwrap()
    }

    fn jwks() -> String {
        json!({"keys": [{"kty": "oct", "kid": "k1", "k": "c2VjcmV0"}]}).to_string()
    }

    /// The discovery document is trusted only for the issuer it was asked about.
    #[tokio::test]
    async fn discovery_names_the_jwks_of_the_same_issuer_only() {
        let server = KeyServer::start().await;
        let issuer = server.url("");
        server.answer("/jwks", 200, jwks());
        let discovery = |iss: &str| json!({"issuer": iss, "jwks_uri": server.url("/jwks")}).to_string();
        server.answer(DISCOVERY, 200, discovery(&format!("{issuer}/")));
        let keys = fetcher(KeySource::Discovery(issuer.clone())).fetch().await.unwrap();
        assert_eq!(keys[0].kid.as_deref(), Some("k1"));

        server.answer(DISCOVERY, 200, discovery("https://other.test"));
        let e = fetcher(KeySource::Discovery(issuer)).fetch().await.err().unwrap();
        assert_eq!(e.label(), "discovery", "{e}");
        assert_eq!(server.hits("/jwks"), 1, "another issuer's jwks_uri is never fetched");
    }

    #[tokio::test]
    async fn only_a_200_is_a_key_set() {
        let server = KeyServer::start().await;
        let source = KeySource::Jwks(server.url("/jwks").parse().unwrap());
        let e = fetcher(source.clone()).fetch().await.err().unwrap();
        assert_eq!(e.label(), "status", "{e}");
        server.answer("/jwks", 200, jwks());
        assert_eq!(fetcher(source).fetch().await.unwrap().len(), 1);
    }
}
