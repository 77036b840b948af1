//! The key ring that seals and opens `requestState` tokens.
//!
//! Threat model: the client holds the token between rounds and may tamper with it, replay it
//! elsewhere or try to read it (it carries the client's own earlier answers, which may be
//! personal data). Every replica must open what any other sealed, and keys must rotate without
//! downtime: the first key of the ring seals, every key opens.
//!
//! Operators supply 32-byte secrets. The cipher key is derived from each secret once, at start,
//! with HKDF-SHA256 under a label fixed for this purpose, so the same secret could safely serve
//! another purpose under another label. Each key has a 4-byte id carried in clear in the token
//! so that opening picks the right key without trial decryption; the id comes from the
//! operator's label when one is given, else from HKDF of the secret, never from the secret's
//! bytes themselves.
//!
//! A ring is immutable once derived. Rotation replaces the whole ring in a [`LiveRing`]: each
//! request reads the current ring once and keeps it to its end, so a request that opened a
//! token under the old ring never sees half of a new one. Reading the key file and deciding
//! when to swap belong to the app layer; nothing here does I/O.

use std::fmt;
use std::sync::Arc;

use parking_lot::RwLock;

use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD, URL_SAFE, URL_SAFE_NO_PAD};
use base64::Engine as _;
use chacha20poly1305::{KeyInit, XChaCha20Poly1305};
use hkdf::Hkdf;
use rand::RngCore;
use sha2::{Digest as _, Sha256};
use zeroize::Zeroizing;

/// Length of an operator secret.
pub const SECRET_LEN: usize = 32;
/// Length of a key id in a token.
pub const KEY_ID_LEN: usize = 4;
/// Most keys a ring holds; rotation needs two or three, the bound keeps look-ups trivial.
pub const MAX_KEYS: usize = 16;
/// Longest accepted key label.
pub const MAX_LABEL_LEN: usize = 64;

const HKDF_SALT: &[u8] = b"mrtr-gateway key ring v1";
const AEAD_INFO: &[u8] = b"mrtr-gateway requestState xchacha20poly1305 v1";
const KEY_ID_INFO: &[u8] = b"mrtr-gateway requestState key id v1";
const SESSION_AEAD_INFO: &[u8] = b"mrtr-gateway Mcp-Session-Id xchacha20poly1305 v1";
const FORWARD_MAC_INFO: &[u8] = b"mrtr-gateway replica forward hmac-sha256 v1";
const LABEL_ID_DOMAIN: &[u8] = b"mrtr-gateway key label v1\0";

/// Errors from reading secrets or building a ring. Never carries key material.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("key line {line}: not base64 (standard or url-safe, padded or not)")]
    Base64 { line: usize },
    #[error("key line {line}: a key must be {SECRET_LEN} bytes, got {len}")]
    Length { line: usize, len: usize },
    #[error("key line {line}: a key id must be 1-{MAX_LABEL_LEN} characters of [A-Za-z0-9_.-]")]
    Label { line: usize },
    #[error("a key must be {SECRET_LEN} bytes, got {0}")]
    SecretLength(usize),
    #[error("key id `{0}` must be 1-{MAX_LABEL_LEN} characters of [A-Za-z0-9_.-]")]
    BadLabel(String),
    #[error("deriving the cipher key failed")]
    Derive,
    #[error("the key ring is empty")]
    Empty,
    #[error("the key ring holds {0} keys; at most {MAX_KEYS} are allowed")]
    TooMany(usize),
    #[error("two keys have the same key id {0} (a repeated key or a repeated label)")]
    DuplicateId(String),
}

/// A 4-byte key id, carried in clear in each token.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct KeyId(pub [u8; KEY_ID_LEN]);

/// One operator secret, optionally labelled. Zeroed on drop; never printed.
pub struct KeySecret {
    bytes: Zeroizing<[u8; SECRET_LEN]>,
    label: Option<String>,
}

/// A derived cipher and its id.
struct RingKey {
    id: KeyId,
    cipher: XChaCha20Poly1305,
    /// The same secret under the session-id label ([`super::session_id`]): a token sealed for
    /// one purpose never opens for the other.
    session: XChaCha20Poly1305,
    /// The same secret under the replica-forwarding label ([`super::replica_auth`]).
    forward: Zeroizing<[u8; SECRET_LEN]>,
}

/// The derived keys: the first seals, all open. Never empty, by construction.
pub struct KeyRing {
    sealing: RingKey,
    older: Vec<RingKey>,
}

/// Parses a key file: one base64 secret per line, optionally `id:` before it; `#` comments and
/// blank lines are ignored. Errors name the line, never its content.
pub fn parse_key_lines(text: &str) -> Result<Vec<KeySecret>, KeyError> {
    let mut secrets = Vec::new();
    for (index, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        secrets.push(parse_key_line(line, index + 1)?);
        if secrets.len() > MAX_KEYS {
            return Err(KeyError::TooMany(secrets.len()));
        }
    }
    Ok(secrets)
}

fn parse_key_line(line: &str, number: usize) -> Result<KeySecret, KeyError> {
    // Base64 never contains ':', so the first ':' separates a label.
    let (label, encoded) = match line.split_once(':') {
        Some((label, encoded)) => (Some(label.trim()), encoded.trim()),
        None => (None, line),
    };
    if let Some(label) = label {
        if !valid_label(label) {
            return Err(KeyError::Label { line: number });
        }
    }
    let bytes = decode_secret(encoded).ok_or(KeyError::Base64 { line: number })?;
    if bytes.len() != SECRET_LEN {
        return Err(KeyError::Length { line: number, len: bytes.len() });
    }
    KeySecret::from_slice(&bytes, label.map(str::to_owned))
}

fn decode_secret(encoded: &str) -> Option<Zeroizing<Vec<u8>>> {
    let engine = match (encoded.contains(['-', '_']), encoded.ends_with('=')) {
        (true, true) => &URL_SAFE,
        (true, false) => &URL_SAFE_NO_PAD,
        (false, true) => &STANDARD,
        (false, false) => &STANDARD_NO_PAD,
    };
    engine.decode(encoded).ok().map(Zeroizing::new)
}

/// True for 1-64 characters of `[A-Za-z0-9_.-]`.
pub(crate) fn valid_label(label: &str) -> bool {
    (1..=MAX_LABEL_LEN).contains(&label.len())
        && label.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

// === impl KeySecret ===

impl KeySecret {
    /// Wraps 32 secret bytes; the label, if any, names the key id.
    pub fn new(bytes: [u8; SECRET_LEN], label: Option<String>) -> Result<Self, KeyError> {
        if let Some(label) = &label {
            if !valid_label(label) {
                return Err(KeyError::BadLabel(label.clone()));
            }
        }
        Ok(Self { bytes: Zeroizing::new(bytes), label })
    }

    /// Copies a 32-byte slice into a secret.
    pub fn from_slice(bytes: &[u8], label: Option<String>) -> Result<Self, KeyError> {
        let mut array = Zeroizing::new([0u8; SECRET_LEN]);
        if bytes.len() != SECRET_LEN {
            return Err(KeyError::SecretLength(bytes.len()));
        }
        array.copy_from_slice(bytes);
        Self::new(*array, label)
    }

    /// A fresh random secret.
    pub fn random() -> Self {
        let mut bytes = Zeroizing::new([0u8; SECRET_LEN]);
        rand::rngs::OsRng.fill_bytes(bytes.as_mut());
        Self { bytes, label: None }
    }

    /// The operator's label, if any.
    pub fn label(&self) -> Option<&str> {
        self.label.as_deref()
    }

    fn derive(&self) -> Result<RingKey, KeyError> {
        let hkdf = Hkdf::<Sha256>::new(Some(HKDF_SALT), self.bytes.as_ref());
        let mut okm = Zeroizing::new([0u8; 32]);
        // HKDF-SHA256 fails only past 8160 output bytes; 32 and 4 are far below.
        hkdf.expand(AEAD_INFO, okm.as_mut()).map_err(|_| KeyError::Derive)?;
        let id = match &self.label {
            Some(label) => label_id(label),
            None => {
                let mut id = [0u8; KEY_ID_LEN];
                hkdf.expand(KEY_ID_INFO, &mut id).map_err(|_| KeyError::Derive)?;
                KeyId(id)
            }
        };
        let cipher = XChaCha20Poly1305::new_from_slice(okm.as_ref()).map_err(|_| KeyError::Derive)?;
        hkdf.expand(SESSION_AEAD_INFO, okm.as_mut()).map_err(|_| KeyError::Derive)?;
        let session = XChaCha20Poly1305::new_from_slice(okm.as_ref()).map_err(|_| KeyError::Derive)?;
        let mut forward = Zeroizing::new([0u8; SECRET_LEN]);
        hkdf.expand(FORWARD_MAC_INFO, forward.as_mut()).map_err(|_| KeyError::Derive)?;
        Ok(RingKey { id, cipher, session, forward })
    }
}

fn label_id(label: &str) -> KeyId {
    let hash = Sha256::new().chain_update(LABEL_ID_DOMAIN).chain_update(label.as_bytes()).finalize();
    let mut id = [0u8; KEY_ID_LEN];
    id.copy_from_slice(&hash[..KEY_ID_LEN]);
    KeyId(id)
}

impl fmt::Debug for KeySecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KeySecret").field("label", &self.label).field("bytes", &"<redacted>").finish()
    }
}

// === impl KeyRing ===

impl KeyRing {
    /// Derives every key once. The first secret seals; duplicate ids are refused because a
    /// token could then open under the wrong key.
    pub fn new(secrets: Vec<KeySecret>) -> Result<Self, KeyError> {
        if secrets.len() > MAX_KEYS {
            return Err(KeyError::TooMany(secrets.len()));
        }
        let mut secrets = secrets.iter();
        let sealing = secrets.next().ok_or(KeyError::Empty)?.derive()?;
        let mut ring = Self { sealing, older: Vec::with_capacity(secrets.len()) };
        for secret in secrets {
            let key = secret.derive()?;
            if ring.ids().any(|id| id == key.id) {
                return Err(KeyError::DuplicateId(key.id.to_string()));
            }
            ring.older.push(key);
        }
        Ok(ring)
    }

    /// A ring of one random key. Tokens it seals open nowhere else and not after a restart;
    /// the caller must warn the operator.
    pub fn ephemeral() -> Result<Self, KeyError> {
        Self::new(vec![KeySecret::random()])
    }

    /// The ids of the ring, sealing key first (for start-up logs).
    pub fn ids(&self) -> impl Iterator<Item = KeyId> + '_ {
        self.keys().map(|k| k.id)
    }

    fn keys(&self) -> impl Iterator<Item = &RingKey> + '_ {
        std::iter::once(&self.sealing).chain(&self.older)
    }

    pub(crate) fn sealing(&self) -> (KeyId, &XChaCha20Poly1305) {
        (self.sealing.id, &self.sealing.cipher)
    }

    pub(crate) fn opening(&self, id: KeyId) -> Option<&XChaCha20Poly1305> {
        self.keys().find(|k| k.id == id).map(|k| &k.cipher)
    }

    /// The id of the key that seals.
    pub fn sealing_id(&self) -> KeyId {
        self.sealing.id
    }

    /// True when a key of this ring has id `id`.
    pub fn contains(&self, id: KeyId) -> bool {
        self.keys().any(|k| k.id == id)
    }

    /// How many keys the ring holds.
    pub fn len(&self) -> usize {
        1 + self.older.len()
    }

    /// A ring is never empty; for clippy's `len_without_is_empty`.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The session-id cipher of the sealing key.
    pub(crate) fn session_sealing(&self) -> (KeyId, &XChaCha20Poly1305) {
        (self.sealing.id, &self.sealing.session)
    }

    /// The replica-forwarding MAC key of the sealing key.
    pub(crate) fn forward_sealing(&self) -> (KeyId, &[u8; SECRET_LEN]) {
        (self.sealing.id, &self.sealing.forward)
    }

    /// The replica-forwarding MAC key of key `id`.
    pub(crate) fn forward_opening(&self, id: KeyId) -> Option<&[u8; SECRET_LEN]> {
        self.keys().find(|k| k.id == id).map(|k| &*k.forward)
    }

    /// The session-id cipher of key `id`.
    pub(crate) fn session_opening(&self, id: KeyId) -> Option<&XChaCha20Poly1305> {
        self.keys().find(|k| k.id == id).map(|k| &k.session)
    }
}

impl fmt::Debug for KeyRing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.ids()).finish()
    }
}

/// The ring in use, replaced whole on rotation while requests run.
///
/// A read-write lock around an `Arc`: a request takes a clone of the `Arc` once (a read lock
/// held for one reference-count increment) and uses that ring to its end; a reload derives the
/// new ring outside the lock and holds the write lock only to swap the pointer.
pub struct LiveRing(RwLock<Arc<KeyRing>>);

// === impl LiveRing ===

impl LiveRing {
    pub fn new(ring: KeyRing) -> Self {
        Self(RwLock::new(Arc::new(ring)))
    }

    /// The ring new requests use.
    pub fn current(&self) -> Arc<KeyRing> {
        self.0.read().clone()
    }

    /// Makes `ring` the one new requests use; requests that already hold the old one keep it.
    pub fn replace(&self, ring: KeyRing) {
        let ring = Arc::new(ring);
        let old = std::mem::replace(&mut *self.0.write(), ring);
        // The old ring's keys are dropped here, outside the lock, or by the last request holding it.
        drop(old);
    }
}

impl fmt::Debug for LiveRing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("LiveRing").field(&*self.current()).finish()
    }
}

// === impl KeyId ===

impl fmt::Display for KeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.iter().try_for_each(|b| write!(f, "{b:02x}"))
    }
}

impl fmt::Debug for KeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "KeyId({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b64(bytes: &[u8]) -> String {
        STANDARD.encode(bytes)
    }

    #[test]
    fn parses_all_base64_flavours_labels_comments_and_blanks() {
        let key = [0xfbu8; 32];
        let text = format!(
            "# rotation: newest first\n\n{}\nold:{}\n  {}  \n{}\n",
            STANDARD.encode(key),
            URL_SAFE_NO_PAD.encode([1u8; 32]),
            STANDARD_NO_PAD.encode([2u8; 32]),
            URL_SAFE.encode([0xfeu8; 32]),
        );
        let secrets = parse_key_lines(&text).unwrap();
        assert_eq!(secrets.len(), 4);
        assert_eq!(*secrets[0].bytes, key);
        assert_eq!(secrets[1].label(), Some("old"));
        assert_eq!(*secrets[2].bytes, [2u8; 32]);
        assert_eq!(*secrets[3].bytes, [0xfeu8; 32]);
    }

    #[test]
    fn errors_name_the_line_never_the_key() {
        let secret = b64(&[7u8; 16]);
        let text = format!("# c\n{}\n{secret}\n", b64(&[1u8; 32]));
        let err = parse_key_lines(&text).unwrap_err();
        assert!(matches!(err, KeyError::Length { line: 3, len: 16 }));
        assert!(!err.to_string().contains(&secret));

        let err = parse_key_lines("\n\nnot*base64\n").unwrap_err();
        assert!(matches!(err, KeyError::Base64 { line: 3 }));
        let err = parse_key_lines(&format!("bad label:{}", b64(&[1u8; 32]))).unwrap_err();
        assert!(matches!(err, KeyError::Label { line: 1 }));
    }

    #[test]
    fn debug_is_redacted() {
        let secret = KeySecret::new([0xab; 32], Some("k1".into())).unwrap();
        let text = format!("{secret:?}");
        assert!(text.contains("redacted") && text.contains("k1"));
        assert!(!text.contains("ab, ") && !text.contains("171"));
    }

    #[test]
    fn ids_come_from_labels_or_derivation_and_must_differ() {
        let ring = KeyRing::new(vec![
            KeySecret::new([1; 32], None).unwrap(),
            KeySecret::new([1; 32], Some("a".into())).unwrap(),
        ])
        .unwrap();
        let ids: Vec<KeyId> = ring.ids().collect();
        assert_eq!(ids[1], label_id("a"));
        assert_ne!(ids[0].0, [1u8; 4], "the id must not be the key's bytes");

        let dup = KeyRing::new(vec![
            KeySecret::new([3; 32], None).unwrap(),
            KeySecret::new([3; 32], None).unwrap(),
        ]);
        assert!(matches!(dup, Err(KeyError::DuplicateId(_))));
        let dup = KeyRing::new(vec![
            KeySecret::new([3; 32], Some("x".into())).unwrap(),
            KeySecret::new([4; 32], Some("x".into())).unwrap(),
        ]);
        assert!(matches!(dup, Err(KeyError::DuplicateId(_))));
    }

    #[test]
    fn empty_and_oversized_rings_are_refused() {
        assert!(matches!(KeyRing::new(Vec::new()), Err(KeyError::Empty)));
        let many = (0..=MAX_KEYS as u8).map(|i| KeySecret::new([i; 32], None).unwrap()).collect();
        assert!(matches!(KeyRing::new(many), Err(KeyError::TooMany(_))));
        assert!(KeySecret::from_slice(&[0; 31], None).is_err());
        assert!(KeySecret::new([0; 32], Some(String::new())).is_err());
    }

    #[test]
    fn key_files_hold_at_most_max_keys() {
        let lines = |n: usize| (0..n).map(|i| b64(&[i as u8; 32]) + "\n").collect::<String>();
        assert_eq!(parse_key_lines(&lines(MAX_KEYS)).unwrap().len(), MAX_KEYS);
        let err = parse_key_lines(&lines(MAX_KEYS + 1)).unwrap_err();
        assert!(matches!(err, KeyError::TooMany(n) if n == MAX_KEYS + 1), "{err}");
    }

    #[test]
    fn ids_print_as_hex() {
        let id = KeyId([0xde, 0xad, 0x0b, 0xef]);
        assert_eq!(id.to_string(), "dead0bef");
        assert_eq!(format!("{id:?}"), "KeyId(dead0bef)");
        let ring = KeyRing::new(vec![KeySecret::new([5; 32], Some("k".into())).unwrap()]).unwrap();
        assert_eq!(format!("{ring:?}"), format!("[KeyId({})]", label_id("k")));
        let live = LiveRing::new(ring);
        assert_eq!(format!("{live:?}"), format!("LiveRing([KeyId({})])", label_id("k")), "ids only");
    }

    #[test]
    fn a_live_ring_swaps_whole_and_keeps_what_requests_hold() {
        let secret = |b: u8, l: &str| KeySecret::new([b; 32], Some(l.into())).unwrap();
        let live = LiveRing::new(KeyRing::new(vec![secret(1, "a")]).unwrap());
        let held = live.current();
        live.replace(KeyRing::new(vec![secret(2, "b"), secret(1, "a")]).unwrap());
        assert_eq!(held.ids().collect::<Vec<_>>(), vec![label_id("a")]);
        let now = live.current();
        assert_eq!((now.sealing_id(), now.len()), (label_id("b"), 2));
        assert!(now.contains(label_id("a")) && !held.contains(label_id("b")));
        assert!(!now.is_empty());
    }

    #[test]
    fn ephemeral_rings_differ() {
        let a: Vec<KeyId> = KeyRing::ephemeral().unwrap().ids().collect();
        let b: Vec<KeyId> = KeyRing::ephemeral().unwrap().ids().collect();
        assert_eq!(a.len(), 1);
        assert_ne!(a, b);
    }
}
