//! The report of `mrtr-gateway check`, as it is written with `--json` (and rendered for people
//! by [`super::human`]). Its fields are documented in the book's "The check command" chapter;
//! `version` changes when a field changes meaning or goes away.

use serde::Serialize;
use serde_json::Value;

/// The report's format version.
pub const VERSION: u32 = 1;

/// The whole report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub version: u32,
    /// The server as it was named: its command line, or its URL.
    pub server: String,
    /// `stdio`, `streamable-http` or `http+sse`.
    pub transport: &'static str,
    /// True when nothing a 2026-07-28 client would see breaks (`breaks` is 0, exit status 0).
    pub ok: bool,
    /// How many differences break something (`differences[].breaks`).
    pub breaks: usize,
    /// The server as a legacy client sees it, directly.
    pub direct: Side,
    /// The server as a 2026-07-28 client sees it, through the embedded gateway.
    pub gateway: Side,
    /// Every difference between the two, breaking or not.
    pub differences: Vec<Difference>,
    /// Tools whose `execution.taskSupport` is `required` or `optional` (listed directly).
    pub needs_tasks: Vec<TaskTool>,
    /// What the gateway's 2026-07-28 schema checks repaired, per tool (or list) and reason.
    pub repairs: Vec<Finding>,
    /// What they refused.
    pub refusals: Vec<Finding>,
    /// Questions that asked for a secret, per tool and reason.
    pub sensitive: Vec<Finding>,
    /// Tools whose `inputSchema`, as listed directly, is not a JSON object schema.
    pub invalid_schemas: Vec<SchemaProblem>,
    /// The calls of `--calls`, tried both ways.
    pub calls: Vec<CallReport>,
}

/// One side's view of the server.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Side {
    /// The negotiated revision (direct) or the one the gateway speaks (`2026-07-28`).
    pub protocol_version: String,
    pub server_info: Value,
    pub capabilities: Value,
    pub counts: Counts,
    /// Lists that failed, with why.
    pub errors: Vec<ListError>,
}

/// How many items each list holds; `null` for a list the server does not offer (no capability)
/// or that failed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    pub tools: Option<usize>,
    pub prompts: Option<usize>,
    pub resources: Option<usize>,
    pub resource_templates: Option<usize>,
}

/// A list request that failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ListError {
    /// `tools`, `prompts`, `resources`, `resource_templates`, or `initialize`.
    pub list: &'static str,
    pub message: String,
}

/// One difference between the direct and the gateway views.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Difference {
    /// `tool`, `prompt`, `resource`, `resource_template`, `capability`, `list`, `call`,
    /// `questions` or `refusal`.
    pub kind: &'static str,
    /// The item's name (a URI for resources), the capability, the list or the tool called.
    pub name: String,
    /// `missing` (directly, not through the gateway), `added` (the other way round),
    /// `changed`, `failed` or `refused`.
    pub change: &'static str,
    pub detail: String,
    /// A 2026-07-28 client would see this break.
    pub breaks: bool,
}

/// A tool that declares task support.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TaskTool {
    pub tool: String,
    /// `required` or `optional`.
    pub task_support: String,
    /// Whether a 2026-07-28 client sees it through the gateway.
    pub through_gateway: bool,
}

/// A count of the gateway's report for one tool (or list) and one reason.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// A tool's name, or `prompts`, `resources`, `resource_templates` for the items of a list.
    pub tool: String,
    pub reason: String,
    pub count: u64,
}

/// A tool whose input schema a 2026-07-28 client may reject.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SchemaProblem {
    pub tool: String,
    pub problem: String,
}

/// One tried call.
#[derive(Debug, Clone, Serialize)]
pub struct CallReport {
    pub tool: String,
    pub arguments: Value,
    pub direct: DirectCall,
    /// Each run through the gateway (two: the second shows whether replay is stable).
    pub gateway: Vec<GatewayRun>,
    /// The runs asked the same questions in the same rounds, and no replay diverged.
    pub stable: bool,
    /// Replays that asked a question the run before had not (the gateway's `/admin/tools`).
    pub divergences: u64,
    /// The gateway's verdict on the tool and its advice (`/admin/tools`), if it has an entry.
    pub verdict: Option<String>,
    pub advice: Option<String>,
    /// Replay is not stable for this tool: run it in park mode (`mrtr.tool_modes`).
    pub park_advised: bool,
    /// The tool's tasks of the tasks extension, as the gateway counted them (`/admin/tools`);
    /// null when it ran none.
    pub tasks: Option<TaskCounts>,
}

/// A tool's tasks: created, how they ended, and their input rounds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct TaskCounts {
    pub created: u64,
    pub completed: u64,
    pub failed: u64,
    pub cancelled: u64,
    pub input_rounds: u64,
}

/// The call made directly, questions answered in-band.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DirectCall {
    pub outcome: Outcome,
    /// The server's requests, in order.
    pub questions: Vec<Question>,
    pub error: Option<String>,
}

/// One run of the call through the gateway, retried until it completed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GatewayRun {
    pub outcome: Outcome,
    /// The questions of each `input_required` round, in order (as many as rounds); for a task,
    /// each set of new questions its `tasks/get` showed.
    pub rounds: Vec<Vec<Question>>,
    pub error: Option<String>,
    /// The call became a task of the tasks extension, followed to its end.
    pub task: bool,
}

/// How a call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// A result that is not a tool error.
    Complete,
    /// A result with `isError: true`.
    ToolError,
    /// A JSON-RPC error, or no answer.
    Error,
}

/// A question the server asked, summed up.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Question {
    /// `elicitation/create`, `sampling/createMessage` or `roots/list`.
    pub method: String,
    /// `form: <message>`, `url: <scheme://host/path>`, `sampling` or `roots`.
    pub summary: String,
}

// === impl Outcome ===

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Complete => "complete",
            Self::ToolError => "tool error",
            Self::Error => "error",
        }
    }
}
