//! Session lifecycle on the wire: initialize, headers, versions, expiry, hangs and close; and a
//! stdio process started ahead of demand.

use std::sync::Arc;
use std::time::Duration;

use http::Method;
use serde_json::json;

use super::server::{init_result, Reply, Script, TestServer, SESSION};
use super::{caps, on_call, result, settings, spare_of};
use crate::protocol::jsonrpc::Outcome;
use crate::upstream::{Session, UpstreamError, UpstreamEvent};

#[tokio::test]
async fn initialize_then_call_with_json_response() {
    let script = on_call(|seen| Reply::Json(result(&seen.body["id"], json!({"content": []}))));
    let mut server = TestServer::start(script).await;
    let mut s = settings(&server);
    s.extra_headers.insert("x-api-key", "k-1".parse().unwrap());
    let session = Session::initialize(Arc::new(s), &caps()).await.unwrap();
    assert_eq!(session.protocol_version(), "2025-11-25");
    assert_eq!(session.initialize_result().server_info["name"], "scripted");
    assert!(!session.declares_logging(), "the scripted server declares tools alone");
    let shown = format!("{session:?}");
    assert!(
        shown.contains(r#"transport: "http""#) && shown.contains(r#"protocol_version: "2025-11-25""#),
        "{shown}"
    );

    let mut call = session.call("tools/call", Some(json!({"name": "echo"})));
    let Some(UpstreamEvent::Response(Outcome::Result(raw))) = call.next_event().await.unwrap() else {
        panic!("expected the call's result")
    };
    assert_eq!(raw.get(), r#"{"content":[]}"#);
    assert!(call.next_event().await.unwrap().is_none());

    let init = server.wait_for(|s| s.rpc_method() == Some("initialize")).await;
    assert_eq!(init.body["params"]["capabilities"], caps());
    assert_eq!(init.body["params"]["clientInfo"]["name"], "test-gateway");
    assert_eq!(init.body["params"]["protocolVersion"], "2025-11-25");
    assert_eq!(init.header("x-api-key"), Some("k-1"));
    assert!(init.header("mcp-session-id").is_none());
    let initialized = server.wait_for(|s| s.rpc_method() == Some("notifications/initialized")).await;
    let posted = server.wait_for(|s| s.rpc_method() == Some("tools/call")).await;
    assert_eq!(posted.body["id"], json!(1), "the session allocates its own ids");
    for seen in [&initialized, &posted] {
        assert_eq!(seen.header("mcp-session-id"), Some(SESSION));
        assert_eq!(seen.header("mcp-protocol-version"), Some("2025-11-25"));
        assert_eq!(seen.header("x-api-key"), Some("k-1"));
    }
}

#[tokio::test]
async fn older_version_is_accepted_and_omits_the_version_header() {
    let script: Script = Arc::new(|seen| match seen.rpc_method() {
        Some("initialize") => Some(Reply::Json(init_result(&seen.body, "2025-03-26"))),
        _ => None,
    });
    let mut server = TestServer::start(script).await;
    let session = Session::initialize(Arc::new(settings(&server)), &caps()).await.unwrap();
    assert_eq!(session.protocol_version(), "2025-03-26");
    let initialized = server.wait_for(|s| s.rpc_method() == Some("notifications/initialized")).await;
    assert_eq!(initialized.header("mcp-session-id"), Some(SESSION));
    assert!(initialized.header("mcp-protocol-version").is_none());
}

#[tokio::test]
async fn unsupported_version_fails_initialize_and_ends_the_session() {
    let script: Script = Arc::new(|seen| match seen.rpc_method() {
        Some("initialize") => Some(Reply::Json(init_result(&seen.body, "2099-01-01"))),
        _ => None,
    });
    let mut server = TestServer::start(script).await;
    let err = Session::initialize(Arc::new(settings(&server)), &caps()).await.unwrap_err();
    assert!(matches!(&err, UpstreamError::Initialize(m) if m.contains("2099-01-01")), "{err}");
    let delete = server.wait_for(|s| s.method == Method::DELETE).await;
    assert_eq!(delete.header("mcp-session-id"), Some(SESSION));
}

#[tokio::test]
async fn initialize_error_response_is_an_initialize_error() {
    let script: Script = Arc::new(|seen| {
        (seen.rpc_method() == Some("initialize"))
            .then(|| Reply::Json(json!({"jsonrpc":"2.0","id":0,"error":{"code":-32602,"message":"no"}})))
    });
    let server = TestServer::start(script).await;
    let err = Session::initialize(Arc::new(settings(&server)), &caps()).await.unwrap_err();
    assert!(matches!(err, UpstreamError::Initialize(ref m) if m.contains("-32602")));
}

#[tokio::test]
async fn not_found_with_a_session_id_means_expired() {
    let server = TestServer::start(on_call(|_| Reply::Status(404))).await;
    let session = Session::initialize(Arc::new(settings(&server)), &caps()).await.unwrap();
    let mut call = session.call("tools/call", None);
    assert!(matches!(call.next_event().await, Err(UpstreamError::SessionExpired)));
    assert!(!session.is_healthy());
}

#[tokio::test]
async fn not_found_without_a_session_id_is_no_expiry() {
    let script: Script = Arc::new(|seen| super::inits(seen).then_some(Reply::Status(404)));
    let server = TestServer::start(script).await;
    let err = Session::initialize(Arc::new(settings(&server)), &caps()).await.unwrap_err();
    assert!(matches!(err, UpstreamError::Http { status, .. } if status == 404), "{err:?}");
}

#[tokio::test]
async fn calls_that_meet_the_same_expiry_renew_the_session_once() {
    let server = TestServer::start(on_call(|_| Reply::Status(404))).await;
    let session = Session::initialize(Arc::new(settings(&server)), &caps()).await.unwrap();
    let (mut first, mut second) = (session.call("tools/call", None), session.call("tools/call", None));
    // Both sent on the first session before either is answered; the renewed session expires
    // too, so each call ends with the expiry.
    let (a, b) = tokio::join!(first.next_event(), second.next_event());
    assert!(matches!((a, b), (Err(UpstreamError::SessionExpired), Err(UpstreamError::SessionExpired))));
    assert_eq!(server.count(super::inits), 2, "the first session, and one renewal for both calls");
}

#[tokio::test]
async fn other_http_failures_keep_status_and_body_excerpt() {
    let server = TestServer::start(on_call(|_| Reply::StatusText(503, "overloaded, try later"))).await;
    let session = Session::initialize(Arc::new(settings(&server)), &caps()).await.unwrap();
    let err = session.request("tools/call", None).await.unwrap_err();
    assert!(
        matches!(&err, UpstreamError::Http { status, body } if *status == 503 && body == "overloaded, try later"),
        "{err:?}"
    );
}

#[tokio::test]
async fn hung_upstream_is_a_timeout() {
    let server = TestServer::start(on_call(|_| Reply::Hang)).await;
    let mut s = settings(&server);
    s.request_timeout = Duration::from_millis(300);
    let session = Session::initialize(Arc::new(s), &caps()).await.unwrap();
    let started = std::time::Instant::now();
    let mut call = session.call("tools/call", None);
    assert!(matches!(call.next_event().await, Err(UpstreamError::Timeout(_))));
    assert!(started.elapsed() < Duration::from_secs(3));
    assert!(!session.is_healthy());
}

#[tokio::test]
async fn unreachable_upstream_is_a_connect_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    drop(listener);
    let settings = crate::upstream::UpstreamSettings::new(url.parse().unwrap());
    let err = Session::initialize(Arc::new(settings), &caps()).await.unwrap_err();
    assert!(matches!(err, UpstreamError::Connect(_)), "{err}");
}

#[tokio::test]
async fn an_unknown_scheme_or_an_https_url_without_roots_is_a_settings_error() {
    let settings = crate::upstream::UpstreamSettings::new("ws://127.0.0.1/mcp".parse().unwrap());
    let err = Session::initialize(Arc::new(settings), &caps()).await.unwrap_err();
    assert!(matches!(err, UpstreamError::Settings(_)), "{err}");
    let mut settings = crate::upstream::UpstreamSettings::new("https://127.0.0.1/mcp".parse().unwrap());
    settings.tls.platform_roots = false;
    let err = Session::initialize(Arc::new(settings), &caps()).await.unwrap_err();
    assert!(matches!(&err, UpstreamError::Settings(m) if m.contains("TLS")), "{err}");
}

#[tokio::test]
async fn close_sends_delete_with_the_session_id() {
    let mut server = TestServer::start(on_call(|_| Reply::Hang)).await;
    let session = Session::initialize(Arc::new(settings(&server)), &caps()).await.unwrap();
    session.close().await.unwrap();
    let delete = server.wait_for(|s| s.method == Method::DELETE).await;
    assert_eq!(delete.header("mcp-session-id"), Some(SESSION));
    assert!(!session.is_healthy());
}

#[tokio::test]
async fn a_server_that_does_not_let_clients_end_sessions_is_closed_without_error() {
    let script: Script = Arc::new(|seen| (seen.method == Method::DELETE).then_some(Reply::Status(405)));
    let mut server = TestServer::start(script).await;
    let session = Session::initialize(Arc::new(settings(&server)), &caps()).await.unwrap();
    assert!(session.close().await.is_ok(), "a 405 to DELETE is not an error");
    server.wait_for(|s| s.method == Method::DELETE).await;
}

#[tokio::test]
async fn a_spare_process_names_its_own_pid_until_it_is_closed() {
    let spare = spare_of("/bin/sleep", &["30"]);
    let proc_dir = wait_until_named(&spare, "sleep").await;
    assert!(spare.is_alive());
    spare.close().await;
    assert!(!std::path::Path::new(&proc_dir).exists(), "stopped and reaped");
}

#[tokio::test]
async fn a_spare_process_that_ignores_sigterm_is_killed_and_reaped_before_its_close_returns() {
    // A signal ignored before an exec stays ignored after it: this `sleep` ignores SIGTERM,
    // and it never reads its stdin, so only the SIGKILL stops it.
    let spare = spare_of("/bin/sh", &["-c", "trap '' TERM; exec sleep 30"]);
    let proc_dir = wait_until_named(&spare, "sleep").await;
    spare.close().await;
    // Reaped, not just signalled: a process killed and left to the runtime's orphan reaper is
    // still a zombie here, with its directory.
    assert!(!std::path::Path::new(&proc_dir).exists(), "killed and reaped before the close returned");
}

/// Waits, bounded, until the spare's pid runs `name`, and gives its `/proc` directory. The
/// kernel names the process after its program during the exec, which may still be finishing
/// as the spawn returns.
async fn wait_until_named(spare: &crate::upstream::session::Spare, name: &str) -> String {
    let proc_dir = format!("/proc/{}", spare.pid());
    let comm = || std::fs::read_to_string(format!("{proc_dir}/comm")).unwrap_or_default().trim().to_owned();
    let named = tokio::time::timeout(Duration::from_secs(5), async {
        while comm() != name {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    });
    assert!(named.await.is_ok(), "the pid is the spare's own process, named {:?}", comm());
    proc_dir
}

/// Closing a deprecated HTTP+SSE session fails the calls still in flight at once and closes its
/// event stream, though a handle on the session is still held.
#[tokio::test]
async fn closing_an_sse_session_fails_its_calls_and_closes_its_stream() {
    let (stream, events) = super::server::sse_channel();
    let events = super::once(events);
    let to_stream = stream.clone();
    let server = TestServer::start(Arc::new(move |seen| {
        if seen.method == Method::GET {
            return events.lock().take().map(Reply::Sse);
        }
        // Answers come on the stream; the `tools/call` never gets one.
        if seen.rpc_method() == Some("initialize") {
            let answer = init_result(&seen.body, "2024-11-05");
            to_stream.try_send(Ok(format!("event: message\ndata: {answer}\n\n"))).unwrap();
        }
        Some(Reply::Status(202))
    }))
    .await;
    stream.send(Ok("event: endpoint\ndata: /messages\n\n".to_owned())).await.unwrap();
    let url = format!("http://{}/sse", server.addr).parse().unwrap();
    let settings = crate::upstream::UpstreamSettings::legacy_sse(url);
    let session = Session::initialize(Arc::new(settings), &caps()).await.unwrap();
    let mut call = session.call("tools/call", None);
    session.close().await.unwrap();
    let ended = tokio::time::timeout(Duration::from_secs(2), call.next_event()).await;
    assert!(matches!(ended, Ok(Err(UpstreamError::Closed(_)))), "{ended:?}");
    let closed = tokio::time::timeout(Duration::from_secs(2), stream.closed()).await;
    assert!(closed.is_ok(), "the event stream outlived the session's close");
    drop(session);
}
