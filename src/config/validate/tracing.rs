//! `[tracing]`: the OTLP collector URL (plain `http`, with `/v1/traces` added when no path is
//! given), the service name, the sample ratio and the export bounds.

use std::time::Duration;

use http::Uri;

use super::super::raw::RawTracing;
use super::super::{ConfigError, OtlpConfig};
use crate::defaults as d;

/// `None` (tracing off) unless an endpoint is set.
pub(super) fn tracing(raw: RawTracing) -> Result<Option<OtlpConfig>, ConfigError> {
    let Some(endpoint) = raw.otlp_endpoint.filter(|e| !e.trim().is_empty()) else { return Ok(None) };
    let service_name = raw.service_name.unwrap_or_else(|| d::TRACING_SERVICE_NAME.into());
    if service_name.trim().is_empty() {
        return Err(ConfigError::invalid("tracing.service_name", "must not be empty"));
    }
    let sample_ratio = raw.sample_ratio.unwrap_or(d::TRACING_SAMPLE_RATIO);
    if !(0.0..=1.0).contains(&sample_ratio) {
        return Err(ConfigError::invalid(
            "tracing.sample_ratio",
            format!("{sample_ratio} is not in 0.0..=1.0"),
        ));
    }
    let max_queue = raw.max_queue.unwrap_or(d::TRACING_MAX_QUEUE);
    if max_queue == 0 {
        return Err(ConfigError::invalid("tracing.max_queue", "must be positive"));
    }
    let export_timeout = match raw.export_timeout_ms {
        None => d::TRACING_EXPORT_TIMEOUT,
        Some(0) => return Err(ConfigError::invalid("tracing.export_timeout_ms", "must be positive")),
        Some(ms) => Duration::from_millis(ms),
    };
    Ok(Some(OtlpConfig {
        endpoint: endpoint_uri(endpoint.trim())?,
        service_name,
        sample_ratio,
        max_queue,
        export_timeout,
    }))
}

fn endpoint_uri(s: &str) -> Result<Uri, ConfigError> {
    const FIELD: &str = "tracing.otlp_endpoint";
    let uri: Uri = s.parse().map_err(|_| ConfigError::invalid(FIELD, format!("{s:?} is not a URL")))?;
    match uri.scheme_str() {
        Some("http") => {}
        Some("https") => {
            return Err(ConfigError::invalid(
                FIELD,
                "https is not supported: use a collector reached over http",
            ))
        }
        _ => return Err(ConfigError::invalid(FIELD, format!("{s:?} is not an http:// URL"))),
    }
    if uri.host().is_none_or(str::is_empty) {
        return Err(ConfigError::invalid(FIELD, format!("{s:?} names no host")));
    }
    if uri.path() != "/" {
        return Ok(uri);
    }
    let with_path = format!("{}{}", s.trim_end_matches('/'), d::TRACING_OTLP_PATH);
    with_path.parse().map_err(|_| ConfigError::invalid(FIELD, format!("{s:?} is not a URL")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(endpoint: &str) -> RawTracing {
        RawTracing { otlp_endpoint: Some(endpoint.into()), ..RawTracing::default() }
    }

    #[test]
    fn off_unless_an_endpoint_is_set() {
        assert!(tracing(RawTracing::default()).unwrap().is_none());
        assert!(tracing(raw("  ")).unwrap().is_none());
    }

    #[test]
    fn the_traces_path_is_added_to_a_bare_collector_url() {
        let cfg = tracing(raw("http://127.0.0.1:4318")).unwrap().unwrap();
        assert_eq!(cfg.endpoint.to_string(), "http://127.0.0.1:4318/v1/traces");
        assert_eq!(cfg.service_name, d::TRACING_SERVICE_NAME);
        assert_eq!(cfg.sample_ratio, d::TRACING_SAMPLE_RATIO);
        let cfg = tracing(raw("http://collector:4318/")).unwrap().unwrap();
        assert_eq!(cfg.endpoint.to_string(), "http://collector:4318/v1/traces");
        let cfg = tracing(raw("http://collector:4318/custom/traces")).unwrap().unwrap();
        assert_eq!(cfg.endpoint.path(), "/custom/traces");
    }

    #[test]
    fn bad_values_name_their_field() {
        for (bad, field) in [
            (raw("collector:4318"), "tracing.otlp_endpoint"),
            (raw("https://collector:4318"), "tracing.otlp_endpoint"),
            (RawTracing { sample_ratio: Some(1.5), ..raw("http://c:1") }, "tracing.sample_ratio"),
            (RawTracing { sample_ratio: Some(f64::NAN), ..raw("http://c:1") }, "tracing.sample_ratio"),
            (RawTracing { max_queue: Some(0), ..raw("http://c:1") }, "tracing.max_queue"),
            (RawTracing { service_name: Some(" ".into()), ..raw("http://c:1") }, "tracing.service_name"),
            (RawTracing { export_timeout_ms: Some(0), ..raw("http://c:1") }, "tracing.export_timeout_ms"),
        ] {
            let err = tracing(bad).unwrap_err().to_string();
            assert!(err.starts_with(field), "{err}");
        }
    }
}
