//! Relayed methods (`tools/list`, `prompts/list`, `resources/list`, `resources/templates/list`,
//! `completion/complete`): one upstream request on a pooled session, whose server requests are
//! refused upstream (these methods may never answer `input_required`), and a result stamped
//! with `resultType` and cache hints.

use serde_json::value::RawValue;
use serde_json::Value;

use crate::error::{map_upstream_error, FrontError};
use crate::metrics::Metrics;
use crate::protocol::jsonrpc::Outcome;
use crate::protocol::methods::RelayMethod;
use crate::upstream::{Pool, PoolKey};

/// Runs a relayed method upstream and returns its raw result. `init_caps` is only called when
/// a new upstream session must be initialised.
pub(super) async fn relay(
    pool: &Pool,
    metrics: &Metrics,
    key: PoolKey,
    init_caps: impl FnOnce() -> Value,
    method: RelayMethod,
    params: Value,
) -> Result<Box<RawValue>, FrontError> {
    let lease = pool.lease_with(key, init_caps).await?;
    let started = std::time::Instant::now();
    let outcome = match lease.session().request(method.name(), Some(params)).await {
        Ok(o) => {
            metrics.observe_upstream(method.name(), started.elapsed());
            o
        }
        Err(e) => {
            if e.poisons_session() {
                lease.poison();
            }
            return Err(e.into());
        }
    };
    match outcome {
        Outcome::Result(raw) if method == RelayMethod::ToolsList => Ok(modern_tools(raw)),
        Outcome::Result(raw) => Ok(raw),
        Outcome::Error(e) => Err(FrontError::Upstream(map_upstream_error(e))),
    }
}

/// Removes what the 2026-07-28 `Tool` no longer has (`execution`, the legacy tasks hint), and
/// hides tools that can only be called as legacy tasks. Most lists carry neither, and are
/// relayed untouched.
fn modern_tools(raw: Box<RawValue>) -> Box<RawValue> {
    if !raw.get().contains("\"execution\"") {
        return raw;
    }
    let Ok(mut result) = serde_json::from_str::<Value>(raw.get()) else { return raw };
    if let Some(Value::Array(tools)) = result.get_mut("tools") {
        tools.retain(|t| t.pointer("/execution/taskSupport").and_then(Value::as_str) != Some("required"));
        for tool in tools.iter_mut().filter_map(Value::as_object_mut) {
            tool.remove("execution");
        }
    }
    RawValue::from_string(result.to_string()).unwrap_or(raw)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn execution_is_removed_and_task_only_tools_hidden() {
        let raw = RawValue::from_string(
            json!({"tools": [
                {"name": "a", "inputSchema": {}, "execution": {"taskSupport": "optional"}},
                {"name": "b", "inputSchema": {}, "execution": {"taskSupport": "required"}},
                {"name": "c", "inputSchema": {}}]})
            .to_string(),
        )
        .unwrap();
        let v: Value = serde_json::from_str(modern_tools(raw).get()).unwrap();
        assert_eq!(v, json!({"tools": [{"name": "a", "inputSchema": {}}, {"name": "c", "inputSchema": {}}]}));
    }

    #[test]
    fn plain_lists_are_untouched() {
        let text = r#"{"tools": [{"name": "a"}]}"#;
        assert_eq!(modern_tools(RawValue::from_string(text.into()).unwrap()).get(), text);
    }
}
