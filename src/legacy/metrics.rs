//! The legacy relay's metrics, registered on the gateway's registry: the sessions it holds, the
//! requests it relays, and the ones it refuses by fixed reason.

use prometheus::core::Collector;
use prometheus::{IntCounterVec, IntGauge, Opts};

/// Legacy relay metrics; clones share the series.
#[derive(Debug, Clone)]
pub struct LegacyMetrics {
    /// Legacy sessions this replica relays now.
    pub sessions: IntGauge,
    /// Relayed legacy requests by HTTP method (`initialize` counted on its own).
    pub relayed: IntCounterVec,
    /// Legacy requests refused, by [`super::LegacyError::label`].
    pub refused: IntCounterVec,
    /// The gateway's `share_refusals_total` (registered by [`crate::metrics::Metrics`], not here).
    pub share_refusals: IntCounterVec,
}

// === impl LegacyMetrics ===

impl LegacyMetrics {
    /// The series, registered nowhere yet.
    pub fn detached() -> Result<Self, prometheus::Error> {
        Ok(Self {
            sessions: IntGauge::new("legacy_sessions", "Legacy client sessions relayed by this replica.")?,
            relayed: IntCounterVec::new(
                Opts::new("legacy_relayed_requests_total", "Legacy client requests relayed upstream."),
                &["method"],
            )?,
            refused: IntCounterVec::new(
                Opts::new("legacy_refused_requests_total", "Legacy client requests refused, by reason."),
                &["reason"],
            )?,
            share_refusals: crate::limits::share::detached_counter()?,
        })
    }

    /// Every series to register (`share_refusals` is the gateway's, not among them).
    pub fn collectors(&self) -> Vec<Box<dyn Collector>> {
        vec![Box::new(self.sessions.clone()), Box::new(self.relayed.clone()), Box::new(self.refused.clone())]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_series_of_the_relay_is_registered_and_the_shared_one_is_not() {
        let metrics = LegacyMetrics::detached().expect("series");
        let registry = prometheus::Registry::new();
        for collector in metrics.collectors() {
            registry.register(collector).expect("registers once");
        }
        metrics.relayed.with_label_values(&["post"]).inc();
        metrics.refused.with_label_values(&["bad_session"]).inc();
        metrics.share_refusals.with_label_values(&["legacy_sessions"]).inc();
        let names: Vec<String> = registry.gather().iter().map(|f| f.name().to_owned()).collect();
        assert_eq!(
            names,
            ["legacy_refused_requests_total", "legacy_relayed_requests_total", "legacy_sessions"]
        );
    }
}
