//! The syslog severities of MCP logging (RFC 5424, as the logging page of both eras lists
//! them), ordered from `debug` to `emergency`.
//!
//! A 2026-07-28 client opts in to a request's log messages with `_meta`
//! `io.modelcontextprotocol/logLevel`; a legacy server is told its session's threshold with
//! `logging/setLevel`. Both speak these eight words, so they are defined once here.

use serde_json::Value;

use super::meta;
use super::params::Params;

/// `logging/setLevel`, the legacy request that sets a session's threshold.
pub const SET_LEVEL: &str = "logging/setLevel";

/// A log severity; later variants are more severe (`Ord` follows severity).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LogLevel {
    Debug,
    Info,
    Notice,
    Warning,
    Error,
    Critical,
    Alert,
    Emergency,
}

/// A `_meta` log level that is not one of the eight.
#[derive(Debug, thiserror::Error)]
#[error(
    "_meta.{} must be one of debug, info, notice, warning, error, critical, alert, emergency",
    meta::LOG_LEVEL
)]
pub struct LogLevelError;

// === impl LogLevel ===

impl LogLevel {
    /// Every level, least severe first.
    pub const ALL: [Self; 8] = [
        Self::Debug,
        Self::Info,
        Self::Notice,
        Self::Warning,
        Self::Error,
        Self::Critical,
        Self::Alert,
        Self::Emergency,
    ];

    /// The wire spelling (the only place it is written).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Debug => "debug",
            Self::Info => "info",
            Self::Notice => "notice",
            Self::Warning => "warning",
            Self::Error => "error",
            Self::Critical => "critical",
            Self::Alert => "alert",
            Self::Emergency => "emergency",
        }
    }

    /// Parses a wire spelling; `None` for anything else (the words are lower case only).
    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|l| l.as_str() == text)
    }

    /// A compact number for an atomic cache: `index + 1`, so that 0 can mean "none".
    pub const fn rank(self) -> u8 {
        self as u8 + 1
    }

    /// The inverse of [`LogLevel::rank`]; `None` for 0 or anything out of range.
    pub fn from_rank(rank: u8) -> Option<Self> {
        Self::ALL.get(usize::from(rank.checked_sub(1)?)).copied()
    }

    /// The level a request's `params._meta` asks for: absent (or `null`) is none; anything but
    /// one of the eight words is an error (the logging page: `-32602`).
    pub fn from_params(params: &Params) -> Result<Option<Self>, LogLevelError> {
        match params.meta(meta::LOG_LEVEL) {
            None | Some("null") => Ok(None),
            Some(json) => {
                let word = super::params::string(json).map_err(|_| LogLevelError)?;
                Self::parse(&word).map(Some).ok_or(LogLevelError)
            }
        }
    }

    /// The level of a `notifications/message`'s params; `None` when it names none this
    /// revision knows (such a message is never relayed: no threshold can admit it).
    pub fn of_message(params: Option<&Value>) -> Option<Self> {
        Self::parse(params?.get("level")?.as_str()?)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn levels_are_ordered_by_severity_and_round_trip() {
        assert!(LogLevel::Debug < LogLevel::Info && LogLevel::Alert < LogLevel::Emergency);
        for level in LogLevel::ALL {
            assert_eq!(LogLevel::parse(level.as_str()), Some(level));
            assert_eq!(LogLevel::from_rank(level.rank()), Some(level));
        }
        assert_eq!(LogLevel::from_rank(0), None);
        assert_eq!(LogLevel::from_rank(9), None);
        assert_eq!(LogLevel::parse("WARNING"), None);
        assert_eq!(LogLevel::parse("warn"), None);
    }

    #[test]
    fn meta_level_is_optional_but_must_be_known() {
        let with =
            |v: Value| Params::of_value(&json!({"_meta": {"io.modelcontextprotocol/logLevel": v}})).unwrap();
        let of = |v: Value| LogLevel::from_params(&Params::of_value(&v).unwrap());
        assert_eq!(LogLevel::from_params(&with(json!("warning"))).unwrap(), Some(LogLevel::Warning));
        let escaped = r#"{"_meta":{"io.modelcontextprotocol/logLevel":"w\u0061rning"}}"#;
        let escaped =
            Params::index(&serde_json::value::RawValue::from_string(escaped.into()).unwrap()).unwrap();
        assert_eq!(LogLevel::from_params(&escaped).unwrap(), Some(LogLevel::Warning));
        assert_eq!(LogLevel::from_params(&with(Value::Null)).unwrap(), None);
        assert_eq!(of(json!({"_meta": {}})).unwrap(), None);
        assert_eq!(of(json!({})).unwrap(), None);
        assert!(LogLevel::from_params(&with(json!("verbose"))).is_err());
        assert!(LogLevel::from_params(&with(json!(3))).is_err());
    }

    #[test]
    fn a_message_level_is_read_from_its_params() {
        assert_eq!(LogLevel::of_message(Some(&json!({"level": "error", "data": 1}))), Some(LogLevel::Error));
        assert_eq!(LogLevel::of_message(Some(&json!({"level": "fatal"}))), None);
        assert_eq!(LogLevel::of_message(Some(&json!({"data": 1}))), None);
        assert_eq!(LogLevel::of_message(None), None);
    }
}
