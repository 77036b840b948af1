//! Who the client is, and what it may do. The principal (`issuer|subject` of a valid JWT, the
//! issuer's `%` and `|` escaped so the pair is unambiguous (see [`token`]), or `anonymous`) is bound into every sealed `requestState`, so a state minted for one client
//! cannot be replayed by another, and it keys the upstream session pool, so an upstream session
//! is never shared across principals. The client's own token is never passed upstream
//! (authorization: "MUST NOT pass through the token it received").
//!
//! The parts: [`keys`] (which key may verify which algorithm), [`remote`] and [`fetch`] (keys
//! from a JWKS or an issuer's discovery document), [`token`] (checking one token),
//! [`metadata`] (RFC 9728 document and challenges) and [`policy`] (the authorization rules).

mod fetch;
mod glob;
mod keys;
mod metadata;
mod metrics;
mod policy;
mod remote;
mod token;

use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue};
use serde_json::Map;

use self::keys::Key;
use self::metadata::Metadata;
use self::remote::{Background, Remote};
use self::token::Verifier;
use crate::config::{AuthConfig, JwtConfig, RuleConfig};
use crate::defaults;

pub use self::fetch::FetchError;
pub use self::keys::JwksError;
pub use self::metadata::WELL_KNOWN;
pub use self::metrics::AuthMetrics;
pub use self::policy::{check_legacy_body, Denied, Grants, Policy};

/// The principal of unauthenticated deployments.
pub const ANONYMOUS: &str = "anonymous";

/// Why a client could not be authenticated (logged; the client gets a 401, or a 503 when the
/// gateway holds no keys to check with).
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("missing bearer token")]
    Missing,
    #[error("Authorization is not a bearer token")]
    NotBearer,
    #[error("invalid token: {0}")]
    Invalid(#[from] jsonwebtoken::errors::Error),
    /// `sub` is missing, empty or not a string.
    #[error("token has no `sub` claim (a non-empty string)")]
    NoSubject,
    /// `iss` is present but not a string (a list of issuers names no one principal).
    #[error("token `iss` claim is not a string")]
    IssuerNotString,
    /// No key of the gateway may verify this token (its `kid` or `alg` matches none).
    #[error("no key for this token's kid and alg")]
    UnknownKey,
    /// The remote keys were never fetched, or are staler than `auth.jwks_max_stale_secs`.
    #[error("token keys unavailable")]
    KeysUnavailable,
}

/// Why the authenticator could not be built.
#[derive(Debug, thiserror::Error)]
pub enum AuthSetupError {
    #[error("TLS client for the key source: {0}")]
    Tls(#[from] crate::outbound::TlsError),
}

/// An authenticated request's principal and what it may do.
#[derive(Debug, Clone)]
pub struct Identity {
    pub principal: Arc<str>,
    pub grants: Grants,
}

/// Authenticates front requests.
pub struct Auth {
    mode: Mode,
    anonymous: Arc<str>,
    metrics: AuthMetrics,
}

enum Mode {
    /// Every client is `anonymous`, with these grants (computed once: they never vary).
    None(Grants),
    Jwt(Box<Jwt>),
}

struct Jwt {
    verifier: Verifier,
    static_keys: Vec<Key>,
    remote: Option<Arc<Remote>>,
    metadata: Option<Metadata>,
    policy: Option<Arc<Policy>>,
    _background: Option<Background>,
}

// === impl AuthError ===

impl AuthError {
    /// A fixed label for the rejection counter.
    pub fn label(&self) -> &'static str {
        use jsonwebtoken::errors::ErrorKind;
        match self {
            Self::Missing => "missing",
            Self::NotBearer => "not_bearer",
            Self::NoSubject => "no_subject",
            Self::IssuerNotString => "issuer",
            Self::UnknownKey => "unknown_key",
            Self::KeysUnavailable => "keys_unavailable",
            Self::Invalid(e) => match e.kind() {
                ErrorKind::ExpiredSignature => "expired",
                ErrorKind::ImmatureSignature => "not_yet_valid",
                ErrorKind::InvalidIssuer => "issuer",
                ErrorKind::InvalidAudience => "audience",
                ErrorKind::InvalidSignature => "signature",
                ErrorKind::InvalidAlgorithm | ErrorKind::InvalidAlgorithmName => "algorithm",
                ErrorKind::MissingRequiredClaim(_) => "missing_claim",
                _ => "malformed",
            },
        }
    }
}

// === impl Auth ===

impl Auth {
    /// An authenticator of the static keys only, built synchronously (the stdio front, which
    /// is anonymous, and unit tests); remote keys need [`Auth::start`].
    pub fn new(cfg: &AuthConfig, metrics: AuthMetrics) -> Self {
        match cfg {
            AuthConfig::None { rules } => Self::anonymous(rules, metrics),
            AuthConfig::Jwt(jwt) => Self::jwt(jwt, None, "/", metrics),
        }
    }

    /// Builds the authenticator; with remote keys, fetches them once (bounded by the fetch
    /// timeout) and starts their background refresh. A failed first fetch does not stop the
    /// start: it is logged, retried, and [`Auth::readiness_check`] fails until it succeeds.
    pub async fn start(
        cfg: &AuthConfig,
        front_path: &str,
        metrics: AuthMetrics,
        outbound: &crate::outbound::OutboundMetrics,
    ) -> Result<Self, AuthSetupError> {
        let jwt = match cfg {
            AuthConfig::None { rules } => return Ok(Self::anonymous(rules, metrics)),
            AuthConfig::Jwt(jwt) => jwt,
        };
        let remote = match &jwt.remote {
            Some(r) => {
                let bound = outbound.bound("jwks", crate::defaults::JWKS_MAX_CONNECTIONS, r.timeout);
                let fetcher = fetch::Fetcher::new(r.source.clone(), r.timeout, r.ca_file.clone(), &bound)?;
                let remote = Remote::new(fetcher, r.clone(), metrics.clone());
                remote.fetch_now().await;
                if !remote.is_loaded() {
                    tracing::error!(
                        "no token keys could be fetched at start: tokens are refused (503) and /readyz \
                         fails until a retry succeeds"
                    );
                }
                Some(remote)
            }
            None => None,
        };
        Ok(Self::jwt(jwt, remote, front_path, metrics))
    }

    /// Every client is `anonymous`; rules (which name no scope or claim here) apply to all.
    fn anonymous(rules: &[RuleConfig], metrics: AuthMetrics) -> Self {
        let grants =
            Policy::compile_anonymous(rules).map_or_else(Grants::unrestricted, |p| p.grants(&Map::new()));
        Self { mode: Mode::None(grants), anonymous: Arc::from(ANONYMOUS), metrics }
    }

    fn jwt(cfg: &JwtConfig, remote: Option<Arc<Remote>>, front_path: &str, metrics: AuthMetrics) -> Self {
        let metadata = cfg.resource.as_ref().map(|r| Metadata::new(r, front_path));
        let policy = Policy::compile(&cfg.rules, metadata.as_ref().map(|m| m.url().to_owned()));
        let jwt = Jwt {
            verifier: Verifier::new(cfg),
            static_keys: cfg.keys.iter().map(Key::from_static).collect(),
            _background: remote.as_ref().map(Remote::spawn_background),
            remote,
            metadata,
            policy,
        };
        Self { mode: Mode::Jwt(Box::new(jwt)), anonymous: Arc::from(ANONYMOUS), metrics }
    }

    /// Whether a 401 should advertise bearer authentication.
    pub fn is_enabled(&self) -> bool {
        matches!(self.mode, Mode::Jwt(..))
    }

    /// A readiness check over the remote keys, if there are any.
    pub fn readiness_check(&self) -> Option<Arc<dyn Fn() -> bool + Send + Sync>> {
        let Mode::Jwt(jwt) = &self.mode else { return None };
        let remote = jwt.remote.clone()?;
        Some(Arc::new(move || remote.is_loaded()))
    }

    /// The principal of a request (`anonymous`, or `iss|sub` of a valid JWT, see [`token`])
    /// and its grants. The principal is recorded on the current span (the front request's),
    /// so every later line of the request, a refusal included, names it.
    pub async fn authenticate(&self, headers: &HeaderMap) -> Result<Identity, AuthError> {
        let jwt = match &self.mode {
            Mode::None(grants) => {
                record_principal(&self.anonymous);
                return Ok(Identity { principal: self.anonymous.clone(), grants: grants.clone() });
            }
            Mode::Jwt(jwt) => jwt,
        };
        let result = jwt.authenticate(headers).await;
        match &result {
            Ok(identity) => record_principal(&identity.principal),
            Err(e) => self.metrics.rejections.with_label_values(&[e.label()]).inc(),
        }
        result
    }

    /// The metadata document, if `path` is where it is served.
    pub fn metadata_at(&self, path: &str) -> Option<Bytes> {
        let Mode::Jwt(jwt) = &self.mode else { return None };
        jwt.metadata.as_ref()?.document_at(path)
    }

    /// The `WWW-Authenticate` value of a 401 for `e`.
    pub fn challenge(&self, e: &AuthError) -> HeaderValue {
        let url = match &self.mode {
            Mode::Jwt(jwt) => jwt.metadata.as_ref().map(Metadata::url),
            Mode::None(_) => None,
        };
        metadata::unauthorized_challenge(matches!(e, AuthError::Missing), url)
    }

    /// Counts a request refused by the rules.
    pub fn count_denial(&self, d: &Denied) {
        self.metrics.denials.with_label_values(&[d.method]).inc();
    }
}

/// Names `principal` on the current span's `principal` field, at most
/// [`defaults::MAX_LOGGED_PRINCIPAL_CHARS`] characters of it (the log formatter escapes it).
fn record_principal(principal: &str) {
    let span = tracing::Span::current();
    if span.is_disabled() {
        return;
    }
    match principal.char_indices().nth(defaults::MAX_LOGGED_PRINCIPAL_CHARS) {
        None => span.record("principal", principal),
        Some((end, _)) => span.record("principal", format!("{}…", &principal[..end]).as_str()),
    };
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Auth").field("enabled", &self.is_enabled()).finish_non_exhaustive()
    }
}

// === impl Jwt ===

impl Jwt {
    async fn authenticate(&self, headers: &HeaderMap) -> Result<Identity, AuthError> {
        let token = token::bearer(headers)?;
        let header = jsonwebtoken::decode_header(token)?;
        let mut remote_keys = self.remote.as_ref().and_then(|r| r.keys());
        if let (Some(remote), Some(kid)) = (&self.remote, header.kid.as_deref()) {
            let known =
                remote_keys.as_ref().is_some_and(|keys| keys.iter().any(|k| k.kid.as_deref() == Some(kid)));
            if !known {
                remote.refresh_for_unknown_kid().await;
                remote_keys = remote.keys();
            }
        }
        let remote_slice = remote_keys.as_deref().unwrap_or_default();
        let candidates = self.static_keys.iter().chain(remote_slice);
        let claims = match self.verifier.verify(token, &header, candidates) {
            Err(AuthError::UnknownKey) if self.remote.is_some() && remote_keys.is_none() => {
                return Err(AuthError::KeysUnavailable)
            }
            other => other?,
        };
        let principal = token::principal(&claims)?;
        let grants = self.policy.as_ref().map_or_else(Grants::unrestricted, |p| p.grants(&claims));
        Ok(Identity { principal, grants })
    }
}

#[cfg(test)]
mod test_support;
#[cfg(test)]
mod tests;
