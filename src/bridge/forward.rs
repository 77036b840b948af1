//! Forwarding a retry to the replica that parked its call (its owner), over HTTP to the
//! owner's internal listener, authenticated with the replica MAC
//! ([`crate::mrtr::replica_auth`]). The connect timeout is short: a replica that does not
//! answer a connect quickly is taken for gone, and the retry is replayed here from the
//! journal its state carries. Any failure of the exchange itself (refused, reset, timed out,
//! an answer that is not ours) ends the same way; only an answer the owner produced is relayed.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::CONTENT_TYPE;
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

use super::wire::{WireReply, WireRequest, RESUME_PATH};
use super::{Clock, MrtrRequest, Reply};
use crate::defaults;
use crate::error::FrontError;
use crate::mrtr::{replica_auth, LiveRing};
use crate::upstream::tls::{self, TlsError, TlsSettings};

/// Why a forwarded retry got no answer from its owner.
#[derive(Debug, thiserror::Error)]
pub enum ForwardError {
    #[error("the owner URL {0:?} is not a URL")]
    Url(String),
    #[error("the request could not be built: {0}")]
    Build(String),
    #[error("the owner could not be reached: {0}")]
    Request(String),
    #[error("the owner did not answer within {0:?}")]
    Timeout(Duration),
    #[error("the owner answered HTTP {0}")]
    Status(StatusCode),
    #[error("the owner's answer could not be read: {0}")]
    Body(String),
}

/// What forwarding a retry came to.
pub(super) enum Forwarded {
    /// The owner served it: relay this.
    Served(Result<Reply, FrontError>),
    /// The owner no longer holds the call.
    NotHeld,
    /// The owner did not answer.
    Failed(ForwardError),
}

/// Forwards retries to their owners; one per replica.
pub struct Forwarder {
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
    keys: Arc<LiveRing>,
    clock: Clock,
    /// Longest one forwarded retry may take (the owner's whole run).
    timeout: Duration,
}

// === impl Forwarder ===

impl Forwarder {
    /// A forwarder to owners at `http://` or `https://` URLs, the latter verified against
    /// `trust` (built once here, never per retry).
    pub fn new(
        connect_timeout: Duration,
        keys: Arc<LiveRing>,
        timeout: Duration,
        trust: &TlsSettings,
    ) -> Result<Self, TlsError> {
        let mut tcp = HttpConnector::new();
        tcp.set_connect_timeout(Some(connect_timeout));
        tcp.set_nodelay(true);
        tcp.enforce_http(false);
        let https = tls::https_connector(tcp, tls::client_config(trust)?);
        let client = Client::builder(TokioExecutor::new()).build(https);
        Ok(Self { client, keys, clock: Clock::System, timeout })
    }

    /// Forwards `req`, whose state is `state`, to the replica advertised as `owner`.
    pub(super) async fn forward(&self, owner: &str, req: &MrtrRequest, state: &str) -> Forwarded {
        let exchange = self.exchange(owner, req, state);
        let answer = match tokio::time::timeout(self.timeout, exchange).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(e)) => return Forwarded::Failed(e),
            Err(_) => return Forwarded::Failed(ForwardError::Timeout(self.timeout)),
        };
        match answer {
            WireReply::Complete(raw) => Forwarded::Served(Ok(Reply::Complete(raw))),
            WireReply::InputRequired { requests, state, round } => {
                Forwarded::Served(Ok(Reply::InputRequired { requests, state, round }))
            }
            WireReply::Error { error, status } => {
                let status = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY);
                Forwarded::Served(Err(FrontError::Relayed { error, status }))
            }
            WireReply::NotHeld => Forwarded::NotHeld,
        }
    }

    async fn exchange(&self, owner: &str, req: &MrtrRequest, state: &str) -> Result<WireReply, ForwardError> {
        let url = format!("{}{RESUME_PATH}", owner.trim_end_matches('/'));
        let uri: http::Uri = url.parse().map_err(|_| ForwardError::Url(owner.to_owned()))?;
        let body = serde_json::to_vec(&WireRequest::new(req, state))
            .map_err(|e| ForwardError::Build(e.to_string()))?;
        let mac = replica_auth::sign(&self.keys.current(), self.clock.unix_now(), &body);
        let request = Request::post(uri)
            .header(CONTENT_TYPE, "application/json")
            .header(replica_auth::HEADER, mac)
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| ForwardError::Build(e.to_string()))?;
        let response =
            self.client.request(request).await.map_err(|e| ForwardError::Request(crate::error::chain(&e)))?;
        let status = response.status();
        if status != StatusCode::OK {
            return Err(ForwardError::Status(status));
        }
        let body = Limited::new(response.into_body(), defaults::MAX_FORWARD_BYTES).collect().await;
        let body = body.map_err(|e| ForwardError::Body(e.to_string()))?.to_bytes();
        serde_json::from_slice(&body).map_err(|e| ForwardError::Body(e.to_string()))
    }
}
