//! An in-test OpenTelemetry collector: a loopback HTTP server that accepts OTLP/HTTP protobuf
//! exports on `/v1/traces`, decodes them with the OTLP proto types, and keeps every span with
//! its resource's `service.name`, so a test can check the gateway's spans and their links.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use parking_lot::Mutex;
use prost::Message as _;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use super::TestResult;

/// One exported span, ids in lowercase hex as a `traceparent` writes them.
#[derive(Debug, Clone)]
pub(crate) struct Exported {
    pub(crate) service: String,
    pub(crate) name: String,
    pub(crate) kind: SpanKind,
    pub(crate) trace_id: String,
    pub(crate) span_id: String,
    /// Empty for a root span.
    pub(crate) parent_id: String,
    pub(crate) attributes: Vec<(String, String)>,
}

/// The collector; it stops when dropped.
pub(crate) struct Collector {
    pub(crate) addr: SocketAddr,
    spans: Arc<Mutex<Vec<Exported>>>,
    accept: JoinHandle<()>,
}

// === impl Collector ===

impl Collector {
    pub(crate) async fn spawn() -> TestResult<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let spans = Arc::new(Mutex::new(Vec::new()));
        let accept = tokio::spawn(accept(listener, spans.clone()));
        Ok(Self { addr, spans, accept })
    }

    /// The collector URL a gateway is configured with (no path: the gateway adds it).
    pub(crate) fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every span received so far.
    pub(crate) fn spans(&self) -> Vec<Exported> {
        self.spans.lock().clone()
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

// === impl Exported ===

impl Exported {
    /// The value of attribute `key`, as text.
    pub(crate) fn attr(&self, key: &str) -> Option<&str> {
        self.attributes.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }
}

async fn accept(listener: TcpListener, spans: Arc<Mutex<Vec<Exported>>>) {
    while let Ok((stream, _)) = listener.accept().await {
        let spans = spans.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req| receive(req, spans.clone()));
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

async fn receive(
    req: Request<Incoming>,
    spans: Arc<Mutex<Vec<Exported>>>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let status = if req.uri().path() != "/v1/traces" {
        StatusCode::NOT_FOUND
    } else {
        match req.into_body().collect().await.map(|b| b.to_bytes()) {
            Ok(body) => match ExportTraceServiceRequest::decode(body) {
                Ok(export) => {
                    spans.lock().extend(flatten(export));
                    StatusCode::OK
                }
                Err(_) => StatusCode::BAD_REQUEST,
            },
            Err(_) => StatusCode::BAD_REQUEST,
        }
    };
    let mut resp = Response::new(Full::new(Bytes::new()));
    *resp.status_mut() = status;
    resp.headers_mut()
        .insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/x-protobuf"));
    Ok(resp)
}

fn flatten(export: ExportTraceServiceRequest) -> Vec<Exported> {
    let mut out = Vec::new();
    for resource_spans in export.resource_spans {
        let resource = resource_spans.resource.map(|r| r.attributes).unwrap_or_default();
        let service = text_of(&resource, "service.name").unwrap_or_default();
        for scope in resource_spans.scope_spans {
            for span in scope.spans {
                out.push(Exported {
                    service: service.clone(),
                    kind: SpanKind::try_from(span.kind).unwrap_or(SpanKind::Unspecified),
                    name: span.name,
                    trace_id: hex(&span.trace_id),
                    span_id: hex(&span.span_id),
                    parent_id: hex(&span.parent_span_id),
                    attributes: span.attributes.iter().map(|kv| (kv.key.clone(), text(kv))).collect(),
                });
            }
        }
    }
    out
}

fn text_of(attrs: &[KeyValue], key: &str) -> Option<String> {
    attrs.iter().find(|kv| kv.key == key).map(text)
}

fn text(kv: &KeyValue) -> String {
    match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
        Some(AnyValue::StringValue(s)) => s.clone(),
        Some(AnyValue::IntValue(i)) => i.to_string(),
        Some(AnyValue::BoolValue(b)) => b.to_string(),
        Some(AnyValue::DoubleValue(d)) => d.to_string(),
        Some(other) => format!("{other:?}"),
        None => String::new(),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
