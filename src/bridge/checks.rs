//! The 2026-07-28 checks of a run ([`crate::schema`]): its questions before they reach the
//! client (repaired, refused when invalid, and held to `elicitation.sensitive` when they ask
//! for a secret), and a completed `tools/call`'s `structuredContent` against the tool's
//! `outputSchema`. Both the replay and the park paths go through here: every question of a run
//! passes [`Run::screen`] (a parked call's open questions passed it when they were first asked),
//! and every reply to a client passes [`Bridge::checked_output`].
//!
//! How a refusal reaches the client: a `tools/call` gets a tool result with `isError: true`
//! and a text naming the tool and the reason, which the model sees (the spec's advice for
//! errors that come from a tool, and a 2026-07-28 client checks no `outputSchema` against an
//! error result); `prompts/get` and `resources/read`, which have no error result, get a
//! JSON-RPC error (`-32603`) with the same text. Nothing the upstream wrote is in either: its
//! words go to the log line.

use crate::protocol::quote::quoted;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};

use super::round::{respond, Run};
use super::{Bridge, MrtrRequest, Reply};
use crate::error::FrontError;
use crate::mrtr::url_elicitations;
use crate::protocol::jsonrpc::{ErrorObject, Outcome};
use crate::protocol::methods::MrtrMethod;
use crate::protocol::{codes, RequestId};
use crate::schema::question::{CheckedQuestion, INVALID_QUESTION};
use crate::schema::{Finding, Refusal, Sensitive, SensitiveAction};
use crate::upstream::Session;

/// What to do with a question after [`Run::screen`].
pub(super) enum Screened {
    /// Ask it (or answer it from the journal), with these params.
    Go,
    /// It was answered upstream (refused, or declined); end the call with this reply.
    End(Result<Reply, FrontError>),
}

/// The few fields of a result the output check reads.
#[derive(Deserialize)]
struct ResultView<'a> {
    #[serde(rename = "structuredContent", borrow, default)]
    structured: Option<&'a RawValue>,
    #[serde(rename = "isError", default)]
    is_error: bool,
}

// === impl Run ===

impl Run<'_> {
    /// Screens question `id` upstream's `checked` found: an invalid one is refused upstream,
    /// one that asks for a secret the policy refuses is declined upstream on the user's behalf;
    /// either ends the call with a reply naming why.
    pub(super) async fn screen(
        &self,
        session: &Session,
        id: &RequestId,
        checked: &CheckedQuestion,
    ) -> Screened {
        let tool = self.req.target.as_str();
        if let Some((refusal, detail)) = &checked.refused {
            self.bridge.metrics.tools.schema(Some(tool), Finding::Refusal(*refusal), detail);
            let refused =
                ErrorObject { code: codes::INVALID_PARAMS, message: INVALID_QUESTION.to_owned(), data: None };
            respond(session, id, Err(refused)).await;
            return Screened::End(refusal_reply(self.req, &question_refused(tool, *refusal)));
        }
        let policy = self.bridge.sensitive;
        let Some(&(reason, _)) =
            checked.sensitive.iter().find(|(r, _)| policy.action(*r) == SensitiveAction::Refused)
        else {
            return Screened::Go;
        };
        for (r, field) in &checked.sensitive {
            self.bridge.metrics.tools.sensitive(tool, *r, SensitiveAction::Refused, field);
        }
        respond(session, id, Ok(json!({"action": "decline"}))).await;
        Screened::End(refusal_reply(self.req, &crate::schema::sensitive::declined_message(tool, reason)))
    }

    /// Counts what a question that goes to the client carries: its repairs, and its secrets
    /// (relayed under `warn`).
    pub(super) fn asked(&self, checked: &CheckedQuestion) {
        let tool = self.req.target.as_str();
        for repair in &checked.repairs {
            self.bridge.metrics.tools.schema(Some(tool), Finding::Repair(*repair), "");
        }
        for (reason, field) in &checked.sensitive {
            self.bridge.metrics.tools.sensitive(tool, *reason, SensitiveAction::Warned, field);
        }
    }

    /// A `-32042` (URL elicitation required) whose URLs the policy refuses: the reply that
    /// ends the call (the upstream already ended it). Under `warn`, its secrets are counted.
    pub(super) fn url_refusal(&self, outcome: &Outcome) -> Option<Result<Reply, FrontError>> {
        let Outcome::Error(e) = outcome else { return None };
        if e.code != codes::LEGACY_URL_ELICITATION_REQUIRED {
            return None;
        }
        let listed = url_elicitations(e.data.as_ref()).ok()?;
        let found: Vec<Sensitive> = listed
            .iter()
            .filter_map(|p| p.get("url").and_then(Value::as_str))
            .filter_map(crate::schema::sensitive::url)
            .collect();
        let tool = self.req.target.as_str();
        let policy = self.bridge.sensitive;
        let refused = found.iter().copied().find(|r| policy.action(*r) == SensitiveAction::Refused);
        let action = if refused.is_some() { SensitiveAction::Refused } else { SensitiveAction::Warned };
        for reason in &found {
            self.bridge.metrics.tools.sensitive(tool, *reason, action, "url");
        }
        refused
            .map(|reason| refusal_reply(self.req, &crate::schema::sensitive::declined_message(tool, reason)))
    }
}

// === impl Bridge ===

impl Bridge {
    /// A completed `tools/call`'s `structuredContent` checked against its tool's
    /// `outputSchema`: a result that breaks it becomes an error result naming the tool and
    /// the reason. No work for a tool without an `outputSchema`, a result without
    /// `structuredContent`, or an error result.
    pub(super) fn checked_output(
        &self,
        req: &MrtrRequest,
        reply: Result<Reply, FrontError>,
    ) -> Result<Reply, FrontError> {
        let (Some(schema), Ok(Reply::Complete(raw))) = (&req.output, &reply) else { return reply };
        if !raw.get().contains("\"structuredContent\"") {
            return reply;
        }
        let Ok(view) = serde_json::from_str::<ResultView<'_>>(raw.get()) else { return reply };
        let Some(structured) = view.structured.filter(|_| !view.is_error) else { return reply };
        let Ok(value) = serde_json::from_str::<Value>(structured.get()) else { return reply };
        let Err(why) = schema.check(&value) else { return reply };
        let (tool, refusal) = (req.target.as_str(), Refusal::StructuredContentInvalid);
        self.metrics.tools.schema(Some(tool), Finding::Refusal(refusal), &why);
        refusal_reply(req, &crate::schema::refused_result(tool))
    }
}

fn question_refused(tool: &str, refusal: Refusal) -> String {
    format!(
        "mrtr-gateway refused a question of {}: {} ({})",
        quoted(tool),
        refusal.describe(),
        refusal.as_str()
    )
}

/// The reply that tells the client of a refusal: an error result for a `tools/call`, a
/// JSON-RPC error otherwise.
fn refusal_reply(req: &MrtrRequest, message: &str) -> Result<Reply, FrontError> {
    if req.method != MrtrMethod::ToolsCall {
        return Err(FrontError::Refused(message.to_owned()));
    }
    let result = json!({"content": [{"type": "text", "text": message}], "isError": true});
    RawValue::from_string(result.to_string()).map(Reply::Complete).map_err(FrontError::internal)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_tool_and_the_reason_only() {
        let m = crate::schema::sensitive::declined_message("login", Sensitive::PasswordFormat);
        assert!(m.contains("\"login\"") && m.contains("password_format") && m.contains("\"refuse\""), "{m}");
        let m = crate::schema::sensitive::declined_message("open", Sensitive::ScriptUrl);
        assert!(m.contains("always refused"), "{m}");
    }
}
