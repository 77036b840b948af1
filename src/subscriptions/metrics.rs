//! The listen bridge's metrics, registered on the gateway's registry: open listen streams and
//! the upstream sessions behind them, notifications delivered by kind, streams ended by reason,
//! and refused listen requests by reason. Every label value is a fixed word.

use prometheus::core::Collector;
use prometheus::{IntCounterVec, IntGauge, Opts};

/// Listen bridge metrics; clones share the series.
#[derive(Debug, Clone)]
pub struct ListenMetrics {
    /// `subscriptions/listen` streams open on this replica.
    pub listeners: IntGauge,
    /// Upstream sessions held for them (one per principal and capability set).
    pub sessions: IntGauge,
    /// Notifications written to listen streams, by method.
    pub delivered: IntCounterVec,
    /// Listen streams ended, by reason (`client_closed`, `shutdown`, `upstream_lost`, `slow_client`).
    pub ended: IntCounterVec,
    /// Listen requests refused, by [`super::ListenError::label`].
    pub refused: IntCounterVec,
}

// === impl ListenMetrics ===

impl ListenMetrics {
    /// The series, registered nowhere yet.
    pub fn detached() -> Result<Self, prometheus::Error> {
        Ok(Self {
            listeners: IntGauge::new("listen_streams", "subscriptions/listen streams open.")?,
            sessions: IntGauge::new(
                "listen_upstream_sessions",
                "Upstream sessions held for subscriptions/listen streams.",
            )?,
            delivered: IntCounterVec::new(
                Opts::new(
                    "listen_notifications_total",
                    "Notifications written to listen streams, by method.",
                ),
                &["method"],
            )?,
            ended: IntCounterVec::new(
                Opts::new("listen_streams_ended_total", "Listen streams ended, by reason."),
                &["reason"],
            )?,
            refused: IntCounterVec::new(
                Opts::new("listen_refused_total", "subscriptions/listen requests refused, by reason."),
                &["reason"],
            )?,
        })
    }

    /// Every series to register.
    pub fn collectors(&self) -> Vec<Box<dyn Collector>> {
        vec![
            Box::new(self.listeners.clone()),
            Box::new(self.sessions.clone()),
            Box::new(self.delivered.clone()),
            Box::new(self.ended.clone()),
            Box::new(self.refused.clone()),
        ]
    }
}
