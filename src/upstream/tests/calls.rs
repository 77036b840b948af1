//! Call event streams: SSE responses, server requests on the POST and GET streams, local pings,
//! resume after an early close, a dying upstream, refused requests and cancellation.

use std::sync::Arc;

use http::Method;
use serde_json::json;

use super::server::{event, sse_channel, Reply, Script, Seen, TestServer};
use super::{caps, on_call, once, result, settings, take};
use crate::protocol::jsonrpc::Outcome;
use crate::protocol::RequestId;
use crate::upstream::{Session, UpstreamError, UpstreamEvent};

async fn open(server: &TestServer) -> Session {
    Session::initialize(Arc::new(settings(server)), &caps()).await.unwrap()
}

fn is_get(seen: &Seen) -> bool {
    seen.method == Method::GET
}

/// A script: `tools/call` streams from `post`, the first plain GET streams from `get`.
fn post_and_get(
    post: tokio::sync::mpsc::Receiver<super::server::Chunk>,
    get: tokio::sync::mpsc::Receiver<super::server::Chunk>,
) -> Script {
    let (post, get) = (once(post), once(get));
    Arc::new(move |seen| match seen.rpc_method() {
        Some("tools/call") => take(&post),
        _ if is_get(seen) => take(&get).or(Some(Reply::Hang)),
        _ => None,
    })
}

async fn expect_event(call: &mut crate::upstream::Call) -> UpstreamEvent {
    call.next_event().await.unwrap().expect("an event")
}

/// Waits for `what` while the call's consumer waits for an event, as the bridge does (the
/// call's reader runs only then); an event arriving first fails the test.
async fn polling<T>(call: &mut crate::upstream::Call, what: impl std::future::Future<Output = T>) -> T {
    tokio::select! {
        biased;
        done = what => done,
        event = call.next_event() => panic!("unexpected event {event:?}"),
    }
}

#[tokio::test]
async fn sse_call_delivers_request_answered_via_respond_then_response() {
    let (tx, rx) = sse_channel();
    let rx = once(rx);
    let mut server = TestServer::start(on_call(move |_| take(&rx).unwrap())).await;
    let session = open(&server).await;
    let mut call = session.call("tools/call", Some(json!({"name": "ask"})));
    let progress = json!({"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}});
    let ask = json!({"jsonrpc":"2.0","id":7,"method":"elicitation/create","params":{"message":"name?"}});
    tx.send(event(Some("1"), &progress)).await.unwrap();
    tx.send(event(Some("2"), &ask)).await.unwrap();

    let UpstreamEvent::Notification { method, .. } = expect_event(&mut call).await else {
        panic!("expected the progress notification first")
    };
    assert_eq!(method, "notifications/progress");
    let UpstreamEvent::Request { id, method, params } = expect_event(&mut call).await else {
        panic!("expected the elicitation request")
    };
    assert_eq!((id.clone(), method.as_str()), (RequestId::Number(7), "elicitation/create"));
    assert_eq!(params.unwrap()["message"], "name?");

    let answer = json!({"action": "accept", "content": {"name": "Ada"}});
    session.respond(&id, Ok(answer.clone())).await.unwrap();
    let posted = server.wait_for(|s| s.is_response_to(&json!(7))).await;
    assert_eq!(posted.body["result"], answer);
    assert_eq!(posted.header("mcp-session-id"), Some(super::server::SESSION));

    tx.send(event(Some("3"), &result(&json!(1), json!({"content": []})))).await.unwrap();
    assert!(matches!(expect_event(&mut call).await, UpstreamEvent::Response(Outcome::Result(_))));
    assert!(call.next_event().await.unwrap().is_none());
}

#[tokio::test]
async fn get_stream_request_goes_to_the_call_holding_the_session() {
    let (post_tx, post_rx) = sse_channel();
    let (get_tx, get_rx) = sse_channel();
    let mut server = TestServer::start(post_and_get(post_rx, get_rx)).await;
    let session = open(&server).await;
    let mut call = session.call("tools/call", None);
    let roots = json!({"jsonrpc":"2.0","id":0,"method":"roots/list"});
    get_tx.send(event(Some("g1"), &roots)).await.unwrap();

    let UpstreamEvent::Request { id, method, .. } = expect_event(&mut call).await else {
        panic!("roots/list was not delivered to the call")
    };
    assert_eq!((id.clone(), method.as_str()), (RequestId::Number(0), "roots/list"));
    session.respond(&id, Ok(json!({"roots": []}))).await.unwrap();
    server.wait_for(|s| s.is_response_to(&json!(0))).await;
    post_tx.send(event(None, &result(&json!(1), json!({})))).await.unwrap();
    assert!(matches!(expect_event(&mut call).await, UpstreamEvent::Response(_)));
    let get = server.seen.lock().iter().find(|s| is_get(s)).cloned().unwrap();
    assert_eq!(get.header("accept"), Some("text/event-stream"));
    assert_eq!(get.header("mcp-session-id"), Some(super::server::SESSION));
}

#[tokio::test]
async fn get_stream_request_without_a_call_is_refused_with_an_error() {
    let (_post_tx, post_rx) = sse_channel();
    let (get_tx, get_rx) = sse_channel();
    let mut server = TestServer::start(post_and_get(post_rx, get_rx)).await;
    let _session = open(&server).await;
    let roots = json!({"jsonrpc":"2.0","id":0,"method":"roots/list"});
    get_tx.send(event(None, &roots)).await.unwrap();
    let answer = server.wait_for(|s| s.is_response_to(&json!(0))).await;
    assert_eq!(answer.body["error"]["code"], json!(-32603));
    assert!(answer.body.get("result").is_none(), "never invented data");
}

#[tokio::test]
async fn a_standalone_stream_takes_requests_until_it_is_closed() {
    let (_post_tx, post_rx) = sse_channel();
    let (get_tx, get_rx) = sse_channel();
    let mut server = TestServer::start(post_and_get(post_rx, get_rx)).await;
    let session = open(&server).await;
    let roots = |id: i64| event(None, &json!({"jsonrpc":"2.0","id":id,"method":"roots/list"}));
    let (first, _first_rx) = session.open_standalone(4);
    let (second, mut second_rx) = session.open_standalone(4);
    // Closing a stream another has replaced leaves the new one in place.
    session.close_standalone(&first);
    get_tx.send(roots(1)).await.unwrap();
    let got = tokio::time::timeout(std::time::Duration::from_secs(5), second_rx.recv()).await;
    let Ok(Some(Ok(UpstreamEvent::Request { id, .. }))) = got else {
        panic!("the open stream did not get the request")
    };
    assert_eq!(id, RequestId::Number(1));
    // Once closed, a request no call can take is refused, never left waiting on it.
    session.close_standalone(&second);
    get_tx.send(roots(2)).await.unwrap();
    let answer = server.wait_for(|s| s.is_response_to(&json!(2))).await;
    assert_eq!(answer.body["error"]["code"], json!(-32603));
}

#[tokio::test]
async fn ping_is_answered_locally_and_never_surfaced() {
    let (tx, rx) = sse_channel();
    let rx = once(rx);
    let mut server = TestServer::start(on_call(move |_| take(&rx).unwrap())).await;
    let session = open(&server).await;
    let mut call = session.call("tools/call", None);
    tx.send(event(None, &json!({"jsonrpc":"2.0","id":"pg","method":"ping"}))).await.unwrap();
    let pong = polling(&mut call, server.wait_for(|s| s.is_response_to(&json!("pg")))).await;
    assert_eq!(pong.body["result"], json!({}));
    tx.send(event(None, &result(&json!(1), json!({})))).await.unwrap();
    assert!(matches!(expect_event(&mut call).await, UpstreamEvent::Response(_)));
}

#[tokio::test]
async fn a_call_shows_its_id() {
    let (_tx, rx) = sse_channel();
    let rx = once(rx);
    let server = TestServer::start(on_call(move |_| take(&rx).unwrap())).await;
    let session = open(&server).await;
    let call = session.call("tools/call", None);
    let shown = format!("{call:?}");
    assert_eq!(shown, format!("Call {{ id: {:?}, .. }}", call.id()));
}

#[tokio::test]
async fn a_detached_call_is_read_while_nobody_polls_it() {
    // A parked call: nobody waits for its events, yet the server's ping is answered.
    let (tx, rx) = sse_channel();
    let rx = once(rx);
    let mut server = TestServer::start(on_call(move |_| take(&rx).unwrap())).await;
    let session = open(&server).await;
    let mut call = session.call("tools/call", None);
    call.detach();
    tx.send(event(None, &json!({"jsonrpc":"2.0","id":"pg","method":"ping"}))).await.unwrap();
    let pong = server.wait_for(|s| s.is_response_to(&json!("pg"))).await;
    assert_eq!(pong.body["result"], json!({}));
    tx.send(event(None, &result(&json!(1), json!({})))).await.unwrap();
    assert!(matches!(expect_event(&mut call).await, UpstreamEvent::Response(_)));
}

#[tokio::test]
async fn early_close_resumes_with_get_and_last_event_id() {
    let script: Script = Arc::new(|seen| match (seen.rpc_method(), seen.header("last-event-id")) {
        (Some("tools/call"), _) => {
            let (tx, rx) = sse_channel();
            // 2025-11-25 polling: a priming event with an id and `retry`, then the server closes.
            tx.try_send(Ok("id: prime-1\nretry: 20\ndata:\n\n".to_owned())).unwrap();
            Some(Reply::Sse(rx))
        }
        (None, Some("prime-1")) if is_get(seen) => {
            let (tx, rx) = sse_channel();
            tx.try_send(event(Some("r-2"), &result(&json!(1), json!({"ok": true})))).unwrap();
            Some(Reply::Sse(rx))
        }
        _ => None,
    });
    let mut server = TestServer::start(script).await;
    let session = open(&server).await;
    let mut call = session.call("tools/call", None);
    let UpstreamEvent::Response(Outcome::Result(raw)) = expect_event(&mut call).await else {
        panic!("expected the resumed response")
    };
    assert_eq!(raw.get(), r#"{"ok":true}"#);
    let resumed = server.wait_for(|s| is_get(s) && s.header("last-event-id").is_some()).await;
    assert_eq!(resumed.header("mcp-session-id"), Some(super::server::SESSION));
}

#[tokio::test]
async fn stream_closed_without_event_id_is_closed_error() {
    let script = on_call(|_| {
        let (tx, rx) = sse_channel();
        tx.try_send(event(None, &json!({"jsonrpc":"2.0","method":"notifications/message"}))).unwrap();
        Reply::Sse(rx)
    });
    let server = TestServer::start(script).await;
    let session = open(&server).await;
    let mut call = session.call("tools/call", None);
    assert!(matches!(expect_event(&mut call).await, UpstreamEvent::Notification { .. }));
    assert!(matches!(call.next_event().await, Err(UpstreamError::Closed(_))));
}

#[tokio::test]
async fn upstream_dying_mid_call_is_a_closed_error() {
    let (tx, rx) = sse_channel();
    let rx = once(rx);
    let server = TestServer::start(on_call(move |_| take(&rx).unwrap())).await;
    let session = open(&server).await;
    let mut call = session.call("tools/call", None);
    let note = json!({"jsonrpc":"2.0","method":"notifications/progress","params":{}});
    tx.send(event(None, &note)).await.unwrap();
    assert!(matches!(expect_event(&mut call).await, UpstreamEvent::Notification { .. }));
    server.kill();
    let err = call.next_event().await.unwrap_err();
    assert!(matches!(err, UpstreamError::Closed(_)), "{err}");
    assert!(!session.is_healthy());
}

#[tokio::test]
async fn request_refuses_server_requests_on_its_stream() {
    let script: Script = Arc::new(|seen| {
        (seen.rpc_method() == Some("tools/list")).then(|| {
            let (tx, rx) = sse_channel();
            let ask = json!({"jsonrpc":"2.0","id":3,"method":"elicitation/create","params":{}});
            tx.try_send(event(None, &ask)).unwrap();
            let id = seen.body["id"].clone();
            tx.try_send(event(None, &result(&id, json!({"tools": []})))).unwrap();
            Reply::Sse(rx)
        })
    });
    let mut server = TestServer::start(script).await;
    let session = open(&server).await;
    let outcome = session.request("tools/list", None).await.unwrap();
    assert!(matches!(outcome, Outcome::Result(ref raw) if raw.get() == r#"{"tools":[]}"#));
    let refusal = server.wait_for(|s| s.is_response_to(&json!(3))).await;
    assert_eq!(refusal.body["error"]["code"], json!(-32603));
}

#[tokio::test]
async fn cancel_notifies_the_server_and_detaches_the_call() {
    let (_post_tx, post_rx) = sse_channel();
    let (get_tx, get_rx) = sse_channel();
    let mut server = TestServer::start(post_and_get(post_rx, get_rx)).await;
    let session = open(&server).await;
    let mut call = session.call("tools/call", None);
    let id = serde_json::to_value(call.id()).unwrap();
    polling(&mut call, server.wait_for(|s| s.rpc_method() == Some("tools/call"))).await;
    session.cancel(call, "client went away").await.unwrap();
    let cancelled = server.wait_for(|s| s.rpc_method() == Some("notifications/cancelled")).await;
    assert_eq!(cancelled.body["params"]["requestId"], id);
    assert_eq!(cancelled.body["params"]["reason"], "client went away");
    // The cancelled call no longer holds the session: a GET-stream request is refused.
    let roots = json!({"jsonrpc":"2.0","id":4,"method":"roots/list"});
    get_tx.send(event(None, &roots)).await.unwrap();
    let refusal = server.wait_for(|s| s.is_response_to(&json!(4))).await;
    assert_eq!(refusal.body["error"]["code"], json!(-32603));
}

#[tokio::test]
async fn dropped_get_stream_reconnects_with_last_event_id() {
    let script: Script = Arc::new(|seen| {
        if !is_get(seen) {
            return None;
        }
        let (tx, rx) = sse_channel();
        if seen.header("last-event-id") == Some("g-1") {
            let roots = json!({"jsonrpc":"2.0","id":11,"method":"roots/list"});
            tx.try_send(event(Some("g-2"), &roots)).unwrap();
            // Hold this stream open until the client drops it.
            tokio::spawn(async move { tx.closed().await });
        } else {
            // First connection: one event with an id, then the server drops the stream.
            let note = json!({"jsonrpc":"2.0","method":"notifications/tools/list_changed"});
            tx.try_send(event(Some("g-1"), &note)).unwrap();
        }
        Some(Reply::Sse(rx))
    });
    let mut server = TestServer::start(script).await;
    let _session = open(&server).await;
    let resumed = server.wait_for(|s| is_get(s) && s.header("last-event-id").is_some()).await;
    assert_eq!(resumed.header("last-event-id"), Some("g-1"));
    // No call holds the session, so the request on the new stream is refused with an error.
    let refusal = server.wait_for(|s| s.is_response_to(&json!(11))).await;
    assert_eq!(refusal.body["error"]["code"], json!(-32603));
}

#[tokio::test]
async fn a_wait_within_an_earlier_limit_ends_and_the_call_goes_on() {
    let (tx, rx) = sse_channel();
    let rx = once(rx);
    let server = TestServer::start(on_call(move |_| take(&rx).unwrap())).await;
    let session = open(&server).await;
    let mut call = session.call("tools/call", Some(json!({"name": "slow"})));
    // Nothing has come by the limit, which is before the call's deadline: the wait ends, the
    // call does not.
    let soon = tokio::time::Instant::now() + std::time::Duration::from_millis(20);
    assert!(call.next_event_within(soon).await.is_none());
    assert!(session.is_healthy());
    let later = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    tx.send(event(Some("1"), &result(&json!(1), json!({"content": []})))).await.unwrap();
    let Some(Ok(Some(UpstreamEvent::Response(Outcome::Result(_))))) = call.next_event_within(later).await
    else {
        panic!("expected the call's response after the first wait ended")
    };
    assert!(matches!(call.next_event_within(soon).await, Some(Ok(None))));
}

/// A session whose server never answers a call, its request timeout `ms`; the server lives
/// as long as the returned handle.
async fn never_answering(ms: u64) -> (TestServer, Session) {
    let server = TestServer::start(on_call(|_| Reply::Hang)).await;
    let mut s = settings(&server);
    s.request_timeout = std::time::Duration::from_millis(ms);
    let session = Session::initialize(Arc::new(s), &caps()).await.unwrap();
    (server, session)
}

#[tokio::test]
async fn at_its_own_deadline_a_call_times_out_whatever_the_limit() {
    let (_server, session) = never_answering(100).await;
    let mut call = session.call("tools/call", None);
    // A limit after the call's deadline, then one at the same instant: the call's wins both.
    let after = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    assert!(matches!(call.next_event_within(after).await, Some(Err(UpstreamError::Timeout(_)))));
    let mut call = session.call("tools/call", None);
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_millis(100);
    call.set_deadline(deadline);
    assert!(matches!(call.next_event_within(deadline).await, Some(Err(UpstreamError::Timeout(_)))));
}

#[tokio::test]
async fn a_deadline_set_past_the_request_timeout_outlives_it() {
    let (_server, session) = never_answering(50).await;
    let mut call = session.call("tools/call", None);
    // A call kept as a task: its own deadline, far past the request timeout, bounds it.
    call.set_deadline(tokio::time::Instant::now() + std::time::Duration::from_secs(30));
    let past_the_timeout = tokio::time::Instant::now() + std::time::Duration::from_millis(200);
    assert!(call.next_event_within(past_the_timeout).await.is_none(), "still waiting");
    assert!(session.is_healthy());
}

#[tokio::test]
async fn each_call_of_a_session_has_an_id_of_its_own() {
    let server = TestServer::start(on_call(|_| Reply::Hang)).await;
    let session = open(&server).await;
    let (first, second) = (session.call("tools/call", None), session.call("tools/call", None));
    let number = |id: &RequestId| match id {
        RequestId::Number(n) => *n,
        RequestId::String(s) => panic!("a string id {s}"),
    };
    assert_eq!(number(second.id()), number(first.id()) + 1);
}

#[tokio::test]
async fn a_get_stream_that_ends_empty_is_retried_ever_more_slowly() {
    // Every GET is answered with a stream that ends at once, before any event.
    retried_ever_more_slowly(Arc::new(|seen| {
        is_get(seen).then(|| {
            let (_ended, rx) = sse_channel();
            Reply::Sse(rx)
        })
    }))
    .await;
}

#[tokio::test]
async fn a_get_stream_that_fails_is_retried_ever_more_slowly() {
    // Every GET is answered with a 500.
    retried_ever_more_slowly(Arc::new(|seen| is_get(seen).then_some(Reply::Status(500)))).await;
}

/// Checks that a session's GET stream, which `script` never lets open, is retried ever more
/// slowly.
async fn retried_ever_more_slowly(script: Script) {
    let server = TestServer::start(script).await;
    let started = tokio::time::Instant::now();
    let _session = open(&server).await;
    // It is retried: a second GET comes (after 0.4 s), bounded on a slow machine.
    let retried = tokio::time::timeout(std::time::Duration::from_secs(10), async {
        while server.count(is_get) < 2 {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    });
    assert!(retried.await.is_ok(), "the GET stream was given up after one failure");
    tokio::time::sleep_until(started + std::time::Duration::from_millis(1500)).await;
    // Each failure in a row doubles the wait (0.4 s, 0.8 s, then 1.6 s): three GETs by now, or
    // fewer on a slow machine. A wait that never grew (0.2 s) would have made eight.
    let gets = server.count(is_get);
    assert!((2..=3).contains(&gets), "{gets} GETs in 1.5 s");
}

#[tokio::test]
async fn a_dropped_session_closes_its_get_stream_at_once() {
    let (_post_tx, post_rx) = sse_channel();
    let (get_tx, get_rx) = sse_channel();
    let mut server = TestServer::start(post_and_get(post_rx, get_rx)).await;
    let session = open(&server).await;
    server.wait_for(is_get).await;
    // Nothing comes on the stream: only the session's end can close it.
    drop(session);
    let closed = tokio::time::timeout(std::time::Duration::from_secs(5), get_tx.closed()).await;
    assert!(closed.is_ok(), "the GET stream outlived its session");
}

#[tokio::test]
async fn streams_a_server_ends_after_the_cancel_are_always_drained() {
    // Like the Python SDK, the server ends a cancelled call's stream at once.
    let (_server, session) = drop_calls_mid_stream(6, true).await;
    // The last drain's time; one that ran out would have been counted by then.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let drains = session.cancel_drain().expect("a Streamable HTTP session");
    assert!(drains.should_drain(), "six streams ended after their cancel: none was counted as run out");
}

#[tokio::test]
async fn streams_left_open_after_their_cancel_are_cut_once_four_drains_ran_out() {
    // Like the TypeScript SDK, the server leaves a cancelled call's stream open.
    let (_server, session) = drop_calls_mid_stream(4, false).await;
    let drains = session.cancel_drain().expect("a Streamable HTTP session");
    // Each dropped call's stream is drained for its bound and found still open; after four,
    // the next dropped streams are cut at once instead.
    let cut = tokio::time::timeout(std::time::Duration::from_secs(5), async {
        while drains.should_drain() {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    });
    assert!(cut.await.is_ok(), "the upstream's drains were never counted");
}

/// Drops `calls` calls in turn, each once it has read an event from its stream, and ends each
/// call's stream after its drop if `end_stream` (else leaves it open).
async fn drop_calls_mid_stream(calls: usize, end_stream: bool) -> (TestServer, Session) {
    let open_streams = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let kept = open_streams.clone();
    let mut server = TestServer::start(on_call(move |_| {
        let (tx, rx) = sse_channel();
        kept.lock().push(Some(tx));
        Reply::Sse(rx)
    }))
    .await;
    let session = open(&server).await;
    let progress = json!({"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}});
    for n in 0..calls {
        let mut call = session.call("tools/call", None);
        polling(&mut call, server.wait_for(|s| s.rpc_method() == Some("tools/call"))).await;
        // An event read: the call is past its response head, reading its stream.
        let stream = open_streams.lock()[n].clone().expect("the call's stream");
        stream.send(event(None, &progress)).await.unwrap();
        expect_event(&mut call).await;
        drop(call);
        if end_stream {
            // Its last sender goes: the stream ends.
            open_streams.lock()[n] = None;
        }
    }
    assert_eq!(open_streams.lock().len(), calls, "one stream per call");
    (server, session)
}
