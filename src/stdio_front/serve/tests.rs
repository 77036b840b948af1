//! The loop against a stub front: cancellation drops the request's future, the drain is
//! bounded, and a signal during the drain ends it at once.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use http_body_util::Full;
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

use super::*;

/// Sets its flag when dropped: the request's future was dropped.
struct Dropped(Arc<AtomicBool>);

impl Drop for Dropped {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// A front whose `hang` requests never answer (their future sets `flags.1` when dropped,
/// after setting `flags.0` when it starts) and whose others answer an empty result.
fn stub(
    flags: (Arc<AtomicBool>, Arc<AtomicBool>),
) -> impl Service<Request<Full<Bytes>>, Response = Response<Full<Bytes>>, Error = Infallible, Future: Send>
       + Clone
       + Send
       + 'static {
    tower::service_fn(move |req: Request<Full<Bytes>>| {
        let (started, guard) = (flags.0.clone(), Dropped(flags.1.clone()));
        async move {
            if req.headers().get("mcp-method").is_some_and(|m| m == "hang") {
                let _guard = guard;
                started.store(true, Ordering::SeqCst);
                std::future::pending::<()>().await;
            }
            Ok(Response::new(Full::new(Bytes::from_static(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#))))
        }
    })
}

fn opts(drain: Duration) -> StdioOptions {
    StdioOptions { path: "/mcp".into(), max_line_bytes: 1024, max_in_flight: 8, drain }
}

async fn until(flag: &AtomicBool, what: &str) {
    let wait = async {
        while !flag.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(5), wait).await.expect(what);
}

async fn all_output(mut out: DuplexStream) -> String {
    let mut text = String::new();
    let _ = out.read_to_string(&mut text).await;
    text
}

const HANG: &[u8] = b"{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"hang\",\"params\":{}}\n";

const CANCEL: &[u8] =
    b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":9}}\n";

#[tokio::test]
async fn a_cancellation_drops_the_request_and_writes_nothing() {
    let flags = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
    let (mut client, input) = tokio::io::duplex(4096);
    let (output, read) = tokio::io::duplex(4096);
    let run = serve(stub(flags.clone()), input, output, opts(Duration::from_secs(5)), std::future::pending());
    let served = tokio::spawn(run);
    client.write_all(HANG).await.unwrap();
    until(&flags.0, "the request to start").await;
    client.write_all(CANCEL).await.unwrap();
    until(&flags.1, "the cancelled request's future to be dropped").await;
    drop(client);
    served.await.unwrap().unwrap();
    assert_eq!(all_output(read).await, "");
}

#[tokio::test]
async fn the_drain_is_bounded() {
    let flags = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
    let (mut client, input) = tokio::io::duplex(4096);
    let (output, read) = tokio::io::duplex(4096);
    client.write_all(HANG).await.unwrap();
    client.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"x\",\"params\":{}}\n").await.unwrap();
    drop(client);
    let run =
        serve(stub(flags.clone()), input, output, opts(Duration::from_millis(200)), std::future::pending());
    tokio::time::timeout(Duration::from_secs(5), run).await.expect("the drain ends").unwrap();
    assert!(flags.1.load(Ordering::SeqCst), "the hung request is cancelled");
    assert_eq!(all_output(read).await, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n");
}

#[tokio::test]
async fn a_signal_during_the_drain_ends_it_at_once() {
    let flags = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
    let (mut client, input) = tokio::io::duplex(4096);
    let (output, _read) = tokio::io::duplex(4096);
    client.write_all(HANG).await.unwrap();
    drop(client);
    let (signal, signalled) = tokio::sync::oneshot::channel::<()>();
    let stop = async move {
        let _ = signalled.await;
    };
    let run = serve(stub(flags.clone()), input, output, opts(Duration::from_secs(60)), stop);
    let served = tokio::spawn(run);
    until(&flags.0, "the request to start").await;
    let _ = signal.send(());
    let ended = tokio::time::timeout(Duration::from_secs(5), served).await;
    ended.expect("the signal ends the drain").unwrap().unwrap();
}

#[tokio::test]
async fn past_the_bound_a_request_is_refused_at_once_and_a_cancellation_still_gets_through() {
    let flags = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicBool::new(false)));
    let (mut client, input) = tokio::io::duplex(4096);
    let (output, mut read) = tokio::io::duplex(4096);
    let one = StdioOptions { max_in_flight: 1, ..opts(Duration::from_secs(5)) };
    let served = tokio::spawn(serve(stub(flags.clone()), input, output, one, std::future::pending()));
    client.write_all(HANG).await.unwrap();
    until(&flags.0, "the request to start").await;
    client.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"x\",\"params\":{}}\n").await.unwrap();
    let mut line = Vec::new();
    while !line.ends_with(b"\n") {
        let mut byte = [0u8; 1];
        tokio::time::timeout(Duration::from_secs(5), read.read_exact(&mut byte)).await.unwrap().unwrap();
        line.push(byte[0]);
    }
    let refused: serde_json::Value = serde_json::from_slice(&line).unwrap();
    assert_eq!(refused["id"], 2);
    assert_eq!(refused["error"]["code"], -32603);
    assert_eq!(refused["error"]["message"], FrontError::Overloaded.to_string());
    client.write_all(CANCEL).await.unwrap();
    until(&flags.1, "the cancellation to reach the request at the bound").await;
    drop(client);
    served.await.unwrap().unwrap();
    assert_eq!(all_output(read).await, "", "nothing more was written");
}
