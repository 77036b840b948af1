//! `subscriptions/listen` on the HTTP front: a validated request handed to the bridge
//! ([`crate::subscriptions`]), answered with its event stream (the acknowledgement first), and
//! recorded once the stream ends: `complete` when the gateway ended it gracefully, `abandoned`
//! when the client closed it. Errors before the stream opens are plain JSON with their status.

use std::sync::Arc;

use http::Response;
use tokio::time::Instant;
use tracing::Instrument;

use super::outcome::{self, Outcome, OutcomeLabel};
use super::service::{Call, FrontState};
use crate::body::FrontBody;
use crate::error::FrontError;
use crate::protocol::methods;
use crate::subscriptions::{Ended, ListenRequest, Listening};

/// Opens the listen stream of `call`.
pub(super) async fn listen(state: &Arc<FrontState>, call: Box<Call>) -> Outcome {
    let started = Instant::now();
    let Some(subscriptions) = state.subscriptions.clone() else {
        return Outcome::error(
            Some(&call.id),
            &FrontError::MethodNotFound(methods::SUBSCRIPTIONS_LISTEN.into()),
        );
    };
    if !call.accepts.sse {
        let e = FrontError::NotAcceptable(
            "subscriptions/listen answers with an event stream: Accept must include text/event-stream".into(),
        );
        return Outcome::error(Some(&call.id), &e);
    }
    let capabilities = call.caps.legacy_initialize(state.upstream_version);
    let params = match call.params.tree() {
        Ok(params) => params,
        Err(e) => return Outcome::error(Some(&call.id), &e.into()),
    };
    let req = ListenRequest {
        id: call.id.clone(),
        key: (call.principal.clone(), call.caps.fingerprint()),
        capabilities: &capabilities,
        params: Some(params),
        grants: &call.grants,
    };
    match subscriptions.listen(req).await {
        Ok(listening) => streamed(state.clone(), listening, started),
        Err(e) => Outcome::error(Some(&call.id), &FrontError::from(e)),
    }
}

/// The SSE response, recorded by a task of its own when the stream ends.
fn streamed(state: Arc<FrontState>, listening: Listening, started: Instant) -> Outcome {
    let Listening { body, ended } = listening;
    let record = async move {
        match ended.await {
            Ok(Ended::ClientClosed) => {
                outcome::record_abandoned(&state.metrics, methods::SUBSCRIPTIONS_LISTEN, started)
            }
            // A graceful end, or one the client is to take as a disconnect: either way the
            // gateway answered as it should.
            Ok(Ended::Shutdown | Ended::Dropped) | Err(_) => {
                let done = Outcome::plain(OutcomeLabel::Complete, Response::new(FrontBody::empty()));
                state.record(methods::SUBSCRIPTIONS_LISTEN, &done, started);
            }
        }
    };
    tokio::spawn(record.in_current_span());
    super::stream::sse_response(body)
}
