//! `[auth]` validated: where token keys come from (static secret or PEM file, a JWKS URL, an
//! issuer's discovery document), which claims a token must carry, the protected-resource
//! metadata (RFC 9728) and the authorization rules. Everything is parsed here once, so the
//! authenticator only builds from typed values and never sees a string it must check again.

use std::collections::BTreeMap;
use std::time::Duration;

use http::Uri;
use jsonwebtoken::{Algorithm, DecodingKey};

use super::raw::{RawAuth, RawRule};
use super::ConfigError;
use crate::defaults as d;

/// Client authentication.
#[derive(Debug, Clone)]
pub enum AuthConfig {
    /// Every client is the principal `anonymous`; `rules` (none naming scopes or claims, which
    /// no anonymous client holds) filter what every client may use.
    None {
        rules: Vec<RuleConfig>,
    },
    Jwt(Box<JwtConfig>),
}

/// JWT bearer validation.
#[derive(Debug, Clone)]
pub struct JwtConfig {
    /// Keys given in the configuration itself (no `kid`).
    pub keys: Vec<StaticKey>,
    /// Keys fetched from the issuer.
    pub remote: Option<RemoteKeys>,
    pub issuer: Option<String>,
    pub audience: Option<String>,
    pub leeway: Duration,
    /// The protected-resource metadata; `None` when `auth.resource` is unset.
    pub resource: Option<ResourceConfig>,
    /// Authorization rules; empty means every authenticated client may call anything.
    pub rules: Vec<RuleConfig>,
}

/// A configured key and the algorithms it may verify.
#[derive(Clone)]
pub struct StaticKey {
    pub key: DecodingKey,
    pub algorithms: Vec<Algorithm>,
}

/// Where remote keys come from, and how they are kept fresh.
#[derive(Debug, Clone)]
pub struct RemoteKeys {
    pub source: KeySource,
    pub refresh: Duration,
    pub min_refresh: Duration,
    pub max_stale: Duration,
    pub timeout: Duration,
    pub wait: Duration,
    /// Extra CA certificates (PEM) trusted for the key source.
    pub ca_file: Option<std::path::PathBuf>,
}

/// A JWKS document, directly or through an issuer's discovery document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySource {
    Jwks(Uri),
    /// The issuer; its discovery document names the JWKS.
    Discovery(String),
}

/// RFC 9728 protected-resource metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceConfig {
    /// As the operator wrote it (the `aud` default is compared as a string).
    pub resource: String,
    pub authorization_servers: Vec<String>,
    pub scopes_supported: Vec<String>,
    pub bearer_methods_supported: Vec<String>,
}

/// One authorization rule, as configured (compiled by the authenticator).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RuleConfig {
    pub scopes: Vec<String>,
    pub claims: BTreeMap<String, String>,
    pub methods: Vec<String>,
    pub tools: Vec<String>,
    pub prompts: Vec<String>,
    pub resources: Vec<String>,
    /// Refused to every principal the rule applies to, whatever any rule allows.
    pub deny_tools: Vec<String>,
    pub deny_prompts: Vec<String>,
    pub deny_resources: Vec<String>,
}

// === impl AuthConfig ===

impl AuthConfig {
    /// No authentication and no rules: every client may call anything.
    pub const OPEN: Self = Self::None { rules: Vec::new() };

    /// The authorization rules, whichever the mode.
    pub fn rules(&self) -> &[RuleConfig] {
        match self {
            Self::None { rules } => rules,
            Self::Jwt(jwt) => &jwt.rules,
        }
    }
}

impl std::fmt::Debug for StaticKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StaticKey").field("key", &"[redacted]").field("algorithms", &self.algorithms).finish()
    }
}

/// Validates `[auth]`.
pub(super) fn validate(raw: RawAuth) -> Result<AuthConfig, ConfigError> {
    match raw.mode.as_deref().unwrap_or("none") {
        "none" => Ok(AuthConfig::None { rules: anonymous_rules(raw.rules)? }),
        "jwt" => jwt(raw).map(|j| AuthConfig::Jwt(Box::new(j))),
        other => Err(ConfigError::invalid("auth.mode", format!("{other:?} is neither \"none\" nor \"jwt\""))),
    }
}

/// The rules of a gateway without authentication: every client is `anonymous`, which holds no
/// scope and no claim, so a rule naming one could never apply and is refused.
fn anonymous_rules(raw: Option<Vec<RawRule>>) -> Result<Vec<RuleConfig>, ConfigError> {
    let rules: Vec<RuleConfig> =
        raw.unwrap_or_default().into_iter().enumerate().map(rule).collect::<Result<_, _>>()?;
    match rules.iter().position(|r| !r.scopes.is_empty() || !r.claims.is_empty()) {
        Some(i) => Err(ConfigError::invalid(
            format!("auth.rules[{i}]"),
            "scopes and claims need auth.mode = \"jwt\" (without it every client is anonymous)",
        )),
        None => Ok(rules),
    }
}

fn jwt(raw: RawAuth) -> Result<JwtConfig, ConfigError> {
    let issuer = either("auth.issuer", raw.issuer.clone(), raw.jwt_issuer.clone())?;
    let resource = resource(&raw)?;
    let audience = either("auth.audience", raw.audience.clone(), raw.jwt_audience.clone())?
        .or_else(|| resource.as_ref().map(|r| r.resource.clone()));
    let mut keys = Vec::new();
    if let Some(secret) = &raw.jwt_hs256_secret {
        let algorithms = vec![Algorithm::HS256, Algorithm::HS384, Algorithm::HS512];
        keys.push(StaticKey { key: DecodingKey::from_secret(secret.expose().as_bytes()), algorithms });
    }
    if let Some(path) = &raw.jwt_public_key_file {
        keys.push(public_key(path)?);
    }
    let remote = remote(&raw, issuer.as_deref())?;
    if keys.is_empty() && remote.is_none() {
        return Err(ConfigError::invalid(
            "auth.jwt_hs256_secret",
            "jwt mode needs a key: jwt_hs256_secret, jwt_public_key_file, jwks_url or oidc_discovery",
        ));
    }
    let leeway = raw.leeway_secs.map_or(d::AUTH_LEEWAY, Duration::from_secs);
    let rules = raw.rules.unwrap_or_default().into_iter().enumerate().map(rule).collect::<Result<_, _>>()?;
    Ok(JwtConfig { keys, remote, issuer, audience, leeway, resource, rules })
}

/// One value given under either of two names (the older `jwt_*` one or the newer one).
fn either(field: &str, new: Option<String>, old: Option<String>) -> Result<Option<String>, ConfigError> {
    match (new, old) {
        (Some(a), Some(b)) if a != b => {
            Err(ConfigError::invalid(field, "differs from its older jwt_* spelling"))
        }
        (a, b) => Ok(a.or(b)),
    }
}

fn remote(raw: &RawAuth, issuer: Option<&str>) -> Result<Option<RemoteKeys>, ConfigError> {
    let source = match (&raw.jwks_url, raw.oidc_discovery.unwrap_or(false), issuer) {
        (None, false, _) => return Ok(None),
        (Some(_), true, _) => {
            return Err(ConfigError::invalid(
                "auth.jwks_url",
                "set either jwks_url or oidc_discovery, not both",
            ))
        }
        (Some(url), false, _) => KeySource::Jwks(fetch_url("auth.jwks_url", url)?),
        (None, true, None) => return Err(ConfigError::invalid("auth.oidc_discovery", "needs auth.issuer")),
        (None, true, Some(iss)) => {
            fetch_url("auth.issuer", iss)?;
            KeySource::Discovery(iss.to_owned())
        }
    };
    let secs = |field: &str, v: Option<u64>, default: Duration| match v {
        Some(0) => Err(ConfigError::invalid(field, "must be positive")),
        Some(s) => Ok(Duration::from_secs(s)),
        None => Ok(default),
    };
    let ms = |field: &str, v: Option<u64>, default: Duration| match v {
        Some(0) => Err(ConfigError::invalid(field, "must be positive")),
        Some(m) => Ok(Duration::from_millis(m)),
        None => Ok(default),
    };
    Ok(Some(RemoteKeys {
        source,
        refresh: secs("auth.jwks_refresh_secs", raw.jwks_refresh_secs, d::JWKS_REFRESH)?,
        min_refresh: secs("auth.jwks_min_refresh_secs", raw.jwks_min_refresh_secs, d::JWKS_MIN_REFRESH)?,
        max_stale: secs("auth.jwks_max_stale_secs", raw.jwks_max_stale_secs, d::JWKS_MAX_STALE)?,
        timeout: ms("auth.jwks_timeout_ms", raw.jwks_timeout_ms, d::JWKS_TIMEOUT)?,
        wait: ms("auth.jwks_wait_ms", raw.jwks_wait_ms, d::JWKS_WAIT)?,
        ca_file: raw.jwks_ca_file.as_ref().map(Into::into),
    }))
}

/// A URL keys are fetched from: `https://`, or `http://` on a loopback host (tests, sidecars).
pub(crate) fn fetch_url(field: &str, url: &str) -> Result<Uri, ConfigError> {
    let uri: Uri = url.parse().map_err(|_| ConfigError::invalid(field, format!("{url:?} is not a URL")))?;
    let loopback = matches!(uri.host(), Some("127.0.0.1" | "localhost" | "[::1]" | "::1"));
    match uri.scheme_str() {
        Some("https") if uri.host().is_some() => Ok(uri),
        Some("http") if loopback => Ok(uri),
        _ => Err(ConfigError::invalid(field, format!("{url:?} must be https:// (http:// only on loopback)"))),
    }
}

fn resource(raw: &RawAuth) -> Result<Option<ResourceConfig>, ConfigError> {
    let Some(url) = &raw.resource else { return Ok(None) };
    let resource: Uri =
        url.parse().map_err(|_| ConfigError::invalid("auth.resource", format!("{url:?} is not a URL")))?;
    if resource.scheme().is_none() || resource.host().is_none() || resource.query().is_some() {
        return Err(ConfigError::invalid("auth.resource", "must be an absolute URL without a query"));
    }
    let bearer = raw
        .bearer_methods_supported
        .clone()
        .unwrap_or_else(|| d::BEARER_METHODS.iter().map(|m| (*m).to_owned()).collect());
    if let Some(m) = bearer.iter().find(|m| !d::BEARER_METHODS.contains(&m.as_str())) {
        return Err(ConfigError::invalid("auth.bearer_methods_supported", format!("{m:?}: only \"header\"")));
    }
    Ok(Some(ResourceConfig {
        resource: url.clone(),
        authorization_servers: raw.authorization_servers.clone().unwrap_or_default(),
        scopes_supported: raw.scopes_supported.clone().unwrap_or_default(),
        bearer_methods_supported: bearer,
    }))
}

fn rule((i, raw): (usize, RawRule)) -> Result<RuleConfig, ConfigError> {
    let methods = raw.methods.unwrap_or_else(|| vec![d::RULE_METHODS.to_owned()]);
    let rule = RuleConfig {
        scopes: raw.scopes.unwrap_or_default(),
        claims: raw.claims.unwrap_or_default(),
        methods,
        tools: raw.tools.unwrap_or_default(),
        prompts: raw.prompts.unwrap_or_default(),
        resources: raw.resources.unwrap_or_default(),
        deny_tools: raw.deny_tools.unwrap_or_default(),
        deny_prompts: raw.deny_prompts.unwrap_or_default(),
        deny_resources: raw.deny_resources.unwrap_or_default(),
    };
    let all = rule.methods.iter().chain(&rule.tools).chain(&rule.prompts).chain(&rule.resources);
    let denied = rule.deny_tools.iter().chain(&rule.deny_prompts).chain(&rule.deny_resources);
    if let Some(bad) = all.chain(denied).chain(&rule.scopes).find(|p| p.is_empty()) {
        return Err(ConfigError::invalid(format!("auth.rules[{i}]"), format!("{bad:?}: an empty name")));
    }
    Ok(rule)
}

fn public_key(path: &str) -> Result<StaticKey, ConfigError> {
    use Algorithm::*;
    let field = "auth.jwt_public_key_file";
    let pem = std::fs::read(path).map_err(|e| ConfigError::invalid(field, format!("{path}: {e}")))?;
    if let Ok(key) = DecodingKey::from_rsa_pem(&pem) {
        return Ok(StaticKey { key, algorithms: vec![RS256, RS384, RS512, PS256, PS384, PS512] });
    }
    if let Ok(key) = DecodingKey::from_ec_pem(&pem) {
        return Ok(StaticKey { key, algorithms: vec![ES256, ES384] });
    }
    if let Ok(key) = DecodingKey::from_ed_pem(&pem) {
        return Ok(StaticKey { key, algorithms: vec![EdDSA] });
    }
    Err(ConfigError::invalid(field, format!("{path} is not an RSA, EC or Ed25519 public key in PEM")))
}

#[cfg(test)]
mod tests;
