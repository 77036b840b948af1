//! `mrtr-gateway check`: the migration readiness report. A team runs it before it deploys the
//! gateway in front of a legacy server, to learn whether the server will work behind it and
//! what its users will see differ.
//!
//! It is the gateway pointed at one server with two clients inside it, and it reuses the real
//! pieces rather than a second implementation of them: a legacy client speaks to the server
//! directly through the upstream seam ([`direct`], on [`crate::upstream::Session`]), and a
//! 2026-07-28 client speaks to it through an embedded gateway ([`gateway`], the real
//! [`crate::app::Gateway`] on loopback ports) over HTTP ([`modern`]). Both read the same lists
//! ([`lists`]) and try the same calls ([`calls`]), answering questions alike ([`answers`]); a
//! tool the server runs as a legacy task is called as one directly, and followed as a task of
//! the tasks extension through the gateway ([`tasks`]), whose counts per tool the report shows;
//! [`compare`] finds what differs and what breaks, [`report`] is the JSON report and [`human`]
//! its readable form; [`progress`] shows the waits on stderr; [`target`] names the server.
//!
//! The exit status ([`exit`]) is 0 when nothing a 2026-07-28 client would see breaks, 1 when
//! something does (the rules are in [`compare`]), and otherwise says why no report was made.

mod answers;
mod calls;
mod compare;
mod direct;
mod gateway;
mod http;
mod human;
mod lists;
mod modern;
mod progress;
pub mod report;
mod target;
mod tasks;

use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};

pub use calls::Calls;
pub use progress::Progress;
pub use target::{config, Target};

use self::direct::{Direct, DirectView};
use self::gateway::{AdminReport, Embedded};
use self::lists::{ListInfo, ListKind};
use self::modern::{Modern, ModernView};
use self::report::{CallReport, Outcome, Report, SchemaProblem, TaskTool};
use crate::capabilities::ClientCaps;
use crate::config::{Config, UpstreamTarget};
use crate::demo::{DemoHandle, DemoOptions};
use crate::upstream::StderrTail;

/// Exit statuses of `mrtr-gateway check`.
pub mod exit {
    /// Nothing a 2026-07-28 client would see breaks.
    pub const OK: i32 = 0;
    /// Something does: the report says what.
    pub const BREAKS: i32 = 1;
    /// `EX_USAGE`: the flags, the configuration or the calls file are wrong.
    pub const USAGE: i32 = 64;
    /// `EX_UNAVAILABLE`: the server could not be started or reached.
    pub const UNAVAILABLE: i32 = 69;
    /// `EX_SOFTWARE`: the check itself failed (the embedded gateway did not start, the report
    /// could not be written).
    pub const SOFTWARE: i32 = 70;
}

/// What the check's 2026-07-28 client declares, and (as the gateway would) its legacy client:
/// everything a server may ask, so that a server gating its tools on capabilities shows them all.
const CLIENT_CAPABILITIES: &str = r#"{"elicitation": {"form": {}, "url": {}}, "sampling": {}, "roots": {}}"#;
/// How long the server's stderr may take to close after a failed start.
const STDERR_SETTLE: Duration = Duration::from_secs(1);

/// Why no report was made.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    #[error("calls file {path}: {reason}")]
    Calls { path: String, reason: String },
    /// The server did not start (or could not be reached: `action`) or answer `initialize`;
    /// `stderr` is the tail of its stderr.
    #[error("cannot {action} the server {server}: {reason}{}", tail(.stderr))]
    Start { action: &'static str, server: String, reason: String, stderr: Vec<String> },
    #[error("the embedded gateway did not start: {0}")]
    Gateway(#[from] crate::app::AppError),
    #[error("{0}")]
    Setup(String),
}

// === impl CheckError ===

impl CheckError {
    /// The exit status for this error.
    pub fn exit_status(&self) -> i32 {
        match self {
            Self::Calls { .. } => exit::USAGE,
            Self::Start { .. } => exit::UNAVAILABLE,
            Self::Gateway(_) | Self::Setup(_) => exit::SOFTWARE,
        }
    }
}

fn tail(stderr: &[String]) -> String {
    if stderr.is_empty() {
        return String::new();
    }
    let lines: Vec<String> = stderr.iter().map(|l| format!("  | {l}")).collect();
    format!("\nthe last lines it wrote on stderr:\n{}", lines.join("\n"))
}

/// Runs the check of the server `cfg` names (the embedded demo when it names none), trying
/// `calls`, and returns its report.
pub async fn run(mut cfg: Config, calls: &Calls, progress: Progress) -> Result<Report, CheckError> {
    let demo = start_demo(&mut cfg)?;
    let mut target = Target::of(&cfg).ok_or_else(|| CheckError::Setup("no server to check".into()))?;
    if demo.is_some() {
        target.display = format!("the embedded demo server at {}", target.display);
    }
    let mut modern_caps: Value =
        serde_json::from_str(CLIENT_CAPABILITIES).map_err(|e| CheckError::Setup(e.to_string()))?;
    let legacy_caps = ClientCaps::from_modern(&modern_caps)
        .map_err(|e| CheckError::Setup(e.to_string()))?
        .legacy_initialize(cfg.upstream.protocol_version);
    // Only the 2026-07-28 client speaks the tasks extension; the legacy one has its own tasks.
    modern_caps["extensions"] = json!({ crate::tasks::EXTENSION: {} });

    let (direct, direct_calls) = check_directly(&cfg, &target, &legacy_caps, calls, progress).await?;
    let timeout = cfg.mrtr.total_timeout + cfg.upstream.request_timeout;
    let http = http::Http::new(timeout).map_err(CheckError::Setup)?;
    let (path, max_rounds) = (cfg.front.path.clone(), cfg.mrtr.max_rounds);
    let wait = cfg.upstream.connect_timeout + cfg.upstream.request_timeout;
    let embedded = progress
        .step("starting the embedded gateway", Embedded::start(gateway::embedded_config(cfg), wait))
        .await?;
    let modern = Modern::new(&http, embedded.url(&path), modern_caps, (max_rounds, timeout));
    let through = progress.step("listing through the gateway", modern.view()).await;
    let mut runs = Vec::new();
    for call in &calls.calls {
        let what = format!("calling {} through the gateway, twice", call.tool);
        runs.push(
            progress.step(&what, async { vec![modern.call(call).await, modern.call(call).await] }).await,
        );
    }
    let admin = embedded.admin_report(&http).await.unwrap_or_else(|e| {
        tracing::warn!(error = %e, "the embedded gateway's /admin/tools could not be read");
        AdminReport::default()
    });
    embedded.stop().await;
    if let Some(demo) = demo {
        let _ = demo.shutdown().await;
    }
    let tried = calls.calls.iter().zip(direct_calls).zip(runs);
    let call_reports = tried.map(|((call, d), g)| call_report(call, d, g, &admin)).collect();
    Ok(assemble(target, direct, through, call_reports, admin))
}

/// The server seen directly: its session, its lists and the tried calls.
async fn check_directly(
    cfg: &Config,
    target: &Target,
    capabilities: &Value,
    calls: &Calls,
    progress: Progress,
) -> Result<(DirectView, Vec<report::DirectCall>), CheckError> {
    let mut settings = crate::app::upstream_settings(cfg, None);
    let tail = Arc::new(StderrTail::default());
    if let Some(stdio) = &mut settings.stdio {
        stdio.stderr_tail = Some(tail.clone());
    }
    let (action, what) = match target.transport {
        "stdio" => ("start", "starting the server"),
        _ => ("reach", "connecting to the server"),
    };
    let opened = progress.step(what, Direct::open(Arc::new(settings), capabilities)).await;
    let direct = match opened {
        Ok(direct) => direct,
        Err(e) => {
            tail.settle(STDERR_SETTLE).await;
            let reason = crate::logging::chain(&e);
            let server = target.display.clone();
            return Err(CheckError::Start { action, server, reason, stderr: tail.lines() });
        }
    };
    let view = progress.step("listing directly", direct.view()).await;
    let mut done = Vec::new();
    for call in &calls.calls {
        let as_task = runs_as_task(&view, &call.tool);
        done.push(
            progress.step(&format!("calling {} directly", call.tool), direct.call(call, as_task)).await,
        );
    }
    direct.close().await;
    Ok((view, done))
}

/// Whether the server runs `tool` only as a legacy task (`execution.taskSupport` `required`), so
/// a legacy client must call it as one.
fn runs_as_task(view: &DirectView, tool: &str) -> bool {
    let listed = view.items.tools.iter().flatten().find(|t| ListKind::Tools.name_of(t) == tool);
    listed.and_then(compare::task_support) == Some("required")
}

/// With no server named, the embedded demo server, started here on loopback.
fn start_demo(cfg: &mut Config) -> Result<Option<DemoHandle>, CheckError> {
    if cfg.upstream.target != UpstreamTarget::Embedded {
        return Ok(None);
    }
    let demo = crate::demo::spawn_loopback(DemoOptions::default())
        .map_err(|e| CheckError::Setup(format!("the embedded demo server: {e}")))?;
    let url = demo.url().parse().map_err(|_| CheckError::Setup("the demo's URL".into()))?;
    cfg.upstream.target = UpstreamTarget::Url(url);
    Ok(Some(demo))
}

fn call_report(
    call: &calls::TriedCall,
    direct: report::DirectCall,
    gateway: Vec<report::GatewayRun>,
    admin: &AdminReport,
) -> CallReport {
    let figures = admin.tool(&call.tool).cloned().unwrap_or_default();
    let same_questions = gateway.windows(2).all(|w| w[0].rounds == w[1].rounds);
    let stable = same_questions && figures.divergences == 0;
    // Park mode is advice for replayed rounds; a task's questions are answered live.
    let asked = gateway.iter().any(|r| !r.rounds.is_empty() && !r.task);
    CallReport {
        tool: call.tool.clone(),
        arguments: Value::Object(call.arguments.clone()),
        direct,
        gateway,
        stable,
        divergences: figures.divergences,
        verdict: figures.verdict,
        advice: figures.advice,
        park_advised: asked && !stable,
        tasks: figures.tasks,
    }
}

fn assemble(
    target: Target,
    direct: DirectView,
    through: ModernView,
    calls: Vec<CallReport>,
    admin: AdminReport,
) -> Report {
    let mut differences = compare::views((&direct.side, &direct.items), (&through.side, &through.items));
    differences.extend(compare::refusals(&admin.refusals));
    differences.extend(calls.iter().flat_map(compare::call));
    let breaks = differences.iter().filter(|d| d.breaks).count();
    Report {
        version: report::VERSION,
        server: target.display,
        transport: target.transport,
        ok: breaks == 0,
        breaks,
        needs_tasks: needs_tasks(&direct, &through),
        invalid_schemas: invalid_schemas(&direct),
        direct: direct.side,
        gateway: through.side,
        differences,
        repairs: admin.repairs,
        refusals: admin.refusals,
        sensitive: admin.sensitive,
        calls,
    }
}

fn needs_tasks(direct: &DirectView, through: &ModernView) -> Vec<TaskTool> {
    let tools = direct.items.tools.iter().flatten();
    tools
        .filter_map(|tool| {
            let support = compare::task_support(tool).filter(|s| matches!(*s, "required" | "optional"))?;
            let name = ListKind::Tools.name_of(tool);
            let through_gateway = through.items.tool(&name).is_some();
            Some(TaskTool { tool: name, task_support: support.to_owned(), through_gateway })
        })
        .collect()
}

/// Tools whose `inputSchema` is not a JSON object schema (`"type": "object"`), which
/// 2026-07-28 clients validate.
fn invalid_schemas(direct: &DirectView) -> Vec<SchemaProblem> {
    let tools = direct.items.tools.iter().flatten();
    tools
        .filter_map(|tool| {
            let problem = match tool.get("inputSchema") {
                None => "no inputSchema".to_owned(),
                Some(Value::Object(schema)) => match schema.get("type") {
                    None => "inputSchema has no \"type\": \"object\"".to_owned(),
                    Some(t) if t == "object" => return None,
                    Some(t) => format!("inputSchema type is {t}, not \"object\""),
                },
                Some(_) => "inputSchema is not an object".to_owned(),
            };
            Some(SchemaProblem { tool: ListKind::Tools.name_of(tool), problem })
        })
        .collect()
}

/// How a call's result ended: a tool error when it says `isError: true`.
fn outcome_of(result: &Value) -> Outcome {
    match result.get("isError") {
        Some(v) if v == &json!(true) => Outcome::ToolError,
        _ => Outcome::Complete,
    }
}

/// `mrtr-gateway check`: reads the flags, runs the check, writes the report; returns the exit
/// status.
pub fn main(cli: &crate::config::Cli, args: &crate::config::CheckArgs) -> i32 {
    let cfg = match config(cli, args) {
        Ok(cfg) => cfg,
        Err(e) => {
            eprintln!("mrtr-gateway check: invalid configuration: {e}");
            return exit::USAGE;
        }
    };
    let filter = if cli.log_level.is_some() { cfg.log.filter.clone() } else { "error".to_owned() };
    crate::logging::init(
        &crate::config::LogConfig { json: cfg.log.json, filter },
        crate::logging::Sink::Stderr,
    );
    let calls = match args.calls.as_deref().map(Calls::read).transpose() {
        Ok(calls) => calls.unwrap_or_default(),
        Err(e) => {
            eprintln!("mrtr-gateway check: {e}");
            return e.exit_status();
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("mrtr-gateway check: cannot start the runtime: {e}");
            return exit::SOFTWARE;
        }
    };
    let result = runtime.block_on(run(cfg, &calls, Progress::stderr()));
    runtime.shutdown_timeout(Duration::from_millis(100));
    match result.map(|report| human::write(&report, args.json_path())) {
        Ok(Ok(status)) => status,
        Ok(Err(e)) => {
            eprintln!("mrtr-gateway check: writing the report: {e}");
            exit::SOFTWARE
        }
        Err(e) => {
            eprintln!("mrtr-gateway check: {e}");
            e.exit_status()
        }
    }
}
