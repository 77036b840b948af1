//! Validation of `[tasks]`: every bound positive, a principal's bound within the total, a
//! time to live the upstream can be asked for in milliseconds, and which ordinary calls become
//! tasks (named tools; a duration within the ttl).

use std::time::Duration;

use super::super::raw::RawTasks;
use super::super::{ConfigError, TasksConfig};
use super::positive;
use crate::defaults as d;

/// Longest task life accepted: a day. A task pins an upstream session for its whole life.
const MAX_TTL_SECS: u64 = 86_400;

pub(super) fn tasks(raw: RawTasks) -> Result<TasksConfig, ConfigError> {
    let max_tasks = positive("tasks.max_tasks", raw.max_tasks.unwrap_or(d::TASKS_MAX_TASKS))?;
    let max_per_principal = positive(
        "tasks.max_per_principal",
        raw.max_per_principal.unwrap_or(d::TASKS_MAX_PER_PRINCIPAL.min(max_tasks)),
    )?;
    if max_per_principal > max_tasks {
        return Err(ConfigError::invalid(
            "tasks.max_per_principal",
            format!("must be at most tasks.max_tasks ({max_tasks})"),
        ));
    }
    let ttl = raw.ttl_secs.map_or(d::TASKS_TTL, Duration::from_secs);
    if ttl.is_zero() || ttl.as_secs() > MAX_TTL_SECS {
        return Err(ConfigError::invalid("tasks.ttl_secs", format!("must be 1 to {MAX_TTL_SECS}")));
    }
    let poll_interval = raw.poll_interval_ms.map_or(d::TASKS_POLL_INTERVAL, Duration::from_millis);
    if poll_interval.is_zero() || poll_interval > ttl {
        return Err(ConfigError::invalid("tasks.poll_interval_ms", "must be positive and at most the ttl"));
    }
    let max_result_bytes =
        positive("tasks.max_result_bytes", raw.max_result_bytes.unwrap_or(d::TASKS_MAX_RESULT_BYTES))?;
    if max_result_bytes > d::TASKS_MAX_RESULT_BYTES_LIMIT {
        return Err(ConfigError::invalid(
            "tasks.max_result_bytes",
            format!(
                "must be at most {} (a result travels between replicas)",
                d::TASKS_MAX_RESULT_BYTES_LIMIT
            ),
        ));
    }
    Ok(TasksConfig {
        enabled: raw.enabled.unwrap_or(d::TASKS_ENABLED),
        max_tasks,
        max_per_principal,
        max_result_bytes,
        ttl,
        poll_interval,
        long_tools: long_tools(raw.long_tools)?,
        long_after: long_after(raw.long_after_ms, ttl)?,
    })
}

fn long_tools(raw: Option<Vec<String>>) -> Result<Vec<String>, ConfigError> {
    let tools = raw.unwrap_or_default();
    if tools.iter().any(String::is_empty) {
        return Err(ConfigError::invalid("tasks.long_tools", "a tool name must not be empty"));
    }
    Ok(tools)
}

/// `None` when zero (off); a call must become a task before its task would expire.
fn long_after(raw: Option<u64>, ttl: Duration) -> Result<Option<Duration>, ConfigError> {
    let after = raw.map_or(d::TASKS_LONG_AFTER, Duration::from_millis);
    if after >= ttl {
        return Err(ConfigError::invalid("tasks.long_after_ms", "must be shorter than tasks.ttl_secs"));
    }
    Ok(Some(after).filter(|after| !after.is_zero()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_and_bounds() {
        assert_eq!(tasks(RawTasks::default()).unwrap(), TasksConfig::default());
        let over = RawTasks { max_tasks: Some(4), max_per_principal: Some(5), ..Default::default() };
        assert!(tasks(over).unwrap_err().to_string().contains("at most tasks.max_tasks"));
        let small = tasks(RawTasks { max_tasks: Some(4), ..Default::default() }).unwrap();
        assert_eq!(small.max_per_principal, 4, "capped by the total");
        let zero = RawTasks { max_result_bytes: Some(0), ..Default::default() };
        assert!(tasks(zero).unwrap_err().to_string().contains("tasks.max_result_bytes"));
        let huge =
            RawTasks { max_result_bytes: Some(d::TASKS_MAX_RESULT_BYTES_LIMIT + 1), ..Default::default() };
        assert!(tasks(huge).unwrap_err().to_string().contains("tasks.max_result_bytes"));
        let forever = RawTasks { ttl_secs: Some(MAX_TTL_SECS + 1), ..Default::default() };
        assert!(tasks(forever).unwrap_err().to_string().contains("tasks.ttl_secs"));
        let slow = RawTasks { ttl_secs: Some(1), poll_interval_ms: Some(2_000), ..Default::default() };
        assert!(tasks(slow).unwrap_err().to_string().contains("tasks.poll_interval_ms"));
    }

    #[test]
    fn long_calls_are_off_by_default_and_bounded_by_the_ttl() {
        let cfg = tasks(RawTasks::default()).unwrap();
        assert_eq!((cfg.long_tools.len(), cfg.long_after), (0, None));
        let zero = RawTasks { long_after_ms: Some(0), ..Default::default() };
        assert_eq!(tasks(zero).unwrap().long_after, None, "zero is off");
        let on = RawTasks {
            long_tools: Some(vec!["crawl".into()]),
            long_after_ms: Some(2_000),
            ..Default::default()
        };
        let on = tasks(on).unwrap();
        assert_eq!((on.long_tools, on.long_after), (vec!["crawl".to_owned()], Some(Duration::from_secs(2))));
        let late = RawTasks { ttl_secs: Some(2), long_after_ms: Some(2_000), ..Default::default() };
        assert!(tasks(late).unwrap_err().to_string().contains("tasks.long_after_ms"));
        let unnamed = RawTasks { long_tools: Some(vec![String::new()]), ..Default::default() };
        assert!(tasks(unnamed).unwrap_err().to_string().contains("tasks.long_tools"));
    }
}
