//! How a client's or a server's text is quoted in a message the gateway writes: escaped and
//! bounded, so that no value is echoed or logged unbounded or able to forge a line. Every layer
//! that names a tool, a method or a header value in an error uses this one function; a value
//! kept or recorded as it is (a span attribute, a reason) is bounded by [`truncate`].

/// Characters of a client-sent value (a header, a name) quoted in an error message or a log
/// line; a longer one is cut, with an ellipsis (not configurable).
pub const MAX_QUOTED_CHARS: usize = 64;

/// `text` in double quotes for a message, escaped as a Rust string literal (control
/// characters, quotes and backslashes), cut after [`MAX_QUOTED_CHARS`] characters of
/// the escaped form with an ellipsis: a client's value is never echoed or logged unbounded.
pub fn quoted(text: &str) -> String {
    let mut out = String::with_capacity(MAX_QUOTED_CHARS.min(text.len()) + 8);
    out.push('"');
    let mut room = MAX_QUOTED_CHARS;
    for c in text.chars() {
        let escaped = c.escape_debug();
        if escaped.len() > room {
            out.push('…');
            break;
        }
        room -= escaped.len();
        out.extend(escaped);
    }
    out.push('"');
    out
}

/// At most `max` bytes of `s`, cut at a character boundary.
pub fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}
