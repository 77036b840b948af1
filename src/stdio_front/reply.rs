//! A front response as lines: a JSON body is one line (an empty one, a notification's 202, is
//! none); an SSE body is one line per event, sent as each event arrives, so progress reaches the
//! client before the result. The HTTP status is not needed: every body the front writes is a
//! complete JSON-RPC message.

use std::fmt::Display;
use std::pin::pin;

use bytes::Bytes;
use http::header::CONTENT_TYPE;
use http::Response;
use http_body::Body;
use http_body_util::BodyExt;
use tokio::sync::mpsc;

use super::output::one_line;

/// The client's side of stdout is gone.
#[derive(Debug)]
pub(super) struct Closed;

/// Sends the messages of `response` to `out`, in order.
pub(super) async fn relay<B>(response: Response<B>, out: &mpsc::Sender<Bytes>) -> Result<(), Closed>
where
    B: Body<Data = Bytes>,
    B::Error: Display,
{
    let sse =
        response.headers().get(CONTENT_TYPE).is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
    let mut body = pin!(response.into_body());
    let mut events = SseDecoder::default();
    let mut whole = Vec::new();
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
            send(out, message).await?;
        }
    }
    let last = if sse { events.finish() } else { Some(whole) };
    match last {
        Some(message) if !message.iter().all(u8::is_ascii_whitespace) => send(out, message).await,
        _ => Ok(()),
    }
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
