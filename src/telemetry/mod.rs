//! OpenTelemetry tracing, off unless `tracing.otlp_endpoint` is set. It owns the tracer
//! provider (spans batched on a bounded queue and exported over OTLP/HTTP protobuf, never on a
//! request's path), the W3C trace-context propagator, and the spans a request makes (see
//! [`spans`]). Each gateway has a provider of its own rather than a process-wide one, so
//! tests can run a traced gateway beside untraced ones.
//!
//! With tracing off a request pays one `Option` check at the front and one relaxed atomic
//! load per round and upstream exchange: no span, no context, no header parsing.

mod carrier;
mod export;
pub mod spans;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use opentelemetry::context::FutureExt as _;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry::KeyValue;
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{
    BatchConfigBuilder, BatchSpanProcessor, Sampler, SdkTracer, SdkTracerProvider,
};
use opentelemetry_sdk::Resource;

pub(crate) use carrier::Written;
pub use spans::{request_id, Ended, ExchangeTrace, FrontRequest, FrontTrace, Peer, RoundTrace, TaskTrace};

use crate::config::OtlpConfig;
use crate::defaults;

/// True once any gateway in this process traces: until then the round and exchange hooks
/// return at once, without looking at the current context.
static ON: AtomicBool = AtomicBool::new(false);

/// Why tracing could not start.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    #[error("tracing needs a running async runtime")]
    NoRuntime(#[from] tokio::runtime::TryCurrentError),
    #[error("OTLP exporter: {0}")]
    Exporter(#[from] opentelemetry_otlp::ExporterBuildError),
    #[error("OTLP client: {0}")]
    Client(#[from] crate::outbound::TlsError),
}

/// A gateway's tracer: built once at start, shut down (flushing its queue) at exit.
pub struct Tracing {
    provider: SdkTracerProvider,
    tracer: SdkTracer,
    propagator: TraceContextPropagator,
}

pub(crate) fn on() -> bool {
    ON.load(Ordering::Relaxed)
}

/// Spawns `task`, in the current trace context when the current request is traced (a task
/// does not inherit it), so that the spans it makes keep their parent.
pub fn spawn<F>(task: F) -> tokio::task::JoinHandle<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    if on() && spans::traced_now() {
        tokio::spawn(task.with_current_context())
    } else {
        tokio::spawn(task)
    }
}

// === impl Tracing ===

impl Tracing {
    /// Starts exporting to the configured collector; `None` when tracing is off. Must be
    /// called on the gateway's runtime, which carries the exports.
    pub fn start(
        cfg: Option<&OtlpConfig>,
        outbound: &crate::outbound::OutboundMetrics,
    ) -> Result<Option<Arc<Self>>, TelemetryError> {
        let Some(cfg) = cfg else { return Ok(None) };
        let bound = outbound.bound("otlp", defaults::OTLP_MAX_CONNECTIONS, cfg.export_timeout);
        let runtime = tokio::runtime::Handle::try_current()?;
        let collector = export::Collector::new(runtime, cfg.export_timeout, &bound)?;
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_http_client(collector)
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(cfg.endpoint.to_string())
            .with_timeout(cfg.export_timeout)
            .build()?;
        let batch = BatchConfigBuilder::default()
            .with_max_queue_size(cfg.max_queue)
            .with_max_export_batch_size(cfg.max_queue.min(defaults::TRACING_EXPORT_BATCH))
            .build();
        let processor = BatchSpanProcessor::builder(exporter).with_batch_config(batch).build();
        let resource = Resource::builder()
            .with_service_name(cfg.service_name.clone())
            .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")))
            .build();
        let provider = SdkTracerProvider::builder()
            .with_span_processor(processor)
            .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(cfg.sample_ratio))))
            .with_resource(resource)
            .build();
        let tracer = provider.tracer("mrtr-gateway");
        ON.store(true, Ordering::Relaxed);
        tracing::info!(endpoint = %cfg.endpoint, ratio = cfg.sample_ratio, "exporting traces over OTLP");
        Ok(Some(Arc::new(Self { provider, tracer, propagator: TraceContextPropagator::new() })))
    }

    /// Exports the spans still queued and stops, bounded by [`defaults::TRACING_SHUTDOWN`].
    /// It blocks a thread while it waits, so it runs on a blocking one.
    pub async fn shutdown(&self) {
        let provider = self.provider.clone();
        let done =
            tokio::task::spawn_blocking(move || provider.shutdown_with_timeout(defaults::TRACING_SHUTDOWN));
        match done.await {
            Ok(Ok(())) => tracing::debug!("trace exporter flushed and stopped"),
            Ok(Err(e)) => tracing::warn!(error = %e, "trace exporter did not flush cleanly"),
            Err(e) => tracing::warn!(error = %e, "trace exporter shutdown failed"),
        }
    }
}

impl std::fmt::Debug for Tracing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tracing").finish_non_exhaustive()
    }
}
