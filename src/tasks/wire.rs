//! The two task dialects and the translation between them, with no I/O.
//!
//! Legacy (2025-11-25) tasks: a `task: {ttl}` param on `tools/call`, a nested
//! `{task: {taskId, status, ttl, pollInterval, ...}}` answer, `tasks/get` without the result,
//! the blocking `tasks/result`, and `execution.taskSupport` on each tool. The tasks extension
//! (`io.modelcontextprotocol/tasks`): a flat `CreateTaskResult` (`resultType: "task"`,
//! `ttlMs`, `pollIntervalMs`), and `tasks/get` answering the detailed task with its `result`,
//! `error` or `inputRequests` inlined. Field names here follow the extension's specification,
//! and the conformance suite's checks of it (docs/src/tasks.md).

use serde_json::{json, Map, Value};

/// The extension's identifier, under `capabilities.extensions`.
pub const EXTENSION: &str = "io.modelcontextprotocol/tasks";
/// The legacy `_meta` key tying a message to its task; the extension drops it.
const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";
/// The `progressToken` the gateway gives a task's upstream call when the client gave none: a
/// legacy server reports progress only on a request that carries one, and the task's session
/// carries nothing else, so any token will do.
const PROGRESS_TOKEN: &str = "mrtr-gateway-task";

/// A tool's `execution.taskSupport`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskSupport {
    Forbidden,
    Optional,
    Required,
}

// === impl TaskSupport ===

impl TaskSupport {
    /// The support a listed tool declares (`forbidden` when it says nothing).
    pub fn of(tool: &Value) -> Self {
        match tool.pointer("/execution/taskSupport").and_then(Value::as_str) {
            Some("required") => Self::Required,
            Some("optional") => Self::Optional,
            _ => Self::Forbidden,
        }
    }
}

/// True when the request's `clientCapabilities` declare the extension.
pub fn extension_declared(caps: &Value) -> bool {
    caps.get("extensions").and_then(|e| e.get(EXTENSION)).is_some_and(|v| !v.is_null())
}

/// `data.requiredCapabilities` of the `-32021` a client without the extension gets.
pub fn required_capabilities() -> Value {
    json!({ "extensions": { EXTENSION: {} } })
}

/// The parts of a legacy `CreateTaskResult` the gateway keeps.
#[derive(Debug, Clone, PartialEq)]
pub struct LegacyTask {
    pub task_id: String,
    pub status: String,
    pub created_at: Option<String>,
    pub status_message: Option<String>,
}

/// What the upstream answered a task-augmented `tools/call` with.
#[derive(Debug)]
pub enum Created {
    Task(LegacyTask),
    /// A plain result: the server ran the tool at once (it may, for an `optional` tool).
    Result(Value),
}

/// Makes `tools/call` params a legacy task request: `task: {ttl}`, and a `progressToken` (the
/// client's, else the gateway's) so that the server reports the task's progress.
pub fn augment(params: &mut Value, ttl_ms: u64) {
    let Some(p) = params.as_object_mut() else { return };
    p.insert("task".into(), json!({ "ttl": ttl_ms }));
    let meta = p.entry("_meta").or_insert_with(|| json!({}));
    if let Some(meta) = meta.as_object_mut() {
        meta.entry(crate::protocol::meta::PROGRESS_TOKEN).or_insert_with(|| json!(PROGRESS_TOKEN));
    }
}

/// The status message a legacy `notifications/progress` makes: its `message`, else
/// `progress X/Y`, or `progress X` without a total; `None` without a numeric `progress`.
pub fn progress_message(params: &Value) -> Option<String> {
    if let Some(message) = params.get("message").and_then(Value::as_str).filter(|m| !m.is_empty()) {
        return Some(message.to_owned());
    }
    let progress = params.get("progress").filter(|v| v.is_number())?;
    Some(match params.get("total").filter(|v| v.is_number()) {
        Some(total) => format!("progress {progress}/{total}"),
        None => format!("progress {progress}"),
    })
}

/// The task a legacy message names in its related-task `_meta` (2025-11-25: a server's request
/// associated with a task must carry it).
pub fn related_task(params: Option<&Value>) -> Option<&str> {
    params?.get("_meta")?.get(RELATED_TASK)?.get("taskId")?.as_str()
}

/// Reads a legacy `CreateTaskResult` (`{task: {...}}`), or a plain result.
pub fn read_created(result: Value) -> Result<Created, &'static str> {
    let Some(task) = result.get("task") else {
        return match result.get("content") {
            Some(_) => Ok(Created::Result(clean_result(result))),
            None => Err("neither task nor content"),
        };
    };
    let text = |name: &str| task.get(name).and_then(Value::as_str).map(str::to_owned);
    let task_id = text("taskId").filter(|t| !t.is_empty()).ok_or("task.taskId missing")?;
    Ok(Created::Task(LegacyTask {
        task_id,
        status: text("status").unwrap_or_else(|| "working".to_owned()),
        created_at: text("createdAt"),
        status_message: text("statusMessage"),
    }))
}

/// The status a legacy `tasks/get` answer reports, and its message.
pub fn read_status(result: &Value) -> (Option<&str>, Option<&str>) {
    let status = result.get("status").and_then(Value::as_str);
    (status, result.get("statusMessage").and_then(Value::as_str))
}

/// A task's state as the extension shows it, without the id.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    pub status: &'static str,
    pub status_message: Option<String>,
    pub created_at: String,
    pub updated_at: String,
    pub ttl_ms: u64,
    pub poll_interval_ms: u64,
    /// The result of a `completed` task, the error of a `failed` one.
    pub result: Option<Value>,
    pub error: Option<Value>,
    /// The open questions of an `input_required` task.
    pub input_requests: Option<Map<String, Value>>,
}

/// The flat `CreateTaskResult` of the extension.
pub fn create_result(task_id: &str, s: &Snapshot) -> Value {
    let mut out = base(task_id, s);
    out.insert("resultType".into(), json!("task"));
    Value::Object(out)
}

/// The detailed task `tasks/get` answers.
pub fn detailed(task_id: &str, s: &Snapshot) -> Value {
    let mut out = base(task_id, s);
    out.insert("resultType".into(), json!("complete"));
    if let Some(result) = &s.result {
        out.insert("result".into(), result.clone());
    }
    if let Some(error) = &s.error {
        out.insert("error".into(), error.clone());
    }
    if let Some(requests) = &s.input_requests {
        out.insert("inputRequests".into(), Value::Object(requests.clone()));
    }
    Value::Object(out)
}

fn base(task_id: &str, s: &Snapshot) -> Map<String, Value> {
    let mut out = Map::new();
    out.insert("taskId".into(), json!(task_id));
    out.insert("status".into(), json!(s.status));
    if let Some(message) = &s.status_message {
        out.insert("statusMessage".into(), json!(message));
    }
    out.insert("createdAt".into(), json!(s.created_at));
    out.insert("lastUpdatedAt".into(), json!(s.updated_at));
    out.insert("ttlMs".into(), json!(s.ttl_ms));
    out.insert("pollIntervalMs".into(), json!(s.poll_interval_ms));
    out
}

/// A legacy task result as the extension inlines it: the related-task `_meta` removed (and
/// `_meta` itself when nothing else was in it).
pub fn clean_result(mut result: Value) -> Value {
    if let Some(object) = result.as_object_mut() {
        let empty = match object.get_mut("_meta").and_then(Value::as_object_mut) {
            Some(meta) => {
                meta.remove(RELATED_TASK);
                meta.is_empty()
            }
            None => false,
        };
        if empty {
            object.remove("_meta");
        }
    }
    result
}

/// `unix_ms` as an ISO-8601 UTC timestamp with milliseconds (`2026-12-03T16:16:11.000Z`).
pub fn iso8601(unix_ms: u64) -> String {
    let (secs, ms) = (unix_ms / 1000, unix_ms % 1000);
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{ms:03}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

/// Days since 1970-01-01 as a proleptic Gregorian date (H. Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot() -> Snapshot {
        Snapshot {
            status: "working",
            status_message: None,
            created_at: iso8601(0),
            updated_at: iso8601(1_000),
            ttl_ms: 60_000,
            poll_interval_ms: 500,
            result: None,
            error: None,
            input_requests: None,
        }
    }

    #[test]
    fn the_create_result_is_flat_and_renamed() {
        let v = create_result("t1.x", &snapshot());
        assert_eq!(v["resultType"], "task");
        assert_eq!(v["taskId"], "t1.x");
        assert_eq!((v["ttlMs"].as_u64(), v["pollIntervalMs"].as_u64()), (Some(60_000), Some(500)));
        for legacy in ["task", "ttl", "pollInterval", "result", "error", "inputRequests", "requestState"] {
            assert!(v.get(legacy).is_none(), "{legacy} in {v}");
        }
    }

    #[test]
    fn the_detailed_task_inlines_what_it_has() {
        let mut s = snapshot();
        s.status = "completed";
        s.result = Some(json!({"content": [{"type": "text", "text": "done"}]}));
        let v = detailed("t1.x", &s);
        assert_eq!((v["resultType"].as_str(), v["status"].as_str()), (Some("complete"), Some("completed")));
        assert_eq!(v["result"]["content"][0]["text"], "done");
        assert!(v.get("error").is_none() && v.get("inputRequests").is_none());
    }

    #[test]
    fn legacy_answers_are_read() {
        let created = read_created(json!({"task": {"taskId": "u-1", "status": "working", "ttl": 5,
            "createdAt": "2026-01-01T00:00:00Z"}}));
        match created.unwrap() {
            Created::Task(t) => assert_eq!((t.task_id.as_str(), t.status.as_str()), ("u-1", "working")),
            other => panic!("{other:?}"),
        }
        assert!(matches!(read_created(json!({"content": []})), Ok(Created::Result(_))));
        assert!(read_created(json!({"task": {}})).is_err());
        assert!(read_created(json!({})).is_err());
    }

    #[test]
    fn a_task_request_carries_its_ttl_and_a_progress_token() {
        let mut params = json!({"name": "t", "arguments": {}});
        augment(&mut params, 5_000);
        assert_eq!(params["task"], json!({"ttl": 5_000}));
        assert_eq!(params["_meta"]["progressToken"], PROGRESS_TOKEN);
        let mut theirs = json!({"name": "t", "_meta": {"progressToken": 7, "other": "x"}});
        augment(&mut theirs, 5_000);
        assert_eq!(theirs["_meta"], json!({"progressToken": 7, "other": "x"}), "the client's token is kept");
    }

    #[test]
    fn the_related_task_is_read() {
        let related = json!({"message": "?", "_meta": {RELATED_TASK: {"taskId": "u-1"}}});
        assert_eq!(related_task(Some(&related)), Some("u-1"));
        assert_eq!(related_task(Some(&json!({"message": "?"}))), None);
        assert_eq!(related_task(None), None);
    }

    #[test]
    fn progress_becomes_a_status_message() {
        let message = |p: Value| progress_message(&p);
        assert_eq!(
            message(json!({"progress": 1, "total": 3, "message": "fetching"})).as_deref(),
            Some("fetching")
        );
        assert_eq!(message(json!({"progress": 2, "total": 3})).as_deref(), Some("progress 2/3"));
        assert_eq!(message(json!({"progress": 2.5, "message": ""})).as_deref(), Some("progress 2.5"));
        assert_eq!(message(json!({"progressToken": 1})), None);
        assert_eq!(message(json!({"progress": "half"})), None);
    }

    #[test]
    fn the_related_task_meta_is_stripped() {
        let r = json!({"content": [], "_meta": {RELATED_TASK: {"taskId": "u-1"}}});
        assert_eq!(clean_result(r), json!({"content": []}));
        let kept = json!({"content": [], "_meta": {RELATED_TASK: {}, "other": 1}});
        assert_eq!(clean_result(kept), json!({"content": [], "_meta": {"other": 1}}));
    }

    #[test]
    fn support_and_declaration_are_read() {
        assert_eq!(
            TaskSupport::of(&json!({"execution": {"taskSupport": "required"}})),
            TaskSupport::Required
        );
        assert_eq!(
            TaskSupport::of(&json!({"execution": {"taskSupport": "optional"}})),
            TaskSupport::Optional
        );
        assert_eq!(TaskSupport::of(&json!({"name": "greet"})), TaskSupport::Forbidden);
        assert!(extension_declared(&json!({"extensions": {EXTENSION: {}}})));
        assert!(!extension_declared(&json!({"extensions": {}})));
        assert!(!extension_declared(&json!({})));
    }

    #[test]
    fn timestamps_are_iso8601() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso8601(1_796_314_571_250), "2026-12-03T16:16:11.250Z");
        assert_eq!(iso8601(951_782_400_000), "2000-02-29T00:00:00.000Z");
    }
}
