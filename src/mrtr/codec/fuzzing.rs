//! Test hook for the fuzz targets: seals arbitrary bytes as the claims of a `requestState`.
//!
//! A fuzzer cannot forge a Poly1305 tag, so random tokens never get past authentication and
//! everything behind it (claims decoding, the version, time and binding checks, the journal)
//! would go unfuzzed. This hook seals bytes the fuzzer chose, with the codec's own sealing key
//! and the exact layout of [`StateCodec::seal_at`], so that [`StateCodec::open_at`] reaches
//! those checks with attacker-shaped claims.
//!
//! It is not part of the production API: the module exists only when the crate is built with
//! the `fuzzing` cargo feature (which the fuzz workspace enables and the gateway binary never
//! does), and it is hidden from the documentation. Sealing unchecked claims is exactly what the
//! gateway itself must never do.

use super::{StateCodec, StateError};

impl StateCodec {
    /// Seals `claims` verbatim (no validation, any bytes) with the ring's sealing key.
    pub fn seal_bytes(&self, claims: &[u8]) -> Result<String, StateError> {
        self.seal_with(|buf| {
            buf.extend_from_slice(claims);
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::{CodecSettings, StateCodec, StateError};
    use crate::mrtr::canonical::arguments_digest;
    use crate::mrtr::claims::Binding;
    use crate::mrtr::journal::Journal;
    use crate::mrtr::keyring::{KeyRing, KeySecret};
    use crate::protocol::methods::MrtrMethod;

    const NOW: u64 = 1_800_000_000;

    fn codec() -> StateCodec {
        let ring = KeyRing::new(vec![KeySecret::new([9; 32], None).unwrap()]).unwrap();
        StateCodec::new(ring, CodecSettings::default())
    }

    #[test]
    fn sealed_bytes_open_like_sealed_claims() {
        let codec = codec();
        let binding = Binding {
            principal: "alice".to_owned(),
            method: MrtrMethod::PromptsGet,
            target: "greet".to_owned(),
            arguments: arguments_digest(None),
        };
        let token = codec.seal_at(&binding, 3, &Journal::new(), NOW).unwrap();
        let claims = codec.open_at(&token, &binding, NOW).unwrap();
        let bytes = serde_json::to_vec(&claims).unwrap();
        let again = codec.open_at(&codec.seal_bytes(&bytes).unwrap(), &binding, NOW).unwrap();
        assert_eq!(serde_json::to_vec(&again).unwrap(), bytes);
        let junk = codec.seal_bytes(b"{} trailing").unwrap();
        assert!(matches!(codec.open_at(&junk, &binding, NOW), Err(StateError::Malformed(_))));
    }
}
