//! The admin listener: `/healthz`, `/readyz` and `/metrics`, on its own port.

use http::StatusCode;
use serde_json::json;

use super::form_only;
use crate::common::client::admin_get;
use crate::common::harness::metric_in;
use crate::common::{Harness, TestResult};

#[tokio::test]
async fn health_readiness_and_metrics() -> TestResult {
    let h = Harness::start().await?;
    let admin = h
        .gateway
        .admin_addr
        .ok_or_else(|| crate::common::HarnessError::Unexpected("no admin listener".into()))?;
    assert_eq!(admin_get(&h.client, admin, "/healthz").await?.0, StatusCode::OK);
    assert_eq!(admin_get(&h.client, admin, "/readyz").await?.0, StatusCode::OK);

    h.client.call_tool("greet", json!({})).caps(form_only()).send().await?.input_required()?;
    h.client.call_tool("echo", json!({"message": "m"})).send().await?.text()?;
    let (status, text) = admin_get(&h.client, admin, "/metrics").await?;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        metric_in(&text, "mrtr_gateway_requests_total{method=\"tools/call\",outcome=\"input_required\"}"),
        1.0
    );
    assert_eq!(
        metric_in(&text, "mrtr_gateway_requests_total{method=\"tools/call\",outcome=\"complete\"}"),
        1.0
    );
    assert_eq!(
        metric_in(&text, "mrtr_gateway_input_required_questions_total{kind=\"elicitation/create\"}"),
        1.0
    );
    h.stop().await
}
