//! The driven client against a bare loopback HTTP/1.1 server: connections are reused once a
//! body ends (read or empty and dropped), closed when a body is dropped early, and a request
//! whose idle connection the server closed goes to a new one.

use std::sync::atomic::{AtomicUsize, Ordering};

use futures_util::StreamExt;
use http_body_util::{BodyExt, StreamBody};
use hyper::server::conn::http1 as server;
use hyper::service::service_fn;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioIo;
use prometheus::IntGauge;
use tokio::net::TcpListener;

use super::*;

/// A server that answers `/empty` with an empty 202, `/close` with `Connection: close`,
/// `/endless` with a body that never ends, `/chunks` with a body of three chunks sent at once,
/// and
/// anything else with the request's target and `Host`, counting the connections it accepted.
async fn server() -> (Uri, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let uri: Uri = format!("http://{}/mcp?x=1", listener.local_addr().unwrap()).parse().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        loop {
            let (tcp, _) = listener.accept().await.unwrap();
            count.fetch_add(1, Ordering::SeqCst);
            let service = service_fn(|req: Request<Incoming>| async move {
                let said = format!(
                    "{} {}",
                    req.uri(),
                    req.headers().get(HOST).and_then(|h| h.to_str().ok()).unwrap_or("-")
                );
                let full = |b: Bytes| Full::new(b).boxed();
                let resp = match req.uri().path() {
                    "/empty" => Response::builder().status(202).body(full(Bytes::new())),
                    "/close" => Response::builder().header("connection", "close").body(full(said.into())),
                    "/chunks" => {
                        let chunks = ["a", "b", "c"].map(|c| Ok(Frame::data(Bytes::from(c))));
                        Response::builder()
                            .body(BodyExt::boxed(StreamBody::new(futures_util::stream::iter(chunks))))
                    }
                    "/endless" => {
                        let first = futures_util::stream::once(async { Ok(Frame::data(Bytes::from("a"))) });
                        let body = StreamBody::new(first.chain(futures_util::stream::pending()));
                        Response::builder().body(BodyExt::boxed(body))
                    }
                    _ => Response::builder().body(full(said.into())),
                };
                Ok::<_, std::convert::Infallible>(resp.unwrap())
            });
            tokio::spawn(server::Builder::new().serve_connection(TokioIo::new(tcp), service));
        }
    });
    (uri, accepted)
}

fn client(uri: &Uri, idle: Duration) -> Driven {
    let gauge = IntGauge::new("open", "open connections").unwrap();
    let connector = LimitedConnector::new(
        HttpConnector::new(),
        &crate::outbound::Bound::new(4, 1, Duration::from_secs(2), gauge),
    );
    Driven::new(connector, uri, idle, 4).unwrap()
}

fn get(uri: &Uri, path: &str) -> Request<Full<Bytes>> {
    let uri = format!("http://{}{path}", uri.authority().unwrap()).parse::<Uri>().unwrap();
    Request::get(uri).body(Full::new(Bytes::new())).unwrap()
}

async fn text(resp: Response<UpstreamBody>) -> String {
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    String::from_utf8(bytes.to_vec()).unwrap()
}

#[tokio::test]
async fn requests_go_in_origin_form_with_a_host_and_reuse_the_connection_once_read() {
    let (uri, accepted) = server().await;
    let driven = client(&uri, Duration::from_secs(30));
    let host = uri.authority().unwrap().to_string();
    for _ in 0..3 {
        let resp = driven.request(get(&uri, "/mcp?x=1")).await.unwrap();
        let said = format!("/mcp?x=1 {host}");
        // Its length, known from the head, is passed on (a relayed body keeps its length).
        assert_eq!(resp.body().size_hint().exact(), Some(said.len() as u64));
        assert_eq!(text(resp).await, said);
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 1, "one connection served all three");
    assert_eq!(driven.idle.len(), 1);
}

#[tokio::test]
async fn a_body_read_to_its_end_frees_its_connection_before_it_drops() {
    let (uri, accepted) = server().await;
    let driven = client(&uri, Duration::from_secs(30));
    let mut first = driven.request(get(&uri, "/mcp")).await.unwrap().into_body();
    assert!(!first.is_end_stream(), "a body with data is not at its end before it is read");
    while let Some(frame) = first.frame().await {
        frame.unwrap();
    }
    assert!(first.is_end_stream());
    assert_eq!(driven.idle.len(), 1, "back idle at its end, the body still held");
    text(driven.request(get(&uri, "/mcp")).await.unwrap()).await;
    assert_eq!(accepted.load(Ordering::SeqCst), 1);
    drop(first);
}

#[tokio::test]
async fn an_empty_body_dropped_unread_frees_its_connection() {
    let (uri, accepted) = server().await;
    let driven = client(&uri, Duration::from_secs(30));
    for _ in 0..3 {
        let resp = driven.request(get(&uri, "/empty")).await.unwrap();
        assert_eq!(resp.status(), 202);
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_body_dropped_before_its_end_closes_its_connection() {
    let (uri, accepted) = server().await;
    let driven = client(&uri, Duration::from_secs(30));
    drop(driven.request(get(&uri, "/endless")).await.unwrap());
    assert_eq!(driven.idle.len(), 0);
    text(driven.request(get(&uri, "/mcp")).await.unwrap()).await;
    assert_eq!(accepted.load(Ordering::SeqCst), 2);
}

/// What has arrived with the head is read on drop: a short body dropped unread frees its
/// connection, whether it came as one frame or as a few chunks.
#[tokio::test]
async fn a_short_body_dropped_unread_frees_its_connection() {
    for path in ["/mcp", "/chunks"] {
        let (uri, accepted) = server().await;
        let driven = client(&uri, Duration::from_secs(30));
        for _ in 0..3 {
            let resp = driven.request(get(&uri, path)).await.unwrap();
            tokio::time::sleep(Duration::from_millis(5)).await;
            drop(resp);
            assert_eq!(driven.idle.len(), 1, "{path}: read to its end on drop");
        }
        assert_eq!(accepted.load(Ordering::SeqCst), 1, "{path}");
    }
}

#[tokio::test]
async fn a_connection_the_server_closed_is_replaced() {
    let (uri, accepted) = server().await;
    let driven = client(&uri, Duration::from_secs(30));
    text(driven.request(get(&uri, "/close")).await.unwrap()).await;
    assert_eq!(driven.idle.len(), 0, "a connection closing with its response is never kept idle");
    // Let the server's FIN arrive before the idle connection is reused.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let resp = driven.request(get(&uri, "/mcp")).await.unwrap();
    assert!(text(resp).await.starts_with("/mcp "));
    assert_eq!(accepted.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn connections_idle_past_the_timeout_are_not_reused() {
    let (uri, accepted) = server().await;
    let driven = client(&uri, Duration::from_millis(20));
    text(driven.request(get(&uri, "/mcp")).await.unwrap()).await;
    tokio::time::sleep(Duration::from_millis(40)).await;
    text(driven.request(get(&uri, "/mcp")).await.unwrap()).await;
    assert_eq!(accepted.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_request_off_the_origin_is_refused() {
    let (uri, _) = server().await;
    let driven = client(&uri, Duration::from_secs(30));
    let other = Request::get("http://127.0.0.1:1/mcp").body(Full::new(Bytes::new())).unwrap();
    assert!(matches!(driven.request(other).await, Err(UpstreamError::Settings(_))));
}

#[tokio::test]
async fn a_refused_connect_is_a_connect_error() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let uri: Uri = format!("http://{}/mcp", listener.local_addr().unwrap()).parse().unwrap();
    drop(listener);
    let driven = client(&uri, Duration::from_secs(30));
    assert!(matches!(driven.request(get(&uri, "/mcp")).await, Err(UpstreamError::Connect(_))));
}

/// A server that answers every request on a connection with keep-alive, then closes the
/// connection once it has been idle for `idle` (as uvicorn does after its keep-alive timeout).
async fn closing_server(idle: Duration) -> (Uri, Arc<AtomicUsize>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let uri: Uri = format!("http://{}/mcp", listener.local_addr().unwrap()).parse().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        loop {
            let (mut tcp, _) = listener.accept().await.unwrap();
            count.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                loop {
                    match tokio::time::timeout(idle, tcp.read(&mut buf)).await {
                        Ok(Ok(n)) if n > 0 => {
                            let ok = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
                            if tcp.write_all(ok).await.is_err() {
                                return;
                            }
                        }
                        // Idle too long, or the client went: close it.
                        _ => return,
                    }
                }
            });
        }
    });
    (uri, accepted)
}

#[tokio::test]
async fn a_keep_alive_connection_the_server_closed_while_idle_is_replaced() {
    let (uri, accepted) = closing_server(Duration::from_millis(20)).await;
    let driven = client(&uri, Duration::from_secs(30));
    for round in 0..4 {
        let next = tokio::time::timeout(Duration::from_secs(2), driven.request(get(&uri, "/mcp")));
        let resp = next.await.unwrap_or_else(|_| panic!("round {round}: the request hung")).unwrap();
        assert_eq!(text(resp).await, "ok");
        assert_eq!(driven.idle.len(), 1, "round {round}: the connection went back idle");
        // The server closes it meanwhile; nobody polls the idle connection, so it is only
        // noticed when it is next leased.
        tokio::time::sleep(Duration::from_millis(60)).await;
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 4, "each closed connection was replaced");
}
