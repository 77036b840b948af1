//! Whether this upstream ends a call's response stream once the call is cancelled, learned
//! from the streams it did or did not end.
//!
//! A replayed round cancels its upstream call. Reading the rest of that call's stream keeps its
//! connection for the next POST, which spares a server a TCP and HTTP setup per round; cutting
//! it closes the connection. Servers differ: the Python SDK answers the cancel and ends the
//! stream at once, while the TypeScript SDK sends nothing for a cancelled request and leaves the
//! stream open, so draining it only holds a connection (and a request slot) for the whole bound.
//! After [`MISSES_BEFORE_CUT`] drains in a row ran out of time, streams are cut at once; one
//! drop in [`REPROBE_EVERY`] is still drained, so an upstream that changes is noticed.

use std::sync::atomic::{AtomicU32, Ordering};

/// Drains in a row that found the stream still open before streams are cut at once.
const MISSES_BEFORE_CUT: u32 = 4;
/// While cutting, one dropped call in this many is drained all the same.
const REPROBE_EVERY: u32 = 64;

/// Shared by every session of one upstream.
#[derive(Debug, Default)]
pub(crate) struct CancelDrain {
    misses: AtomicU32,
    skipped: AtomicU32,
}

// === impl CancelDrain ===

impl CancelDrain {
    /// Whether the stream of a call dropped now should be drained (else cut).
    pub(crate) fn should_drain(&self) -> bool {
        if self.misses.load(Ordering::Relaxed) < MISSES_BEFORE_CUT {
            return true;
        }
        self.skipped.fetch_add(1, Ordering::Relaxed) % REPROBE_EVERY == REPROBE_EVERY - 1
    }

    /// A drain ended: `ended` when the server ended the stream within the bound.
    pub(crate) fn record(&self, ended: bool) {
        if ended {
            self.misses.store(0, Ordering::Relaxed);
        } else {
            let _ = self.misses.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |m| m.checked_add(1));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_drained_until_they_keep_running_out_of_time() {
        let d = CancelDrain::default();
        for _ in 0..MISSES_BEFORE_CUT - 1 {
            assert!(d.should_drain());
            d.record(false);
        }
        d.record(true);
        assert!(d.should_drain(), "one stream that ended resets the count");
        for _ in 0..MISSES_BEFORE_CUT {
            d.record(false);
        }
        let drained = (0..REPROBE_EVERY * 2).filter(|_| d.should_drain()).count();
        assert_eq!(drained, 2, "while cutting, one in {REPROBE_EVERY} is still drained");
        d.record(true);
        assert!(d.should_drain(), "a reprobe that found the stream ended stops the cutting");
    }
}
