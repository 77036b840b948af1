//! The `https://` client against a loopback TLS server whose CA, server and client certificates
//! are made here: a trusted CA file connects (SNI `localhost`), an unknown issuer is refused with
//! a certificate error, and an upstream that requires mutual TLS accepts only the configured
//! client identity. Through the upstream transport, a failed handshake is a connect failure and
//! a connection lost after it a transport failure.

use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::Empty;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use crate::config::tls::{ClientIdentity, TlsSettings};
use crate::outbound::tls::{client_config, https_connector, TlsError};

type Boxed = Box<dyn std::error::Error + Send + Sync>;

/// A CA and what it signed, as PEM text.
struct Pki {
    ca_pem: String,
    issuer: Issuer<'static, KeyPair>,
}

/// A leaf certificate and its key.
struct Leaf {
    cert: CertificateDer<'static>,
    cert_pem: String,
    key: PrivatePkcs8KeyDer<'static>,
    key_pem: String,
}

impl Pki {
    fn new(name: &str) -> Result<Self, rcgen::Error> {
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let key = KeyPair::generate()?;
        let ca_pem = params.self_signed(&key)?.pem();
        Ok(Self { ca_pem, issuer: Issuer::new(params, key) })
    }

    fn leaf(&self, name: &str) -> Result<Leaf, rcgen::Error> {
        let key = KeyPair::generate()?;
        let cert = CertificateParams::new(vec![name.to_owned()])?.signed_by(&key, &self.issuer)?;
        Ok(Leaf {
            cert_pem: cert.pem(),
            cert: cert.der().clone(),
            key: PrivatePkcs8KeyDer::from(key.serialize_der()),
            key_pem: key.serialize_pem(),
        })
    }

    fn roots(&self) -> Result<RootCertStore, Boxed> {
        let mut roots = RootCertStore::empty();
        for cert in rustls_pemfile::certs(&mut self.ca_pem.as_bytes()) {
            roots.add(cert?)?;
        }
        Ok(roots)
    }
}

/// Serves one fixed HTTP/1.1 answer per TLS connection on `127.0.0.1:0`.
async fn serve(config: ServerConfig) -> Result<u16, Boxed> {
    serve_replying(config, true).await
}

/// [`serve`], answering every request when `reply`, else closing the connection once the
/// request is read.
async fn serve_replying(config: ServerConfig, reply: bool) -> Result<u16, Boxed> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let port = listener.local_addr()?.port();
    let acceptor = TlsAcceptor::from(Arc::new(config));
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else { return };
                let mut buf = [0u8; 1024];
                let _ = tls.read(&mut buf).await;
                if reply {
                    let ok = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok";
                    let _ = tls.write_all(ok).await;
                }
                let _ = tls.shutdown().await;
            });
        }
    });
    Ok(port)
}

fn server_config(leaf: &Leaf, client_roots: Option<RootCertStore>) -> Result<ServerConfig, Boxed> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder =
        ServerConfig::builder_with_provider(provider.clone()).with_safe_default_protocol_versions()?;
    let builder = match client_roots {
        None => builder.with_no_client_auth(),
        Some(roots) => builder.with_client_cert_verifier(
            WebPkiClientVerifier::builder_with_provider(roots.into(), provider).build()?,
        ),
    };
    let key = PrivateKeyDer::Pkcs8(leaf.key.clone_key());
    Ok(builder.with_single_cert(vec![leaf.cert.clone()], key)?)
}

fn write(dir: &Path, name: &str, text: &str) -> Result<std::path::PathBuf, std::io::Error> {
    let path = dir.join(name);
    std::fs::write(&path, text)?;
    Ok(path)
}

/// GETs `https://localhost:port/` with `settings`; the status, or the error chain as text.
async fn get(port: u16, settings: &TlsSettings) -> Result<StatusCode, String> {
    let config = client_config(settings).map_err(|e| e.to_string())?;
    let mut tcp = HttpConnector::new();
    tcp.enforce_http(false);
    let client = Client::builder(TokioExecutor::new()).build(https_connector(tcp, config));
    let req = Request::get(format!("https://localhost:{port}/")).body(Empty::<Bytes>::new());
    match client.request(req.map_err(|e| e.to_string())?).await {
        Ok(resp) => Ok(resp.status()),
        Err(e) => Err(crate::logging::chain(&e)),
    }
}

fn trusting(ca_file: std::path::PathBuf) -> TlsSettings {
    TlsSettings { platform_roots: false, ca_file: Some(ca_file), client_identity: None }
}

#[tokio::test]
async fn a_server_signed_by_the_configured_ca_is_trusted() -> Result<(), Boxed> {
    let pki = Pki::new("test CA")?;
    let port = serve(server_config(&pki.leaf("localhost")?, None)?).await?;
    let dir = tempfile::tempdir()?;
    let settings = trusting(write(dir.path(), "ca.pem", &pki.ca_pem)?);
    assert_eq!(get(port, &settings).await?, StatusCode::OK);
    Ok(())
}

#[tokio::test]
async fn an_unknown_issuer_or_another_name_is_a_certificate_error() -> Result<(), Boxed> {
    let (pki, other) = (Pki::new("test CA")?, Pki::new("another CA")?);
    let dir = tempfile::tempdir()?;
    let port = serve(server_config(&pki.leaf("localhost")?, None)?).await?;
    let foreign = trusting(write(dir.path(), "other.pem", &other.ca_pem)?);
    let error = get(port, &foreign).await.err().ok_or("a foreign CA was trusted")?;
    assert!(error.contains("UnknownIssuer"), "{error}");

    let port = serve(server_config(&pki.leaf("upstream.internal")?, None)?).await?;
    let own = trusting(write(dir.path(), "ca.pem", &pki.ca_pem)?);
    let error = get(port, &own).await.err().ok_or("a certificate for another name was accepted")?;
    assert!(error.contains("not valid for name"), "{error}");
    Ok(())
}

#[tokio::test]
async fn mutual_tls_needs_the_configured_client_identity() -> Result<(), Boxed> {
    let pki = Pki::new("test CA")?;
    let port = serve(server_config(&pki.leaf("localhost")?, Some(pki.roots()?))?).await?;
    let dir = tempfile::tempdir()?;
    let mut settings = trusting(write(dir.path(), "ca.pem", &pki.ca_pem)?);
    assert!(get(port, &settings).await.is_err(), "a client without a certificate was accepted");

    let client = pki.leaf("gateway-client")?;
    settings.client_identity = Some(ClientIdentity {
        cert_file: write(dir.path(), "client.pem", &client.cert_pem)?,
        key_file: write(dir.path(), "client.key", &client.key_pem)?,
    });
    assert_eq!(get(port, &settings).await?, StatusCode::OK);
    Ok(())
}

/// The upstream transport's errors on an `https://` upstream: a handshake refused for an unknown
/// issuer is a connect failure, a connection the server closes after reading the request a
/// transport failure (never a connect failure: the connection was made).
#[tokio::test]
async fn through_the_transport_a_refused_handshake_is_a_connect_failure_and_a_lost_connection_not(
) -> Result<(), Boxed> {
    use crate::upstream::http::Transport;
    use crate::upstream::{UpstreamError, UpstreamSettings};
    let (pki, other) = (Pki::new("test CA")?, Pki::new("another CA")?);
    let dir = tempfile::tempdir()?;
    let transport = |port: u16, ca: &str| -> Result<Transport, Boxed> {
        let url = format!("https://localhost:{port}/sse").parse()?;
        let tls = trusting(write(dir.path(), "ca.pem", ca)?);
        let settings = UpstreamSettings { tls, ..UpstreamSettings::legacy_sse(url) };
        let gauge = prometheus::IntGauge::new("connections", "connections")?;
        Ok(Transport::new(std::sync::Arc::new(settings), gauge)?)
    };
    let port = serve_replying(server_config(&pki.leaf("localhost")?, None)?, false).await?;
    let foreign = transport(port, &other.ca_pem)?.open_event_stream().await;
    assert!(matches!(foreign, Err(UpstreamError::Connect(_))), "{:?}", foreign.err());
    let lost = transport(port, &pki.ca_pem)?.open_event_stream().await;
    assert!(matches!(lost, Err(UpstreamError::Transport(_))), "{:?}", lost.err());
    Ok(())
}

#[test]
fn configuration_errors_name_the_file() -> Result<(), Boxed> {
    let dir = tempfile::tempdir()?;
    let missing = dir.path().join("absent.pem");
    let error = client_config(&trusting(missing)).err().ok_or("a missing CA file was accepted")?;
    assert!(matches!(error, TlsError::Read { .. }) && error.to_string().contains("absent.pem"), "{error}");

    let empty = write(dir.path(), "empty.pem", "not a certificate\n")?;
    let error = client_config(&trusting(empty)).err().ok_or("an empty CA file was accepted")?;
    assert!(matches!(error, TlsError::NoCertificate { .. }), "{error}");

    let none = TlsSettings { platform_roots: false, ca_file: None, client_identity: None };
    assert!(matches!(client_config(&none), Err(TlsError::NoRoots)));

    let pki = Pki::new("test CA")?;
    let mut settings = trusting(write(dir.path(), "ca.pem", &pki.ca_pem)?);
    let cert_file = write(dir.path(), "client.pem", &pki.leaf("c")?.cert_pem)?;
    settings.client_identity = Some(ClientIdentity { cert_file: cert_file.clone(), key_file: cert_file });
    let error = client_config(&settings).err().ok_or("a certificate was accepted as a key")?;
    assert!(matches!(error, TlsError::NoKey { .. }), "{error}");
    Ok(())
}
