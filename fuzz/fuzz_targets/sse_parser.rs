//! Arbitrary bytes as an upstream's `text/event-stream`, fed to the gateway's SSE decoder whole
//! and again in fuzzer-chosen pieces. Layout: the first byte picks the piece length (1-256),
//! the rest is the stream.
//!
//! Checks: no panic; how the stream is cut into network chunks never changes the events it
//! yields or the error it ends with (a CRLF or a BOM split across chunks included); no event's
//! data exceeds the bound; the events of a stream that parsed round-trip through the SSE
//! writer's own grammar (each field on its line, the data lines joined by `\n`).

#![no_main]

use libfuzzer_sys::fuzz_target;
use mrtr_gateway::upstream::sse::{SseError, SseEvent, SseParser};

/// Small, so the line and event bounds are reached by short inputs.
const MAX_EVENT: usize = 256;

/// The events of feeding `stream` in pieces of `piece` bytes, and the error that ended it.
fn parse(stream: &[u8], piece: usize) -> (Vec<SseEvent>, Option<String>) {
    let mut parser = SseParser::new(MAX_EVENT);
    let mut events = Vec::new();
    for chunk in stream.chunks(piece) {
        match parser.feed(chunk) {
            Ok(more) => events.extend(more),
            Err(e) => return (events, Some(kind(&e))),
        }
    }
    (events, None)
}

fn kind(e: &SseError) -> String {
    match e {
        SseError::LineTooLong(_) => "line".to_owned(),
        SseError::EventTooLarge(_) => "event".to_owned(),
        SseError::Utf8 => "utf8".to_owned(),
    }
}

/// Writes `events` back as a stream, one field per line.
fn write(events: &[SseEvent]) -> Vec<u8> {
    let mut out = String::new();
    for e in events {
        if let Some(id) = &e.id {
            out.push_str(&format!("id: {id}\n"));
        }
        if let Some(kind) = &e.event {
            out.push_str(&format!("event: {kind}\n"));
        }
        if let Some(retry) = e.retry {
            out.push_str(&format!("retry: {}\n", retry.as_millis()));
        }
        for line in e.data.split('\n') {
            out.push_str(&format!("data: {line}\n"));
        }
        out.push('\n');
    }
    out.into_bytes()
}

fuzz_target!(|data: &[u8]| {
    let Some((&first, stream)) = data.split_first() else { return };
    let piece = usize::from(first) + 1;
    let (whole, whole_err) = parse(stream, stream.len().max(1));
    let (pieces, pieces_err) = parse(stream, piece);
    let (bytes, bytes_err) = parse(stream, 1);
    assert_eq!(whole_err, pieces_err, "the error depends on the chunking");
    assert_eq!(whole_err, bytes_err, "the error depends on the chunking");
    if whole_err.is_none() {
        assert_eq!(whole, pieces, "the events depend on the chunking");
        assert_eq!(whole, bytes, "the events depend on the chunking");
    }
    for event in whole.iter().chain(&pieces) {
        assert!(event.data.len() <= MAX_EVENT, "an event over the bound: {}", event.data.len());
    }
    // Only events whose fields the writer can express unambiguously (no line breaks in id or
    // type, no leading space the reader would strip) are re-read.
    let plain = |s: &str| !s.contains(['\r', '\n']) && !s.starts_with(' ');
    let writable = |e: &SseEvent| {
        e.id.as_deref().is_none_or(plain)
            && e.event.as_deref().is_none_or(plain)
            && e.data.split('\n').all(|l| !l.contains('\r') && !l.starts_with(' '))
    };
    let events: Vec<SseEvent> = whole.into_iter().filter(writable).collect();
    if whole_err.is_none() && !events.is_empty() {
        let (again, err) = parse(&write(&events), piece);
        if err.is_none() {
            assert_eq!(again, events, "written events read back differently");
        }
    }
});
