//! The authenticator's series: refused tokens by reason, key refreshes by outcome, and calls
//! denied by the authorization rules. Labels are fixed strings, never a claim or a key id.

use prometheus::core::Collector;
use prometheus::{IntCounterVec, Opts};

/// Authentication and authorization metrics.
#[derive(Debug, Clone)]
pub struct AuthMetrics {
    /// Refused credentials, by [`super::AuthError::label`].
    pub rejections: IntCounterVec,
    /// Remote key fetches, by outcome (`ok` or the failure's label).
    pub key_fetches: IntCounterVec,
    /// Requests refused by the authorization rules, by method.
    pub denials: IntCounterVec,
}

// === impl AuthMetrics ===

impl AuthMetrics {
    /// The series, registered nowhere yet.
    pub fn detached() -> Result<Self, prometheus::Error> {
        let vec = |name: &str, help: &str, label: &str| IntCounterVec::new(Opts::new(name, help), &[label]);
        Ok(Self {
            rejections: vec("auth_rejections_total", "Client credentials refused, by reason.", "reason")?,
            key_fetches: vec("auth_key_fetches_total", "Remote token-key fetches, by outcome.", "outcome")?,
            denials: vec("auth_denials_total", "Requests refused by the authorization rules.", "method")?,
        })
    }

    /// Every series to register.
    pub fn collectors(&self) -> Vec<Box<dyn Collector>> {
        vec![
            Box::new(self.rejections.clone()),
            Box::new(self.key_fetches.clone()),
            Box::new(self.denials.clone()),
        ]
    }
}
