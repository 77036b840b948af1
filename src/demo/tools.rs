//! The tool handlers: each one behaves like a tool of a real legacy server, asking the client
//! for input in the middle of the call the way the 2025 SDKs do.
//!
//! The asking helpers ([`ask_name`], [`sample`], [`roots`]) are shared with the prompt and the
//! resource. Handlers return a [`ToolOutcome`]; a failed server → client request becomes an
//! `isError` result naming the request, as an SDK tool that lets the error escape would.

use std::time::Duration;

use rand::Rng;
use serde_json::{json, Value};

use super::catalog::Tool;
use super::context::{AskError, CallContext, Route};
use crate::protocol::methods;

/// Bounds on `count_down`, so a call cannot keep a stream busy for long.
const MAX_STEPS: u64 = 100;
const MAX_DELAY_MS: u64 = 10_000;
const DEFAULT_DELAY_MS: u64 = 100;
/// Longest `die` waits for its earlier events to leave before it breaks its stream.
const DIE_DRAIN: Duration = Duration::from_secs(1);
/// A short pause after that, so the flush is on the wire before the connection drops.
const DIE_GRACE: Duration = Duration::from_millis(10);

/// Errors a handler turns into an `isError` result.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ToolError {
    #[error("MCP error -32602: Invalid arguments for tool {tool}: {reason}")]
    Arguments { tool: &'static str, reason: String },
    #[error(transparent)]
    Ask(#[from] AskError),
    #[error("{method} answer is malformed: {reason}")]
    Answer { method: &'static str, reason: &'static str },
    #[error("the response stream closed")]
    StreamClosed,
}

/// How a tool call ends.
#[derive(Debug)]
pub(crate) enum ToolOutcome {
    Text(String),
    Failed(String),
    /// Drop the response stream without answering.
    Abort,
}

/// What an elicitation for a name produced.
#[derive(Debug)]
pub(crate) enum NameAnswer {
    Given(String),
    /// Declined or cancelled; holds the action.
    Refused(String),
}

/// Runs one tool.
pub(crate) async fn run(ctx: &CallContext, tool: Tool, args: &Value) -> ToolOutcome {
    let result = match tool {
        Tool::Echo => echo(args),
        Tool::Greet => greet(ctx).await,
        Tool::ConfirmTwice => confirm_twice(ctx).await,
        Tool::Summarize => summarize(ctx, args).await,
        Tool::ListRoots => list_roots(ctx).await,
        Tool::AskThree => ask_three(ctx).await,
        Tool::CountDown => count_down(ctx, args).await,
        Tool::UrlLogin => url_login(ctx).await,
        Tool::FlakyQuestion => flaky_question(ctx).await,
        Tool::PlaceOrder => place_order(ctx).await,
        Tool::Hang => std::future::pending().await,
        Tool::BumpCounter => {
            let (value, notified) = ctx.resources.bump().await;
            text(format!("demo://counter is now {value}; {notified} subscribed session(s) notified."))
        }
        Tool::Die => {
            // Let what was written so far reach the client first, so the break is visibly
            // mid-stream rather than a refused response.
            ctx.stream.drained(DIE_DRAIN).await;
            tokio::time::sleep(DIE_GRACE).await;
            return ToolOutcome::Abort;
        }
    };
    result.unwrap_or_else(|error| ToolOutcome::Failed(error.to_string()))
}

fn text(s: String) -> Result<ToolOutcome, ToolError> {
    Ok(ToolOutcome::Text(s))
}

fn string_arg(tool: Tool, args: &Value, key: &str) -> Result<String, ToolError> {
    args.get(key).and_then(Value::as_str).map(str::to_owned).ok_or_else(|| ToolError::Arguments {
        tool: tool.name(),
        reason: format!("`{key}` must be a string"),
    })
}

fn echo(args: &Value) -> Result<ToolOutcome, ToolError> {
    text(format!("Echo: {}", string_arg(Tool::Echo, args, "message")?))
}

async fn greet(ctx: &CallContext) -> Result<ToolOutcome, ToolError> {
    match ask_name(ctx, "What is your name?").await? {
        NameAnswer::Given(name) => text(format!("Hello, {name}!")),
        NameAnswer::Refused(action) => text(format!("No name given ({action}).")),
    }
}

async fn confirm_twice(ctx: &CallContext) -> Result<ToolOutcome, ToolError> {
    let name = match ask_name(ctx, "What is your name?").await? {
        NameAnswer::Given(name) => name,
        NameAnswer::Refused(action) => return text(format!("No name given ({action}).")),
    };
    let schema = json!({
        "type": "object",
        "properties": {"ok": {"type": "boolean", "title": "Confirm"}},
        "required": ["ok"],
    });
    let (action, content) = elicit(ctx, &format!("Please confirm: is your name {name}?"), schema).await?;
    if action != "accept" {
        return text(format!("Not confirmed ({action})."));
    }
    let ok = content.get("ok").and_then(Value::as_bool).ok_or(ToolError::Answer {
        method: methods::ELICITATION_CREATE,
        reason: "accepted content has no boolean `ok`",
    })?;
    text(format!("Confirmed {name}: {ok}"))
}

async fn summarize(ctx: &CallContext, args: &Value) -> Result<ToolOutcome, ToolError> {
    let input = string_arg(Tool::Summarize, args, "text")?;
    let (summary, model) = sample(ctx, &input).await?;
    text(format!("Summary: {summary} (model {model})"))
}

async fn list_roots(ctx: &CallContext) -> Result<ToolOutcome, ToolError> {
    text(format!("Roots: {}", join_roots(&roots(ctx).await?)))
}

fn join_roots(uris: &[String]) -> String {
    if uris.is_empty() {
        return "(none)".to_owned();
    }
    uris.join(", ")
}

/// Three requests in flight together, like Python's `asyncio.gather`.
async fn ask_three(ctx: &CallContext) -> Result<ToolOutcome, ToolError> {
    let (name, summary, roots) =
        tokio::join!(ask_name(ctx, "Who is asking?"), sample(ctx, "three questions at once"), roots(ctx),);
    let name = match name? {
        NameAnswer::Given(name) => name,
        NameAnswer::Refused(action) => format!("({action})"),
    };
    let (summary, model) = summary?;
    let roots = join_roots(&roots?);
    text(format!("Name: {name}; Summary: {summary} (model {model}); Roots: {roots}"))
}

async fn count_down(ctx: &CallContext, args: &Value) -> Result<ToolOutcome, ToolError> {
    let steps = bounded_arg(args, "steps", None, MAX_STEPS)?;
    let delay = bounded_arg(args, "delay_ms", Some(DEFAULT_DELAY_MS), MAX_DELAY_MS)?;
    for step in 1..=steps {
        tokio::time::sleep(Duration::from_millis(delay)).await;
        ctx.progress(step, steps).await.map_err(|_| ToolError::StreamClosed)?;
    }
    text(format!("Done after {steps} steps"))
}

fn bounded_arg(args: &Value, key: &str, default: Option<u64>, max: u64) -> Result<u64, ToolError> {
    let value = match args.get(key) {
        None => default,
        Some(value) => value.as_u64(),
    };
    value.filter(|v| *v <= max).ok_or_else(|| ToolError::Arguments {
        tool: Tool::CountDown.name(),
        reason: format!("`{key}` must be an integer from 0 to {max}"),
    })
}

async fn url_login(ctx: &CallContext) -> Result<ToolOutcome, ToolError> {
    // Like the reference servers: the URL is stable for the same call, the elicitation id is
    // fresh on every run (it is a correlation id, which replay ignores).
    let elicitation_id = format!("{:032x}", rand::thread_rng().gen::<u128>());
    let params = json!({
        "mode": "url",
        "message": "Please sign in to continue.",
        "url": "https://login.example.com/authorize?client=mrtr-demo",
        "elicitationId": elicitation_id,
    });
    let answer = ctx.ask(methods::ELICITATION_CREATE, params, Route::Post).await?;
    text(format!("Logged in ({})", action_of(&answer)?))
}

/// A legacy tool that is not deterministic: its question changes on every run.
async fn flaky_question(ctx: &CallContext) -> Result<ToolOutcome, ToolError> {
    let roll: u32 = rand::thread_rng().gen_range(1..=1_000_000);
    let schema = json!({
        "type": "object",
        "properties": {"answer": {"type": "string"}},
        "required": ["answer"],
    });
    let message = format!("The server rolled {roll}. What do you say?");
    let (action, content) = elicit(ctx, &message, schema).await?;
    let answer = content.get("answer").and_then(Value::as_str).unwrap_or("");
    text(format!("Roll {roll}: {action} {answer}").trim_end().to_owned())
}

/// A legacy tool with a side effect before its question, as a real one that writes something
/// and then asks: every run places an order (counted in the stats, and its number is in the
/// result), so a replayed call places one more. After the answer it reports its one step of
/// progress (when the call has a progress token), as a tool that goes on working would.
async fn place_order(ctx: &CallContext) -> Result<ToolOutcome, ToolError> {
    let order = ctx.stats.place_order();
    let schema = json!({
        "type": "object",
        "properties": {"note": {"type": "string", "title": "Delivery note"}},
        "required": ["note"],
    });
    let (action, content) = elicit(ctx, "Order placed. Any delivery note?", schema).await?;
    ctx.progress(1, 1).await.map_err(|_| ToolError::StreamClosed)?;
    let note = content.get("note").and_then(Value::as_str).unwrap_or("");
    text(format!("Order #{order} placed ({action}) {note}").trim_end().to_owned())
}

/// Asks for a required string `name` with a form elicitation on the call's stream.
pub(crate) async fn ask_name(ctx: &CallContext, message: &str) -> Result<NameAnswer, ToolError> {
    let schema = json!({
        "type": "object",
        "properties": {"name": {"type": "string", "title": "Name", "description": "Your name"}},
        "required": ["name"],
    });
    let (action, content) = elicit(ctx, message, schema).await?;
    if action != "accept" {
        return Ok(NameAnswer::Refused(action));
    }
    let name = content.get("name").and_then(Value::as_str).ok_or(ToolError::Answer {
        method: methods::ELICITATION_CREATE,
        reason: "accepted content has no string `name`",
    })?;
    Ok(NameAnswer::Given(name.to_owned()))
}

/// A form elicitation; like the reference server, form mode is sent without a `mode` field so
/// that 2025-06-18 clients understand it too. Returns the action and the content (or null).
async fn elicit(ctx: &CallContext, message: &str, schema: Value) -> Result<(String, Value), ToolError> {
    let params = json!({"message": message, "requestedSchema": schema});
    let mut answer = ctx.ask(methods::ELICITATION_CREATE, params, Route::Post).await?;
    let action = action_of(&answer)?;
    Ok((action, answer.get_mut("content").map(Value::take).unwrap_or(Value::Null)))
}

fn action_of(answer: &Value) -> Result<String, ToolError> {
    match answer.get("action").and_then(Value::as_str) {
        Some(action @ ("accept" | "decline" | "cancel")) => Ok(action.to_owned()),
        _ => Err(ToolError::Answer {
            method: methods::ELICITATION_CREATE,
            reason: "`action` must be accept, decline or cancel",
        }),
    }
}

/// Asks the client's model to summarize `input`; returns the text and the model name.
pub(crate) async fn sample(ctx: &CallContext, input: &str) -> Result<(String, String), ToolError> {
    let params = json!({
        "messages": [{"role": "user", "content": {"type": "text", "text": format!("Please summarize: {input}")}}],
        "systemPrompt": "You are a concise summarizer.",
        "maxTokens": 100,
    });
    let answer = ctx.ask(methods::SAMPLING_CREATE_MESSAGE, params, Route::Post).await?;
    let malformed = |reason| ToolError::Answer { method: methods::SAMPLING_CREATE_MESSAGE, reason };
    let model = answer.get("model").and_then(Value::as_str).ok_or(malformed("no string `model`"))?;
    let summary = sampled_text(&answer["content"]).ok_or(malformed("no text content"))?;
    Ok((summary.to_owned(), model.to_owned()))
}

/// 2025-11-25 allows an array of content blocks where 2025-06-18 had one block.
fn sampled_text(content: &Value) -> Option<&str> {
    let block = match content {
        Value::Array(blocks) => blocks.iter().find(|b| b["type"] == "text")?,
        block => block,
    };
    block.get("text").and_then(Value::as_str)
}

/// Asks the client's roots on the standalone GET stream, as the TypeScript SDK does.
pub(crate) async fn roots(ctx: &CallContext) -> Result<Vec<String>, ToolError> {
    let answer = ctx.ask(methods::ROOTS_LIST, json!({}), Route::Standalone).await?;
    let list = answer
        .get("roots")
        .and_then(Value::as_array)
        .ok_or(ToolError::Answer { method: methods::ROOTS_LIST, reason: "no `roots` array" })?;
    Ok(list.iter().filter_map(|root| root.get("uri")?.as_str().map(str::to_owned)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sampled_text_reads_one_block_or_an_array() {
        assert_eq!(sampled_text(&json!({"type": "text", "text": "a"})), Some("a"));
        let blocks = json!([{"type": "image", "data": ""}, {"type": "text", "text": "b"}]);
        assert_eq!(sampled_text(&blocks), Some("b"));
        assert_eq!(sampled_text(&json!([])), None);
    }

    #[test]
    fn count_down_arguments_are_bounded() {
        assert_eq!(bounded_arg(&json!({"steps": 3}), "steps", None, MAX_STEPS).unwrap(), 3);
        assert!(bounded_arg(&json!({}), "steps", None, MAX_STEPS).is_err());
        assert!(bounded_arg(&json!({"steps": 101}), "steps", None, MAX_STEPS).is_err());
        assert!(bounded_arg(&json!({"steps": -1}), "steps", None, MAX_STEPS).is_err());
        assert_eq!(bounded_arg(&json!({}), "delay_ms", Some(7), 9).unwrap(), 7);
    }

    #[test]
    fn actions_are_validated() {
        assert_eq!(action_of(&json!({"action": "decline"})).unwrap(), "decline");
        let err = action_of(&json!({"action": "maybe"})).unwrap_err();
        assert!(err.to_string().contains("elicitation/create answer is malformed"));
    }

    #[test]
    fn echo_names_a_missing_argument() {
        let ToolOutcome::Text(reply) = echo(&json!({"message": "hi"})).unwrap() else {
            panic!("echo failed")
        };
        assert_eq!(reply, "Echo: hi");
        let err = echo(&json!({})).unwrap_err().to_string();
        assert!(err.contains("Invalid arguments for tool echo"), "{err}");
    }
}
