//! The rustls client configuration for `https://` upstreams: which roots are trusted (the
//! platform's store, plus an optional CA bundle file), and an optional client certificate for
//! mutual TLS. Built once when the pool is built, never per connection; SNI comes from the
//! upstream URL's host, which the connector passes to rustls.
//!
//! Every failure names the file and what was wrong with it, so an operator can fix the mount or
//! the path; no key material is ever part of a message.

use std::path::Path;
use std::sync::Arc;

use hyper_rustls::HttpsConnector;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ClientConfig, RootCertStore};

pub use crate::config::tls::{ClientIdentity, TlsSettings};

/// Why the TLS client configuration could not be built.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("reading {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("{path} holds no PEM certificate")]
    NoCertificate { path: String },
    #[error("{path} holds no PEM private key")]
    NoKey { path: String },
    #[error("no trusted root certificates: the platform store is empty or disabled and no CA file is set")]
    NoRoots,
    #[error("the client certificate and key do not form a usable identity: {0}")]
    Identity(#[source] rustls::Error),
    #[error("TLS configuration: {0}")]
    Rustls(#[from] rustls::Error),
}

/// Builds the client configuration. ALPN is left to [`https_connector`], which offers the HTTP
/// versions the client speaks.
pub fn client_config(settings: &TlsSettings) -> Result<ClientConfig, TlsError> {
    let roots = root_store(settings)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots);
    let config = match &settings.client_identity {
        None => builder.with_no_client_auth(),
        Some(id) => {
            let chain = certificates(&id.cert_file)?;
            let key = private_key(&id.key_file)?;
            builder.with_client_auth_cert(chain, key).map_err(TlsError::Identity)?
        }
    };
    Ok(config)
}

/// A configuration that trusts nothing, for a client whose upstream is plain `http://`: it is
/// never used for a handshake.
pub(crate) fn plain_only() -> Result<ClientConfig, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider).with_safe_default_protocol_versions()?;
    Ok(builder.with_root_certificates(RootCertStore::empty()).with_no_client_auth())
}

/// Wraps the TCP connector: `https://` URLs get TLS (SNI from the URL's host, HTTP/2 or
/// HTTP/1.1 by ALPN), `http://` URLs stay plain.
pub(crate) fn https_connector<C>(tcp: C, config: ClientConfig) -> HttpsConnector<C> {
    hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(config)
        .https_or_http()
        .enable_all_versions()
        .wrap_connector(tcp)
}

fn root_store(settings: &TlsSettings) -> Result<RootCertStore, TlsError> {
    let mut roots = RootCertStore::empty();
    if settings.platform_roots {
        let found = rustls_native_certs::load_native_certs();
        for error in &found.errors {
            tracing::warn!(%error, "a platform root certificate could not be loaded");
        }
        let (added, ignored) = roots.add_parsable_certificates(found.certs);
        tracing::debug!(added, ignored, "platform root certificates");
    }
    if let Some(path) = &settings.ca_file {
        for cert in certificates(path)? {
            roots.add(cert)?;
        }
    }
    if roots.is_empty() {
        return Err(TlsError::NoRoots);
    }
    Ok(roots)
}

fn read(path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|source| TlsError::Read { path: path.display().to_string(), source })
}

fn certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem = read(path)?;
    let certs = rustls_pemfile::certs(&mut &pem[..])
        .collect::<Result<Vec<_>, _>>()
        .map_err(|source| TlsError::Read { path: path.display().to_string(), source })?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate { path: path.display().to_string() });
    }
    Ok(certs)
}

fn private_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    let pem = read(path)?;
    rustls_pemfile::private_key(&mut &pem[..])
        .map_err(|source| TlsError::Read { path: path.display().to_string(), source })?
        .ok_or_else(|| TlsError::NoKey { path: path.display().to_string() })
}
