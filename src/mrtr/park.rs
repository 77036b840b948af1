//! The park handle sealed into a `requestState` when a round ended with its upstream call still
//! running (park mode): which replica holds the call, and which of its parked calls it is.
//!
//! The handle is only a pointer. The state it travels in still carries the whole journal, so a
//! replica that cannot reach the call (its owner is gone, or the call expired) replays it, as in
//! replay mode. The call id is 16 random bytes: it names one parked call among all replicas
//! sharing the key ring, and being inside the sealed claims it cannot be forged or chosen by a
//! client. Nothing here holds a call or reads a clock; the registry lives in the bridge.

use std::fmt;

use rand::RngCore;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Bytes of a parked call id.
pub const CALL_ID_LEN: usize = 16;

/// The id of one parked call, random per park.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct CallId(pub [u8; CALL_ID_LEN]);

/// Where a parked call waits: the owner's advertised URL (empty when the owner advertises
/// none, so only the replica that parked it can find it) and the call's id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParkHandle {
    #[serde(rename = "o")]
    pub owner: String,
    #[serde(rename = "c")]
    pub call: CallId,
}

// === impl CallId ===

impl CallId {
    /// A fresh random id.
    pub fn random() -> Self {
        let mut bytes = [0u8; CALL_ID_LEN];
        rand::thread_rng().fill_bytes(&mut bytes);
        Self(bytes)
    }

    /// Parses the lowercase hex form [`fmt::Display`] writes.
    pub fn parse(text: &str) -> Option<Self> {
        if text.len() != 2 * CALL_ID_LEN || !text.is_ascii() {
            return None;
        }
        let mut bytes = [0u8; CALL_ID_LEN];
        for (i, byte) in bytes.iter_mut().enumerate() {
            *byte = u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok()?;
        }
        Some(Self(bytes))
    }
}

impl fmt::Display for CallId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

impl fmt::Debug for CallId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CallId({self})")
    }
}

impl Serialize for CallId {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for CallId {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        Self::parse(&text).ok_or_else(|| serde::de::Error::custom("a call id is 32 hex digits"))
    }
}

// === impl ParkHandle ===

impl ParkHandle {
    /// A handle on a call parked now by the replica advertised as `owner`.
    pub fn new(owner: &str) -> Self {
        Self { owner: owner.to_owned(), call: CallId::random() }
    }

    /// True when the replica advertised as `me` parked this call (an empty owner is local to
    /// whichever replica reads it: nobody else could be asked).
    pub fn is_local_to(&self, me: &str) -> bool {
        self.owner.is_empty() || self.owner == me
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn call_ids_round_trip_through_hex() {
        let id = CallId::random();
        let text = id.to_string();
        assert_eq!(text.len(), 32);
        assert_eq!(CallId::parse(&text), Some(id));
        assert_ne!(CallId::random(), id, "16 random bytes do not repeat");
    }

    #[test]
    fn malformed_call_ids_are_refused() {
        for bad in
            ["", "00", &"g".repeat(32), &"0".repeat(31), &"0".repeat(33), "é0000000000000000000000000000000"]
        {
            assert_eq!(CallId::parse(bad), None, "{bad:?}");
        }
        let err = serde_json::from_str::<ParkHandle>(r#"{"o":"","c":"zz"}"#).unwrap_err();
        assert!(err.to_string().contains("32 hex digits"));
    }

    #[test]
    fn handles_serialise_compactly_and_know_their_owner() {
        let handle = ParkHandle { owner: "http://10.0.0.7:9443".into(), call: CallId([0xab; 16]) };
        let text = serde_json::to_string(&handle).unwrap();
        assert_eq!(text, format!(r#"{{"o":"http://10.0.0.7:9443","c":"{}"}}"#, "ab".repeat(16)));
        assert_eq!(serde_json::from_str::<ParkHandle>(&text).unwrap(), handle);
        // Log lines and panics show the id as the hex a state carries, never as a byte array.
        assert_eq!(format!("{:?}", handle.call), format!("CallId({})", "ab".repeat(16)));
        assert!(handle.is_local_to("http://10.0.0.7:9443"));
        assert!(!handle.is_local_to("http://10.0.0.8:9443"));
        assert!(!handle.is_local_to(""));
        assert!(ParkHandle::new("").is_local_to("http://anything"));
    }
}
