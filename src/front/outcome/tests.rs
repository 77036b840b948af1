//! The boundary records what the client is not told: the upstream failure's kind on its
//! counter, its full detail on the request's log line.

use http::StatusCode;
use http_body_util::BodyExt;
use serde_json::Value;

use super::*;
use crate::logging::captured::logged;
use crate::upstream::UpstreamError;

const BODY: &[u8] = b"Traceback secret: File \"app.py\", line 7, password=hunter2";

async fn body_json(outcome: Outcome) -> Value {
    let bytes = outcome.response.into_body().collect().await.map(|c| c.to_bytes());
    serde_json::from_slice(&bytes.unwrap_or_default()).unwrap_or_default()
}

fn http_500() -> FrontError {
    UpstreamError::http(StatusCode::INTERNAL_SERVER_ERROR, BODY).into()
}

#[test]
fn labels_are_the_metric_spelling() {
    assert_eq!(OutcomeLabel::InputRequired.as_str(), "input_required");
    assert_eq!(OutcomeLabel::Streamed.as_str(), "streamed");
    assert_eq!(http_500().label().as_str(), "upstream_unavailable");
    let busy = FrontError::from(UpstreamError::PoolExhausted(std::time::Duration::from_secs(1)));
    assert_eq!(busy.label(), OutcomeLabel::Overloaded);
}

#[tokio::test]
async fn an_upstream_500_body_never_reaches_the_client() {
    let outcome = Outcome::error(Some(&RequestId::Number(7)), &http_500());
    assert_eq!(outcome.response.status(), StatusCode::BAD_GATEWAY);
    let body = body_json(outcome).await;
    assert_eq!(body["error"]["code"], -32603);
    assert_eq!(body["error"]["message"], "upstream returned HTTP 500");
    let text = body.to_string();
    assert!(!text.contains("Traceback") && !text.contains("hunter2"), "{text}");
}

#[test]
fn the_boundary_counts_the_upstream_kind_and_logs_the_detail_once() {
    let metrics = Metrics::new().unwrap_or_else(|e| panic!("{e}"));
    let outcome = Outcome::error(Some(&RequestId::Number(1)), &http_500());
    let ((), log) = logged(tracing::Level::INFO, || outcome.record(&metrics, "tools/call", Instant::now()));
    assert_eq!(metrics.upstream_errors.with_label_values(&["http_status"]).get(), 1);
    assert_eq!(metrics.requests.with_label_values(&["tools/call", "upstream_unavailable"]).get(), 1);
    assert_eq!(log.lines().count(), 1, "{log}");
    assert!(log.contains("WARN") && log.contains("Traceback secret"), "{log}");
}

#[test]
fn client_errors_count_no_upstream_failure() {
    let metrics = Metrics::new().unwrap_or_else(|e| panic!("{e}"));
    let outcome = Outcome::error(None, &FrontError::InvalidParams("bad".into()));
    outcome.record(&metrics, "tools/call", Instant::now());
    let text = String::from_utf8(metrics.render()).unwrap_or_default();
    assert!(!text.contains("mrtr_gateway_upstream_errors_total{"), "{text}");
    assert_eq!(metrics.requests.with_label_values(&["tools/call", "invalid_params"]).get(), 1);
}

#[test]
fn a_relayed_response_is_labelled_by_its_status() {
    use OutcomeLabel as L;
    for (status, label) in [
        (202, L::Accepted),
        (200, L::Complete),
        (204, L::Complete),
        (401, L::Unauthorized),
        (403, L::Forbidden),
        (404, L::SessionNotFound),
        (405, L::HttpMethodNotAllowed),
        (406, L::NotAcceptable),
        (413, L::PayloadTooLarge),
        (415, L::UnsupportedMediaType),
        (429, L::RateLimited),
        (502, L::UpstreamError),
        (503, L::Overloaded),
        (504, L::UpstreamTimeout),
        (400, L::InvalidRequest),
        (409, L::InvalidRequest),
        (500, L::Internal),
        (302, L::Internal),
    ] {
        let mut response = Response::new(FrontBody::empty());
        *response.status_mut() = StatusCode::from_u16(status).unwrap();
        assert_eq!(Outcome::relayed(response).label, label, "HTTP {status}");
    }
}
