//! An `https://` upstream: the demo legacy server behind a TLS terminator whose CA and
//! certificate are made here. With the CA configured the whole MRTR flow runs over TLS; with a
//! CA that did not sign the certificate the client gets a clear 502 naming a TLS failure, and
//! nothing of the certificate error's own text.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use http::StatusCode;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use serde_json::json;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;

use super::form_only;
use crate::common::answers::NAME;
use crate::common::{answer_all, Client, Harness, HarnessError, Setup, TestResult};
use mrtr_gateway::app::Gateway;
use mrtr_gateway::config::Config;

/// A CA's certificate (PEM) and a `localhost` certificate it signed.
pub(super) struct Pki {
    pub(super) ca_pem: String,
    /// The `localhost` certificate and its key, PEM, for a listener configured by files.
    pub(super) leaf_pem: String,
    pub(super) key_pem: String,
    leaf: CertificateDer<'static>,
    key: PrivatePkcs8KeyDer<'static>,
}

pub(super) fn pki(ca_name: &str) -> TestResult<Pki> {
    make_pki(ca_name).map_err(|e| HarnessError::Unexpected(format!("making certificates: {e}")))
}

fn make_pki(ca_name: &str) -> Result<Pki, rcgen::Error> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.distinguished_name.push(DnType::CommonName, ca_name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_key = KeyPair::generate()?;
    let ca_pem = params.self_signed(&ca_key)?.pem();
    let issuer = Issuer::new(params, ca_key);
    let key = KeyPair::generate()?;
    let leaf = CertificateParams::new(vec!["localhost".to_owned()])?.signed_by(&key, &issuer)?;
    Ok(Pki {
        ca_pem,
        leaf_pem: leaf.pem(),
        key_pem: key.serialize_pem(),
        leaf: leaf.der().clone(),
        key: PrivatePkcs8KeyDer::from(key.serialize_der()),
    })
}

/// Terminates TLS on `127.0.0.1:0` and relays the bytes to `backend`; stopped on drop.
pub(super) struct Terminator {
    port: u16,
    task: JoinHandle<()>,
}

impl Terminator {
    pub(super) async fn start(pki: &Pki, backend: SocketAddr) -> TestResult<Self> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .and_then(|b| {
                b.with_no_client_auth()
                    .with_single_cert(vec![pki.leaf.clone()], PrivateKeyDer::Pkcs8(pki.key.clone_key()))
            })
            .map_err(|e| HarnessError::Unexpected(format!("TLS server config: {e}")))?;
        let acceptor = TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let task = tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let (Ok(mut tls), Ok(mut plain)) =
                        (acceptor.accept(tcp).await, TcpStream::connect(backend).await)
                    else {
                        return;
                    };
                    let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
                });
            }
        });
        Ok(Self { port, task })
    }

    fn url(&self) -> String {
        format!("https://localhost:{}/mcp", self.port)
    }

    pub(super) fn port(&self) -> u16 {
        self.port
    }
}

impl Drop for Terminator {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn trusting(dir: &tempfile::TempDir, ca_pem: &str) -> TestResult<(Setup, PathBuf)> {
    let path = dir.path().join("upstream-ca.pem");
    std::fs::write(&path, ca_pem)?;
    let setup = Setup::new()
        .set("upstream.tls", "platform_roots = false")
        .set("upstream.tls", &format!("ca_file = {:?}", path.display().to_string()));
    Ok((setup, path))
}

#[tokio::test]
async fn the_mrtr_flow_runs_over_an_https_upstream_with_the_configured_ca() -> TestResult {
    let h = Harness::start().await?;
    let pki = pki("upstream test CA")?;
    let tls = Terminator::start(&pki, h.demo.addr).await?;
    let dir = tempfile::tempdir()?;
    let (setup, _) = trusting(&dir, &pki.ca_pem)?;
    let (gateway, client) = setup.attach_url(&tls.url()).await?;

    let call = || client.call_tool("confirm_twice", json!({})).caps(form_only());
    let (q1, s1) = call().send().await?.input_required()?;
    let (q2, s2) = call().state(&s1).responses(answer_all(&q1)).send().await?.input_required()?;
    let done = call().state(&s2).responses(answer_all(&q2)).send().await?;
    assert_eq!(done.text()?, format!("Confirmed {NAME}: true"));
    gateway.shutdown().await;
    h.stop().await
}

#[tokio::test]
async fn a_certificate_the_configured_ca_did_not_sign_is_a_clear_502() -> TestResult {
    let h = Harness::start().await?;
    let (served, other) = (pki("upstream test CA")?, pki("another CA")?);
    let tls = Terminator::start(&served, h.demo.addr).await?;
    let dir = tempfile::tempdir()?;
    let (setup, _) = trusting(&dir, &other.ca_pem)?;
    // Not `attach_url`: this gateway's upstream never becomes ready.
    let gateway = Gateway::start(Config::from_toml(&setup.toml(&tls.url()))?).await?;
    let client = Client::new(gateway.url("/mcp"));
    let reply = client.call_tool("echo", json!({"message": "hi"})).send().await?;
    let message = reply.expect_error(StatusCode::BAD_GATEWAY, -32603)?;
    assert_eq!(message, "upstream server unavailable: TLS handshake failed");
    gateway.shutdown().await;
    h.stop().await
}
