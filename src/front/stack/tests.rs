//! The stack driven with `oneshot`, without sockets, around stub handlers.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, Limited};
use parking_lot::Mutex;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot, Notify};
use tower::{service_fn, Service, ServiceExt};

use super::{layered, stack, Limits};
use crate::app::{front_state, upstream_settings};
use crate::body::FrontBody;
use crate::config::Config;
use crate::logging::captured::capture;
use crate::metrics::Metrics;

type Req = Request<Limited<Full<Bytes>>>;

fn limits(max_in_flight: usize) -> Limits {
    Limits { max_in_flight, max_body_bytes: 64, request_timeout: Duration::from_secs(5) }
}

fn post(body: &'static str) -> Request<Full<Bytes>> {
    Request::post("/mcp")
        .header("mcp-method", "tools/call")
        .body(Full::new(Bytes::from_static(body.as_bytes())))
        .expect("request")
}

fn ok(body: FrontBody) -> Result<Response<FrontBody>, Infallible> {
    Ok(Response::new(body))
}

async fn json<B: http_body::Body>(r: Response<B>) -> Value
where
    B::Error: std::fmt::Debug,
{
    let bytes = r.into_body().collect().await.expect("body").to_bytes();
    serde_json::from_slice(&bytes).expect("JSON body")
}

fn counted(metrics: &Metrics, outcome: &str) -> u64 {
    metrics.requests.with_label_values(&["tools/call", outcome]).get()
}

#[tokio::test]
async fn a_request_past_the_limit_is_shed_with_503() {
    let metrics = Arc::new(Metrics::new().expect("metrics"));
    let (entered, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let (e, r) = (entered.clone(), release.clone());
    let inner = service_fn(move |_: Req| {
        let (e, r) = (e.clone(), r.clone());
        async move {
            e.notify_one();
            r.notified().await;
            ok(FrontBody::full("{}"))
        }
    });
    let svc = layered(inner, limits(1), metrics.clone());
    let first = tokio::spawn(svc.clone().oneshot(post("{}")));
    entered.notified().await;
    let shed = svc.clone().oneshot(post("{}")).await.expect("infallible");
    assert_eq!(shed.status(), StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(json(shed).await["error"]["code"], -32603);
    assert_eq!(counted(&metrics, "overloaded"), 1);
    release.notify_one();
    assert_eq!(first.await.expect("task").expect("infallible").status(), StatusCode::OK);
}

#[tokio::test]
async fn a_streamed_response_holds_its_permit_until_its_body_ends() {
    let streams = Arc::new(Mutex::new(Vec::new()));
    let senders = streams.clone();
    let inner = service_fn(move |_: Req| {
        let (tx, rx) = mpsc::channel::<Bytes>(4);
        senders.lock().push(tx);
        async move { ok(FrontBody::Stream(rx)) }
    });
    let svc = layered(inner, limits(1), Arc::new(Metrics::new().expect("metrics")));
    let streamed = svc.clone().oneshot(post("{}")).await.expect("infallible");
    assert_eq!(streamed.status(), StatusCode::OK);
    // The response head is out, the stream is not over: no room for another request.
    let shed = svc.clone().oneshot(post("{}")).await.expect("infallible");
    assert_eq!(shed.status(), StatusCode::SERVICE_UNAVAILABLE);
    let tx = streams.lock().pop().expect("a stream");
    tx.send(Bytes::from_static(b"event: message\ndata: {}\n\n")).await.expect("send");
    drop(tx);
    let body = streamed.into_body().collect().await.expect("body").to_bytes();
    assert!(body.starts_with(b"event: message"));
    let next = svc.clone().oneshot(post("{}")).await.expect("infallible");
    assert_eq!(next.status(), StatusCode::OK);
}

#[tokio::test]
async fn a_dropped_stream_releases_its_permit() {
    let inner = service_fn(|_: Req| async {
        let (_tx, rx) = mpsc::channel::<Bytes>(1);
        // The sender stays alive in a task that never ends, as a pump would while running.
        tokio::spawn(async move {
            std::future::pending::<()>().await;
            drop(_tx)
        });
        ok(FrontBody::Stream(rx))
    });
    let svc = layered(inner, limits(1), Arc::new(Metrics::new().expect("metrics")));
    let streamed = svc.clone().oneshot(post("{}")).await.expect("infallible");
    drop(streamed);
    let next = svc.clone().oneshot(post("{}")).await.expect("infallible");
    assert_eq!(next.status(), StatusCode::OK);
}

#[tokio::test]
async fn the_request_id_is_made_or_kept_and_echoed() {
    let inner = service_fn(|req: Req| async move {
        let seen = req.headers()["x-request-id"].to_str().unwrap_or_default().to_owned();
        ok(FrontBody::full(seen))
    });
    let svc = layered(inner, limits(4), Arc::new(Metrics::new().expect("metrics")));
    let mut own = post("{}");
    own.headers_mut().insert("x-request-id", "client-7".parse().expect("value"));
    let r = svc.clone().oneshot(own).await.expect("infallible");
    assert_eq!(r.headers()["x-request-id"], "client-7");
    let (a, b) = (svc.clone().oneshot(post("{}")), svc.clone().oneshot(post("{}")));
    let (a, b) = (a.await.expect("infallible"), b.await.expect("infallible"));
    let id = a.headers()["x-request-id"].clone();
    assert_ne!(id, b.headers()["x-request-id"]);
    let seen = a.into_body().collect().await.expect("body").to_bytes();
    assert_eq!(seen, id.as_bytes(), "the handler sees the id it echoes");
}

#[tokio::test]
async fn a_declared_body_over_the_limit_is_refused_before_the_handler() {
    let metrics = Arc::new(Metrics::new().expect("metrics"));
    let inner = service_fn(|_: Req| async { panic!("the handler must not run") });
    let svc = layered(inner, limits(4), metrics.clone());
    let big = Request::post("/mcp")
        .header("mcp-method", "tools/call")
        .header("content-length", "65")
        .body(Full::new(Bytes::from(vec![b' '; 65])))
        .expect("request");
    let r = svc.oneshot(big).await.expect("infallible");
    assert_eq!(r.status(), StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(json(r).await["error"]["code"], -32600);
    assert_eq!(counted(&metrics, "payload_too_large"), 1);
}

/// A body of exactly the limit is the handler's to read.
#[tokio::test]
async fn a_declared_body_of_the_limit_is_let_through() {
    let inner = service_fn(|req: Req| async move {
        let read = req.into_body().collect().await.expect("within the limit").to_bytes();
        ok(FrontBody::full(read.len().to_string()))
    });
    let svc = layered(inner, limits(4), Arc::new(Metrics::new().expect("metrics")));
    let full = Request::post("/mcp")
        .header("content-length", "64")
        .body(Full::new(Bytes::from(vec![b' '; 64])))
        .expect("request");
    let r = svc.oneshot(full).await.expect("infallible");
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(&r.into_body().collect().await.expect("body").to_bytes()[..], b"64");
}

/// A handler that is never ready.
#[derive(Clone)]
struct NotReady;

impl Service<Req> for NotReady {
    type Response = Response<FrontBody>;
    type Error = Infallible;
    type Future = std::future::Ready<Result<Response<FrontBody>, Infallible>>;

    fn poll_ready(&mut self, _: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Infallible>> {
        std::task::Poll::Pending
    }

    fn call(&mut self, _: Req) -> Self::Future {
        panic!("called while not ready")
    }
}

/// Every layer asks the one below whether it is ready: none claims a readiness it lacks.
#[test]
fn the_stack_is_ready_only_when_its_handler_is() {
    let mut svc = layered(NotReady, limits(4), Arc::new(Metrics::new().expect("metrics")));
    let mut cx = std::task::Context::from_waker(futures_util::task::noop_waker_ref());
    assert!(Service::<Request<Full<Bytes>>>::poll_ready(&mut svc, &mut cx).is_pending());
}

#[tokio::test]
async fn an_undeclared_body_is_limited_as_it_is_read() {
    let inner = service_fn(|req: Req| async move {
        let err = req.into_body().collect().await.expect_err("over the limit");
        assert!(err.downcast_ref::<http_body_util::LengthLimitError>().is_some());
        ok(FrontBody::empty())
    });
    let svc = layered(inner, limits(4), Arc::new(Metrics::new().expect("metrics")));
    let big = Request::post("/mcp").body(Full::new(Bytes::from(vec![b' '; 65]))).expect("request");
    assert_eq!(svc.oneshot(big).await.expect("infallible").status(), StatusCode::OK);
}

#[tokio::test(start_paused = true)]
async fn a_handler_that_never_answers_times_out_and_frees_its_permit() {
    let metrics = Arc::new(Metrics::new().expect("metrics"));
    let (tx, rx) = oneshot::channel::<()>();
    let rx = Arc::new(Mutex::new(Some(rx)));
    let inner = service_fn(move |_: Req| {
        let first = rx.lock().take();
        async move {
            match first {
                Some(never) => {
                    let _ = never.await;
                    ok(FrontBody::empty())
                }
                None => ok(FrontBody::full("{}")),
            }
        }
    });
    let mut svc = layered(inner, limits(1), metrics.clone());
    let r = svc.ready().await.expect("ready").call(post("{}")).await.expect("infallible");
    assert_eq!(r.status(), StatusCode::GATEWAY_TIMEOUT);
    assert_eq!(counted(&metrics, "request_timeout"), 1);
    let next = svc.oneshot(post("{}")).await.expect("infallible");
    assert_eq!(next.status(), StatusCode::OK);
    drop(tx);
}

#[tokio::test]
async fn the_real_front_is_served_without_a_socket() {
    // Nothing listens upstream: these requests are answered before any upstream call.
    let cfg = Config::from_toml("[upstream]\nurl = \"http://127.0.0.1:9/mcp\"\n").expect("config");
    let metrics = Arc::new(Metrics::new().expect("metrics"));
    let pool = Arc::new(crate::upstream::Pool::new(upstream_settings(&cfg, None)).expect("pool"));
    let state = Arc::new(front_state(&cfg, &metrics, &pool).expect("front state"));
    let svc = stack::<Full<Bytes>>(state, Duration::from_secs(5));
    let get = Request::get("/mcp").body(Full::new(Bytes::new())).expect("request");
    let r = svc.clone().oneshot(get).await.expect("infallible");
    assert_eq!(r.status(), StatusCode::METHOD_NOT_ALLOWED);
    assert!(r.headers().contains_key("x-request-id"));
    assert_eq!(json(r).await["error"]["code"], -32600);
    let note = Request::post("/mcp")
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from_static(br#"{"jsonrpc":"2.0","method":"notifications/x"}"#)))
        .expect("request");
    assert_eq!(svc.oneshot(note).await.expect("infallible").status(), StatusCode::ACCEPTED);
    assert_eq!(metrics.requests.with_label_values(&["notification", "accepted"]).get(), 1);
}

#[tokio::test]
async fn authorization_is_never_logged() {
    let inner = service_fn(|req: Req| async move {
        // What the span records below the sensitive-headers layer.
        let headers = format!("{:?}", req.headers());
        assert!(req.headers()["authorization"].is_sensitive());
        assert!(!headers.contains("top-secret-token"), "{headers}");
        tracing::info!("inside the handler");
        ok(FrontBody::full("{}"))
    });
    let svc = layered(inner, limits(4), Arc::new(Metrics::new().expect("metrics")));
    let (captured, _guard) = capture(tracing::Level::TRACE);
    let mut req = post("{}");
    req.headers_mut().insert("authorization", "Bearer top-secret-token".parse().expect("value"));
    req.headers_mut().insert("x-request-id", "rid-42".parse().expect("value"));
    let r = svc.oneshot(req).await.expect("infallible");
    r.into_body().collect().await.expect("body");
    let logged = captured.text();
    assert!(logged.contains("inside the handler"), "{logged}");
    assert!(logged.contains("rid-42"), "the span names the request: {logged}");
    assert!(logged.contains("authorization"), "headers are recorded at debug: {logged}");
    assert!(!logged.contains("top-secret-token"), "{logged}");
}

#[tokio::test]
async fn a_request_dropped_before_its_response_is_logged_and_counted_as_abandoned() {
    let metrics = Arc::new(Metrics::new().expect("metrics"));
    let entered = Arc::new(Notify::new());
    let e = entered.clone();
    // A handler that never answers, as one waiting for its upstream does.
    let inner = service_fn(move |_: Req| {
        let e = e.clone();
        async move {
            e.notify_one();
            std::future::pending::<()>().await;
            ok(FrontBody::empty())
        }
    });
    let svc = layered(inner, limits(4), metrics.clone());
    let (captured, _guard) = capture(tracing::Level::INFO);
    let mut req = post("{}");
    req.headers_mut().insert("x-request-id", "rid-gone".parse().expect("value"));
    let mut call = Box::pin(svc.oneshot(req));
    // Poll the call until the handler runs, then drop it, as hyper does when the client leaves.
    tokio::select! {
        biased;
        () = entered.notified() => {}
        _ = &mut call => panic!("the handler never answers"),
    }
    drop(call);
    assert_eq!(counted(&metrics, "abandoned"), 1);
    let logged = captured.text();
    let lines: Vec<&str> = logged.lines().filter(|l| l.contains("outcome=\"abandoned\"")).collect();
    assert_eq!(lines.len(), 1, "{logged}");
    assert!(lines[0].contains("rid-gone") && lines[0].contains("tools/call"), "{logged}");
}

#[tokio::test]
async fn an_answered_request_is_not_counted_as_abandoned() {
    let metrics = Arc::new(Metrics::new().expect("metrics"));
    let svc = layered(service_fn(|_: Req| async { ok(FrontBody::full("{}")) }), limits(4), metrics.clone());
    let r = svc.oneshot(post("{}")).await.expect("infallible");
    drop(r);
    assert_eq!(counted(&metrics, "abandoned"), 0);
}

/// The `x-request-id` a stub handler saw and the one the response carried, for a request
/// sending `ids` (none, one, or several values).
async fn id_for(
    svc: &(impl Service<
        Request<Full<Bytes>>,
        Response = Response<impl http_body::Body<Error = Infallible>>,
        Error = Infallible,
    > + Clone),
    ids: &[&str],
) -> (String, String) {
    let mut req = post("{}");
    for id in ids {
        req.headers_mut().append("x-request-id", id.parse().expect("value"));
    }
    let r = svc.clone().oneshot(req).await.expect("infallible");
    let echoed = r.headers()["x-request-id"].to_str().expect("ascii").to_owned();
    let seen = r.into_body().collect().await.ok().map(|c| c.to_bytes()).unwrap_or_default();
    (String::from_utf8_lossy(&seen).into_owned(), echoed)
}

/// A client's id is echoed and logged only when it is short, of safe characters and not of
/// the form the gateway issues; any other is replaced by one of the gateway's.
#[tokio::test]
async fn an_unsafe_client_request_id_is_replaced_by_the_gateways_own() {
    let inner = service_fn(|req: Req| async move {
        let seen = req.headers()["x-request-id"].to_str().unwrap_or_default().to_owned();
        ok(FrontBody::full(seen))
    });
    let svc = layered(inner, limits(4), Arc::new(Metrics::new().expect("metrics")));
    let longest = "a".repeat(crate::defaults::MAX_CLIENT_REQUEST_ID_BYTES);
    // "0badc0de-" is one character short of the issued form: no counter after the dash.
    let kept = ["client-7", "3f2c1a9e-8b4d-4c1e-9f0a-2b7d6e5c4a31", "req_1.2:3/4+5=6@x", "0badc0de-"];
    for kept in kept.into_iter().chain([longest.as_str()]) {
        assert_eq!(id_for(&svc, &[kept]).await, (kept.to_owned(), kept.to_owned()));
    }
    let too_long = "a".repeat(60 * 1024);
    let refused = [
        vec![too_long.as_str()],
        vec!["two words"],
        vec!["quote\"d"],
        vec!["semi;colon"],
        vec!["0badc0de-1f"],
        vec!["ABCDEF01-7"],
        vec!["first", "second"],
    ];
    for ids in refused {
        let (seen, echoed) = id_for(&svc, &ids).await;
        assert_eq!(seen, echoed, "the handler sees the id it echoes");
        assert!(!ids.contains(&echoed.as_str()), "{ids:?} kept");
        assert!(issued_form(&echoed), "{echoed:?} is not one of the gateway's ids");
    }
}

fn issued_form(id: &str) -> bool {
    let (prefix, counter) = id.split_once('-').unwrap_or_default();
    prefix.len() == 8 && !counter.is_empty() && id.chars().all(|c| c == '-' || c.is_ascii_hexdigit())
}

/// A legacy session's id is a bearer of the session: the debug header dump hides it, and the
/// span names it by a fingerprint.
#[tokio::test]
async fn a_session_id_is_logged_as_a_fingerprint_only() {
    use sha2::{Digest as _, Sha256};
    let inner = service_fn(|_: Req| async move {
        tracing::info!("inside the handler");
        ok(FrontBody::full("{}"))
    });
    let svc = layered(inner, limits(4), Arc::new(Metrics::new().expect("metrics")));
    let (captured, _guard) = capture(tracing::Level::TRACE);
    const SESSION: &str = "v1.k1.sealed-session-id-that-opens-the-session";
    let mut req = post("{}");
    req.headers_mut().insert("mcp-session-id", SESSION.parse().expect("value"));
    let r = svc.oneshot(req).await.expect("infallible");
    r.into_body().collect().await.expect("body");
    let logged = captured.text();
    assert!(logged.contains("inside the handler") && logged.contains("mcp-session-id"), "{logged}");
    assert!(!logged.contains("sealed-session-id"), "{logged}");
    let digest = Sha256::digest(SESSION.as_bytes());
    let fingerprint: String = digest[..4].iter().map(|b| format!("{b:02x}")).collect();
    assert!(logged.contains(&format!("session=\"{fingerprint}\"")), "{logged}");
}

/// A real front with JWT auth and a one-token bucket per principal: the 429's log line names
/// its principal, the 401's names none (there is none), and a long subject is cut.
#[tokio::test]
async fn refusal_lines_name_the_principal_when_there_is_one() {
    use jsonwebtoken::{encode, EncodingKey, Header};
    let toml = "[upstream]\nurl = \"http://127.0.0.1:9/mcp\"\n\
                [auth]\nmode = \"jwt\"\njwt_hs256_secret = \"log-test-secret\"\n\
                [limits]\nprincipal = { rate_per_sec = 0.001, burst = 1 }\n";
    let cfg = Config::from_toml(toml).expect("config");
    let metrics = Arc::new(Metrics::new().expect("metrics"));
    let pool = Arc::new(crate::upstream::Pool::new(upstream_settings(&cfg, None)).expect("pool"));
    let state = Arc::new(front_state(&cfg, &metrics, &pool).expect("front state"));
    let svc = stack::<Full<Bytes>>(state, Duration::from_secs(5));
    let subject = format!("carol-{}", "x".repeat(4096));
    let exp = jsonwebtoken::get_current_timestamp() + 600;
    let claims = serde_json::json!({"sub": subject, "iss": "https://issuer.test", "exp": exp});
    let token =
        encode(&Header::default(), &claims, &EncodingKey::from_secret(b"log-test-secret")).expect("jwt");
    let request = |bearer: Option<&str>| {
        let mut b = Request::post("/mcp")
            .header("content-type", "application/json")
            .header("accept", "application/json")
            .header("mcp-protocol-version", crate::protocol::MODERN_VERSION)
            .header("mcp-method", "tools/list");
        if let Some(t) = bearer {
            b = b.header("authorization", format!("Bearer {t}"));
        }
        let body = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": {
            "io.modelcontextprotocol/protocolVersion": crate::protocol::MODERN_VERSION,
            "io.modelcontextprotocol/clientCapabilities": {}}}});
        b.body(Full::new(Bytes::from(body.to_string()))).expect("request")
    };
    let (captured, _guard) = capture(tracing::Level::INFO);
    // The first takes the bucket's token (and fails upstream: nothing listens there).
    svc.clone().oneshot(request(Some(&token))).await.expect("infallible");
    let limited = svc.clone().oneshot(request(Some(&token))).await.expect("infallible");
    assert_eq!(limited.status(), StatusCode::TOO_MANY_REQUESTS);
    let anonymous = svc.oneshot(request(None)).await.expect("infallible");
    assert_eq!(anonymous.status(), StatusCode::UNAUTHORIZED);
    let logged = captured.text();
    let line = |outcome: &str| {
        let want = format!("outcome=\"{outcome}\"");
        let lines: Vec<&str> = logged.lines().filter(|l| l.contains(&want)).collect();
        assert_eq!(lines.len(), 1, "{logged}");
        lines[0].to_owned()
    };
    let limit = crate::defaults::MAX_LOGGED_PRINCIPAL_CHARS;
    let named = "principal=\"https://issuer.test|carol-";
    let rate_limited = line("rate_limited");
    assert!(rate_limited.contains(named), "{rate_limited}");
    assert!(rate_limited.contains("xxx…\""), "the principal is cut: {rate_limited}");
    assert!(rate_limited.len() < limit + 400, "{} bytes: {rate_limited}", rate_limited.len());
    let unauthorized = line("unauthorized");
    assert!(!unauthorized.contains("principal="), "{unauthorized}");
}
