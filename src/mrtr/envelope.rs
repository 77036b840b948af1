//! The AEAD envelope every value the gateway seals shares (a `requestState`, a legacy client's
//! `Mcp-Session-Id`): one layout, one nonce rule and one associated-data rule, written once so
//! the two cannot drift apart.
//!
//! ```text
//! key id (4) ‖ nonce (24, random) ‖ XChaCha20-Poly1305(plaintext) ‖ tag (16)
//! associated data = domain ‖ key id
//! ```
//!
//! The domain names the purpose (with its format version and a 0x00 terminator), so a value
//! sealed for one purpose never opens as another even under the same key. What the plaintext
//! holds, its size bounds and the text encoding around the envelope belong to each caller.

use chacha20poly1305::aead::AeadInPlace;
use chacha20poly1305::{Tag, XChaCha20Poly1305, XNonce};
use rand::RngCore;

use crate::mrtr::keyring::{KeyId, KEY_ID_LEN};

pub(crate) const NONCE_LEN: usize = 24;
pub(crate) const TAG_LEN: usize = 16;
pub(crate) const HEADER_LEN: usize = KEY_ID_LEN + NONCE_LEN;
/// Longest purpose domain: the associated data lives on the stack.
const MAX_DOMAIN_LEN: usize = 48;

/// Why an envelope did not open or seal; each caller maps it into its own error.
#[derive(Debug, thiserror::Error)]
pub(crate) enum EnvelopeError {
    #[error("too short")]
    TooShort,
    #[error("sealed by unknown key {0}")]
    UnknownKey(KeyId),
    #[error("failed authentication")]
    Integrity,
    #[error("encryption failed")]
    Seal,
}

/// The associated data of an envelope: `domain ‖ key id`.
pub(crate) struct Aad {
    buf: [u8; MAX_DOMAIN_LEN + KEY_ID_LEN],
    len: usize,
}

impl std::ops::Deref for Aad {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

/// The associated data binding `domain` and the key id. Panics on a domain longer than any
/// purpose defines (a programming error, caught by every test that seals).
pub(crate) fn aad(domain: &[u8], id: KeyId) -> Aad {
    assert!(domain.len() <= MAX_DOMAIN_LEN, "envelope domain too long");
    let mut buf = [0u8; MAX_DOMAIN_LEN + KEY_ID_LEN];
    buf[..domain.len()].copy_from_slice(domain);
    buf[domain.len()..domain.len() + KEY_ID_LEN].copy_from_slice(&id.0);
    Aad { buf, len: domain.len() + KEY_ID_LEN }
}

/// A buffer holding the header (`id` and a fresh random nonce) with room for `plain_len` bytes
/// of plaintext and the tag; the caller appends the plaintext, then calls [`seal`].
pub(crate) fn start(id: KeyId, plain_len: usize) -> Vec<u8> {
    let mut nonce = [0u8; NONCE_LEN];
    rand::thread_rng().fill_bytes(&mut nonce);
    let mut buf = Vec::with_capacity(HEADER_LEN + plain_len + TAG_LEN);
    buf.extend_from_slice(&id.0);
    buf.extend_from_slice(&nonce);
    buf
}

/// The envelope's length once `buf` (from [`start`], plaintext appended) is sealed.
pub(crate) fn sealed_len(buf: &[u8]) -> usize {
    buf.len() + TAG_LEN
}

/// Encrypts everything after the header of `buf` (from [`start`]) in place, under `domain`,
/// and appends the tag.
pub(crate) fn seal(
    buf: &mut Vec<u8>,
    cipher: &XChaCha20Poly1305,
    domain: &[u8],
) -> Result<(), EnvelopeError> {
    let (id, nonce) = header(buf).ok_or(EnvelopeError::TooShort)?;
    let tag = cipher
        .encrypt_in_place_detached(&nonce, &aad(domain, id), &mut buf[HEADER_LEN..])
        .map_err(|_| EnvelopeError::Seal)?;
    buf.extend_from_slice(&tag);
    Ok(())
}

/// Authenticates and decrypts `buf` in place under `domain`, with the cipher `cipher_for`
/// gives for the envelope's key id; returns the plaintext.
pub(crate) fn open<'a, 'k>(
    buf: &'a mut [u8],
    domain: &[u8],
    cipher_for: impl FnOnce(KeyId) -> Option<&'k XChaCha20Poly1305>,
) -> Result<&'a [u8], EnvelopeError> {
    if buf.len() < HEADER_LEN + TAG_LEN {
        return Err(EnvelopeError::TooShort);
    }
    let (id, nonce) = header(buf).ok_or(EnvelopeError::TooShort)?;
    let cipher = cipher_for(id).ok_or(EnvelopeError::UnknownKey(id))?;
    let body_len = buf.len() - HEADER_LEN - TAG_LEN;
    let (sealed, tag) = buf[HEADER_LEN..].split_at_mut(body_len);
    cipher
        .decrypt_in_place_detached(&nonce, &aad(domain, id), sealed, Tag::from_slice(tag))
        .map_err(|_| EnvelopeError::Integrity)?;
    Ok(sealed)
}

fn header(buf: &[u8]) -> Option<(KeyId, XNonce)> {
    let header = buf.get(..HEADER_LEN)?;
    let mut id = [0u8; KEY_ID_LEN];
    id.copy_from_slice(&header[..KEY_ID_LEN]);
    Some((KeyId(id), *XNonce::from_slice(&header[KEY_ID_LEN..])))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mrtr::keyring::{KeyRing, KeySecret};

    const DOMAIN: &[u8] = b"mrtr-gateway/test/v1\0";

    fn ring() -> KeyRing {
        KeyRing::new(vec![KeySecret::new([5; 32], None).unwrap()]).unwrap()
    }

    fn sealed(ring: &KeyRing, plain: &[u8]) -> Vec<u8> {
        let (id, cipher) = ring.sealing();
        let mut buf = start(id, plain.len());
        buf.extend_from_slice(plain);
        let len = sealed_len(&buf);
        seal(&mut buf, cipher, DOMAIN).unwrap();
        assert_eq!(buf.len(), len);
        buf
    }

    #[test]
    fn a_sealed_envelope_opens_to_its_plaintext_under_its_domain_only() {
        let ring = ring();
        let mut buf = sealed(&ring, b"hello");
        assert_eq!(open(&mut buf.clone(), DOMAIN, |id| ring.opening(id)).unwrap(), b"hello");
        let other = open(&mut buf, b"mrtr-gateway/test/v2\0", |id| ring.opening(id));
        assert!(matches!(other, Err(EnvelopeError::Integrity)));
    }

    #[test]
    fn every_flipped_bit_and_every_short_buffer_is_refused() {
        let ring = ring();
        let buf = sealed(&ring, b"x");
        for i in 0..buf.len() * 8 {
            let mut flipped = buf.clone();
            flipped[i / 8] ^= 1 << (i % 8);
            assert!(open(&mut flipped, DOMAIN, |id| ring.opening(id)).is_err(), "bit {i}");
        }
        for len in 0..HEADER_LEN + TAG_LEN {
            let mut short = buf[..len.min(buf.len())].to_vec();
            assert!(matches!(open(&mut short, DOMAIN, |id| ring.opening(id)), Err(EnvelopeError::TooShort)));
        }
    }

    #[test]
    fn an_unknown_key_is_named_and_nonces_differ() {
        let ring = ring();
        let mut buf = sealed(&ring, b"x");
        let id = KeyId(buf[..KEY_ID_LEN].try_into().unwrap());
        assert!(matches!(open(&mut buf, DOMAIN, |_| None), Err(EnvelopeError::UnknownKey(k)) if k == id));
        let (a, b) = (sealed(&ring, b"x"), sealed(&ring, b"x"));
        assert_ne!(a[KEY_ID_LEN..HEADER_LEN], b[KEY_ID_LEN..HEADER_LEN]);
    }

    #[test]
    fn the_associated_data_is_the_domain_then_the_key_id() {
        let id = KeyId([1, 2, 3, 4]);
        assert_eq!(&*aad(DOMAIN, id), [DOMAIN, &[1, 2, 3, 4]].concat().as_slice());
    }
}
