//! Streams an upstream response body to the client as it arrives (an SSE stream of server
//! requests, notifications and the response; or a JSON body), without buffering it.
//!
//! One task per relayed body moves frames into the front body's bounded channel, so a slow
//! client slows the upstream read instead of growing memory. It stops at the first of: the
//! body's end, the client going away, the session ending (deleted or expired) and, for a
//! POST's stream, the call's deadline. Dropping the upstream body closes its stream upstream.
//! While it runs it holds the session [`Active`], so a session with an open stream never idles out.
//! A restricted client's list responses go through a [`Rewrite`] on the way.

use bytes::Bytes;
use http_body::Body;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use super::rewrite::Rewrite;
use super::table::Active;
use crate::body::FrontBody;

/// Chunks buffered towards the client before the upstream read waits.
const CHUNKS: usize = 16;

/// The front body fed from `body`, through `rewrite` when there is one.
pub(super) fn stream(
    body: Incoming,
    active: Active,
    ended: watch::Receiver<bool>,
    deadline: Option<Instant>,
    rewrite: Option<Rewrite>,
) -> FrontBody {
    if body.is_end_stream() {
        return FrontBody::empty();
    }
    let (tx, rx) = mpsc::channel(CHUNKS);
    tokio::spawn(pump(body, tx, active, (ended, deadline), rewrite));
    FrontBody::Stream(rx)
}

async fn pump(
    mut body: Incoming,
    tx: mpsc::Sender<Bytes>,
    _active: Active,
    (mut ended, deadline): (watch::Receiver<bool>, Option<Instant>),
    mut rewrite: Option<Rewrite>,
) {
    let expiry = async {
        match deadline {
            Some(at) => tokio::time::sleep_until(at).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(expiry);
    loop {
        // Biased: a stop signal wins over a frame that is ready at the same time.
        let frame = tokio::select! {
            biased;
            _ = tx.closed() => return,
            _ = ended.wait_for(|e| *e) => return,
            _ = &mut expiry => {
                tracing::debug!("legacy stream reached the call deadline");
                return;
            }
            frame = body.frame() => frame,
        };
        match frame {
            Some(Ok(frame)) => {
                let Ok(data) = frame.into_data() else { continue };
                let Some(rewriting) = &mut rewrite else {
                    if tx.send(data).await.is_err() {
                        return;
                    }
                    continue;
                };
                let out = rewriting.push(data);
                for chunk in out.chunks {
                    if tx.send(chunk).await.is_err() {
                        return;
                    }
                }
                if out.end {
                    return;
                }
            }
            Some(Err(e)) => {
                tracing::debug!(error = %e, "legacy upstream stream failed");
                return;
            }
            None => {
                if let Some(rest) = rewrite.and_then(Rewrite::finish) {
                    let _ = tx.send(rest).await;
                }
                return;
            }
        }
    }
}
