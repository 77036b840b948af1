//! Forwarding a retry to the replica that parked its call (its owner), over HTTP to the
//! owner's internal listener, authenticated with the replica MAC
//! ([`crate::mrtr::replica_auth`]). The connect timeout is short: a replica that does not
//! answer a connect quickly is taken for gone, and the retry is replayed here from the
//! journal its state carries. Any failure of the exchange itself (refused, reset, timed out,
//! an answer that is not ours) ends the same way; only an answer the owner produced is relayed.
//! When the client asked for progress or logs, the owner's notifications are passed on to the
//! client's stream as their lines arrive, before the reply ([`super::wire`]).
//!
//! Two bounds, because an owner can accept a TCP connection and still never take the retry
//! (its internal listener's slots all held, its connections queued in the kernel's backlog):
//! the owner must *accept* the exchange, its response head, within `cluster.forward_accept_
//! timeout_ms` (connect and TLS included), and the whole exchange must end within the call's
//! own run bound. The owner sends its head as soon as it verified the retry, before it runs
//! the call, and the reply as the stream's last line (`stream_answer` in the internal
//! listener), so a late head means an owner that did not take the retry, never a slow call.
//! Past the accept bound the retry is replayed here like any failed exchange. An owner that
//! takes the retry out of its backlog only after that (within the MAC's ±30 s) still resumes
//! the call it holds, so the call then runs on both replicas and the owner's answer reaches no
//! one, as with an exchange that outlived the whole bound: the bound is a trade of a rare
//! second run for a client that is not left waiting on a wedged owner.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::CONTENT_TYPE;
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Full};

use super::wire::{WireFrame, WireReply, WireRequest, RESUME_PATH};
use crate::bridge::{Forwarded, Forwarding, MrtrRequest, Notes, OwnerLink, Reply};
use crate::clock::Clock;
use crate::config::tls::TlsSettings;
use crate::defaults;
use crate::error::FrontError;
use crate::mrtr::{replica_auth, LiveRing};
use crate::outbound::{self, Bound, HttpsClient, TlsError, Trust};

/// Why a forwarded retry got no answer from its owner.
#[derive(Debug, thiserror::Error)]
pub enum ForwardError {
    #[error("the owner URL {0:?} is not a URL")]
    Url(String),
    #[error("the request could not be built: {0}")]
    Build(String),
    #[error("the owner could not be reached: {0}")]
    Request(String),
    #[error("the owner did not take the retry within {0:?}")]
    Unaccepted(Duration),
    #[error("the owner did not answer within {0:?}")]
    Timeout(Duration),
    #[error("the owner answered HTTP {0}")]
    Status(StatusCode),
    #[error("the owner's answer could not be read: {0}")]
    Body(String),
}

/// Forwards retries to their owners; one per replica.
pub struct Forwarder {
    client: HttpsClient,
    keys: Arc<LiveRing>,
    clock: Clock,
    /// Longest the owner may take to accept a forwarded retry (its response head).
    accept_timeout: Duration,
    /// Longest one forwarded retry may take (the owner's whole run).
    timeout: Duration,
    /// Longest one forwarded task request may take ([`super::tasks`]).
    pub(super) task_timeout: Duration,
}

// === impl Forwarder ===

impl Forwarder {
    /// A forwarder to owners at `http://` or `https://` URLs, the latter verified against
    /// `trust` (built once here, never per retry). An owner must connect within
    /// `connect_timeout`, accept the retry (send its response head) within `accept_timeout`,
    /// and answer it within `timeout`.
    pub fn new(
        (connect_timeout, accept_timeout): (Duration, Duration),
        keys: Arc<LiveRing>,
        timeout: Duration,
        trust: &TlsSettings,
        bound: &Bound,
    ) -> Result<Self, TlsError> {
        let spec = outbound::ClientSpec {
            name: "forward",
            connect_timeout,
            trust: Trust::Verified(trust),
            bound,
            idle_timeout: None,
            max_idle_per_host: None,
        };
        // A task request makes at most one bounded upstream exchange on the owner.
        let task_timeout = accept_timeout + defaults::TASK_UPSTREAM_TIMEOUT + defaults::TASK_FORWARD_SLACK;
        let client = outbound::client(&spec)?;
        Ok(Self { client, keys, clock: Clock::System, accept_timeout, timeout, task_timeout })
    }

    /// Forwards `req`, whose state is `state`, to the replica advertised as `owner`; the
    /// notifications the owner relays go to `notes`.
    async fn forward_retry(
        &self,
        owner: &str,
        req: &MrtrRequest,
        state: &str,
        notes: Option<&Notes>,
    ) -> Forwarded {
        let exchange = self.exchange(owner, req, state, notes);
        let answer = match tokio::time::timeout(self.timeout, exchange).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(e)) => return Forwarded::Failed(Box::new(e)),
            Err(_) => return Forwarded::Failed(Box::new(ForwardError::Timeout(self.timeout))),
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

    async fn exchange(
        &self,
        owner: &str,
        req: &MrtrRequest,
        state: &str,
        notes: Option<&Notes>,
    ) -> Result<WireReply, ForwardError> {
        let body = serde_json::to_vec(&WireRequest::new(req, state, notes))
            .map_err(|e| ForwardError::Build(e.to_string()))?;
        let response = self.post(owner, RESUME_PATH, body).await?;
        read_answer(response.into_body(), notes).await
    }

    /// POSTs `body` to `path` on the replica advertised as `owner`, signed with the replica
    /// MAC, and waits for the owner to accept it (its response head) within the accept bound.
    /// The response, when its status is 200.
    pub(super) async fn post(
        &self,
        owner: &str,
        path: &str,
        body: Vec<u8>,
    ) -> Result<http::Response<hyper::body::Incoming>, ForwardError> {
        let url = format!("{}{path}", owner.trim_end_matches('/'));
        let uri: http::Uri = url.parse().map_err(|_| ForwardError::Url(owner.to_owned()))?;
        let mac = replica_auth::sign(&self.keys.current(), self.clock.unix_now(), &body);
        let request = Request::post(uri)
            .header(CONTENT_TYPE, "application/json")
            .header(replica_auth::HEADER, mac)
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| ForwardError::Build(e.to_string()))?;
        let accepted = tokio::time::timeout(self.accept_timeout, self.client.request(request)).await;
        let response = accepted
            .map_err(|_| ForwardError::Unaccepted(self.accept_timeout))?
            .map_err(|e| ForwardError::Request(crate::logging::chain(&e)))?;
        let status = response.status();
        if status != StatusCode::OK {
            return Err(ForwardError::Status(status));
        }
        Ok(response)
    }
}

impl OwnerLink for Forwarder {
    fn forward<'a>(
        &'a self,
        owner: &'a str,
        req: &'a MrtrRequest,
        state: &'a str,
        notes: Option<&'a Notes>,
    ) -> Forwarding<'a> {
        Box::pin(self.forward_retry(owner, req, state, notes))
    }
}

/// Reads the owner's lines: notifications go to `notes` as they come, the last line is the
/// reply. At most [`defaults::MAX_FORWARD_BYTES`] in all.
async fn read_answer(
    mut body: hyper::body::Incoming,
    notes: Option<&Notes>,
) -> Result<WireReply, ForwardError> {
    let (mut pending, mut total, mut reply) = (Vec::new(), 0usize, None);
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| ForwardError::Body(e.to_string()))?;
        let Ok(data) = frame.into_data() else { continue };
        total += data.len();
        if total > defaults::MAX_FORWARD_BYTES {
            return Err(ForwardError::Body(format!("over {} bytes", defaults::MAX_FORWARD_BYTES)));
        }
        pending.extend_from_slice(&data);
        while let Some(end) = pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = pending.drain(..=end).collect();
            take_line(&line[..end], notes, &mut reply).await?;
        }
    }
    take_line(&pending, notes, &mut reply).await?;
    reply.ok_or_else(|| ForwardError::Body("the answer ended without a reply".into()))
}

/// One line of the answer; a blank one is nothing, and nothing may follow the reply.
async fn take_line(
    line: &[u8],
    notes: Option<&Notes>,
    reply: &mut Option<WireReply>,
) -> Result<(), ForwardError> {
    if line.iter().all(u8::is_ascii_whitespace) {
        return Ok(());
    }
    if reply.is_some() {
        return Err(ForwardError::Body("a line after the reply".into()));
    }
    match WireFrame::parse(line).map_err(|e| ForwardError::Body(e.to_string()))? {
        WireFrame::Note(note) => {
            if let Some(notes) = notes {
                // The client's stream closing is not the owner's failure: the reply still counts.
                let _ = notes.tx.send(note).await;
            }
        }
        WireFrame::Reply(r) => *reply = Some(r),
    }
    Ok(())
}
