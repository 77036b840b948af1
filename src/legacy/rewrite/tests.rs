use std::sync::Arc;

use serde_json::json;

use super::*;
use crate::legacy::body::LegacyBody;
use crate::legacy::lists::ListFilter;
use crate::upstream::sse::SseParser;

/// Hides every tool whose name starts with `secret`.
struct NoSecrets;

impl ListFilter for NoSecrets {
    fn retain_listed(&self, _method: &str, result: &mut Value) -> usize {
        let Some(Value::Array(items)) = result.get_mut("tools") else { return 0 };
        let before = items.len();
        items.retain(|i| !i["name"].as_str().unwrap_or_default().starts_with("secret"));
        before - items.len()
    }
}

fn lists(body: Value) -> Lists {
    let body = LegacyBody::parse(body.to_string().as_bytes());
    Lists::for_post(Arc::new(NoSecrets), &body).expect("a list request")
}

fn list_request(id: i64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"})
}

fn tools_response(id: i64) -> String {
    json!({"jsonrpc": "2.0", "id": id, "result": {"tools": [{"name": "echo"}, {"name": "secret_rm"}]}})
        .to_string()
}

/// Feeds `body` in chunks of `size` bytes and returns everything that came out.
fn run(mut rewrite: Rewrite, body: &[u8], size: usize) -> (Vec<u8>, bool) {
    let mut out = Vec::new();
    for chunk in body.chunks(size) {
        let o = rewrite.push(Bytes::copy_from_slice(chunk));
        o.chunks.iter().for_each(|c| out.extend_from_slice(c));
        if o.end {
            return (out, true);
        }
    }
    out.extend_from_slice(&rewrite.finish().unwrap_or_default());
    (out, false)
}

fn messages(sse: &[u8]) -> Vec<Value> {
    let events = SseParser::new(1 << 20).feed(sse).unwrap();
    events.iter().filter(|e| !e.data.is_empty()).map(|e| serde_json::from_str(&e.data).unwrap()).collect()
}

#[test]
fn an_sse_stream_keeps_every_other_byte_and_loses_the_hidden_tool() {
    let priming = "id: p-0\r\ndata: \r\n\r\n";
    let question =
        "id: p-1\r\nevent: message\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"roots/list\"}\r\n\r\n";
    let answer = format!("id: p-2\r\nevent: message\r\ndata: {}\r\n\r\n", tools_response(1));
    let after = ": a comment after the response\n\nid: p-3\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"x\"}\n\n";
    let body = format!("{priming}{question}{answer}{after}");
    // Every chunk size cuts the stream somewhere else, a CRLF in two included.
    for size in [1, 2, 3, 7, 64, body.len()] {
        let rewrite = Rewrite::new(lists(list_request(1)), "text/event-stream; charset=utf-8").unwrap();
        let (out, ended) = run(rewrite, body.as_bytes(), size);
        assert!(!ended);
        let out = String::from_utf8(out).unwrap();
        assert!(out.starts_with(&format!("{priming}{question}")), "size {size}: {out:?}");
        assert!(out.ends_with(after), "size {size}: after the response, bytes pass as they came");
        let rewritten = &out[priming.len() + question.len()..out.len() - after.len()];
        assert!(rewritten.starts_with("id: p-2\nevent: message\ndata: "), "{rewritten:?}");
        let tools = &messages(rewritten.as_bytes())[0]["result"]["tools"];
        assert_eq!(tools, &json!([{"name": "echo"}]), "size {size}");
    }
}

#[test]
fn a_json_body_and_a_json_batch_are_filtered_whole() {
    let rewrite = Rewrite::new(lists(list_request(4)), "application/json").unwrap();
    let (out, _) = run(rewrite, tools_response(4).as_bytes(), 5);
    let v: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["result"]["tools"], json!([{"name": "echo"}]));

    let batch = format!("[{},{}]", tools_response(5), tools_response(6));
    let rewrite = Rewrite::new(lists(json!([list_request(6)])), "application/json").unwrap();
    let (out, _) = run(rewrite, batch.as_bytes(), 9);
    let v: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v[0]["result"]["tools"].as_array().unwrap().len(), 2, "id 5 was not a list request here");
    assert_eq!(v[1]["result"]["tools"], json!([{"name": "echo"}]));

    let other = tools_response(9);
    let rewrite = Rewrite::new(lists(list_request(1)), "application/json").unwrap();
    assert_eq!(
        run(rewrite, other.as_bytes(), 4).0,
        other.as_bytes(),
        "nothing to filter: the bytes as they came"
    );
    assert!(Rewrite::new(lists(list_request(1)), "text/plain").is_none());
}

#[test]
fn media_types_are_read_whatever_their_case() {
    // A client that reads `Text/Event-Stream` as SSE must get its lists filtered all the same.
    let rewrite = Rewrite::new(lists(list_request(1)), "Text/Event-Stream").unwrap();
    let body = format!("event: message\ndata: {}\n\n", tools_response(1));
    let out = String::from_utf8(run(rewrite, body.as_bytes(), 7).0).unwrap();
    assert!(out.contains("echo") && !out.contains("secret_rm"), "{out}");
    assert!(Rewrite::new(lists(list_request(1)), "Application/JSON; charset=utf-8").is_some());
}

#[test]
fn a_list_response_past_the_bound_is_refused_and_ends_the_body() {
    let mut sse = Rewrite::new(lists(list_request(3)), "text/event-stream").unwrap();
    sse.max = 64;
    let first = "data: {\"jsonrpc\":\"2.0\",\"method\":\"n\"}\n\n";
    let huge = format!("data: {}\n\n", tools_response(3));
    let (out, ended) = run(sse, format!("{first}{huge}").as_bytes(), 16);
    assert!(ended);
    let out = String::from_utf8(out).unwrap();
    assert!(out.starts_with(first), "{out:?}");
    let refused = messages(&out.as_bytes()[first.len()..]);
    assert_eq!(
        refused,
        vec![json!({"jsonrpc": "2.0", "id": 3, "error": {"code": -32000, "message": TOO_LARGE}})]
    );

    let mut json =
        Rewrite::new(lists(json!([list_request(1), list_request(2)])), "application/json").unwrap();
    json.max = 16;
    let (out, ended) = run(json, tools_response(1).as_bytes(), 8);
    assert!(ended);
    let v: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!((v[0]["id"].clone(), v[1]["id"].clone()), (json!(1), json!(2)));
    assert!(!out.windows(6).any(|w| w == b"secret"), "nothing of the response went out");
}

/// Once the awaited response went by, the rest of a chunk goes out with it, not at the end of
/// the body: a stream that stays open must not hold what the upstream sent after the list.
#[test]
fn the_rest_after_the_last_list_response_goes_out_at_once() {
    let answer = format!("data: {}\n\n", tools_response(1));
    let after = "id: p-3\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"x\"}\n\nid: p-4\nda";
    let mut rewrite = Rewrite::new(lists(list_request(1)), "text/event-stream").unwrap();
    let out = rewrite.push(Bytes::from(format!("{answer}{after}")));
    assert!(!out.end);
    let out: Vec<u8> = out.chunks.concat();
    let out = String::from_utf8(out).unwrap();
    assert!(out.ends_with(after), "{out:?}");
    assert_eq!(messages(out.as_bytes())[0]["result"]["tools"], json!([{"name": "echo"}]));
}

/// One awaited response gets its error as one object, as it asked in one; a batch as a batch.
#[test]
fn a_single_list_request_past_the_bound_gets_a_single_error() {
    let counter = prometheus::IntCounter::new("too_large", "too large").unwrap();
    let mut json =
        Rewrite::new(lists(list_request(7)).counting(counter.clone()), "application/json").unwrap();
    json.max = 16;
    let (out, ended) = run(json, tools_response(7).as_bytes(), 8);
    assert!(ended);
    let v: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v, json!({"jsonrpc": "2.0", "id": 7, "error": {"code": -32000, "message": TOO_LARGE}}));
    assert_eq!(counter.get(), 1, "the refusal is counted");
}

#[test]
fn a_rewriter_shows_what_it_awaits() {
    let rewrite = Rewrite::new(lists(list_request(1)), "application/json").unwrap();
    let shown = format!("{rewrite:?}");
    assert!(shown.contains("Lists { pending"), "{shown}");
}

#[test]
fn a_list_response_of_exactly_the_bound_is_still_filtered() {
    let body = tools_response(2);
    let mut json = Rewrite::new(lists(list_request(2)), "application/json").unwrap();
    json.max = body.len();
    let (out, ended) = run(json, body.as_bytes(), body.len());
    assert!(!ended, "the bound is the largest body kept, not the first refused");
    let v: Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["result"]["tools"], json!([{"name": "echo"}]));
}

#[test]
fn lines_ended_by_a_lone_cr_end_events_too() {
    // SSE allows CR, LF or CRLF to end a line; a CR followed by anything but LF is a whole end.
    let body = format!("id: 1\rdata: {}\r\r", tools_response(8));
    for size in [1, 5, body.len()] {
        let rewrite = Rewrite::new(lists(list_request(8)), "text/event-stream").unwrap();
        let (out, _) = run(rewrite, body.as_bytes(), size);
        let tools = &messages(&out)[0]["result"]["tools"];
        assert_eq!(tools, &json!([{"name": "echo"}]), "size {size}: {:?}", String::from_utf8_lossy(&out));
    }
}
