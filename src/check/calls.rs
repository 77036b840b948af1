//! The calls file of `mrtr-gateway check --calls FILE`: the tool calls to try, with their
//! arguments, and canned answers for the questions they ask. JSON:
//!
//! ```json
//! {
//!   "answers": {"form": {"action": "accept", "content": {"name": "Ada"}}},
//!   "calls": [
//!     {"tool": "greet", "arguments": {}},
//!     {"tool": "summarize", "arguments": {"text": "..."}, "answers": {"sampling": {"role": "assistant",
//!       "content": {"type": "text", "text": "short"}, "model": "m"}}}
//!   ]
//! }
//! ```
//!
//! Bounded: the file is at most [`MAX_FILE_BYTES`] and holds at most [`MAX_CALLS`] calls.

use std::path::Path;

use serde::Deserialize;
use serde_json::{Map, Value};

use super::answers::Answers;
use super::CheckError;

/// Largest calls file read.
const MAX_FILE_BYTES: u64 = 1024 * 1024;
/// Most calls one check tries (each runs at least three times: once directly, twice through
/// the gateway).
const MAX_CALLS: usize = 64;

/// The calls to try, validated.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Calls {
    pub calls: Vec<TriedCall>,
}

/// One call: a tool, its arguments, the answers to its questions.
#[derive(Debug, Clone, PartialEq)]
pub struct TriedCall {
    pub tool: String,
    pub arguments: Map<String, Value>,
    /// The call's own answers, the file's filling in the gaps.
    pub answers: Answers,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    answers: Answers,
    calls: Vec<RawCall>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCall {
    tool: String,
    #[serde(default)]
    arguments: Map<String, Value>,
    #[serde(default)]
    answers: Answers,
}

// === impl Calls ===

impl Calls {
    /// Reads and validates the calls file at `path`.
    pub fn read(path: &Path) -> Result<Self, CheckError> {
        let invalid = |reason: String| CheckError::Calls { path: path.display().to_string(), reason };
        let size = std::fs::metadata(path).map_err(|e| invalid(e.to_string()))?.len();
        if size > MAX_FILE_BYTES {
            return Err(invalid(format!("larger than {MAX_FILE_BYTES} bytes")));
        }
        let text = std::fs::read_to_string(path).map_err(|e| invalid(e.to_string()))?;
        Self::parse(&text).map_err(invalid)
    }

    /// Parses the text of a calls file.
    pub fn parse(text: &str) -> Result<Self, String> {
        let raw: RawFile = serde_json::from_str(text).map_err(|e| e.to_string())?;
        if raw.calls.len() > MAX_CALLS {
            return Err(format!("{} calls: at most {MAX_CALLS}", raw.calls.len()));
        }
        let calls = raw
            .calls
            .into_iter()
            .enumerate()
            .map(|(i, c)| match c.tool.is_empty() {
                true => Err(format!("calls[{i}].tool is empty")),
                false => Ok(TriedCall {
                    tool: c.tool,
                    arguments: c.arguments,
                    answers: c.answers.or(&raw.answers),
                }),
            })
            .collect::<Result<_, _>>()?;
        Ok(Self { calls })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_calls_file_parses_with_its_answers_merged() {
        let calls = Calls::parse(
            r#"{"answers": {"form": {"action": "decline"}, "url": {"action": "accept"}},
                "calls": [{"tool": "greet"},
                          {"tool": "login", "arguments": {"user": "ada"}, "answers": {"url": {"action": "cancel"}}}]}"#,
        )
        .unwrap();
        assert_eq!(calls.calls.len(), 2);
        assert_eq!(calls.calls[0].answers.form, Some(json!({"action": "decline"})));
        assert!(calls.calls[0].arguments.is_empty());
        assert_eq!(calls.calls[1].arguments["user"], "ada");
        assert_eq!(calls.calls[1].answers.url, Some(json!({"action": "cancel"})));
        assert_eq!(calls.calls[1].answers.form, Some(json!({"action": "decline"})));
    }

    #[test]
    fn mistakes_are_named() {
        assert!(Calls::parse(r#"{"calls": [{"tool": ""}]}"#).unwrap_err().contains("calls[0].tool"));
        assert!(Calls::parse(r#"{"calls": [{"tool": "x", "args": {}}]}"#).unwrap_err().contains("args"));
        assert!(Calls::parse(r#"{"calls": [{"tool": "x", "arguments": [1]}]}"#).is_err());
        assert!(Calls::parse(r#"{"answers": {"forms": {}}, "calls": []}"#).unwrap_err().contains("forms"));
        let many = json!({"calls": vec![json!({"tool": "x"}); MAX_CALLS + 1]}).to_string();
        assert!(Calls::parse(&many).unwrap_err().contains("at most"));
    }
}
