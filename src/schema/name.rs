//! Tool names that travel in the `Mcp-Name` header.
//!
//! A 2026-07-28 client mirrors a `tools/call`'s name into `Mcp-Name`; a name outside the
//! header-safe set (the 2026-07-28 tool-name characters: ASCII letters, digits, `_`, `-`, `.`)
//! must be sent Base64-wrapped (`=?base64?…?=`), which not every client does, and a name that
//! is empty cannot be named at all. The gateway lists such a tool under an encoded name made
//! only of safe characters and maps a call of that name back to the upstream's name.
//!
//! The mapping is a pure function both ways, so any replica maps a call back without having
//! seen the listing: `_.` followed by the name's UTF-8 bytes, where `A-Z a-z 0-9 . -` stand
//! for themselves, `_` is written `__` and every other byte `_HH` (two uppercase hex digits).
//! A name that already reads as an encoded name (`_.foo`) is encoded too (`_.__.foo`), so
//! every call name that decodes was produced by [`encode`]: nothing is ambiguous.

/// What every encoded name starts with.
pub const PREFIX: &str = "_.";

/// Whether `name` can be listed as it is: non-empty, header-safe characters only, and not
/// readable as an encoded name.
pub fn travels(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| plain(b) || b == b'_') && decode(name).is_none()
}

/// The name a 2026-07-28 client sees for the upstream's `name`.
pub fn encode(name: &str) -> String {
    let mut out = String::with_capacity(PREFIX.len() + name.len() * 2);
    out.push_str(PREFIX);
    for b in name.bytes() {
        match b {
            b'_' => out.push_str("__"),
            b if plain(b) => out.push(char::from(b)),
            b => {
                out.push('_');
                out.push(hex(b >> 4));
                out.push(hex(b & 0x0f));
            }
        }
    }
    out
}

/// The upstream's name for a client's `name`, when `name` is an encoded one.
pub fn decode(name: &str) -> Option<String> {
    let rest = name.strip_prefix(PREFIX)?;
    let mut bytes = Vec::with_capacity(rest.len());
    let mut it = rest.bytes();
    while let Some(b) = it.next() {
        match b {
            b'_' => match it.next()? {
                b'_' => bytes.push(b'_'),
                high => bytes.push(unhex(high)? << 4 | unhex(it.next()?)?),
            },
            b if plain(b) => bytes.push(b),
            _ => return None,
        }
    }
    String::from_utf8(bytes).ok()
}

/// Characters that stand for themselves.
fn plain(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'.' || b == b'-'
}

fn hex(nibble: u8) -> char {
    char::from(b"0123456789ABCDEF"[usize::from(nibble & 0x0f)])
}

fn unhex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn safe_names_travel_as_they_are() {
        for name in ["get_weather", "DATA_EXPORT_v2", "admin.tools.list", "a-b", "_private"] {
            assert!(travels(name), "{name}");
        }
        for name in ["", "search files", "get/user", "名前", "a\nb", "_.x", "_.__"] {
            assert!(!travels(name), "{name:?}");
        }
    }

    #[test]
    fn encoded_names_are_readable_and_safe() {
        assert_eq!(encode("search files"), "_.search_20files");
        assert_eq!(encode("a_b/c"), "_.a__b_2Fc");
        assert_eq!(encode("é"), "_._C3_A9");
        assert_eq!(encode(""), "_.");
        assert_eq!(encode("_.x"), "_.__.x");
        for name in ["search files", "a_b/c", "é", "", "_.x"] {
            let encoded = encode(name);
            assert!(encoded.bytes().all(|b| plain(b) || b == b'_'), "{encoded}");
            assert_eq!(decode(&encoded).as_deref(), Some(name));
        }
    }

    #[test]
    fn malformed_encodings_do_not_decode() {
        for name in ["search", "_.a_2", "_.a_zz", "_.a_2f", "_.a b", "_._FF", "x._20"] {
            assert_eq!(decode(name), None, "{name}");
        }
    }

    proptest! {
        #[test]
        fn encoding_round_trips_and_never_collides_with_a_listed_name(name in ".{0,40}") {
            let encoded = encode(&name);
            prop_assert_eq!(decode(&encoded), Some(name.clone()));
            prop_assert!(!travels(&encoded), "an encoded name is always decoded back");
            // A name listed as it is never decodes, so a call of it is never rewritten.
            if travels(&name) {
                prop_assert_eq!(decode(&name), None);
            }
        }
    }
}
