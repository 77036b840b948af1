//! Questions that ask for secrets. The MCP elicitation spec says servers MUST NOT request
//! sensitive information (passwords, API keys, tokens, payment credentials) through form mode,
//! and a URL-mode question sends the user to whatever URL the server names. Legacy servers do
//! both; this module only *detects* it, and `elicitation.sensitive` decides what the bridge does
//! (`warn`: relay, log and count; `refuse`: decline upstream on the user's behalf).
//!
//! The rules, each one a reason label:
//! - `password_format`: a property with `"format": "password"`;
//! - `credential_field`, `payment_field`, `identity_field`: a property whose *name* or `title`
//!   holds, as whole words, a credential term (password, passwd, passcode, passphrase, secret,
//!   token, apikey, api key), a payment term (card number, cardnumber, cvv, cvc, iban) or an
//!   identity term (ssn, social security). Words are split at anything that is not a letter or
//!   a digit and at camelCase humps (`apiKey`, `APIKey` → `api key`), and compared in lower
//!   case; a plural or a longer word is another word (`tokens`, `tokenizer_mode`, `secretary`
//!   do not match). A term followed by a word that names something *about* it rather than the
//!   secret itself (count, limit, length, budget, usage, hint, policy, type, format, name)
//!   does not match either (`token_count`, `password_hint`);
//! - `insecure_url`: a URL-mode question whose URL is not `https:`, or `http:` to a loopback
//!   host (`localhost`, `127.0.0.0/8`, `[::1]`);
//! - `script_url`: a `javascript:`, `vbscript:` or `data:` URL, refused whatever the policy.
//!   Schemes are read the way a browser reads them (ASCII whitespace and control characters
//!   removed, case ignored), so `" Java\tScript:"` is one.

use std::net::{IpAddr, Ipv6Addr};

use serde_json::{Map, Value};

use crate::defaults;

/// Why a question is sensitive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Sensitive {
    PasswordFormat,
    CredentialField,
    PaymentField,
    IdentityField,
    InsecureUrl,
    ScriptUrl,
}

/// `elicitation.sensitive`: what the gateway does with a sensitive question.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SensitivePolicy {
    /// Relay it, with a log line, a count and a mark in the migration report.
    Warn,
    /// Decline it upstream on the user's behalf and tell the client why.
    Refuse,
}

/// What the gateway did with a sensitive question (the metric's `action` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SensitiveAction {
    Warned,
    Refused,
}

/// Terms, as word sequences, and the reason each gives.
const TERMS: &[(&[&str], Sensitive)] = &[
    (&["password"], Sensitive::CredentialField),
    (&["passwd"], Sensitive::CredentialField),
    (&["passcode"], Sensitive::CredentialField),
    (&["passphrase"], Sensitive::CredentialField),
    (&["secret"], Sensitive::CredentialField),
    (&["token"], Sensitive::CredentialField),
    (&["apikey"], Sensitive::CredentialField),
    (&["api", "key"], Sensitive::CredentialField),
    (&["card", "number"], Sensitive::PaymentField),
    (&["cardnumber"], Sensitive::PaymentField),
    (&["cvv"], Sensitive::PaymentField),
    (&["cvc"], Sensitive::PaymentField),
    (&["iban"], Sensitive::PaymentField),
    (&["ssn"], Sensitive::IdentityField),
    (&["social", "security"], Sensitive::IdentityField),
];

/// Words after a term that make it name something about the secret, not the secret.
const ABOUT: &[&str] =
    &["count", "limit", "length", "budget", "usage", "hint", "policy", "type", "format", "name"];

// === impl Sensitive ===

impl Sensitive {
    pub const ALL: [Self; 6] = [
        Self::PasswordFormat,
        Self::CredentialField,
        Self::PaymentField,
        Self::IdentityField,
        Self::InsecureUrl,
        Self::ScriptUrl,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::PasswordFormat => "password_format",
            Self::CredentialField => "credential_field",
            Self::PaymentField => "payment_field",
            Self::IdentityField => "identity_field",
            Self::InsecureUrl => "insecure_url",
            Self::ScriptUrl => "script_url",
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }

    /// Refused whatever `elicitation.sensitive` says.
    pub fn always_refused(self) -> bool {
        self == Self::ScriptUrl
    }

    /// What the question asked for, in words a client may read.
    pub fn describe(self) -> &'static str {
        match self {
            Self::PasswordFormat => "a password field in a form",
            Self::CredentialField => "a credential (password, secret, token or API key) in a form",
            Self::PaymentField => "payment details (card number, CVV or IBAN) in a form",
            Self::IdentityField => "a social security number in a form",
            Self::InsecureUrl => "a visit to a URL that is not https",
            Self::ScriptUrl => "a visit to a javascript:, vbscript: or data: URL",
        }
    }
}

// === impl SensitivePolicy ===

impl SensitivePolicy {
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "warn" => Some(Self::Warn),
            "refuse" => Some(Self::Refuse),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Warn => "warn",
            Self::Refuse => "refuse",
        }
    }

    /// What this policy does with a question sensitive for `reason`.
    pub fn action(self, reason: Sensitive) -> SensitiveAction {
        if self == Self::Refuse || reason.always_refused() {
            SensitiveAction::Refused
        } else {
            SensitiveAction::Warned
        }
    }
}

impl Default for SensitivePolicy {
    /// [`defaults::ELICITATION_SENSITIVE`].
    fn default() -> Self {
        Self::parse(defaults::ELICITATION_SENSITIVE).unwrap_or(Self::Warn)
    }
}

// === impl SensitiveAction ===

impl SensitiveAction {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Warned => "warned",
            Self::Refused => "refused",
        }
    }
}

/// What the client is told when a question of `tool` was declined upstream on the user's
/// behalf because it asked for `reason`: one text for calls and tasks alike.
pub fn declined_message(tool: &str, reason: Sensitive) -> String {
    let why = if reason.always_refused() {
        "such URLs are always refused"
    } else {
        "the gateway's elicitation.sensitive policy is \"refuse\""
    };
    format!(
        "mrtr-gateway declined a question of {} on the user's behalf: it asked for {} ({}); {why}",
        crate::protocol::quote::quoted(tool),
        reason.describe(),
        reason.as_str()
    )
}

/// The sensitive properties of a form's `requestedSchema`: (reason, property name), in the
/// schema's order.
pub fn form(requested_schema: Option<&Value>) -> Vec<(Sensitive, String)> {
    let Some(properties) = requested_schema.and_then(|s| s.get("properties")).and_then(Value::as_object)
    else {
        return Vec::new();
    };
    properties.iter().filter_map(|(name, schema)| property(name, schema).map(|r| (r, name.clone()))).collect()
}

fn property(name: &str, schema: &Value) -> Option<Sensitive> {
    let schema = schema.as_object();
    if schema.and_then(|s| s.get("format")).and_then(Value::as_str) == Some("password") {
        return Some(Sensitive::PasswordFormat);
    }
    let title = schema.and_then(|s: &Map<String, Value>| s.get("title")).and_then(Value::as_str);
    named(name).or_else(|| title.and_then(named))
}

/// The reason `text` (a property name or title) names a secret, if it does.
fn named(text: &str) -> Option<Sensitive> {
    let words = words(text);
    (0..words.len()).find_map(|i| {
        TERMS.iter().find_map(|(term, reason)| {
            let end = i + term.len();
            let matches = words.get(i..end).is_some_and(|w| w.iter().zip(term.iter()).all(|(a, b)| a == b));
            let about = words.get(end).is_some_and(|next| ABOUT.contains(&next.as_str()));
            (matches && !about).then_some(*reason)
        })
    })
}

/// Lower-case words of `text`, split at non-alphanumerics and camelCase humps.
fn words(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut word = String::new();
    for (i, &c) in chars.iter().enumerate() {
        if !c.is_alphanumeric() {
            flush(&mut word, &mut out);
            continue;
        }
        let prev = i.checked_sub(1).map(|p| chars[p]);
        let next = chars.get(i + 1);
        let hump = c.is_uppercase()
            && prev.is_some_and(|p| {
                p.is_lowercase() || (p.is_uppercase() && next.is_some_and(|n| n.is_lowercase()))
            });
        if hump {
            flush(&mut word, &mut out);
        }
        word.extend(c.to_lowercase());
    }
    flush(&mut word, &mut out);
    out
}

fn flush(word: &mut String, out: &mut Vec<String>) {
    if !word.is_empty() {
        out.push(std::mem::take(word));
    }
}

/// Why a URL-mode question's `url` is sensitive, if it is.
pub fn url(url: &str) -> Option<Sensitive> {
    // A browser drops ASCII tabs and newlines anywhere, and leading spaces and controls.
    let cleaned: String = url.chars().filter(|c| !c.is_ascii_whitespace() && !c.is_ascii_control()).collect();
    let Some((scheme, _)) = cleaned.split_once(':') else { return Some(Sensitive::InsecureUrl) };
    match scheme.to_ascii_lowercase().as_str() {
        "https" => None,
        "javascript" | "vbscript" | "data" => Some(Sensitive::ScriptUrl),
        "http" if loopback(&cleaned) => None,
        _ => Some(Sensitive::InsecureUrl),
    }
}

fn loopback(url: &str) -> bool {
    let Ok(uri) = url.parse::<http::Uri>() else { return false };
    let Some(host) = uri.host() else { return false };
    if host.eq_ignore_ascii_case("localhost") {
        return true;
    }
    let bare = host.strip_prefix('[').and_then(|h| h.strip_suffix(']'));
    match bare {
        Some(v6) => v6.parse::<Ipv6Addr>().is_ok_and(|ip| ip.is_loopback()),
        None => host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn reasons(properties: Value) -> Vec<(Sensitive, String)> {
        form(Some(&json!({"type": "object", "properties": properties})))
    }

    #[test]
    fn secrets_are_found_by_format_name_and_title() {
        let found = reasons(json!({
            "pin": {"type": "string", "format": "password"},
            "card_number": {"type": "string"},
            "value": {"type": "string", "title": "Your API key"},
            "cvv": {"type": "string"},
            "ssn": {"type": "string"},
            "iban": {"type": "string"},
            "accessToken": {"type": "string"},
            "APIKey": {"type": "string"},
            "clientSecret": {"type": "string"},
            "new-password": {"type": "string"},
        }));
        let expect = [
            (Sensitive::CredentialField, "APIKey"),
            (Sensitive::CredentialField, "accessToken"),
            (Sensitive::PaymentField, "card_number"),
            (Sensitive::CredentialField, "clientSecret"),
            (Sensitive::PaymentField, "cvv"),
            (Sensitive::PaymentField, "iban"),
            (Sensitive::CredentialField, "new-password"),
            (Sensitive::PasswordFormat, "pin"),
            (Sensitive::IdentityField, "ssn"),
            (Sensitive::CredentialField, "value"),
        ];
        let expect: Vec<(Sensitive, String)> = expect.iter().map(|(r, n)| (*r, (*n).to_owned())).collect();
        assert_eq!(found, expect);
    }

    #[test]
    fn look_alikes_are_not_flagged() {
        let found = reasons(json!({
            "tokenizer_mode": {"type": "string"},
            "max_tokens": {"type": "integer"},
            "token_count": {"type": "integer"},
            "password_hint": {"type": "string"},
            "secretary": {"type": "string"},
            "discard": {"type": "boolean"},
            "card_color": {"type": "string"},
            "name": {"type": "string", "title": "Number of tokens"},
            "email": {"type": "string", "format": "email"},
        }));
        assert_eq!(found, []);
        assert_eq!(form(None), []);
        assert_eq!(form(Some(&json!({"type": "object"}))), []);
    }

    #[test]
    fn words_split_at_humps_and_separators() {
        assert_eq!(words("apiKey"), ["api", "key"]);
        assert_eq!(words("APIKey"), ["api", "key"]);
        assert_eq!(words("card-number 2"), ["card", "number", "2"]);
        assert_eq!(words("tokenizer_mode"), ["tokenizer", "mode"]);
    }

    #[test]
    fn urls_must_be_https_or_loopback_http() {
        for ok in [
            "https://login.example.com/x",
            "HTTPS://a.example",
            "http://127.0.0.1:8080/cb",
            "http://localhost/x",
            "http://[::1]:9/",
        ] {
            assert_eq!(url(ok), None, "{ok}");
        }
        for insecure in [
            "http://login.example.com/x",
            "http://127.0.0.1.evil.example/",
            "http://localhost@evil.example/",
            "ftp://a.example/f",
            "no-scheme",
            "file:///etc/passwd",
        ] {
            assert_eq!(url(insecure), Some(Sensitive::InsecureUrl), "{insecure}");
        }
        for script in
            ["javascript:alert(1)", " Java\tScript:alert(1)", "data:text/html,<b>x</b>", "VBScript:x"]
        {
            assert_eq!(url(script), Some(Sensitive::ScriptUrl), "{script}");
        }
    }

    #[test]
    fn the_policy_decides_except_for_script_urls() {
        assert_eq!(SensitivePolicy::default(), SensitivePolicy::Warn);
        assert_eq!(SensitivePolicy::parse(defaults::ELICITATION_SENSITIVE), Some(SensitivePolicy::Warn));
        assert_eq!(SensitivePolicy::Warn.action(Sensitive::PaymentField), SensitiveAction::Warned);
        assert_eq!(SensitivePolicy::Warn.action(Sensitive::ScriptUrl), SensitiveAction::Refused);
        assert_eq!(SensitivePolicy::Refuse.action(Sensitive::InsecureUrl), SensitiveAction::Refused);
    }
}
