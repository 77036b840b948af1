//! A legacy `-32042` (URL elicitation required) answer, as the bridge turns it into a
//! URL-mode `input_required`.
//!
//! 2026-07-28 has no such error code (the schema keeps `-32042` reserved, "2025-11-25 only"):
//! a server that needs the user to visit a URL asks for it as an `inputRequests` entry instead.
//! So for a client that declared `elicitation.url`, the elicitations the error lists become
//! this round's questions (see [`crate::mrtr::UrlVerdict`] for how the retry goes on). A client
//! that did not declare it gets -32021 naming `elicitation.url`; an error that lists nothing
//! usable, or a client that declined, gets a fixed `-32603` message naming the cause. What the
//! upstream said goes only to the log line.

use serde_json::{json, Value};

use crate::capabilities::ClientCaps;
use crate::error::FrontError;
use crate::mrtr::{url_elicitations, ReplayError};
use crate::protocol::codes;
use crate::protocol::jsonrpc::ErrorObject;
use crate::protocol::methods::ELICITATION_CREATE;

/// The URL elicitations a `-32042` answer lists (`None` for any other answer), or the error
/// the client gets instead.
pub(super) fn required(error: &ErrorObject, caps: &ClientCaps) -> Option<Result<Vec<Value>, FrontError>> {
    if error.code != codes::LEGACY_URL_ELICITATION_REQUIRED {
        return None;
    }
    let needs = ClientCaps::required_for(ELICITATION_CREATE, Some(&json!({"mode": "url"})));
    // A client without `elicitation.url` gets -32021 naming it, as it does when the upstream
    // pushes a URL elicitation mid-call: the same requirement, told the same way.
    match needs.map(|required| caps.missing(&required)) {
        Ok(None) => {}
        Ok(Some(missing)) => {
            log(error, "the request did not declare elicitation.url");
            return Some(Err(FrontError::MissingCapability { required: missing }));
        }
        Err(e) => {
            log(error, &e.to_string());
            return Some(Err(fixed("the upstream requires a URL elicitation it did not describe")));
        }
    }
    Some(url_elicitations(error.data.as_ref()).map_err(|e| {
        log(error, &e.to_string());
        fixed("the upstream requires a URL elicitation it did not describe")
    }))
}

/// The client declined or cancelled a URL elicitation the upstream still requires.
pub(super) fn refused() -> FrontError {
    fixed("the upstream requires a URL elicitation that the client declined")
}

/// A listed elicitation could not be asked.
pub(super) fn unusable(e: ReplayError) -> FrontError {
    match e {
        ReplayError::TooManyQuestions { limit } => FrontError::TooManyQuestions { limit },
        other => {
            tracing::warn!(error = %other, "upstream URL elicitation cannot be embedded");
            fixed("the upstream requires a URL elicitation it did not describe")
        }
    }
}

fn fixed(message: &str) -> FrontError {
    FrontError::Upstream(ErrorObject { code: codes::INTERNAL_ERROR, message: message.to_owned(), data: None })
}

fn log(error: &ErrorObject, why: &str) {
    tracing::warn!(upstream_message = %error.message, why, "upstream URL elicitation required error not translated");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::logging::captured::logged;

    fn url_error(data: Value) -> ErrorObject {
        ErrorObject { code: -32042, message: "secret upstream words".into(), data: Some(data) }
    }

    fn listed() -> Value {
        json!({"elicitations": [{"mode": "url", "elicitationId": "e", "url": "https://a.example/x", "message": "m"}]})
    }

    fn caps(value: Value) -> ClientCaps {
        ClientCaps::from_modern(&value).unwrap()
    }

    #[test]
    fn only_minus_32042_is_a_url_requirement() {
        let other = ErrorObject { code: -32602, message: "m".into(), data: None };
        assert!(required(&other, &caps(json!({"elicitation": {"url": {}}}))).is_none());
    }

    #[test]
    fn a_client_with_url_elicitation_gets_the_listed_elicitations() {
        let list =
            required(&url_error(listed()), &caps(json!({"elicitation": {"url": {}}}))).unwrap().unwrap();
        assert_eq!(list.len(), 1);
        assert_eq!(list[0]["url"], "https://a.example/x");
    }

    #[test]
    fn what_the_upstream_said_goes_to_the_log_line_only() {
        let client = caps(json!({"elicitation": {"form": {}}}));
        let (answer, log) = logged(tracing::Level::WARN, || required(&url_error(listed()), &client));
        let Some(Err(e)) = answer else { panic!("expected an error") };
        assert!(!e.to_object().message.contains("secret"));
        assert_eq!(log.lines().count(), 1, "{log}");
        assert!(log.contains("secret upstream words"), "{log}");
        assert!(log.contains("the request did not declare elicitation.url"), "{log}");
    }

    #[test]
    fn other_clients_get_32021_naming_url_mode_and_bad_lists_a_fixed_message() {
        let url_mode = json!({"elicitation": {"url": {}}});
        for client in [json!({}), json!({"elicitation": {}}), json!({"elicitation": {"form": {}}})] {
            let Some(Err(e)) = required(&url_error(listed()), &caps(client.clone())) else {
                panic!("expected an error for {client}")
            };
            let object = e.to_object();
            assert_eq!(object.code, -32021, "{client}");
            assert_eq!(object.data, Some(json!({"requiredCapabilities": url_mode})), "{client}");
            assert!(!object.message.contains("secret"), "{}", object.message);
        }
        let Some(Err(e)) = required(&url_error(json!({"elicitations": []})), &caps(url_mode)) else {
            panic!("expected an error for an empty list")
        };
        let object = e.to_object();
        assert_eq!(object.code, -32603);
        assert!(!object.message.contains("secret"), "{}", object.message);
        assert_eq!(object.data, None);
    }
}
