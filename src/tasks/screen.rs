//! The checks a question asked inside a task passes before `tasks/get` shows it: the same three
//! an ordinary call's question passes in `src/bridge/round.rs` and `src/bridge/checks.rs`, so
//! that a task is no way around them. In order:
//!
//! 1. the client's capabilities (those of the request that created the task): a question it
//!    did not declare the capability for is refused upstream and counted in
//!    `capability_denials_total`;
//! 2. the 2026-07-28 schema ([`crate::schema::question::check`]): an invalid question is refused
//!    upstream, a repaired one is shown repaired; both counted in the migration report;
//! 3. `elicitation.sensitive`: a question asking for a secret the policy refuses (and a
//!    `javascript:` or `data:` URL, whatever the policy) is declined upstream on the user's
//!    behalf; one it warns about is shown; both counted in the migration report.
//!
//! A refused question is never shown: the task's `statusMessage` names why instead, in the
//! gateway's words (the upstream's go to the log line). [`screen`] decides; [`shown`] counts
//! what a question that went to the client carried. Both are used by `live::surface`, which
//! legacy tasks and long calls share.
//!
//! A task's result meets the check an ordinary call's result meets in `src/bridge/checks.rs`
//! ([`result`]): `structuredContent` that breaks the tool's `outputSchema` is replaced by an
//! error result naming the tool and the reason, counted in the migration report. This holds
//! for a result `tasks/get` shows and for one a task tool answered at once.

use serde_json::{json, Value};

use super::metrics::TaskMetrics;
use crate::capabilities::{self, ClientCaps};
use crate::protocol::codes;
use crate::protocol::jsonrpc::ErrorObject;
use crate::protocol::quote::quoted;
use crate::schema::question::{self, CheckedQuestion, INVALID_QUESTION};
use crate::schema::{Finding, OutputSchema, Refusal, SensitiveAction, SensitivePolicy};

/// What a task's questions are held to: its client's capabilities and the sensitive-forms policy.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Rules {
    pub caps: ClientCaps,
    pub sensitive: SensitivePolicy,
}

/// What becomes of one question.
#[derive(Debug)]
pub(super) enum Screened {
    /// Show it; its params are `checked.repaired` when they were repaired.
    Show(CheckedQuestion),
    /// Never shown: answer the upstream this, and tell the client `why` in the status message.
    Refuse { answer: Result<Value, ErrorObject>, why: String },
}

/// Holds question `method` of a task of `tool` to `rules`, counting a refusal.
pub(super) fn screen(
    rules: &Rules,
    metrics: &TaskMetrics,
    tool: &str,
    method: &str,
    params: Option<&Value>,
) -> Screened {
    let required = match ClientCaps::required_for(method, params) {
        Ok(required) => required,
        Err(e) => {
            let why = format!("mrtr-gateway refused a question of {}: {e}", quoted(tool));
            return Screened::Refuse { answer: Err(error(codes::INVALID_PARAMS, e.to_string())), why };
        }
    };
    if rules.caps.missing(&required).is_some() {
        let capability = capabilities::label(method);
        metrics.capability_denials.with_label_values(&[capability]).inc();
        tracing::info!(tool, capability, "a task's question needs a capability its client did not declare");
        let why = format!(
            "mrtr-gateway refused a question of {}: the client did not declare the {capability} capability it needs",
            quoted(tool)
        );
        return Screened::Refuse { answer: Err(error(codes::INTERNAL_ERROR, why.clone())), why };
    }
    let checked = question::check(method, params);
    if let Some((refusal, detail)) = &checked.refused {
        report(metrics, |r| r.schema(Some(tool), Finding::Refusal(*refusal), detail));
        let why = format!(
            "mrtr-gateway refused a question of {}: {} ({})",
            quoted(tool),
            refusal.describe(),
            refusal.as_str()
        );
        return Screened::Refuse {
            answer: Err(error(codes::INVALID_PARAMS, INVALID_QUESTION.to_owned())),
            why,
        };
    }
    let policy = rules.sensitive;
    let refused = checked.sensitive.iter().find(|(r, _)| policy.action(*r) == SensitiveAction::Refused);
    let Some(&(reason, _)) = refused else { return Screened::Show(checked) };
    for (r, field) in &checked.sensitive {
        report(metrics, |report| report.sensitive(tool, *r, SensitiveAction::Refused, field));
    }
    Screened::Refuse {
        answer: Ok(json!({"action": "decline"})),
        why: crate::schema::sensitive::declined_message(tool, reason),
    }
}

/// Counts what a question that went to the client carries: its repairs, and its secrets
/// (relayed under `warn`).
pub(super) fn shown(metrics: &TaskMetrics, tool: &str, checked: &CheckedQuestion) {
    for repair in &checked.repairs {
        report(metrics, |r| r.schema(Some(tool), Finding::Repair(*repair), ""));
    }
    for (reason, field) in &checked.sensitive {
        report(metrics, |r| r.sensitive(tool, *reason, SensitiveAction::Warned, field));
    }
}

/// A task tool's `result` checked against the tool's compiled `outputSchema` (none: no
/// check): one whose `structuredContent` breaks it becomes an error result naming the tool and
/// the reason; the validator's words, which may quote the value, go to the log line.
pub(super) fn result(
    output: Option<&OutputSchema>,
    metrics: &TaskMetrics,
    tool: &str,
    result: Value,
) -> Value {
    let Some(Err(why)) = output.map(|schema| schema.check_result(&result)) else { return result };
    let refusal = Refusal::StructuredContentInvalid;
    tracing::info!(tool, detail = %why, "a task's result breaks its tool's outputSchema");
    report(metrics, |r| r.schema(Some(tool), Finding::Refusal(refusal), &why));
    let text = crate::schema::refused_result(tool);
    json!({"content": [{"type": "text", "text": text}], "isError": true})
}

fn report(metrics: &TaskMetrics, count: impl FnOnce(&crate::tool_report::ToolReport)) {
    if let Some(report) = &metrics.tools {
        count(report);
    }
}

fn error(code: i64, message: String) -> ErrorObject {
    ErrorObject { code, message, data: None }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(caps: Value, sensitive: SensitivePolicy) -> Rules {
        Rules { caps: ClientCaps::from_modern(&caps).expect("caps"), sensitive }
    }

    fn refused(screened: Screened) -> (Result<Value, ErrorObject>, String) {
        match screened {
            Screened::Refuse { answer, why } => (answer, why),
            Screened::Show(checked) => panic!("shown: {checked:?}"),
        }
    }

    #[test]
    fn an_undeclared_capability_is_refused_and_counted() {
        let metrics = TaskMetrics::detached().expect("metrics");
        let form =
            serde_json::json!({"message": "m", "requestedSchema": {"type": "object", "properties": {}}});
        let (answer, why) = refused(screen(
            &rules(json!({}), SensitivePolicy::Warn),
            &metrics,
            "t",
            "elicitation/create",
            Some(&form),
        ));
        assert_eq!(answer.expect_err("an error").code, codes::INTERNAL_ERROR);
        assert!(why.contains("elicitation capability"), "{why}");
        assert_eq!(metrics.capability_denials.with_label_values(&["elicitation"]).get(), 1);
        let declared = rules(json!({"elicitation": {}}), SensitivePolicy::Warn);
        assert!(matches!(
            screen(&declared, &metrics, "t", "elicitation/create", Some(&form)),
            Screened::Show(_)
        ));
        let (_, why) = refused(screen(&declared, &metrics, "t", "sampling/createMessage", None));
        assert!(why.contains("sampling capability"), "{why}");
    }

    #[test]
    fn invalid_questions_are_refused_and_secrets_held_to_the_policy() {
        let metrics = TaskMetrics::detached().expect("metrics");
        let all = json!({"elicitation": {"form": {}, "url": {}}});
        let nested = json!({"message": "m", "requestedSchema": {"type": "object",
            "properties": {"a": {"type": "object", "properties": {}}}}});
        let warn = rules(all.clone(), SensitivePolicy::Warn);
        let (answer, _) = refused(screen(&warn, &metrics, "t", "elicitation/create", Some(&nested)));
        assert_eq!(answer.expect_err("an error").message, INVALID_QUESTION);
        let password = json!({"message": "m", "requestedSchema": {"type": "object",
            "properties": {"pw": {"type": "string", "format": "password"}}}});
        assert!(matches!(
            screen(&warn, &metrics, "t", "elicitation/create", Some(&password)),
            Screened::Show(_)
        ));
        let refuse = rules(all, SensitivePolicy::Refuse);
        let (answer, why) = refused(screen(&refuse, &metrics, "t", "elicitation/create", Some(&password)));
        assert_eq!(answer.expect("an answer"), json!({"action": "decline"}));
        assert!(why.contains("password_format") && why.contains("\"refuse\""), "{why}");
        let script =
            json!({"mode": "url", "message": "m", "url": "javascript:alert(1)", "elicitationId": "e"});
        let (answer, why) = refused(screen(&warn, &metrics, "t", "elicitation/create", Some(&script)));
        assert_eq!(answer.expect("an answer"), json!({"action": "decline"}));
        assert!(why.contains("always refused"), "{why}");
    }

    #[test]
    fn a_result_that_breaks_the_output_schema_becomes_an_error_result() {
        let metrics = TaskMetrics::detached().expect("metrics");
        let schema = json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]});
        let page =
            json!({"tools": [{"name": "t", "inputSchema": {"type": "object"}, "outputSchema": schema}]});
        let raw = serde_json::value::to_raw_value(&page).expect("raw");
        let checked = crate::schema::Checker::default().tools(&raw, true);
        let compiled = checked.tools[0].output.clone().expect("compiled");
        let good = json!({"content": [], "structuredContent": {"n": 1}});
        assert_eq!(result(Some(&compiled), &metrics, "t", good.clone()), good);
        assert_eq!(result(None, &metrics, "t", json!({"structuredContent": "x"}))["structuredContent"], "x");
        let bad =
            result(Some(&compiled), &metrics, "t", json!({"content": [], "structuredContent": {"n": "one"}}));
        assert_eq!(bad["isError"], true, "{bad}");
        let text = bad["content"][0]["text"].as_str().unwrap_or_default();
        assert!(text.contains("structured_content_invalid") && !text.contains("one"), "{bad}");
    }
}
