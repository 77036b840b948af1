//! Counters that tests and the binary read to see what the demo server went through.
//!
//! Everything is a fixed set of atomics: the per-tool counters are indexed by the closed tool
//! enum, so no client input can make this structure grow. The one text kept, the last
//! cancellation's reason, is cut to [`REASON_BYTES`].

use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use super::catalog::Tool;
use crate::protocol::quote::truncate;

/// The most of a cancellation's reason kept.
const REASON_BYTES: usize = 256;

/// What the demo server has seen since it started. Shared as `Arc<DemoStats>`.
#[derive(Debug, Default)]
pub struct DemoStats {
    initializes: AtomicU64,
    sessions_alive: AtomicU64,
    sessions_evicted: AtomicU64,
    deletes: AtomicU64,
    tool_calls: [AtomicU64; Tool::ALL.len()],
    unknown_tool_calls: AtomicU64,
    cancellations: AtomicU64,
    cancel_reason: Mutex<String>,
    calls_stopped: AtomicU64,
    requests_sent: AtomicU64,
    answers: AtomicU64,
    errors: AtomicU64,
    unmatched_answers: AtomicU64,
    outstanding: AtomicU64,
    subscribes: AtomicU64,
    refused_subscribes: AtomicU64,
    unsubscribes: AtomicU64,
    pings: AtomicU64,
    set_levels: AtomicU64,
    orders: AtomicU64,
    connections: AtomicU64,
    calls_before_get_stream: AtomicU64,
}

fn bump(counter: &AtomicU64) {
    counter.fetch_add(1, Ordering::Relaxed);
}

fn read(counter: &AtomicU64) -> u64 {
    counter.load(Ordering::Relaxed)
}

// === impl DemoStats ===

impl DemoStats {
    /// TCP connections accepted since the server started (a client that reuses its
    /// connections keeps this low).
    pub fn connections(&self) -> u64 {
        read(&self.connections)
    }

    pub(crate) fn connection_accepted(&self) {
        bump(&self.connections);
    }

    /// Calls (`tools/call`, `prompts/get`, `resources/read`) that arrived on a session whose
    /// standalone GET stream had not been answered yet.
    pub fn calls_before_get_stream(&self) -> u64 {
        read(&self.calls_before_get_stream)
    }

    pub(crate) fn call_before_get_stream(&self) {
        bump(&self.calls_before_get_stream);
    }

    /// Orders `place_order` has placed: its side effect, once per run of the tool.
    pub fn orders(&self) -> u64 {
        read(&self.orders)
    }

    /// Places one more order; returns its number (from 1).
    pub(crate) fn place_order(&self) -> u64 {
        self.orders.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// `initialize` requests answered (each created a session).
    pub fn initializes(&self) -> u64 {
        read(&self.initializes)
    }

    /// Sessions currently alive.
    pub fn sessions_alive(&self) -> u64 {
        read(&self.sessions_alive)
    }

    /// Sessions dropped for idleness or to make room.
    pub fn sessions_evicted(&self) -> u64 {
        read(&self.sessions_evicted)
    }

    /// Sessions ended by `DELETE /mcp`.
    pub fn deletes(&self) -> u64 {
        read(&self.deletes)
    }

    /// `resources/subscribe` requests accepted.
    pub fn subscribes(&self) -> u64 {
        read(&self.subscribes)
    }

    /// `resources/unsubscribe` requests that ended a subscription.
    pub fn unsubscribes(&self) -> u64 {
        read(&self.unsubscribes)
    }

    /// `resources/subscribe` requests refused: an unknown or unreadable resource, a session
    /// at its limit, or a server that does not offer subscriptions.
    pub fn refused_subscribes(&self) -> u64 {
        read(&self.refused_subscribes)
    }

    /// `ping` requests answered.
    pub fn pings(&self) -> u64 {
        read(&self.pings)
    }

    pub(crate) fn record_subscribe(&self) {
        bump(&self.subscribes);
    }

    pub(crate) fn record_refused_subscribe(&self) {
        bump(&self.refused_subscribes);
    }

    pub(crate) fn record_ping(&self) {
        bump(&self.pings);
    }

    /// `logging/setLevel` requests answered.
    pub fn set_levels(&self) -> u64 {
        read(&self.set_levels)
    }

    pub(crate) fn record_set_level(&self) {
        bump(&self.set_levels);
    }

    pub(crate) fn record_unsubscribe(&self) {
        bump(&self.unsubscribes);
    }

    /// `tools/call` requests for the tool `name` (known tools only; see
    /// [`unknown_tool_calls`](Self::unknown_tool_calls)).
    pub fn tool_calls(&self, name: &str) -> u64 {
        Tool::parse(name).map_or(0, |tool| read(&self.tool_calls[tool.index()]))
    }

    /// `tools/call` requests naming a tool the server does not have.
    pub fn unknown_tool_calls(&self) -> u64 {
        read(&self.unknown_tool_calls)
    }

    /// `notifications/cancelled` received.
    pub fn cancellations(&self) -> u64 {
        read(&self.cancellations)
    }

    /// The reason the last `notifications/cancelled` gave, cut to [`REASON_BYTES`] ("" before
    /// any, or when it gave none).
    pub fn last_cancel_reason(&self) -> String {
        self.cancel_reason.lock().clone()
    }

    /// Running calls actually stopped by a cancellation.
    pub fn calls_stopped(&self) -> u64 {
        read(&self.calls_stopped)
    }

    /// Server → client requests written to a stream.
    pub fn requests_sent(&self) -> u64 {
        read(&self.requests_sent)
    }

    /// Successful responses the client POSTed back.
    pub fn answers(&self) -> u64 {
        read(&self.answers)
    }

    /// Error responses the client POSTed back.
    pub fn errors(&self) -> u64 {
        read(&self.errors)
    }

    /// Responses POSTed back whose id matched no outstanding request.
    pub fn unmatched_answers(&self) -> u64 {
        read(&self.unmatched_answers)
    }

    /// Server → client requests waiting for an answer right now.
    pub fn outstanding(&self) -> u64 {
        read(&self.outstanding)
    }

    pub(crate) fn record_initialize(&self) {
        bump(&self.initializes);
        bump(&self.sessions_alive);
    }

    pub(crate) fn record_session_end(&self, reason: SessionEnd) {
        self.sessions_alive.fetch_sub(1, Ordering::Relaxed);
        match reason {
            SessionEnd::Deleted => bump(&self.deletes),
            SessionEnd::Evicted => bump(&self.sessions_evicted),
            SessionEnd::Shutdown => {}
        }
    }

    pub(crate) fn record_tool_call(&self, tool: Option<Tool>) {
        match tool {
            Some(tool) => bump(&self.tool_calls[tool.index()]),
            None => bump(&self.unknown_tool_calls),
        }
    }

    pub(crate) fn record_cancellation(&self, stopped: bool, reason: &str) {
        bump(&self.cancellations);
        truncate(reason, REASON_BYTES).clone_into(&mut self.cancel_reason.lock());
        if stopped {
            bump(&self.calls_stopped);
        }
    }

    pub(crate) fn record_request_sent(&self) {
        bump(&self.requests_sent);
    }

    pub(crate) fn record_request_opened(&self) {
        bump(&self.outstanding);
    }

    pub(crate) fn record_request_settled(&self) {
        self.outstanding.fetch_sub(1, Ordering::Relaxed);
    }

    pub(crate) fn record_answer(&self, is_error: bool, matched: bool) {
        bump(if is_error { &self.errors } else { &self.answers });
        if !matched {
            bump(&self.unmatched_answers);
        }
    }
}

/// Why a session ended, for the counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SessionEnd {
    Deleted,
    Evicted,
    Shutdown,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cancellation_keeps_its_reason_cut_on_a_char_boundary() {
        let stats = DemoStats::default();
        assert_eq!(stats.last_cancel_reason(), "");
        stats.record_cancellation(true, "shutting down");
        assert_eq!((stats.cancellations(), stats.calls_stopped()), (1, 1));
        assert_eq!(stats.last_cancel_reason(), "shutting down");
        // 255 ASCII bytes then a two-byte char: the cut falls inside it, so it is left out.
        let long = format!("{}é and more", "a".repeat(REASON_BYTES - 1));
        stats.record_cancellation(false, &long);
        assert_eq!(stats.last_cancel_reason(), "a".repeat(REASON_BYTES - 1));
        assert_eq!((stats.cancellations(), stats.calls_stopped()), (2, 1));
    }
}
