//! A token issuer on loopback for the JWKS tests: it serves a JWKS document the test can swap
//! (key rotation) or take down (HTTP 503), and an OpenID discovery document naming it, and
//! counts what it was asked. Its signing keys are made here at test time, never stored.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
use parking_lot::Mutex;
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::common::{HarnessError, TestResult};

/// What the issuer serves and what it saw.
#[derive(Default)]
struct State {
    jwks: Mutex<Value>,
    down: AtomicBool,
    jwks_fetches: AtomicUsize,
    failed_fetches: AtomicUsize,
    discovery_fetches: AtomicUsize,
    url: OnceLock<String>,
}

/// A running issuer.
pub(crate) struct Issuer {
    state: Arc<State>,
    task: JoinHandle<()>,
}

/// A private signing key and its public JWK.
pub(crate) struct SigningKey {
    pub(crate) kid: String,
    pub(crate) alg: Algorithm,
    encoding: EncodingKey,
    pub(crate) jwk: Value,
}

// === impl Issuer ===

impl Issuer {
    /// Serves `keys` as its JWKS.
    pub(crate) async fn spawn(keys: &[&SigningKey]) -> TestResult<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr: SocketAddr = listener.local_addr()?;
        let state = Arc::new(State::default());
        let _ = state.url.set(format!("http://{addr}"));
        let issuer = Self { task: tokio::spawn(accept(listener, state.clone())), state };
        issuer.serve(keys);
        Ok(issuer)
    }

    pub(crate) fn addr(&self) -> TestResult<SocketAddr> {
        let url = self.url();
        let host = url.trim_start_matches("http://");
        host.parse().map_err(|_| HarnessError::Unexpected(format!("issuer address {host}")))
    }

    /// The issuer's URL (its `iss` for discovery).
    pub(crate) fn url(&self) -> String {
        self.state.url.get().cloned().unwrap_or_default()
    }

    pub(crate) fn jwks_url(&self) -> String {
        format!("{}/jwks", self.url())
    }

    /// Serves `keys` from now on (a rotation).
    pub(crate) fn serve(&self, keys: &[&SigningKey]) {
        *self.state.jwks.lock() = json!({"keys": keys.iter().map(|k| k.jwk.clone()).collect::<Vec<_>>()});
    }

    /// Answers 503 to every request while `down`.
    pub(crate) fn set_down(&self, down: bool) {
        self.state.down.store(down, Ordering::SeqCst);
    }

    /// JWKS requests answered with keys.
    pub(crate) fn jwks_fetches(&self) -> usize {
        self.state.jwks_fetches.load(Ordering::SeqCst)
    }

    /// Requests answered 503 while down.
    pub(crate) fn failed_fetches(&self) -> usize {
        self.state.failed_fetches.load(Ordering::SeqCst)
    }

    pub(crate) fn discovery_fetches(&self) -> usize {
        self.state.discovery_fetches.load(Ordering::SeqCst)
    }
}

impl Drop for Issuer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn accept(listener: TcpListener, state: Arc<State>) {
    while let Ok((stream, _)) = listener.accept().await {
        let state = state.clone();
        let service = service_fn(move |req| handle(req, state.clone()));
        tokio::spawn(async move {
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

async fn handle(req: Request<Incoming>, state: Arc<State>) -> Result<Response<Full<Bytes>>, Infallible> {
    if state.down.load(Ordering::SeqCst) {
        state.failed_fetches.fetch_add(1, Ordering::SeqCst);
        return Ok(reply(StatusCode::SERVICE_UNAVAILABLE, json!({"error": "down"})));
    }
    let url = state.url.get().cloned().unwrap_or_default();
    Ok(match req.uri().path() {
        "/jwks" => {
            state.jwks_fetches.fetch_add(1, Ordering::SeqCst);
            reply(StatusCode::OK, state.jwks.lock().clone())
        }
        "/.well-known/openid-configuration" => {
            state.discovery_fetches.fetch_add(1, Ordering::SeqCst);
            reply(StatusCode::OK, json!({"issuer": url, "jwks_uri": format!("{url}/jwks")}))
        }
        _ => reply(StatusCode::NOT_FOUND, json!({})),
    })
}

fn reply(status: StatusCode, body: Value) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from(body.to_string())));
    *r.status_mut() = status;
    r.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("application/json"));
    r
}

// === impl SigningKey ===

fn b64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

fn fail(what: &str, e: &dyn std::fmt::Display) -> HarnessError {
    HarnessError::Unexpected(format!("{what}: {e}"))
}

/// One RSA key pair for every test of the process (2048-bit generation is slow in debug); the
/// first test to ask makes it while the others wait.
fn rsa_pair() -> TestResult<&'static (String, String, Value)> {
    static PAIR: OnceLock<Result<(String, String, Value), String>> = OnceLock::new();
    PAIR.get_or_init(make_rsa_pair).as_ref().map_err(|e| HarnessError::Unexpected(format!("RSA key: {e}")))
}

fn make_rsa_pair() -> Result<(String, String, Value), String> {
    use rsa::pkcs8::{EncodePrivateKey, EncodePublicKey, LineEnding};
    use rsa::traits::PublicKeyParts;
    let key = rsa::RsaPrivateKey::new(&mut rand::thread_rng(), 2048).map_err(|e| e.to_string())?;
    let private = key.to_pkcs8_pem(LineEnding::LF).map_err(|e| e.to_string())?.to_string();
    let public = rsa::RsaPublicKey::from(&key);
    let public_pem = public.to_public_key_pem(LineEnding::LF).map_err(|e| e.to_string())?;
    let jwk = json!({"kty": "RSA", "n": b64(&public.n().to_bytes_be()), "e": b64(&public.e().to_bytes_be())});
    Ok((private, public_pem, jwk))
}

impl SigningKey {
    /// An RSA key for `alg` (RS* or PS*), with `alg` named in its JWK.
    pub(crate) fn rsa(kid: &str, alg: Algorithm) -> TestResult<Self> {
        let (private, _, jwk) = rsa_pair()?;
        let mut jwk = jwk.clone();
        jwk["kid"] = json!(kid);
        jwk["alg"] = json!(format!("{alg:?}"));
        Ok(Self { kid: kid.into(), alg, encoding: EncodingKey::from_rsa_pem(private.as_bytes())?, jwk })
    }

    /// The PEM of the RSA public key, the bytes an algorithm-confusion attack signs with.
    pub(crate) fn rsa_public_pem() -> TestResult<String> {
        Ok(rsa_pair()?.1.clone())
    }

    /// A P-256 key for ES256 (its JWK names no `alg`).
    pub(crate) fn ec(kid: &str) -> TestResult<Self> {
        let key = rcgen::KeyPair::generate().map_err(|e| fail("EC key", &e))?;
        let raw = key.public_key_raw();
        let jwk =
            json!({"kty": "EC", "crv": "P-256", "kid": kid, "x": b64(&raw[1..33]), "y": b64(&raw[33..65])});
        let encoding = EncodingKey::from_ec_pem(key.serialize_pem().as_bytes())?;
        Ok(Self { kid: kid.into(), alg: Algorithm::ES256, encoding, jwk })
    }

    /// An Ed25519 key for EdDSA.
    pub(crate) fn ed25519(kid: &str) -> TestResult<Self> {
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519).map_err(|e| fail("Ed25519 key", &e))?;
        let jwk = json!({"kty": "OKP", "crv": "Ed25519", "kid": kid, "x": b64(key.public_key_raw())});
        let encoding = EncodingKey::from_ed_pem(key.serialize_pem().as_bytes())?;
        Ok(Self { kid: kid.into(), alg: Algorithm::EdDSA, encoding, jwk })
    }

    /// A shared secret for HS256, served as an `oct` JWK.
    pub(crate) fn hmac(kid: &str, secret: &[u8]) -> Self {
        let jwk = json!({"kty": "oct", "kid": kid, "alg": "HS256", "k": b64(secret)});
        Self { kid: kid.into(), alg: Algorithm::HS256, encoding: EncodingKey::from_secret(secret), jwk }
    }

    /// `claims` signed with this key, its `kid` in the header.
    pub(crate) fn sign(&self, claims: &Value) -> TestResult<String> {
        let mut header = Header::new(self.alg);
        header.kid = Some(self.kid.clone());
        Ok(encode(&header, claims, &self.encoding)?)
    }
}
