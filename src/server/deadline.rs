//! What one connection's deadlines are measured on: when it opened, whether its handshake is
//! over, and how many of its requests are in flight (since when none is). The accept loop's
//! watchdog (`watchdog` in `server.rs`) reads it; three small pieces write it:
//!
//! - [`Watched`], the connection's IO, sees the first bytes the client sends and marks the
//!   handshake over once its protocol is known: the first byte that is not the HTTP/2 preface
//!   (HTTP/1), or the whole preface and the SETTINGS frame that must follow it (HTTP/2). It
//!   never looks at a byte after that.
//! - [`InFlight`], taken when hyper calls the service with a request head, and carried by the
//!   response body ([`Tracked`]) until hyper drops it (sent, or the client went away): a stream
//!   that lasts minutes is a request in flight all along, never idle.
//!
//! Why not hyper's own timers: hyper bounds an HTTP/1 request head (`header_read_timeout`) and
//! pings HTTP/2 peers, but it closes neither a connection that sends nothing (the auto
//! builder's protocol sniff waits for ever), nor an HTTP/2 connection with no stream, nor a TLS
//! handshake with no ClientHello.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use http_body::{Body, Frame, SizeHint};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::Instant;

use crate::defaults::CLOSE_GRACE;

/// The client preface of HTTP/2 (RFC 9113, 3.4).
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// The header of an HTTP/2 frame: 24-bit length, type, flags, stream id.
const FRAME_HEADER: usize = 9;
const SETTINGS: u8 = 0x4;

/// One connection's deadlines.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Deadlines {
    /// From the accept until the handshake is over.
    pub(crate) handshake: Duration,
    /// With no request in flight, once the handshake is over.
    pub(crate) idle: Duration,
}

/// What the watchdog of one connection reads.
#[derive(Debug)]
pub(crate) struct Activity {
    opened: Instant,
    handshaken: AtomicBool,
    in_flight: AtomicUsize,
    /// Since when no request is in flight, in ms after `opened`.
    idle_since_ms: AtomicU64,
}

/// One request in flight on its connection, until dropped.
#[derive(Debug)]
pub(crate) struct InFlight(Arc<Activity>);

/// How far the first bytes of a connection went.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Sniff {
    /// Every byte so far is the HTTP/2 preface's: `0` bytes of it seen.
    Preface(usize),
    /// After the preface, the first frame's header bytes so far.
    Header(Vec<u8>),
    /// The SETTINGS frame's payload bytes still to come.
    Payload(usize),
    /// The protocol is known.
    Done,
}

pin_project_lite::pin_project! {
    /// A connection's IO that marks its handshake over once it saw enough of the first bytes.
    #[derive(Debug)]
    pub(crate) struct Watched<I> {
        #[pin]
        io: I,
        sniff: Sniff,
        activity: Arc<Activity>,
    }
}

pin_project_lite::pin_project! {
    /// A response body that keeps its request in flight until hyper drops it.
    pub(crate) struct Tracked<B> {
        #[pin]
        body: B,
        _in_flight: InFlight,
    }
}

// === impl Activity ===

impl Activity {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self {
            opened: Instant::now(),
            handshaken: AtomicBool::new(false),
            in_flight: AtomicUsize::new(0),
            idle_since_ms: AtomicU64::new(0),
        })
    }

    /// The end of the handshake: from its accept.
    pub(crate) fn handshake_deadline(&self, deadlines: Deadlines) -> Instant {
        self.opened + deadlines.handshake
    }

    /// When the connection is past its deadline if nothing changes; `None` while a request is
    /// in flight. Once it was told to close (`closing`, since when), it has [`CLOSE_GRACE`]
    /// with no request in flight to end.
    pub(crate) fn deadline(&self, deadlines: Deadlines, closing: Option<Instant>) -> Option<Instant> {
        if closing.is_none() && !self.handshaken.load(Ordering::SeqCst) {
            return Some(self.handshake_deadline(deadlines));
        }
        if self.in_flight.load(Ordering::SeqCst) > 0 {
            return None;
        }
        let quiet = self.opened + Duration::from_millis(self.idle_since_ms.load(Ordering::SeqCst));
        Some(match closing {
            Some(at) => quiet.max(at) + CLOSE_GRACE,
            None => quiet + deadlines.idle,
        })
    }

    /// A request came in: the connection is not idle until it ends. A request is also the end
    /// of any handshake.
    pub(crate) fn begin(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        self.handshaken.store(true, Ordering::SeqCst);
        InFlight(self.clone())
    }

    fn handshake_done(&self) {
        if !self.handshaken.load(Ordering::SeqCst) {
            // The idle clock starts now; stored before the flag, which is read first.
            self.mark_idle_now();
            self.handshaken.store(true, Ordering::SeqCst);
        }
    }

    fn mark_idle_now(&self) {
        let ms = u64::try_from(self.opened.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.idle_since_ms.store(ms, Ordering::SeqCst);
    }
}

// === impl InFlight ===

impl Drop for InFlight {
    fn drop(&mut self) {
        // The time first: a watchdog that reads no request in flight reads this time too.
        self.0.mark_idle_now();
        self.0.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

// === impl Sniff ===

impl Sniff {
    /// Takes the next bytes the client sent.
    fn feed(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            match self {
                Self::Preface(seen) => {
                    let want = &H2_PREFACE[*seen..];
                    let n = want.len().min(bytes.len());
                    if bytes[..n] != want[..n] {
                        *self = Self::Done;
                        return;
                    }
                    *seen += n;
                    bytes = &bytes[n..];
                    if *seen == H2_PREFACE.len() {
                        *self = Self::Header(Vec::with_capacity(FRAME_HEADER));
                    }
                }
                Self::Header(header) => {
                    let n = (FRAME_HEADER - header.len()).min(bytes.len());
                    header.extend_from_slice(&bytes[..n]);
                    bytes = &bytes[n..];
                    if header.len() == FRAME_HEADER {
                        let len = usize::from(header[0]) << 16
                            | usize::from(header[1]) << 8
                            | usize::from(header[2]);
                        // Anything but SETTINGS is hyper's to refuse.
                        *self =
                            if header[3] == SETTINGS && len > 0 { Self::Payload(len) } else { Self::Done };
                    }
                }
                Self::Payload(left) => {
                    let n = (*left).min(bytes.len());
                    *left -= n;
                    bytes = &bytes[n..];
                    if *left == 0 {
                        *self = Self::Done;
                    }
                }
                Self::Done => return,
            }
        }
    }
}

// === impl Watched ===

impl<I> Watched<I> {
    pub(crate) fn new(io: I, activity: Arc<Activity>) -> Self {
        Self { io, sniff: Sniff::Preface(0), activity }
    }
}

impl<I: AsyncRead> AsyncRead for Watched<I> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.project();
        if *this.sniff == Sniff::Done {
            return this.io.poll_read(cx, buf);
        }
        let before = buf.filled().len();
        let read = this.io.poll_read(cx, buf);
        this.sniff.feed(&buf.filled()[before..]);
        if *this.sniff == Sniff::Done {
            this.activity.handshake_done();
        }
        read
    }
}

impl<I: AsyncWrite> AsyncWrite for Watched<I> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.project().io.poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.project().io.poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.project().io.poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.project().io.poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}

// === impl Tracked ===

impl<B> Tracked<B> {
    pub(crate) fn new(body: B, in_flight: InFlight) -> Self {
        Self { body, _in_flight: in_flight }
    }
}

impl<B: Body> Body for Tracked<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        self.project().body.poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fed(chunks: &[&[u8]]) -> Sniff {
        let mut sniff = Sniff::Preface(0);
        for chunk in chunks {
            sniff.feed(chunk);
        }
        sniff
    }

    #[test]
    fn http1_is_known_at_its_first_byte() {
        assert_eq!(fed(&[b"G"]), Sniff::Done);
        assert_eq!(fed(&[b"POST /mcp HTTP/1.1\r\n"]), Sniff::Done);
        // A start of the preface that then differs is HTTP/1 too.
        assert_eq!(fed(&[b"PRI * HTTP/1.1"]), Sniff::Done);
    }

    #[test]
    fn http2_is_known_after_the_preface_and_its_settings_frame() {
        let settings = [0, 0, 6, SETTINGS, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 100];
        assert_eq!(fed(&[&H2_PREFACE[..10]]), Sniff::Preface(10));
        assert_eq!(fed(&[H2_PREFACE]), Sniff::Header(Vec::new()));
        assert_eq!(fed(&[H2_PREFACE, &settings[..4]]), Sniff::Header(settings[..4].to_vec()));
        assert_eq!(fed(&[H2_PREFACE, &settings[..11]]), Sniff::Payload(4));
        assert_eq!(fed(&[H2_PREFACE, &settings]), Sniff::Done);
        let whole = [H2_PREFACE, &settings[..], b"more frames"].concat();
        assert_eq!(fed(&[&whole]), Sniff::Done);
        // An empty SETTINGS frame, and a first frame that is not SETTINGS (hyper refuses it).
        assert_eq!(fed(&[H2_PREFACE, &[0, 0, 0, SETTINGS, 0, 0, 0, 0, 0]]), Sniff::Done);
        assert_eq!(fed(&[H2_PREFACE, &[0, 0, 8, 0x6, 0, 0, 0, 0, 0]]), Sniff::Done);
    }

    #[tokio::test(start_paused = true)]
    async fn the_deadline_waits_for_the_handshake_then_for_no_request_in_flight() {
        let deadlines = Deadlines { handshake: Duration::from_secs(10), idle: Duration::from_secs(60) };
        let activity = Activity::new();
        let opened = Instant::now();
        assert_eq!(activity.deadline(deadlines, None), Some(opened + deadlines.handshake));
        tokio::time::advance(Duration::from_secs(2)).await;
        activity.handshake_done();
        let idle = activity.deadline(deadlines, None);
        assert_eq!(idle, Some(opened + Duration::from_secs(2) + deadlines.idle));
        let (first, second) = (activity.begin(), activity.begin());
        tokio::time::advance(Duration::from_secs(600)).await;
        assert_eq!(activity.deadline(deadlines, None), None, "a long request is not idle");
        drop(first);
        assert_eq!(activity.deadline(deadlines, None), None, "one is still in flight");
        tokio::time::advance(Duration::from_secs(1)).await;
        drop(second);
        let since = opened + Duration::from_secs(603);
        assert_eq!(activity.deadline(deadlines, None), Some(since + deadlines.idle));
        // Told to close later than its last request ended: the grace runs from then.
        let closing = since + Duration::from_secs(5);
        assert_eq!(activity.deadline(deadlines, Some(closing)), Some(closing + CLOSE_GRACE));
    }

    #[tokio::test(start_paused = true)]
    async fn a_connection_told_to_close_in_its_handshake_has_the_grace_to_end() {
        let deadlines = Deadlines { handshake: Duration::from_secs(10), idle: Duration::from_secs(60) };
        let activity = Activity::new();
        tokio::time::advance(Duration::from_secs(3)).await;
        let now = Instant::now();
        assert_eq!(activity.deadline(deadlines, Some(now)), Some(now + CLOSE_GRACE));
    }
}
