//! Arbitrary text as a mirrored header value (`Mcp-Name`, `Mcp-Method`, `Mcp-Param-*`), through
//! the front's decoder of the `=?base64?{Base64(UTF-8)}?=` form.
//!
//! Checks: no panic; text outside the sentinel form decodes to itself; whatever the sentinel
//! form decodes to is exactly what encoding it again gives back (strict, canonical base64: no
//! two header values name the same text); and any text wrapped in the form decodes to itself.

#![no_main]

use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use libfuzzer_sys::fuzz_target;
use mrtr_gateway::front::validate::decode_header_value;

const PREFIX: &str = "=?base64?";
const SUFFIX: &str = "?=";

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let encoded = text.strip_prefix(PREFIX).and_then(|rest| rest.strip_suffix(SUFFIX));
    match (encoded, decode_header_value(text)) {
        (None, decoded) => assert_eq!(decoded.as_deref(), Some(text), "plain text changed"),
        (Some(encoded), Some(decoded)) => {
            assert_eq!(STANDARD.encode(decoded.as_bytes()), encoded, "two encodings of one text");
        }
        (Some(_), None) => {}
    }
    let wrapped = format!("{PREFIX}{}{SUFFIX}", STANDARD.encode(data));
    assert_eq!(decode_header_value(&wrapped).as_deref(), Some(text), "the sentinel form lost text");
});
