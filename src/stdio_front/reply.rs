//! A front response as lines: a JSON body is one line (an empty one, a notification's 202, is
//! none); an SSE body is one line per event, sent as each event arrives, so progress reaches the
//! client before the result. The HTTP status is not needed: every body the front writes is a
//! complete JSON-RPC message.
//!
//! Over HTTP a stream that ends without its response tells the client the request was lost (a
//! listen stream whose upstream session died ends so). Over stdio nothing ends, so the client
//! is told ([`unanswered`]): a listen request gets `notifications/cancelled` naming it, the one
//! server-sent use the transport allows, and any other request an error response.

use std::fmt::Display;
use std::pin::pin;

use bytes::Bytes;
use http::header::CONTENT_TYPE;
use http::Response;
use http_body::Body;
use http_body_util::BodyExt;
use tokio::sync::mpsc;

use super::output::one_line;
use crate::error::FrontError;
use crate::protocol::jsonrpc::error_bytes;
use crate::protocol::{methods, RequestId};

/// The client's side of stdout is gone.
#[derive(Debug)]
pub(super) struct Closed;

/// Sends the messages of `response` to `out`, in order; true when one of them was a response.
pub(super) async fn relay<B>(response: Response<B>, out: &mpsc::Sender<Bytes>) -> Result<bool, Closed>
where
    B: Body<Data = Bytes>,
    B::Error: Display,
{
    let sse =
        response.headers().get(CONTENT_TYPE).is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
    let mut body = pin!(response.into_body());
    let mut events = SseDecoder::default();
    let mut whole = Vec::new();
    let mut responded = false;
    while let Some(frame) = body.frame().await {
        let data = match frame {
            Ok(frame) => match frame.into_data() {
                Ok(data) => data,
                Err(_) => continue,
            },
            Err(e) => {
                tracing::warn!(error = %e, "front response body failed");
                break;
            }
        };
        if !sse {
            whole.extend_from_slice(&data);
            continue;
        }
        for message in events.push(&data) {
            responded |= is_response(&message);
            send(out, message).await?;
        }
    }
    let last = if sse { events.finish() } else { Some(whole) };
    match last {
        Some(message) if !message.iter().all(u8::is_ascii_whitespace) => {
            // A JSON body is the response (or the error that stands for it).
            responded |= !sse || is_response(&message);
            send(out, message).await?;
            Ok(responded)
        }
        _ => Ok(responded),
    }
}

/// Tells the client that request `id` (`subscriptions/listen` when `listen`) ended without a
/// response.
pub(super) async fn unanswered(id: &RequestId, listen: bool, out: &mpsc::Sender<Bytes>) {
    let message = if listen {
        let params = serde_json::json!({
            "requestId": id,
            "reason": "the subscription ended: listen again",
        });
        let note = serde_json::json!({"jsonrpc": "2.0", "method": methods::CANCELLED, "params": params});
        note.to_string().into_bytes()
    } else {
        tracing::warn!(%id, "a stdio request's response ended before its result");
        let e = FrontError::internal("the gateway's response ended before its result");
        error_bytes(Some(id), &e.to_object())
    };
    let _ = send(out, message).await;
}

/// True for a JSON-RPC response: a result or an error, no method.
fn is_response(message: &[u8]) -> bool {
    #[derive(serde::Deserialize)]
    struct Probe {
        method: Option<serde::de::IgnoredAny>,
        result: Option<serde::de::IgnoredAny>,
        error: Option<serde::de::IgnoredAny>,
    }
    serde_json::from_slice::<Probe>(message)
        .is_ok_and(|p| p.method.is_none() && (p.result.is_some() || p.error.is_some()))
}

async fn send(out: &mpsc::Sender<Bytes>, message: Vec<u8>) -> Result<(), Closed> {
    out.send(one_line(message)).await.map_err(|_| Closed)
}

/// Splits an SSE byte stream into the `data` of each event (lines joined by `\n`).
#[derive(Debug, Default)]
pub(super) struct SseDecoder {
    pending: Vec<u8>,
}

impl SseDecoder {
    /// Feeds `chunk`; returns the data of every event it completed.
    pub(super) fn push(&mut self, chunk: &[u8]) -> Vec<Vec<u8>> {
        self.pending.extend_from_slice(chunk);
        let mut done = Vec::new();
        while let Some(end) = self.pending.windows(2).position(|w| w == b"\n\n") {
            let event: Vec<u8> = self.pending.drain(..end + 2).collect();
            done.extend(event_data(&event[..end]));
        }
        done
    }

    /// The data of an event the stream ended inside, if any.
    pub(super) fn finish(self) -> Option<Vec<u8>> {
        event_data(&self.pending)
    }
}

fn event_data(event: &[u8]) -> Option<Vec<u8>> {
    let mut data: Option<Vec<u8>> = None;
    for line in event.split(|&b| b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let Some(value) = line.strip_prefix(b"data:") else { continue };
        let value = value.strip_prefix(b" ").unwrap_or(value);
        match &mut data {
            Some(d) => {
                d.push(b'\n');
                d.extend_from_slice(value);
            }
            None => data = Some(value.to_vec()),
        }
    }
    data.filter(|d| !d.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::Full;

    fn response(content_type: &'static str, body: impl Into<String>) -> Response<Full<Bytes>> {
        let mut response = Response::new(Full::new(Bytes::from(body.into())));
        response.headers_mut().insert(CONTENT_TYPE, http::HeaderValue::from_static(content_type));
        response
    }

    /// The lines `response` becomes, and whether one was its response.
    async fn lines(response: Response<Full<Bytes>>) -> (Vec<String>, bool) {
        let (tx, mut rx) = mpsc::channel(8);
        let responded = relay(response, &tx).await.unwrap();
        drop(tx);
        let mut lines = Vec::new();
        while let Some(line) = rx.recv().await {
            lines.push(String::from_utf8(line.to_vec()).unwrap());
        }
        (lines, responded)
    }

    #[tokio::test]
    async fn a_stream_without_its_response_is_told_apart() {
        let note = r#"data: {"jsonrpc":"2.0","method":"notifications/progress","params":{}}"#;
        let ended = format!("{note}\n\ndata: {{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{{}}}}\n\n");
        let (sent, responded) = lines(response("text/event-stream", ended)).await;
        assert_eq!((sent.len(), responded), (2, true));
        let (sent, responded) = lines(response("text/event-stream", format!("{note}\n\n"))).await;
        assert_eq!((sent.len(), responded), (1, false), "a notification alone is no response");
        let error = r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"x"}}"#;
        assert_eq!(lines(response("application/json", error)).await, (vec![error.to_owned()], true));
        assert_eq!(lines(response("application/json", "")).await, (vec![], false), "a 202 answers nothing");
    }

    #[tokio::test]
    async fn an_unanswered_listen_is_cancelled_and_any_other_request_gets_an_error() {
        let (tx, mut rx) = mpsc::channel(2);
        unanswered(&RequestId::String("listen:1".into()), true, &tx).await;
        unanswered(&RequestId::Number(7), false, &tx).await;
        let listen: serde_json::Value = serde_json::from_slice(&rx.recv().await.unwrap()).unwrap();
        assert_eq!(listen["method"], "notifications/cancelled");
        assert_eq!(listen["params"]["requestId"], "listen:1");
        assert!(listen.get("id").is_none(), "a notification: {listen}");
        let other: serde_json::Value = serde_json::from_slice(&rx.recv().await.unwrap()).unwrap();
        assert_eq!((other["id"].clone(), other["error"]["code"].clone()), (7.into(), (-32603).into()));
    }

    #[test]
    fn events_split_across_chunks_are_joined() {
        let mut d = SseDecoder::default();
        assert!(d.push(b"event: message\ndata: {\"a\"").is_empty());
        assert_eq!(
            d.push(b":1}\n\n: keep-alive\n\ndata: {}\n\n"),
            vec![b"{\"a\":1}".to_vec(), b"{}".to_vec()]
        );
        assert_eq!(d.finish(), None);
    }

    #[test]
    fn multi_line_data_and_an_unterminated_last_event() {
        let mut d = SseDecoder::default();
        assert_eq!(d.push(b"data: [1,\r\ndata: 2]\r\n\n"), vec![b"[1,\n2]".to_vec()]);
        assert!(d.push(b"data: {\"end\":true}").is_empty());
        assert_eq!(d.finish(), Some(b"{\"end\":true}".to_vec()));
    }
}
