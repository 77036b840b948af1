//! What an outbound TLS client trusts and presents (`https://` upstreams, JWKS, the forwarder
//! to other replicas): plain settings read from the config. The rustls configuration is built
//! from them in `crate::outbound::tls`; this type lives in the config layer so that the config
//! does not import the upstream client it configures.

use std::path::PathBuf;

/// Where the trust roots and the client identity of an `https://` upstream come from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsSettings {
    /// Trust the platform's root certificates (on by default).
    pub platform_roots: bool,
    /// A PEM bundle of extra CA certificates (a private CA, say).
    pub ca_file: Option<PathBuf>,
    /// A PEM client certificate chain and its key, for upstreams that require mutual TLS.
    pub client_identity: Option<ClientIdentity>,
}

/// A client certificate chain and its private key, both PEM files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientIdentity {
    pub cert_file: PathBuf,
    pub key_file: PathBuf,
}

// === impl TlsSettings ===

impl TlsSettings {
    /// The platform's roots, no extra CA, no client certificate.
    pub fn platform() -> Self {
        Self { platform_roots: true, ca_file: None, client_identity: None }
    }
}
