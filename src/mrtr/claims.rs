//! The claims sealed inside a `requestState` token, and the round cap.
//!
//! SEP-2322 asks servers to bind protected state to the authenticated principal, a short expiry
//! and the originating request ("method name and a digest of its salient parameters"). The
//! claims carry exactly that plus the round number and the journal. Serde keys are one or two
//! letters: the token travels on every retry and its size is bounded.

use std::borrow::Cow;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::mrtr::canonical::{arguments_digest, Digest};
use crate::mrtr::journal::Journal;
use crate::mrtr::park::ParkHandle;
use crate::protocol::methods::MrtrMethod;
use crate::protocol::params::{string, Params};

/// Version of the claims layout; bump when a field changes meaning.
pub const FORMAT_VERSION: u8 = 1;

/// Errors about rounds and about the request fields claims are built from.
#[derive(Debug, thiserror::Error)]
pub enum ClaimsError {
    #[error("the call needed more than {max} input rounds")]
    TooManyRounds { max: u32 },
    #[error("`params.requestState` must be a string")]
    StateNotString,
}

/// What a state is bound to: who asked, and which call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binding {
    /// The authenticated principal (or the gateway's name for anonymous callers).
    pub principal: String,
    pub method: MrtrMethod,
    /// Tool name, prompt name or resource URI.
    pub target: String,
    /// [`crate::mrtr::canonical::arguments_digest`] of the call's arguments.
    pub arguments: Digest,
}

/// Decrypted claims of a state token.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StateClaims {
    #[serde(rename = "v")]
    pub version: u8,
    /// Unix seconds.
    #[serde(rename = "ia")]
    pub issued_at: u64,
    /// Unix seconds.
    #[serde(rename = "ex")]
    pub expires_at: u64,
    #[serde(rename = "p")]
    pub principal: String,
    #[serde(rename = "m", with = "method_code")]
    pub method: MrtrMethod,
    #[serde(rename = "t")]
    pub target: String,
    #[serde(rename = "a")]
    pub arguments: Digest,
    /// Rounds answered with `input_required` so far in this chain (1 for the first).
    #[serde(rename = "r")]
    pub round: u32,
    #[serde(rename = "j")]
    pub journal: Journal,
    /// Where the upstream call waits, when the round ended with it parked (park mode).
    #[serde(rename = "k", default, skip_serializing_if = "Option::is_none")]
    pub park: Option<ParkHandle>,
}

/// The same claims, borrowed for sealing (the journal is not cloned into a token).
#[derive(Serialize)]
pub(crate) struct ClaimsRef<'a> {
    #[serde(rename = "v")]
    pub(crate) version: u8,
    #[serde(rename = "ia")]
    pub(crate) issued_at: u64,
    #[serde(rename = "ex")]
    pub(crate) expires_at: u64,
    #[serde(rename = "p")]
    pub(crate) principal: &'a str,
    #[serde(rename = "m", with = "method_code")]
    pub(crate) method: MrtrMethod,
    #[serde(rename = "t")]
    pub(crate) target: &'a str,
    #[serde(rename = "a")]
    pub(crate) arguments: Digest,
    #[serde(rename = "r")]
    pub(crate) round: u32,
    #[serde(rename = "j")]
    pub(crate) journal: &'a Journal,
    #[serde(rename = "k", skip_serializing_if = "Option::is_none")]
    pub(crate) park: Option<&'a ParkHandle>,
}

/// Reads `params.requestState`: absent or `null` is none; anything but a string is an error.
pub fn request_state(params: &Params) -> Result<Option<Cow<'_, str>>, ClaimsError> {
    match params.get("requestState") {
        None | Some("null") => Ok(None),
        Some(json) => string(json).map(Some).map_err(|_| ClaimsError::StateNotString),
    }
}

/// The number the next `input_required` round gets, if the cap allows one more.
/// `previous` is the round of the incoming state (0 on a first call).
pub fn next_round(previous: u32, max_rounds: u32) -> Result<u32, ClaimsError> {
    match previous.checked_add(1) {
        Some(next) if next <= max_rounds => Ok(next),
        _ => Err(ClaimsError::TooManyRounds { max: max_rounds }),
    }
}

// === impl Binding ===

impl Binding {
    /// The binding of a `tools/call`, `prompts/get` or `resources/read` whose target (tool
    /// name, prompt name or resource URI) the front has already read: hashes the arguments
    /// field of `params` (none for resources).
    pub fn new(principal: &str, method: MrtrMethod, target: &str, params: Option<&Value>) -> Self {
        let arguments = method.arguments_field().and_then(|name| params.and_then(|p| p.get(name)));
        Self {
            principal: principal.to_owned(),
            method,
            target: target.to_owned(),
            arguments: arguments_digest(arguments),
        }
    }

    /// A binding no other matches: its arguments digest is random. For a request whose
    /// arguments cannot be bound (see the bridge's `MrtrRequest::binding`).
    pub fn unmatchable(principal: &str, method: MrtrMethod, target: &str) -> Self {
        Self {
            principal: principal.to_owned(),
            method,
            target: target.to_owned(),
            arguments: Digest(rand::random()),
        }
    }
}

// === impl StateClaims ===

impl StateClaims {
    /// The binding these claims were sealed under.
    pub fn binding(&self) -> Binding {
        Binding {
            principal: self.principal.clone(),
            method: self.method,
            target: self.target.clone(),
            arguments: self.arguments,
        }
    }
}

/// `MrtrMethod` as its one-byte code.
mod method_code {
    use super::*;
    use crate::protocol::methods::MrtrMethod::{PromptsGet, ResourcesRead, ToolsCall};

    pub(super) fn serialize<S: Serializer>(m: &MrtrMethod, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u8(m.code())
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<MrtrMethod, D::Error> {
        let code = u8::deserialize(d)?;
        [ToolsCall, PromptsGet, ResourcesRead]
            .into_iter()
            .find(|m| m.code() == code)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown method code {code}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn borrowed_and_owned_claims_share_one_layout() {
        let journal = Journal::new();
        let sealed = ClaimsRef {
            version: FORMAT_VERSION,
            issued_at: 10,
            expires_at: 20,
            principal: "alice",
            method: MrtrMethod::PromptsGet,
            target: "greet",
            arguments: arguments_digest(None),
            round: 2,
            journal: &journal,
            park: None,
        };
        let text = serde_json::to_string(&sealed).unwrap();
        let claims: StateClaims = serde_json::from_str(&text).unwrap();
        assert_eq!(claims.method, MrtrMethod::PromptsGet);
        assert_eq!((claims.issued_at, claims.expires_at, claims.round), (10, 20, 2));
        assert_eq!(claims.binding().principal, "alice");
        assert_eq!(serde_json::to_string(&claims).unwrap(), text);
        assert!(text.contains("\"m\":2"));
        assert!(claims.park.is_none() && !text.contains("\"k\""), "no handle, no field");
    }

    #[test]
    fn a_park_handle_travels_with_the_journal() {
        let (journal, handle) = (Journal::new(), ParkHandle::new("http://10.0.0.7:9443"));
        let sealed = ClaimsRef {
            version: FORMAT_VERSION,
            issued_at: 10,
            expires_at: 20,
            principal: "alice",
            method: MrtrMethod::ToolsCall,
            target: "order",
            arguments: arguments_digest(None),
            round: 1,
            journal: &journal,
            park: Some(&handle),
        };
        let claims: StateClaims = serde_json::from_str(&serde_json::to_string(&sealed).unwrap()).unwrap();
        assert_eq!(claims.park, Some(handle));
    }

    #[test]
    fn unknown_method_codes_are_rejected() {
        let text = format!(
            r#"{{"v":1,"ia":0,"ex":1,"p":"","m":9,"t":"","a":"{}","r":1,"j":{{}}}}"#,
            arguments_digest(None)
        );
        let err = serde_json::from_str::<StateClaims>(&text).unwrap_err();
        assert!(err.to_string().contains("unknown method code 9"));
    }

    #[test]
    fn bindings_come_from_the_call() {
        let params = json!({"name": "get_weather", "arguments": {"b": 1, "a": 2}});
        let binding = Binding::new("alice", MrtrMethod::ToolsCall, "get_weather", Some(&params));
        assert_eq!(binding.target, "get_weather");
        assert_eq!(binding.arguments, arguments_digest(Some(&json!({"a": 2, "b": 1}))));
        let read = json!({"uri": "file:///a", "arguments": {"ignored": true}});
        let binding = Binding::new("bob", MrtrMethod::ResourcesRead, "file:///a", Some(&read));
        assert_eq!((binding.target.as_str(), binding.arguments), ("file:///a", arguments_digest(None)));
    }

    #[test]
    fn request_state_field() {
        let of = |v: Value| Params::of_value(&v).unwrap();
        assert_eq!(request_state(&of(json!({"requestState": "v1.abc"}))).unwrap().as_deref(), Some("v1.abc"));
        assert_eq!(
            request_state(&of(json!({"requestState": "v1.\"q\""}))).unwrap().as_deref(),
            Some("v1.\"q\"")
        );
        assert_eq!(request_state(&of(json!({"requestState": null}))).unwrap(), None);
        assert_eq!(request_state(&of(json!({}))).unwrap(), None);
        assert!(matches!(request_state(&of(json!({"requestState": 5}))), Err(ClaimsError::StateNotString)));
    }

    #[test]
    fn round_cap() {
        let max = crate::defaults::MAX_ROUNDS;
        assert_eq!(next_round(0, max).unwrap(), 1);
        assert_eq!(next_round(max - 1, max).unwrap(), max);
        assert!(matches!(next_round(max, max), Err(ClaimsError::TooManyRounds { max: m }) if m == max));
        assert!(next_round(u32::MAX, u32::MAX).is_err());
    }
}
