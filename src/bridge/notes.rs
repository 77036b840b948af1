//! What of the upstream's notifications a 2026-07-28 request sees, and the upstream log level
//! behind it.
//!
//! A request's response stream may carry two kinds of notification before its result: progress
//! (when it gave a `progressToken`) and log messages (when its `_meta` carries
//! `io.modelcontextprotocol/logLevel`, only at or above that level; never without it: the
//! logging page's MUST NOT). Everything else a legacy server notifies during a call stays here:
//! list changes and resource updates belong to `subscriptions/listen`, and
//! `notifications/elicitation/complete` was removed in 2026-07-28 (a URL elicitation's retry is
//! how the client resumes), so it is consumed.
//!
//! Legacy logging is per session (`logging/setLevel`), and a pooled session serves one call at
//! a time: before its call, the session is set to the level the request asks for, when that
//! differs from what the session was last set to and the server declared `logging`. The level
//! is cached per session, so a request without a level, or with the session's level, costs no
//! upstream request. Messages are filtered here too, so a session left more verbose by an
//! earlier request (or a server that ignores the level) never shows a request less than it
//! asked for or more.

use serde_json::{json, Map, Value};
use tokio::sync::mpsc;

use crate::protocol::log_level::LogLevel;
use crate::protocol::methods;
use crate::upstream::Session;

/// Where the notifications of the current round go, and what the client asked to see.
#[derive(Debug)]
pub struct Notes {
    /// The client's `progressToken`: progress is relayed only when there is one.
    pub progress_token: Option<Value>,
    /// The client's `_meta` log level: log messages are relayed only when there is one.
    pub log_level: Option<LogLevel>,
    pub tx: mpsc::Sender<Value>,
}

/// The notifications the bridge tells apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Progress,
    Log,
    ElicitationComplete,
    Other,
}

// === impl Notes ===

impl Notes {
    /// The message for the client's stream for one upstream notification, if this request
    /// may see it.
    pub(super) fn relay(&self, method: &str, params: Option<Value>) -> Option<Value> {
        match classify(method) {
            Kind::Progress => self.progress(params),
            Kind::Log => self.log(params),
            Kind::ElicitationComplete => {
                tracing::debug!("upstream notifications/elicitation/complete consumed");
                None
            }
            Kind::Other => None,
        }
    }

    /// Every round is a new upstream call given the current front request's token, but the
    /// client is only ever shown its own token.
    fn progress(&self, params: Option<Value>) -> Option<Value> {
        let token = self.progress_token.as_ref()?;
        let Some(Value::Object(mut p)) = params else { return None };
        p.insert("progressToken".into(), token.clone());
        Some(json!({ "jsonrpc": "2.0", "method": methods::PROGRESS, "params": p }))
    }

    /// A log message at or above the asked level, with the fields of a 2026-07-28
    /// `LoggingMessageNotificationParams` only (`level`, `logger`, `data`).
    fn log(&self, params: Option<Value>) -> Option<Value> {
        let wanted = self.log_level?;
        let level = LogLevel::of_message(params.as_ref())?;
        if level < wanted {
            return None;
        }
        let Some(Value::Object(p)) = params else { return None };
        let kept: Map<String, Value> =
            p.into_iter().filter(|(k, _)| matches!(k.as_str(), "level" | "logger" | "data")).collect();
        Some(json!({ "jsonrpc": "2.0", "method": methods::MESSAGE, "params": kept }))
    }
}

fn classify(method: &str) -> Kind {
    match method {
        methods::PROGRESS => Kind::Progress,
        methods::MESSAGE => Kind::Log,
        methods::ELICITATION_COMPLETE => Kind::ElicitationComplete,
        _ => Kind::Other,
    }
}

/// Sets the session's upstream log level to `wanted` before a call, when the request asks for
/// one, the server declared `logging` and the session is not already there. A refusal or a
/// failure is logged and the call goes on: its messages are still filtered here.
pub(super) async fn align_level(session: &Session, wanted: Option<LogLevel>) {
    let Some(wanted) = wanted else { return };
    if !session.declares_logging() || session.log_level() == Some(wanted) {
        return;
    }
    match session.set_log_level(wanted).await {
        Ok(Ok(())) => tracing::debug!(level = wanted.as_str(), "upstream log level set"),
        Ok(Err(e)) => tracing::warn!(
            level = wanted.as_str(),
            code = e.code,
            upstream_message = %e.message,
            "upstream refused logging/setLevel; its messages are filtered by the gateway"
        ),
        Err(e) => tracing::warn!(level = wanted.as_str(), error = %e, "logging/setLevel failed upstream"),
    }
}

#[cfg(test)]
mod tests {
    use super::super::guard::tests::upstream;
    use super::*;

    #[tokio::test]
    async fn the_session_is_set_to_the_level_asked_once_and_only_when_it_differs() {
        let (demo, pool) = upstream();
        let lease = pool.lease((std::sync::Arc::from("p"), 0), &json!({})).await.unwrap();
        let session = lease.session();
        assert!(session.declares_logging(), "the demo declares logging");
        align_level(session, None).await;
        assert_eq!((session.log_level(), demo.stats.set_levels()), (None, 0), "no level asked, none set");
        align_level(session, Some(LogLevel::Warning)).await;
        assert_eq!((session.log_level(), demo.stats.set_levels()), (Some(LogLevel::Warning), 1));
        align_level(session, Some(LogLevel::Warning)).await;
        assert_eq!(demo.stats.set_levels(), 1, "the session is there already");
        align_level(session, Some(LogLevel::Debug)).await;
        assert_eq!((session.log_level(), demo.stats.set_levels()), (Some(LogLevel::Debug), 2));
    }

    fn notes(token: Option<Value>, level: Option<LogLevel>) -> Notes {
        let (tx, _rx) = mpsc::channel(1);
        Notes { progress_token: token, log_level: level, tx }
    }

    fn message(level: &str) -> Option<Value> {
        Some(json!({"level": level, "logger": "db", "data": {"n": 1}, "_meta": {"x": 1}}))
    }

    #[test]
    fn logs_at_or_above_the_asked_level_are_relayed_with_their_own_fields() {
        let n = notes(None, Some(LogLevel::Warning));
        assert_eq!(n.relay(methods::MESSAGE, message("info")), None);
        assert_eq!(n.relay(methods::MESSAGE, message("notice")), None);
        let relayed = n.relay(methods::MESSAGE, message("warning")).unwrap();
        assert_eq!(
            relayed,
            json!({"jsonrpc": "2.0", "method": "notifications/message",
                   "params": {"level": "warning", "logger": "db", "data": {"n": 1}}})
        );
        assert!(n.relay(methods::MESSAGE, message("emergency")).is_some());
        // A level this revision does not know is never relayed.
        assert_eq!(n.relay(methods::MESSAGE, message("fatal")), None);
    }

    #[test]
    fn without_a_level_no_log_is_relayed() {
        let n = notes(Some(json!(1)), None);
        for level in LogLevel::ALL {
            assert_eq!(n.relay(methods::MESSAGE, message(level.as_str())), None);
        }
    }

    #[test]
    fn progress_carries_the_clients_token_and_needs_one() {
        let params = || Some(json!({"progressToken": 99, "progress": 1}));
        let with = notes(Some(json!("mine")), Some(LogLevel::Debug));
        let note = with.relay(methods::PROGRESS, params()).unwrap();
        assert_eq!(note["params"], json!({"progressToken": "mine", "progress": 1}));
        assert_eq!(notes(None, Some(LogLevel::Debug)).relay(methods::PROGRESS, params()), None);
    }

    #[test]
    fn elicitation_complete_and_other_notifications_are_consumed() {
        let n = notes(Some(json!(1)), Some(LogLevel::Debug));
        let complete = Some(json!({"elicitationId": "e-1"}));
        assert_eq!(n.relay(methods::ELICITATION_COMPLETE, complete), None);
        assert_eq!(n.relay("notifications/resources/list_changed", None), None);
        assert_eq!(classify(methods::ELICITATION_COMPLETE), Kind::ElicitationComplete);
    }
}
