//! An incremental, sans-IO parser for `text/event-stream` (the WHATWG "server-sent events"
//! grammar), as legacy Streamable HTTP servers use it for POST responses and the GET stream.
//!
//! Byte chunks go in as they arrive from the network, whole events come out. Lines may end in
//! CRLF, LF or a lone CR, and a CRLF may be split across two chunks. Comments (`:`) are skipped.
//! An event is emitted for every blank line that follows at least one field, so that a 2025-11-25
//! "priming" event (an `id` with empty `data`) still reports its id and `retry` to the caller, who
//! needs them to resume the stream. Line and event sizes are bounded: a hostile or broken upstream
//! cannot make the gateway buffer without limit.

use std::borrow::Cow;
use std::time::Duration;

/// Largest line buffer kept between lines.
const KEPT_LINE_CAPACITY: usize = 16 * 1024;

/// Why a stream could not be parsed.
#[derive(Debug, thiserror::Error)]
pub enum SseError {
    #[error("SSE line longer than {0} bytes")]
    LineTooLong(usize),
    #[error("SSE event larger than {0} bytes")]
    EventTooLarge(usize),
    #[error("SSE stream is not valid UTF-8")]
    Utf8,
}

/// One dispatched event. `data` lines are joined with `\n`; it is empty for a priming event.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SseEvent {
    /// The `id` field of this event, if it carried one.
    pub id: Option<String>,
    /// The `event` field (`None` means the default type, `message`). An explicit `message`,
    /// which nearly every server writes, is borrowed, not allocated per event.
    pub event: Option<Cow<'static, str>>,
    /// The joined `data` lines.
    pub data: String,
    /// A reconnection delay the server asked for in this event.
    pub retry: Option<Duration>,
}

/// The parser state: the unfinished line and the unfinished event.
#[derive(Debug)]
pub struct SseParser {
    line: Vec<u8>,
    event: SseEvent,
    has_field: bool,
    has_data: bool,
    skip_lf: bool,
    at_start: bool,
    max_line: usize,
    max_event: usize,
}

// === impl SseParser ===

impl SseParser {
    /// A parser whose events (all data lines together) may not exceed `max_event` bytes.
    /// A single line is bounded by the same figure plus room for its field name.
    pub fn new(max_event: usize) -> Self {
        Self {
            line: Vec::new(),
            event: SseEvent::default(),
            has_field: false,
            has_data: false,
            skip_lf: false,
            at_start: true,
            max_line: max_event.saturating_add(64),
            max_event,
        }
    }

    /// Feeds one chunk and returns the events it completed, in order.
    pub fn feed(&mut self, chunk: &[u8]) -> Result<Vec<SseEvent>, SseError> {
        let mut out = Vec::new();
        self.feed_into(chunk, &mut out)?;
        Ok(out)
    }

    /// Feeds one chunk and adds the events it completed to `out`, in order; those completed
    /// before an error are added too. A line whole in the chunk is parsed where it lies: only
    /// a line split across chunks is copied (a run at a time) into the line buffer, which
    /// keeps its capacity between lines. This runs on every upstream response.
    pub fn feed_into(&mut self, mut chunk: &[u8], out: &mut impl Extend<SseEvent>) -> Result<(), SseError> {
        while let Some((&first, rest)) = chunk.split_first() {
            if std::mem::take(&mut self.skip_lf) && first == b'\n' {
                chunk = rest;
                continue;
            }
            let Some(end) = memchr::memchr2(b'\r', b'\n', chunk) else {
                return self.append(chunk);
            };
            self.skip_lf = chunk[end] == b'\r';
            if self.line.is_empty() {
                self.check_line(end)?;
                self.parse_line(&chunk[..end], out)?;
            } else {
                self.append(&chunk[..end])?;
                self.end_line(out)?;
            }
            chunk = &chunk[end + 1..];
        }
        Ok(())
    }

    fn check_line(&self, len: usize) -> Result<(), SseError> {
        if len > self.max_line {
            return Err(SseError::LineTooLong(self.max_line));
        }
        Ok(())
    }

    fn append(&mut self, bytes: &[u8]) -> Result<(), SseError> {
        self.check_line(self.line.len() + bytes.len())?;
        self.line.extend_from_slice(bytes);
        Ok(())
    }

    fn end_line(&mut self, out: &mut impl Extend<SseEvent>) -> Result<(), SseError> {
        let mut line = std::mem::take(&mut self.line);
        let result = self.parse_line(&line, out);
        // Keep an ordinary line's buffer for the next line, but not a huge one's: a long-lived
        // GET stream should not pin the largest event it ever saw.
        if line.capacity() <= KEPT_LINE_CAPACITY {
            line.clear();
            self.line = line;
        }
        result
    }

    fn parse_line(&mut self, mut line: &[u8], out: &mut impl Extend<SseEvent>) -> Result<(), SseError> {
        if std::mem::take(&mut self.at_start) {
            line = line.strip_prefix("\u{feff}".as_bytes()).unwrap_or(line);
        }
        if line.is_empty() {
            self.dispatch(out);
            return Ok(());
        }
        // Split by bytes (a field name is ASCII), and check as UTF-8 only the value of a field
        // that is kept.
        let (name, value) = match memchr::memchr(b':', line) {
            Some(0) => return Ok(()),
            Some(colon) => {
                (&line[..colon], line[colon + 1..].strip_prefix(b" ").unwrap_or(&line[colon + 1..]))
            }
            None => (line, &[][..]),
        };
        self.field(name, value)
    }

    fn field(&mut self, name: &[u8], value: &[u8]) -> Result<(), SseError> {
        let text = || std::str::from_utf8(value).map_err(|_| SseError::Utf8);
        match name {
            b"data" => self.push_data(text()?)?,
            b"event" if value == b"message" => self.event.event = Some(Cow::Borrowed("message")),
            b"event" => self.event.event = Some(Cow::Owned(text()?.to_owned())),
            // An id containing NUL is ignored (WHATWG), so it never reaches a header.
            b"id" if !value.contains(&0) => self.event.id = Some(text()?.to_owned()),
            b"retry" if !value.is_empty() && value.iter().all(u8::is_ascii_digit) => {
                let millis = text()?.parse::<u64>().unwrap_or(u64::MAX);
                self.event.retry = Some(Duration::from_millis(millis));
            }
            _ => return Ok(()),
        }
        self.has_field = true;
        Ok(())
    }

    fn push_data(&mut self, value: &str) -> Result<(), SseError> {
        let extra = value.len() + usize::from(self.has_data);
        if self.event.data.len() + extra > self.max_event {
            return Err(SseError::EventTooLarge(self.max_event));
        }
        if self.has_data {
            self.event.data.push('\n');
        }
        self.event.data.push_str(value);
        self.has_data = true;
        Ok(())
    }

    fn dispatch(&mut self, out: &mut impl Extend<SseEvent>) {
        if std::mem::take(&mut self.has_field) {
            out.extend(Some(std::mem::take(&mut self.event)));
        }
        self.event = SseEvent::default();
        self.has_data = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed_all(parser: &mut SseParser, chunks: &[&[u8]]) -> Vec<SseEvent> {
        chunks.iter().flat_map(|c| parser.feed(c).unwrap()).collect()
    }

    #[test]
    fn an_ordinary_split_lines_buffer_is_kept_and_a_huge_ones_is_freed() {
        let mut p = SseParser::new(1 << 20);
        for (len, kept) in [(8 * 1024, true), (64 * 1024, false)] {
            let line = format!("data: {}", "x".repeat(len));
            // Split, so that the line goes through the line buffer.
            let (head, tail) = line.as_bytes().split_at(10);
            feed_all(&mut p, &[head, tail, b"\n"]);
            assert_eq!(p.line.capacity() >= len, kept, "a line of {len} bytes");
            assert!(p.line.is_empty());
        }
    }

    #[test]
    fn event_split_across_every_byte_boundary() {
        let stream = b"event: message\nid: 7\ndata: {\"a\":1}\n\n";
        for cut in 0..stream.len() {
            let mut p = SseParser::new(1024);
            let events = feed_all(&mut p, &[&stream[..cut], &stream[cut..]]);
            assert_eq!(events.len(), 1, "cut at {cut}");
            assert_eq!(events[0].data, "{\"a\":1}");
            assert_eq!(events[0].id.as_deref(), Some("7"));
            assert_eq!(events[0].event.as_deref(), Some("message"));
        }
    }

    #[test]
    fn crlf_cr_and_lf_line_endings() {
        let mut p = SseParser::new(1024);
        let events = feed_all(&mut p, &[b"data: a\r", b"\ndata: b\r\r\ndata: c\n\n"]);
        let data: Vec<_> = events.iter().map(|e| e.data.as_str()).collect();
        assert_eq!(data, ["a\nb", "c"]);
    }

    #[test]
    fn multi_line_data_is_joined_with_newlines() {
        let mut p = SseParser::new(1024);
        let events = p.feed(b"data: one\ndata:two\ndata\ndata:  three\n\n").unwrap();
        assert_eq!(events[0].data, "one\ntwo\n\n three");
    }

    #[test]
    fn priming_event_reports_id_and_retry_with_empty_data() {
        let mut p = SseParser::new(1024);
        let events = p.feed(b"id: ev-1\nretry: 1500\ndata:\n\n").unwrap();
        assert_eq!(
            events,
            [SseEvent {
                id: Some("ev-1".into()),
                event: None,
                data: String::new(),
                retry: Some(Duration::from_millis(1500)),
            }]
        );
    }

    #[test]
    fn comments_blank_lines_and_unknown_fields_emit_nothing() {
        let mut p = SseParser::new(1024);
        assert!(p.feed(b": keep-alive\n\n\nfoo: bar\n\n").unwrap().is_empty());
        assert!(p.feed(b"retry: 12x\n\n").unwrap().is_empty());
    }

    #[test]
    fn bom_at_stream_start_is_skipped() {
        let mut p = SseParser::new(1024);
        let events = p.feed("\u{feff}data: x\n\n".as_bytes()).unwrap();
        assert_eq!(events[0].data, "x");
    }

    #[test]
    fn oversized_event_and_line_are_refused() {
        let mut p = SseParser::new(8);
        assert!(matches!(p.feed(b"data: 12345\ndata: 6789\n"), Err(SseError::EventTooLarge(8))));
        let mut p = SseParser::new(8);
        let long = vec![b'x'; 200];
        assert!(matches!(p.feed(&long), Err(SseError::LineTooLong(_))));
    }

    #[test]
    fn an_event_of_exactly_the_bound_is_kept() {
        // 4 bytes, the newline that joins the lines, 3 bytes: 8 in all.
        let mut p = SseParser::new(8);
        let events = p.feed(b"data: 1234\ndata: 567\n\n").unwrap();
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].data, "1234\n567");
        let mut p = SseParser::new(8);
        assert!(matches!(p.feed(b"data: 1234\ndata: 5678\n\n"), Err(SseError::EventTooLarge(8))));
    }

    #[test]
    fn a_line_of_exactly_the_bound_is_kept_whole_or_split() {
        // An event bound of 8 bytes allows lines of 72 (the field name and some slack).
        let at_bound = [vec![b':'; 72], b"\ndata: x\n\n".to_vec()].concat();
        for cut in [0, 40] {
            let mut p = SseParser::new(8);
            let events = feed_all(&mut p, &[&at_bound[..cut], &at_bound[cut..]]);
            assert_eq!(events.len(), 1, "cut at {cut}");
        }
        let over = [vec![b':'; 73], b"\n".to_vec()].concat();
        assert!(matches!(SseParser::new(8).feed(&over), Err(SseError::LineTooLong(72))));
    }

    #[test]
    fn an_id_holding_nul_is_ignored() {
        let mut p = SseParser::new(64);
        let events = p.feed(b"id: 7\nid: a\0b\ndata: x\n\n").unwrap();
        assert_eq!(events[0].id.as_deref(), Some("7"), "the id before it stands");
    }

    #[test]
    fn events_before_an_error_are_kept_and_split_lines_parse_as_whole_ones() {
        let stream = b"event: message\ndata: a\n\nevent: other\ndata: b\n\ndata: \xff\n";
        let mut p = SseParser::new(64);
        let mut out = Vec::new();
        assert!(matches!(p.feed_into(stream, &mut out), Err(SseError::Utf8)));
        let got: Vec<_> = out.iter().map(|e| (e.event.as_deref(), e.data.as_str())).collect();
        assert_eq!(got, [(Some("message"), "a"), (Some("other"), "b")]);
        // The same events, fed a byte at a time (every line through the line buffer).
        let mut p = SseParser::new(64);
        let mut bytewise = Vec::new();
        for byte in &stream[..stream.len() - b"data: \xff\n".len()] {
            p.feed_into(std::slice::from_ref(byte), &mut bytewise).unwrap();
        }
        assert_eq!(bytewise, out);
    }

    #[test]
    fn invalid_utf8_is_an_error() {
        for line in [&b"data: \xff\n"[..], b"event: \xff\n", b"id: \xff\n"] {
            let mut p = SseParser::new(64);
            assert!(matches!(p.feed(line), Err(SseError::Utf8)), "{line:?}");
        }
        // What is skipped is never read as text: a comment, or an unknown field.
        let mut p = SseParser::new(64);
        assert!(p.feed(b": \xff\n\xff: x\nfoo: \xff\n\n").unwrap().is_empty());
    }
}
