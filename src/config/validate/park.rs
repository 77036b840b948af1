//! Validation of the park settings (`mrtr.mode`, `mrtr.tool_modes`, `mrtr.side_effecting`,
//! `mrtr.park_timeout_ms`, `mrtr.max_parked`) and of `[cluster]`. Kept apart from the other
//! sections so each stays short.

use http::Uri;

use super::super::raw::{RawCluster, RawMrtr};
use super::super::{ClusterConfig, ConfigError, MrtrMode, ParkConfig};
use super::{addr, millis, positive, share, tls_files};
use crate::config::tls::TlsSettings;
use crate::defaults as d;

/// Takes the park fields out of `raw` and validates them.
pub(super) fn park(raw: &mut RawMrtr, authenticated: bool) -> Result<ParkConfig, ConfigError> {
    let mode = match raw.mode.take() {
        None => MrtrMode::Replay,
        Some(text) => parse_mode("mrtr.mode", &text)?,
    };
    let tool_modes = raw
        .tool_modes
        .take()
        .unwrap_or_default()
        .into_iter()
        .map(|(tool, text)| {
            if tool.is_empty() {
                return Err(ConfigError::invalid("mrtr.tool_modes", "a tool name must not be empty"));
            }
            Ok((tool.clone(), parse_mode(&format!("mrtr.tool_modes.{tool}"), &text)?))
        })
        .collect::<Result<_, _>>()?;
    let side_effecting = raw.side_effecting.take().unwrap_or_default();
    if side_effecting.iter().any(String::is_empty) {
        return Err(ConfigError::invalid("mrtr.side_effecting", "a tool name must not be empty"));
    }
    let max_parked = positive("mrtr.max_parked", raw.max_parked.unwrap_or(d::MAX_PARKED))?;
    Ok(ParkConfig {
        mode,
        tool_modes,
        side_effecting,
        timeout: millis("mrtr.park_timeout_ms", raw.park_timeout_ms, d::PARK_TIMEOUT)?,
        max_parked,
        max_parked_per_principal: share(
            "mrtr.max_parked_per_principal",
            raw.max_parked_per_principal,
            ("mrtr.max_parked", max_parked),
            authenticated,
        )?,
    })
}

fn parse_mode(field: &str, text: &str) -> Result<MrtrMode, ConfigError> {
    MrtrMode::parse(text)
        .ok_or_else(|| ConfigError::invalid(field, format!("{text:?} is not one of replay, park, auto")))
}

pub(super) fn cluster(raw: RawCluster) -> Result<ClusterConfig, ConfigError> {
    let connect_timeout = millis(
        "cluster.forward_connect_timeout_ms",
        raw.forward_connect_timeout_ms,
        d::FORWARD_CONNECT_TIMEOUT,
    )?;
    let accept_timeout = millis(
        "cluster.forward_accept_timeout_ms",
        raw.forward_accept_timeout_ms,
        d::FORWARD_ACCEPT_TIMEOUT,
    )?;
    if accept_timeout < connect_timeout {
        return Err(ConfigError::invalid(
            "cluster.forward_accept_timeout_ms",
            "must be at least cluster.forward_connect_timeout_ms (it includes the connect)",
        ));
    }
    let tls = tls_files("cluster.tls_cert_file", raw.tls_cert_file, raw.tls_key_file)?;
    let scheme = if tls.is_some() { "https" } else { "http" };
    let (advertise_url, listen) = match (raw.advertise_url, raw.listen) {
        (None, None) => (None, None),
        (Some(url), Some(listen)) => {
            (Some(advertised(&url, scheme)?), Some(addr("cluster.listen", &listen)?))
        }
        (Some(_), None) => {
            return Err(ConfigError::invalid("cluster.listen", "is required with cluster.advertise_url"))
        }
        (None, Some(_)) => {
            return Err(ConfigError::invalid("cluster.advertise_url", "is required with cluster.listen"))
        }
    };
    if tls.is_some() && listen.is_none() {
        return Err(ConfigError::invalid("cluster.tls_cert_file", "is set but cluster.listen is not"));
    }
    let forward_tls =
        TlsSettings { platform_roots: true, ca_file: raw.tls_ca_file.map(Into::into), client_identity: None };
    Ok(ClusterConfig { advertise_url, listen, connect_timeout, accept_timeout, tls, forward_tls })
}

/// A `scheme://host:port` URL with no path beyond `/`, no query and no user info: `https` when
/// the internal listener serves TLS, else `http`.
fn advertised(url: &str, scheme: &str) -> Result<Uri, ConfigError> {
    const FIELD: &str = "cluster.advertise_url";
    let uri: Uri = url.parse().map_err(|e| ConfigError::invalid(FIELD, format!("{url:?}: {e}")))?;
    let plain = uri.scheme_str() == Some(scheme)
        && uri.host().is_some()
        && uri.port_u16().is_some()
        && matches!(uri.path(), "" | "/")
        && uri.query().is_none()
        && !uri.authority().is_some_and(|a| a.as_str().contains('@'));
    if !plain {
        let with_tls = if scheme == "https" { " (cluster.tls_cert_file is set)" } else { "" };
        return Err(ConfigError::invalid(
            FIELD,
            format!("{url:?} is not a URL like {scheme}://10.0.0.7:9443{with_tls}"),
        ));
    }
    Ok(uri)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_and_overrides_are_read() {
        let mut raw = RawMrtr {
            mode: Some("auto".into()),
            tool_modes: Some([("order".to_owned(), "park".to_owned())].into()),
            side_effecting: Some(vec!["pay".into()]),
            park_timeout_ms: Some(1500),
            ..RawMrtr::default()
        };
        let cfg = park(&mut raw, false).unwrap();
        assert_eq!(
            (cfg.mode, cfg.mode_of("order"), cfg.mode_of("other")),
            (MrtrMode::Auto, MrtrMode::Park, MrtrMode::Auto)
        );
        assert_eq!(cfg.side_effecting, ["pay"]);
        assert_eq!(cfg.timeout.as_millis(), 1500);
        assert_eq!(cfg.max_parked, d::MAX_PARKED);
        assert_eq!(cfg.max_parked_per_principal, d::MAX_PARKED, "no share of its own without auth");
        assert!(cfg.may_park());
        assert!(!park(&mut RawMrtr::default(), false).unwrap().may_park(), "replay is the default");
        let authenticated = park(&mut RawMrtr::default(), true).unwrap();
        assert_eq!(authenticated.max_parked_per_principal, d::MAX_PARKED / 4, "a quarter with auth");
    }

    #[test]
    fn bad_park_settings_name_their_field() {
        let cases: [(RawMrtr, &str); 6] = [
            (RawMrtr { mode: Some("sometimes".into()), ..RawMrtr::default() }, "mrtr.mode"),
            (
                RawMrtr { tool_modes: Some([("t".to_owned(), "x".to_owned())].into()), ..RawMrtr::default() },
                "mrtr.tool_modes.t",
            ),
            (RawMrtr { park_timeout_ms: Some(0), ..RawMrtr::default() }, "mrtr.park_timeout_ms"),
            (RawMrtr { max_parked: Some(0), ..RawMrtr::default() }, "mrtr.max_parked"),
            (
                RawMrtr { max_parked: Some(4), max_parked_per_principal: Some(5), ..RawMrtr::default() },
                "mrtr.max_parked_per_principal: must not exceed mrtr.max_parked (4)",
            ),
            (
                RawMrtr { max_parked_per_principal: Some(0), ..RawMrtr::default() },
                "mrtr.max_parked_per_principal",
            ),
        ];
        for (mut raw, field) in cases {
            let err = park(&mut raw, true).unwrap_err().to_string();
            assert!(err.starts_with(field), "{err}");
        }
    }

    #[test]
    fn cluster_urls_are_plain_http_with_a_port() {
        let ok = cluster(RawCluster {
            advertise_url: Some("http://10.0.0.7:9443".into()),
            listen: Some("0.0.0.0:9443".into()),
            ..RawCluster::default()
        })
        .unwrap();
        assert_eq!(ok.advertise_url.unwrap().to_string(), "http://10.0.0.7:9443/");
        assert_eq!(ok.connect_timeout, d::FORWARD_CONNECT_TIMEOUT);
        for bad in ["https://a:1", "http://a", "http://a:1/x", "http://u@a:1", "nonsense"] {
            let raw = RawCluster {
                advertise_url: Some(bad.into()),
                listen: Some("127.0.0.1:1".into()),
                ..RawCluster::default()
            };
            assert!(cluster(raw).unwrap_err().to_string().starts_with("cluster.advertise_url"), "{bad}");
        }
        let alone = RawCluster { advertise_url: Some("http://a:1".into()), ..RawCluster::default() };
        assert!(cluster(alone).unwrap_err().to_string().starts_with("cluster.listen"));
        assert_eq!(cluster(RawCluster::default()).unwrap().advertise_url, None);
    }

    #[test]
    fn a_tls_listener_is_advertised_as_https() {
        let tls = |url: &str| RawCluster {
            advertise_url: Some(url.into()),
            listen: Some("0.0.0.0:9443".into()),
            tls_cert_file: Some("cert.pem".into()),
            tls_key_file: Some("key.pem".into()),
            tls_ca_file: Some("ca.pem".into()),
            ..RawCluster::default()
        };
        let ok = cluster(tls("https://10.0.0.7:9443")).unwrap();
        assert_eq!(ok.advertise_url.unwrap().to_string(), "https://10.0.0.7:9443/");
        assert_eq!(ok.tls.unwrap().cert, std::path::PathBuf::from("cert.pem"));
        assert_eq!(ok.forward_tls.ca_file, Some("ca.pem".into()));
        assert!(ok.forward_tls.platform_roots);
        let err = cluster(tls("http://10.0.0.7:9443")).unwrap_err().to_string();
        assert!(err.starts_with("cluster.advertise_url") && err.contains("https://"), "{err}");
        let half = RawCluster { tls_key_file: None, ..tls("https://a:1") };
        assert!(cluster(half).unwrap_err().to_string().starts_with("cluster.tls_cert_file"));
        let unlistened = RawCluster { advertise_url: None, listen: None, ..tls("https://a:1") };
        assert!(cluster(unlistened).unwrap_err().to_string().starts_with("cluster.tls_cert_file"));
    }
}
