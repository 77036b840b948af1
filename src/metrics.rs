//! Prometheus metrics of the gateway, registered on a registry the caller owns (no global
//! registry, so tests and several gateways in one process stay independent).
//!
//! Every label value comes from a fixed set (method names the front accepts, error labels, state
//! rejection reasons, capability names), except the tool label of replay divergences, which is
//! bounded by [`MAX_DIVERGENCE_TOOLS`] distinct values before folding into `"other"`, and the
//! key id of the per-key state counts, which names only keys of the configured ring (at most
//! [`crate::mrtr::keyring::MAX_KEYS`] at a time; the hex id, never key material). The `tool_*`
//! series of the migration report ([`ToolSeries`]) carry only the tool names that report gives
//! an entry of its own (at most [`crate::defaults::TOOL_REPORT_MAX_TOOLS`], then `(other)`).

use std::cell::RefCell;
use std::collections::HashSet;
use std::sync::Arc;

use parking_lot::Mutex;
use prometheus::core::Collector;
use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, Opts, Registry, TextEncoder,
};

use crate::defaults::{LATENCY_BUCKETS, MAX_DIVERGENCE_TOOLS, QUESTION_BUCKETS, ROUND_BUCKETS};
use crate::limits::share;
use crate::mrtr::KeyId;
use crate::outbound::OutboundMetrics;
use crate::tool_report::{SchemaSeries, ToolSeries};
use crate::upstream::PoolMetrics;

/// The prefix of every series name.
pub const PREFIX: &str = "mrtr_gateway";

/// Errors from registering metrics.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    #[error("registering metric: {0}")]
    Register(#[from] prometheus::Error),
}

/// One series as registered: its full name and its label names. [`Metrics::series`] lists them
/// all, so the metrics reference (`docs/src/operations.md`) is checked against what the gateway
/// registers rather than against a copy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Series {
    pub name: String,
    pub labels: Vec<String>,
}

/// A registry that also records the series registered on it.
struct Registrar {
    registry: Registry,
    series: RefCell<Vec<Series>>,
}

/// All gateway metrics.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    /// Every series registered, in registration order.
    series: Vec<Series>,
    /// Front requests by method and outcome (`complete`, `input_required` or an error label).
    pub requests: IntCounterVec,
    /// Questions surfaced to clients in `input_required` results, by kind.
    pub input_required: IntCounterVec,
    /// Refused `requestState` tokens by exact reason.
    pub state_rejections: IntCounterVec,
    /// Legacy requests refused because the client did not declare the capability.
    pub capability_denials: IntCounterVec,
    /// Failed front requests caused by the upstream, by [`crate::upstream::UpstreamError::label`].
    pub upstream_errors: IntCounterVec,
    /// Upstream request duration by method, observed when the upstream's response arrives.
    pub upstream_duration: HistogramVec,
    /// Front request duration by method.
    pub front_duration: HistogramVec,
    /// Upstream sessions in the pool.
    pub pool_sessions: IntGauge,
    /// The pool's own: upstream connections, queued calls, overload rejections.
    pub pool: PoolMetrics,
    /// Replayed calls that asked something their journal did not hold where it held an answer.
    pub replay_divergences: IntCounterVec,
    divergence_tools: Mutex<HashSet<String>>,
    /// The legacy relay's: sessions, relayed and refused requests.
    pub legacy: crate::legacy::LegacyMetrics,
    /// Client authentication and authorization: refusals, key fetches, denials.
    pub auth: crate::auth::AuthMetrics,
    /// Requests refused by a rate limit, by limit (`principal` or `tool:<configured name>`).
    pub rate_limited: IntCounterVec,
    /// Failed state-store commands, by command (`consume`, `ping`, `task_put`, `task_get`) and
    /// failure.
    pub state_store_errors: IntCounterVec,
    /// 1 while the single-use state store answers its pings.
    pub state_store_up: IntGauge,
    /// `requestState` tokens sealed, by the id of the key that sealed them.
    pub state_seals: IntCounterVec,
    /// `requestState` tokens opened, by key id (`unknown` when the token names no key of the
    /// ring) and result (`ok` or the rejection reason).
    pub state_opens: IntCounterVec,
    /// Reloads of the state key file, by result (`applied`, `unchanged`, `refused`).
    pub key_reloads: IntCounterVec,
    /// Keys in the state key ring in use.
    pub state_keys: IntGauge,
    /// The per-tool migration report of this replica, which feeds the `tool_*` series.
    pub tools: Arc<crate::tool_report::ToolReport>,
    /// The `subscriptions/listen` bridge's: open streams, their upstream sessions, deliveries.
    pub subscriptions: crate::subscriptions::ListenMetrics,
    /// The task bridge's: tasks by outcome, tasks held.
    pub tasks: crate::tasks::TaskMetrics,
    /// The connections of the outbound clients other than the upstream's (JWKS, OTLP, forward).
    pub outbound: OutboundMetrics,
    /// Upstream calls parked on this replica, waiting for their retry.
    pub parked_calls: IntGauge,
    /// What became of rounds that park mode concerns, by a fixed outcome label
    /// ([`crate::bridge::ParkOutcome`]).
    pub park_outcomes: IntCounterVec,
    /// Requests refused (or calls not parked) because their principal held its share of a
    /// bound every client shares, by [`crate::limits::share`]. The legacy relay and the pool count through
    /// their own clones of it.
    pub share_refusals: IntCounterVec,
}

// === impl Metrics ===

impl Metrics {
    /// Creates and registers every metric on a fresh registry.
    pub fn new() -> Result<Self, MetricsError> {
        let registry = Registrar::new(Registry::new_custom(Some(PREFIX.into()), None)?);
        let mut m = Self {
            requests: counter(
                &registry,
                "requests_total",
                "Front requests by method and outcome.",
                &["method", "outcome"],
            )?,
            input_required: counter(
                &registry,
                "input_required_questions_total",
                "Questions returned in input_required results, by kind.",
                &["kind"],
            )?,
            state_rejections: counter(
                &registry,
                "state_rejections_total",
                "requestState tokens refused, by reason.",
                &["reason"],
            )?,
            capability_denials: counter(
                &registry,
                "capability_denials_total",
                "Upstream requests refused for an undeclared client capability.",
                &["capability"],
            )?,
            upstream_errors: counter(
                &registry,
                "upstream_errors_total",
                "Front requests that failed because of the upstream, by kind of failure.",
                &["kind"],
            )?,
            upstream_duration: histogram(
                &registry,
                "upstream_request_duration_seconds",
                "Upstream request duration.",
                &["method"],
            )?,
            front_duration: histogram(
                &registry,
                "request_duration_seconds",
                "Front request duration.",
                &["method"],
            )?,
            pool_sessions: gauge(&registry, "upstream_sessions", "Upstream sessions in the pool.")?,
            replay_divergences: counter(
                &registry,
                "replay_divergences_total",
                "Replays that asked a new question while recorded answers went unused, by tool.",
                &["tool"],
            )?,
            divergence_tools: Mutex::new(HashSet::new()),
            rate_limited: counter(
                &registry,
                "rate_limited_total",
                "Requests refused by a rate limit, by limit.",
                &["limit"],
            )?,
            state_store_errors: counter(
                &registry,
                "state_store_errors_total",
                "Failed commands to the state store (single use, finished tasks), by command and failure.",
                &["op", "error"],
            )?,
            state_store_up: gauge(
                &registry,
                "state_store_up",
                "1 while the single-use state store answers.",
            )?,
            state_seals: counter(
                &registry,
                "state_seals_total",
                "requestState tokens sealed, by key id.",
                &["key_id"],
            )?,
            state_opens: counter(
                &registry,
                "state_opens_total",
                "requestState tokens opened, by key id and result (ok or the rejection reason).",
                &["key_id", "result"],
            )?,
            key_reloads: counter(
                &registry,
                "state_key_reloads_total",
                "Reloads of the state key file, by result (applied, unchanged, refused).",
                &["result"],
            )?,
            state_keys: gauge(&registry, "state_keys", "Keys in the state key ring in use.")?,
            tools: Arc::new(crate::tool_report::ToolReport::new(ToolSeries {
                calls: counter(
                    &registry,
                    "tool_calls_total",
                    "Tool calls that ended on this replica, by tool and result.",
                    &["tool", "result"],
                )?,
                runs: counter(
                    &registry,
                    "tool_runs_total",
                    "Tool runs that reached the upstream, by tool and how they were served.",
                    &["tool", "served"],
                )?,
                call_rounds: count_histogram(
                    &registry,
                    "tool_call_rounds",
                    "input_required rounds of each completed tool call, by tool.",
                    &["tool"],
                    ROUND_BUCKETS,
                )?,
                round_questions: count_histogram(
                    &registry,
                    "tool_round_questions",
                    "Questions of each input_required round, by tool.",
                    &["tool"],
                    QUESTION_BUCKETS,
                )?,
                divergences: counter(
                    &registry,
                    "tool_divergences_total",
                    "Tool runs whose replay asked a new question while recorded answers went unused.",
                    &["tool"],
                )?,
                run_duration: histogram(
                    &registry,
                    "tool_run_duration_seconds",
                    "Tool run duration, from the run's start in the gateway to its reply, by tool.",
                    &["tool"],
                )?,
                schema: SchemaSeries {
                    repairs: counter(
                        &registry,
                        "schema_repairs_total",
                        "What the gateway repaired so that 2026-07-28 clients get valid messages, by tool and reason.",
                        &["tool", "reason"],
                    )?,
                    refusals: counter(
                        &registry,
                        "schema_refusals_total",
                        "What the gateway refused as invalid 2026-07-28 and unrepairable, by tool and reason.",
                        &["tool", "reason"],
                    )?,
                    sensitive: counter(
                        &registry,
                        "sensitive_questions_total",
                        "Questions that asked for a secret, by tool, reason and what the gateway did (warned, refused).",
                        &["tool", "reason", "action"],
                    )?,
                },
                tasks: counter(
                    &registry,
                    "tool_tasks_total",
                    "Tasks of the tasks extension, by tool and event (created, completed, failed, cancelled, input_rounds).",
                    &["tool", "event"],
                )?,
            })),
            parked_calls: gauge(&registry, "parked_calls", "Upstream calls parked on this replica.")?,
            park_outcomes: counter(
                &registry,
                "park_outcomes_total",
                "Park mode rounds and retries, by outcome (parked, resumed, timed_out, full, ...).",
                &["outcome"],
            )?,
            share_refusals: counter(&registry, share::COUNTER.0, share::COUNTER.1, &["share"])?,
            pool: PoolMetrics::detached()?,
            legacy: crate::legacy::LegacyMetrics::detached()?,
            auth: crate::auth::AuthMetrics::detached()?,
            subscriptions: crate::subscriptions::ListenMetrics::detached()?,
            tasks: crate::tasks::TaskMetrics::detached()?,
            outbound: OutboundMetrics::detached()?,
            // Both replaced once every series is registered, below.
            registry: Registry::new(),
            series: Vec::new(),
        };
        // One series for every share: the legacy relay and the pool count on the registered one.
        m.legacy.share_refusals = m.share_refusals.clone();
        m.pool.share_refusals = m.share_refusals.clone();
        // The task bridge counts each tool's tasks in the migration report.
        m.tasks.tools = Some(m.tools.clone());
        // A task's questions are held to the client's capabilities too, counted as the bridge counts.
        m.tasks.capability_denials = m.capability_denials.clone();
        let features = [
            m.pool.collectors(),
            m.legacy.collectors(),
            m.auth.collectors(),
            m.subscriptions.collectors(),
            m.tasks.collectors(),
            m.outbound.collectors(),
        ];
        for collector in features.into_iter().flatten() {
            registry.add(collector)?;
        }
        (m.registry, m.series) = registry.into_parts();
        Ok(m)
    }

    /// Every series the gateway registers, with its full name (`mrtr_gateway_…`) and label
    /// names: the families `/metrics` shows once they have a value.
    pub fn series(&self) -> &[Series] {
        &self.series
    }

    /// Counts one replay divergence of `tool`, bounding the label set.
    pub fn record_divergence(&self, tool: &str) {
        let label = {
            let mut seen = self.divergence_tools.lock();
            if seen.contains(tool) || seen.len() < MAX_DIVERGENCE_TOOLS {
                seen.insert(tool.to_owned());
                tool
            } else {
                "other"
            }
        };
        self.replay_divergences.with_label_values(&[label]).inc();
    }

    /// Counts one token sealed with key `key`.
    pub fn record_seal(&self, key: KeyId) {
        self.state_seals.with_label_values(&[&key.to_string()]).inc();
    }

    /// Counts one token opened (`result` is `ok` or a fixed rejection reason) under `key`, or
    /// under `unknown` when the token names no key of the ring.
    pub fn record_open(&self, key: Option<KeyId>, result: &str) {
        let key = key.map_or_else(|| "unknown".to_owned(), |k| k.to_string());
        self.state_opens.with_label_values(&[&key, result]).inc();
    }

    /// Observes one upstream request of `method` (a fixed method name) whose response arrived
    /// `elapsed` after it was sent.
    pub fn observe_upstream(&self, method: &str, elapsed: std::time::Duration) {
        self.upstream_duration.with_label_values(&[method]).observe(elapsed.as_secs_f64());
    }

    /// The text exposition of every metric.
    pub fn render(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(8 * 1024);
        // Encoding into a Vec only fails on invalid metric families, which registration rules out.
        let _ = TextEncoder::new().encode(&self.registry.gather(), &mut out);
        out
    }
}

// === impl Registrar ===

impl Registrar {
    fn new(registry: Registry) -> Self {
        Self { registry, series: RefCell::new(Vec::new()) }
    }

    /// Registers `collector` and records its series under the registry's prefix.
    fn add(&self, collector: Box<dyn Collector>) -> Result<(), prometheus::Error> {
        let named = collector
            .desc()
            .into_iter()
            .map(|d| Series { name: format!("{PREFIX}_{}", d.fq_name), labels: d.variable_labels.clone() });
        self.series.borrow_mut().extend(named);
        self.registry.register(collector)
    }

    fn into_parts(self) -> (Registry, Vec<Series>) {
        (self.registry, self.series.into_inner())
    }
}

fn counter(r: &Registrar, name: &str, help: &str, labels: &[&str]) -> Result<IntCounterVec, MetricsError> {
    let c = IntCounterVec::new(Opts::new(name, help), labels)?;
    r.add(Box::new(c.clone()))?;
    Ok(c)
}

fn histogram(r: &Registrar, name: &str, help: &str, labels: &[&str]) -> Result<HistogramVec, MetricsError> {
    let opts = HistogramOpts::new(name, help).buckets(LATENCY_BUCKETS.to_vec());
    let h = HistogramVec::new(opts, labels)?;
    r.add(Box::new(h.clone()))?;
    Ok(h)
}

/// A histogram of counts (rounds, questions) over `buckets`.
fn count_histogram(
    r: &Registrar,
    name: &str,
    help: &str,
    labels: &[&str],
    buckets: &[f64],
) -> Result<HistogramVec, MetricsError> {
    let h = HistogramVec::new(HistogramOpts::new(name, help).buckets(buckets.to_vec()), labels)?;
    r.add(Box::new(h.clone()))?;
    Ok(h)
}

fn gauge(r: &Registrar, name: &str, help: &str) -> Result<IntGauge, MetricsError> {
    let g = IntGauge::new(name, help)?;
    r.add(Box::new(g.clone()))?;
    Ok(g)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_prefixed_metrics() {
        let m = Metrics::new().unwrap();
        m.requests.with_label_values(&["tools/call", "complete"]).inc();
        m.state_rejections.with_label_values(&["expired"]).inc();
        let text = String::from_utf8(m.render()).unwrap();
        assert!(
            text.contains(r#"mrtr_gateway_requests_total{method="tools/call",outcome="complete"} 1"#),
            "{text}"
        );
        assert!(text.contains(r#"mrtr_gateway_state_rejections_total{reason="expired"} 1"#));
    }

    #[test]
    fn state_counts_carry_hex_key_ids_only() {
        let m = Metrics::new().unwrap();
        let key = KeyId([0xab, 0x01, 0x02, 0x03]);
        m.record_seal(key);
        m.record_open(Some(key), "ok");
        m.record_open(None, "malformed");
        let text = String::from_utf8(m.render()).unwrap();
        assert!(text.contains(r#"mrtr_gateway_state_seals_total{key_id="ab010203"} 1"#), "{text}");
        assert!(text.contains(r#"mrtr_gateway_state_opens_total{key_id="ab010203",result="ok"} 1"#));
        assert!(text.contains(r#"mrtr_gateway_state_opens_total{key_id="unknown",result="malformed"} 1"#));
    }

    #[test]
    fn series_lists_every_registered_family_with_its_labels() {
        let m = Metrics::new().unwrap();
        let find = |name: &str| m.series().iter().find(|s| s.name == name).map(|s| s.labels.clone());
        assert_eq!(find("mrtr_gateway_requests_total"), Some(vec!["method".into(), "outcome".into()]));
        assert_eq!(find("mrtr_gateway_upstream_sessions"), Some(vec![]));
        // The features' series, registered through their collectors.
        assert_eq!(find("mrtr_gateway_auth_denials_total"), Some(vec!["method".into()]));
        assert_eq!(find("mrtr_gateway_outbound_connections"), Some(vec!["client".into()]));
        assert_eq!(find("mrtr_gateway_listen_streams"), Some(vec![]));
        assert_eq!(find("mrtr_gateway_listen_refused_total"), Some(vec!["reason".into()]));
        let mut names: Vec<_> = m.series().iter().map(|s| s.name.as_str()).collect();
        let total = names.len();
        names.dedup();
        assert_eq!(names.len(), total, "a series is listed twice");
    }

    #[test]
    fn divergence_labels_are_bounded() {
        let m = Metrics::new().unwrap();
        for i in 0..MAX_DIVERGENCE_TOOLS + 10 {
            m.record_divergence(&format!("tool-{i}"));
        }
        m.record_divergence("tool-0");
        assert_eq!(m.replay_divergences.with_label_values(&["other"]).get(), 10);
        assert_eq!(m.replay_divergences.with_label_values(&["tool-0"]).get(), 2);
    }
}
