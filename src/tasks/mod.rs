//! Legacy task tools served as tasks of the 2026-07-28 tasks extension
//! (`io.modelcontextprotocol/tasks`), on the replica that starts them.
//!
//! A legacy (2025-11-25) server runs a tool whose `execution.taskSupport` is `required` or
//! `optional` as a legacy task when its `tools/call` carries `task: {ttl}`. When a client that
//! declared the extension calls such a tool, [`Tasks::start`] takes an upstream session out of
//! the pool (a legacy task belongs to the session that created it, so the session stays pinned
//! to the task for its life), calls the tool there as a legacy task, and answers the client a
//! flat `CreateTaskResult` whose `taskId` is sealed like a `requestState`
//! ([`crate::mrtr::TaskSealer`]: owner replica, handle, upstream task, principal, expiry). The
//! live state (the pinned session, the open `tasks/result` request, pending questions, the
//! result) stays in a bounded table on this replica ([`table`]); [`live`] drives each task.
//! `tasks/get`, `tasks/update` and `tasks/cancel` open the id, find the task and answer from it
//! ([`serve`]); those that reach another replica are served from the shared result store or
//! forwarded to the owner ([`forward`]). A finished task is written to that store when there
//! is one ([`store`]). Each task has a tracing span (handle, tool, principal) its lifecycle is logged
//! in. An ordinary call may become a task too, when the configuration says so ([`long`]): the
//! same table, ids and requests serve it, and it is kept in the store as well. At shutdown
//! [`Tasks::stop_all`] ends every running task `failed`, cancels it upstream and waits, within a
//! bound, for its driver to finish (which keeps it in the store), so that a rollout leaves no
//! legacy task running without an owner.
//!
//! The user-facing account is `docs/src/tasks.md`; the translation of the two dialects is in
//! [`wire`]. Errors are [`TaskError`], converted for the client in `src/error.rs`.

mod create;
mod error;
pub mod forward;
mod live;
mod long;
mod metrics;
mod screen;
mod serve;
pub mod store;
mod table;
pub mod wire;

pub use error::TaskError;
pub use forward::{LinkFailure, OwnerAnswer, OwnerCall, OwnerCalling, TaskLink, TaskOp};
pub use long::Trigger;
pub use metrics::TaskMetrics;
pub use store::ResultStore;
pub use wire::{extension_declared, TaskSupport, EXTENSION};

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use opentelemetry::context::FutureExt as _;
use parking_lot::Mutex;
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tracing::Instrument;

use self::live::{Ending, LiveTask, Origin, Spec};
use self::screen::Rules;
use self::store::Records;
use self::table::Table;
use self::wire::Created;
use crate::capabilities::ClientCaps;
use crate::config::TasksConfig;
use crate::defaults;
use crate::mrtr::{LegacyVersion, LiveRing, TaskClaims, TaskSealer};
use crate::protocol::jsonrpc::Outcome;
use crate::protocol::methods;
use crate::schema::{OutputSchema, SensitivePolicy};
use crate::telemetry::TaskTrace;
use crate::upstream::{Call, Pool, PoolKey, Session, UpstreamError, UpstreamEvent};

/// Most tool names whose task support is remembered; past it the catalogue starts over.
const CATALOGUE_MAX_TOOLS: usize = 4096;

/// The task bridge of one replica.
pub struct Tasks {
    cfg: TasksConfig,
    pool: Arc<Pool>,
    keys: Arc<LiveRing>,
    /// This replica's advertised URL, the owner sealed in its task ids (empty without one).
    owner: String,
    version: LegacyVersion,
    table: Table,
    catalogue: Catalogue,
    metrics: TaskMetrics,
    /// Reaches the owners of tasks other replicas hold (`[cluster]` configured).
    link: Option<Arc<dyn TaskLink>>,
    /// Where finished tasks are kept for every replica (`state.redis_url` set).
    records: Option<Records>,
    /// `elicitation.sensitive`: what a task's question that asks for a secret gets.
    sensitive: SensitivePolicy,
    drivers: Drivers,
}

/// The running drivers: each holds a clone of the sender, so [`Tasks::stop_all`] knows when
/// all have finished (its receiver sees the channel close).
#[derive(Debug)]
struct Drivers {
    guard: Mutex<Option<mpsc::Sender<()>>>,
    finished: Mutex<Option<mpsc::Receiver<()>>>,
}

/// Each tool's `execution.taskSupport`, learnt from the upstream's tool lists: the tools that
/// declare one are remembered; any other tool of a listed upstream is `forbidden`.
#[derive(Debug, Default)]
pub struct Catalogue {
    tools: Mutex<HashMap<String, TaskSupport>>,
    listed: std::sync::atomic::AtomicBool,
}

/// What a `tools/call` that may start a task answered.
#[derive(Debug)]
pub enum Started {
    /// The flat `CreateTaskResult`.
    Task(Value),
    /// The tool's result: the upstream ran it at once.
    Complete(Value),
    /// The `InputRequiredResult` of a round of a call that asks before it creates its task
    /// ([`create`]): its questions, and its sealed task id as the `requestState`.
    InputRequired(Value),
}

/// What the upstream answered a task-augmented call with first.
enum First {
    Created(Created),
    /// A question before the task exists: the call, held, and that request ([`create`]).
    Asked(Call, UpstreamEvent),
}

// === impl Catalogue ===

impl Catalogue {
    /// Notes that a `tools/list` page was seen whose tools declare no task support.
    pub fn mark_listed(&self) {
        self.listed.store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Learns the task support of every tool of a `tools/list` page.
    pub fn learn(&self, page: &Value) {
        self.mark_listed();
        let Some(list) = page.get("tools").and_then(Value::as_array) else { return };
        let mut tools = self.tools.lock();
        for tool in list {
            let Some(name) = tool.get("name").and_then(Value::as_str) else { continue };
            if tools.len() >= CATALOGUE_MAX_TOOLS && !tools.contains_key(name) {
                tools.clear();
            }
            tools.insert(name.to_owned(), TaskSupport::of(tool));
        }
    }

    /// The support `tool` declared in the last list that named it; `None` before any list
    /// was seen.
    pub fn support(&self, tool: &str) -> Option<TaskSupport> {
        let known = self.tools.lock().get(tool).copied();
        known.or_else(|| {
            self.listed.load(std::sync::atomic::Ordering::Relaxed).then_some(TaskSupport::Forbidden)
        })
    }
}

// === impl Tasks ===

impl Tasks {
    pub fn new(
        cfg: TasksConfig,
        pool: Arc<Pool>,
        keys: Arc<LiveRing>,
        version: LegacyVersion,
        metrics: TaskMetrics,
    ) -> Self {
        let table = Table::new(cfg.max_tasks, cfg.max_per_principal);
        let catalogue = Catalogue::default();
        let owner = String::new();
        let (link, records, sensitive) = (None, None, SensitivePolicy::default());
        let (guard, finished) = mpsc::channel(1);
        let drivers = Drivers { guard: Mutex::new(Some(guard)), finished: Mutex::new(Some(finished)) };
        Self { cfg, pool, keys, owner, version, table, catalogue, metrics, link, records, sensitive, drivers }
    }

    /// Applies `policy` to the questions tasks ask that ask for a secret (`elicitation.sensitive`).
    pub fn with_sensitive(mut self, policy: SensitivePolicy) -> Self {
        self.sensitive = policy;
        self
    }

    /// What the questions of a task started for the client of pool key `key` are held to: the
    /// key's second half is the fingerprint of that request's `clientCapabilities`.
    fn rules(&self, key: &PoolKey) -> Rules {
        Rules { caps: ClientCaps::from_fingerprint(key.1), sensitive: self.sensitive }
    }

    /// Keeps finished tasks in `store` too, for every replica to serve.
    pub fn with_store(mut self, store: Arc<dyn ResultStore>) -> Self {
        self.records = Some(Records::new(store, self.keys.clone(), self.cfg.max_result_bytes));
        self
    }

    /// Seals `url` (`cluster.advertise_url`) as the owner of the tasks started here.
    pub fn with_owner(mut self, url: &str) -> Self {
        self.owner = url.trim_end_matches('/').to_owned();
        self
    }

    /// The tools' task support, which the front teaches from its tool lists.
    pub fn catalogue(&self) -> &Catalogue {
        &self.catalogue
    }

    /// Calls a task tool upstream as a legacy task on a session pinned to it, and answers the
    /// client's `CreateTaskResult` once the task is in the table (a `tasks/get` for it
    /// resolves from then on). `params` are the `tools/call` params to send upstream;
    /// `capabilities` those to declare if a session must be opened; `output` the tool's
    /// compiled `outputSchema`, which its result is checked against.
    pub async fn start(
        &self,
        principal: &Arc<str>,
        key: PoolKey,
        capabilities: Value,
        mut params: Value,
        output: Option<Arc<OutputSchema>>,
    ) -> Result<Started, TaskError> {
        self.table.check_room(principal, Instant::now()).inspect_err(|e| self.metrics.count(e.label()))?;
        let tool = params.get("name").and_then(Value::as_str).unwrap_or_default().to_owned();
        let rules = self.rules(&key);
        let session = self.pool.take_unpooled(&key, &capabilities).await.map_err(TaskError::Unavailable)?;
        // Under the creating request's span, when it is traced; the task's exchanges under it.
        let trace = TaskTrace::start(&tool);
        wire::augment(&mut params, self.cfg.ttl.as_millis() as u64);
        let (created, held) = match create(&session, params).await {
            Ok(First::Created(Created::Task(t))) => (Some(t), None),
            Ok(First::Created(Created::Result(result))) => {
                close(&session).await;
                return Ok(self.at_once(output.as_deref(), &tool, result));
            }
            Ok(First::Asked(call, question)) => (None, Some((call, question))),
            Err(e) => {
                close(&session).await;
                return Err(e);
            }
        };
        let now_ms = unix_ms();
        let (upstream_task, status_message) =
            created.map_or((None, None), |c| (Some(c.task_id), c.status_message));
        let spec = Spec {
            tool,
            principal: principal.clone(),
            upstream_task,
            session: session.clone(),
            version: self.version,
            created_ms: now_ms,
            status_message,
            ttl: self.cfg.ttl,
            poll: self.cfg.poll_interval,
            max_result_bytes: self.cfg.max_result_bytes,
            origin: Origin::LegacyTask,
            rules,
            output,
        };
        let span = task_span(&spec.tool, principal);
        let task = Arc::new(LiveTask::new(spec).with_span(span));
        let (id, handle) = match self.hold(&task, now_ms) {
            Ok(ids) => ids,
            Err(e) => {
                // Lost a race for the last slot: the upstream task (or call) is cancelled with it.
                task.cancel(now_ms);
                let driving = live::drive(task, self.metrics.clone(), unix_ms, held);
                self.spawn(async move {
                    let ending = driving.await;
                    ended(None, None, trace, ending).await;
                });
                return Err(e);
            }
        };
        if held.is_some() {
            tracing::info!(parent: &task.span, "the task's call asks before it creates its task");
            self.spawn(self.run(task.clone(), handle, held, trace));
            return create::round_reply(&task, &id).await;
        }
        let snapshot = task.snapshot();
        tracing::info!(parent: &task.span, status = snapshot.status, "task created");
        self.spawn(self.run(task, handle, None, trace));
        Ok(Started::Task(wire::create_result(&id, &snapshot)))
    }

    /// Runs a task's driver, which [`Self::stop_all`] waits for.
    fn spawn(&self, driver: impl std::future::Future<Output = ()> + Send + 'static) {
        let guard = self.drivers.guard.lock().clone();
        tokio::spawn(async move {
            driver.await;
            drop(guard);
        });
    }

    /// At shutdown, once no request is left: ends every running task `failed` (its `tasks/get`
    /// says the replica shut down), which makes its driver cancel it upstream, and waits up to
    /// `bound` for every driver to finish. Returns how many tasks were stopped.
    pub async fn stop_all(&self, bound: std::time::Duration) -> usize {
        drop(self.drivers.guard.lock().take());
        let now_ms = unix_ms();
        let stopped = self.table.running().iter().filter(|task| task.stop(now_ms)).count();
        let Some(mut finished) = self.drivers.finished.lock().take() else { return stopped };
        if tokio::time::timeout(bound, finished.recv()).await.is_err() {
            tracing::warn!(stopped, "gave up waiting for stopped tasks to be cancelled upstream");
        }
        stopped
    }

    /// The result of a task tool the upstream ran at once, checked against its `output`.
    fn at_once(&self, output: Option<&OutputSchema>, tool: &str, result: Value) -> Started {
        Started::Complete(screen::result(output, &self.metrics, tool, result))
    }

    /// Seals an id for `task`, created at `now_ms`, and puts it in the table within the bounds
    /// (a `tasks/get` for it resolves from then on); counts it created, or its refusal. Returns
    /// the id and the task's handle, which its span records from then on.
    fn hold(&self, task: &Arc<LiveTask>, now_ms: u64) -> Result<(String, String), TaskError> {
        let expires_at = (now_ms + self.cfg.ttl.as_millis() as u64).div_ceil(1000);
        let upstream = task.upstream_task().unwrap_or_default();
        let claims = TaskClaims::new(&self.owner, upstream, &task.principal, expires_at);
        let sealed = TaskSealer::shared(self.keys.current()).seal(&claims).map_err(TaskError::Seal);
        let (id, held) = sealed
            .and_then(|id| Ok((id, self.table.insert(claims.handle.clone(), task.clone(), Instant::now())?)))
            .inspect_err(|e| self.metrics.count(e.label()))?;
        task.span.record("handle", claims.handle.as_str());
        self.metrics.live.set(held as i64);
        self.metrics.created(&task.tool);
        Ok((id, claims.handle))
    }

    /// Drives `task` to its end (from its `held` call, when it asked before it created its
    /// task), then keeps it in the result store if there is one; in the task's span.
    fn run(
        &self,
        task: Arc<LiveTask>,
        handle: String,
        held: Option<(Call, UpstreamEvent)>,
        trace: Option<TaskTrace>,
    ) -> impl std::future::Future<Output = ()> + 'static {
        let (metrics, records, span) = (self.metrics.clone(), self.records.clone(), task.span.clone());
        let cx = trace.as_ref().map_or_else(opentelemetry::Context::new, TaskTrace::context);
        async move {
            let ending = live::drive(task.clone(), metrics, unix_ms, held).await;
            ended(records.as_ref(), Some((&handle, &task)), trace, ending).await;
        }
        .with_context(cx)
        .instrument(span)
    }
}

/// What a task's driver does once the task ended, a legacy task's or a long call's: keeps it in
/// the result store (when there is one, and the task was held under a handle), and ends its span.
async fn ended(
    records: Option<&Records>,
    held: Option<(&str, &LiveTask)>,
    trace: Option<TaskTrace>,
    ending: Ending,
) {
    if let (Some(records), Some((handle, task))) = (records, held) {
        records.keep(handle, task).await;
    }
    if let Some(trace) = trace {
        trace.end(ending.label());
    }
}

/// A task's span: its handle is recorded once the task is held.
fn task_span(tool: &str, principal: &str) -> tracing::Span {
    tracing::info_span!("task", handle = tracing::field::Empty, tool, principal)
}

/// The upstream's first answer to the task-augmented call: its task or result, or a question
/// it asks first (progress before either is dropped: no task holds it yet).
async fn create(session: &Session, params: Value) -> Result<First, TaskError> {
    let mut call = session.call(methods::TOOLS_CALL, Some(params));
    let deadline = Instant::now() + defaults::TASK_UPSTREAM_TIMEOUT;
    loop {
        let event = match tokio::time::timeout_at(deadline, call.next_event()).await {
            Ok(Ok(Some(event))) => event,
            Ok(Ok(None)) => {
                return Err(TaskError::Unavailable(UpstreamError::Closed(
                    "the call ended without a response".into(),
                )))
            }
            Ok(Err(e)) => return Err(TaskError::Unavailable(e)),
            Err(_) => {
                return Err(TaskError::Unavailable(UpstreamError::Timeout(defaults::TASK_UPSTREAM_TIMEOUT)))
            }
        };
        match event {
            UpstreamEvent::Request { .. } => return Ok(First::Asked(call, event)),
            UpstreamEvent::Notification { .. } => {}
            UpstreamEvent::Response(Outcome::Error(e)) => return Err(TaskError::Upstream(e)),
            UpstreamEvent::Response(Outcome::Result(raw)) => {
                let value = serde_json::from_str(raw.get()).map_err(|_| TaskError::Malformed("not JSON"))?;
                return wire::read_created(value).map(First::Created).map_err(TaskError::Malformed);
            }
        }
    }
}

async fn close(session: &Session) {
    if let Err(e) = session.close().await {
        tracing::debug!(error = %e, "closing a task's upstream session");
    }
}

/// The detailed task of a good id whose task this replica no longer holds (it restarted, or
/// dropped the finished task under `tasks.max_tasks`).
fn lost(task_id: &str) -> Value {
    failed_task(
        task_id,
        "the gateway no longer holds this task: the replica that ran it restarted, or dropped its result under its bounds",
    )
}

/// The detailed task of a good id that ended `failed` with the gateway's own `message`, for a
/// task no replica can tell more of.
fn failed_task(task_id: &str, message: &str) -> Value {
    let now = wire::iso8601(unix_ms());
    json!({
        "resultType": "complete",
        "taskId": task_id,
        "status": "failed",
        "createdAt": now,
        "lastUpdatedAt": now,
        "ttlMs": 0,
        "error": { "code": crate::protocol::codes::INTERNAL_ERROR, "message": message },
    })
}

fn unix_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}
