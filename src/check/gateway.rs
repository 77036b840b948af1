//! The embedded gateway: the real gateway ([`crate::app::Gateway`]) started in this process on
//! loopback ports, in front of the same server, as one replica with no authentication, rate
//! limits, TLS or cluster link, so that what the report shows is what the gateway itself does
//! to the server's traffic. Its `/admin/tools` report gives what only it can count: schema
//! repairs and refusals, sensitive questions, replay divergences and each tool's tasks.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use serde_json::Value;

use super::http::Http;
use super::report::{Finding, TaskCounts};
use crate::app::{AppError, Gateway};
use crate::config::{AuthConfig, Config, LimitsConfig};

/// The check's gateway.
pub(super) struct Embedded {
    gateway: Gateway,
}

/// What `/admin/tools` says about one tool.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct ToolFigures {
    pub divergences: u64,
    pub verdict: Option<String>,
    pub advice: Option<String>,
    /// Its tasks, when it ran any.
    pub tasks: Option<TaskCounts>,
}

/// The findings of `/admin/tools`: per tool, and what the schema checks did.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct AdminReport {
    pub tools: Vec<(String, ToolFigures)>,
    pub repairs: Vec<Finding>,
    pub refusals: Vec<Finding>,
    pub sensitive: Vec<Finding>,
}

/// `cfg` as the check runs it: loopback listeners on free ports, one replica, every client
/// allowed (the check shows the server, not the deployment's rules), nothing sent elsewhere.
pub(super) fn embedded_config(mut cfg: Config) -> Config {
    let loopback = SocketAddr::from((Ipv4Addr::LOCALHOST, 0));
    cfg.front.listen = loopback;
    cfg.front.tls = None;
    cfg.admin_listen = Some(loopback);
    cfg.cluster.listen = None;
    cfg.cluster.advertise_url = None;
    cfg.cluster.tls = None;
    cfg.auth = AuthConfig::OPEN;
    cfg.limits = LimitsConfig::default();
    cfg.tracing = None;
    cfg.state.single_use = None;
    cfg
}

// === impl Embedded ===

impl Embedded {
    /// Starts the gateway and waits, at most `wait`, for its upstream to answer `initialize`
    /// (a server that does not is reported on by the requests that follow).
    pub(super) async fn start(cfg: Config, wait: Duration) -> Result<Self, AppError> {
        let gateway = Gateway::start(cfg).await?;
        let ready = async {
            while !gateway.ready.is_ready() {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        };
        let _ = tokio::time::timeout(wait, ready).await;
        Ok(Self { gateway })
    }

    /// The front URL.
    pub(super) fn url(&self, path: &str) -> String {
        self.gateway.url(path)
    }

    /// `/admin/tools`, read; empty when it cannot be read.
    pub(super) async fn admin_report(&self, http: &Http) -> Result<AdminReport, String> {
        let Some(admin) = self.gateway.admin_addr else { return Ok(AdminReport::default()) };
        let json = http.get_json(&format!("http://{admin}/admin/tools")).await?;
        Ok(AdminReport::parse(&json))
    }

    pub(super) async fn stop(self) {
        self.gateway.shutdown().await;
    }
}

// === impl AdminReport ===

impl AdminReport {
    /// Reads the fields of `/admin/tools` the check uses; absent ones count as empty, so that a
    /// gateway without schema checks reads as one that found nothing.
    pub(super) fn parse(json: &Value) -> Self {
        let mut report = Self::default();
        for tool in json.get("tools").and_then(Value::as_array).into_iter().flatten() {
            let name = tool.get("tool").and_then(Value::as_str).unwrap_or_default().to_owned();
            let text = |k: &str| tool.get(k).and_then(Value::as_str).map(str::to_owned);
            let figures = ToolFigures {
                divergences: tool.get("divergences").and_then(Value::as_u64).unwrap_or(0),
                verdict: text("verdict"),
                advice: text("advice"),
                tasks: tool.get("tasks").and_then(task_counts),
            };
            let schema = tool.get("schema");
            report.repairs.extend(counts(&name, schema.and_then(|s| s.get("repairs"))));
            report.refusals.extend(counts(&name, schema.and_then(|s| s.get("refusals"))));
            report.sensitive.extend(counts(&name, tool.get("sensitive")));
            report.tools.push((name, figures));
        }
        for (list, schema) in json.get("lists").and_then(Value::as_object).into_iter().flatten() {
            report.repairs.extend(counts(list, schema.get("repairs")));
            report.refusals.extend(counts(list, schema.get("refusals")));
        }
        report
    }

    /// The figures of `tool`, if it has an entry.
    pub(super) fn tool(&self, tool: &str) -> Option<&ToolFigures> {
        self.tools.iter().find(|(name, _)| name == tool).map(|(_, f)| f)
    }
}

/// A tool's `tasks` counts; `None` when it created none.
fn task_counts(tasks: &Value) -> Option<TaskCounts> {
    let n = |field: &str| tasks.get(field).and_then(Value::as_u64).unwrap_or(0);
    let counts = TaskCounts {
        created: n("created"),
        completed: n("completed"),
        failed: n("failed"),
        cancelled: n("cancelled"),
        input_rounds: n("input_rounds"),
    };
    (counts.created > 0).then_some(counts)
}

/// `{"<reason>": n}` as findings of `tool`, zero counts left out.
fn counts(tool: &str, by_reason: Option<&Value>) -> Vec<Finding> {
    let Some(Value::Object(map)) = by_reason else { return Vec::new() };
    map.iter()
        .filter_map(|(reason, n)| n.as_u64().filter(|n| *n > 0).map(|count| (reason, count)))
        .map(|(reason, count)| Finding { tool: tool.to_owned(), reason: reason.clone(), count })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_admin_report_is_read_with_or_without_schema_findings() {
        let before = json!({"max_tools": 256, "tools": [{"tool": "greet", "divergences": 2, "verdict": "diverges",
            "advice": "park it"}]});
        let parsed = AdminReport::parse(&before);
        assert_eq!(parsed.tool("greet").map(|f| f.divergences), Some(2));
        assert!(parsed.repairs.is_empty() && parsed.refusals.is_empty() && parsed.sensitive.is_empty());

        let after = json!({"tools": [{"tool": "login", "divergences": 0,
            "schema": {"repairs": {"missing_type": 1, "unused": 0}, "refusals": {"not_an_object": 2}},
            "sensitive": {"password": 3}}],
            "lists": {"prompts": {"repairs": {"dropped_field": 4}, "refusals": {}}}});
        let parsed = AdminReport::parse(&after);
        let finding =
            |tool: &str, reason: &str, count| Finding { tool: tool.into(), reason: reason.into(), count };
        assert_eq!(
            parsed.repairs,
            vec![finding("login", "missing_type", 1), finding("prompts", "dropped_field", 4)]
        );
        assert_eq!(parsed.refusals, vec![finding("login", "not_an_object", 2)]);
        assert_eq!(parsed.sensitive, vec![finding("login", "password", 3)]);
        assert_eq!(parsed.tool("login").and_then(|f| f.verdict.clone()), None);
        assert_eq!(parsed.tool("login").and_then(|f| f.tasks), None, "no tasks field, no tasks");

        let tasks = json!({"tools": [{"tool": "research", "verdict": "task", "tasks": {"created": 2,
            "completed": 1, "failed": 0, "cancelled": 1, "input_rounds": 3}},
            {"tool": "plain", "tasks": {"created": 0, "completed": 0, "failed": 0, "cancelled": 0, "input_rounds": 0}}]});
        let parsed = AdminReport::parse(&tasks);
        let want = TaskCounts { created: 2, completed: 1, failed: 0, cancelled: 1, input_rounds: 3 };
        assert_eq!(parsed.tool("research").and_then(|f| f.tasks), Some(want));
        assert_eq!(parsed.tool("plain").and_then(|f| f.tasks), None);
        assert_eq!(AdminReport::parse(&json!(null)), AdminReport::default());
    }
}
