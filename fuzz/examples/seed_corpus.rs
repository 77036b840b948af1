//! Writes the seed corpus of every fuzz target from real artefacts of the gateway: states that
//! the codec sealed over journals that `Replay` built and `accept_responses` filled, JSON-RPC
//! messages from the crate's own serialisers, and front requests with valid `_meta` and
//! mirrored headers. Seeds are starting points only; libFuzzer mutates them.
//!
//! SSE streams as legacy servers write them (priming events, multi-line data, CRLF), mirrored
//! header values in both forms, and JWTs signed with the fuzz gateway's secret.
//!
//! Run from the repository root: `cargo run --manifest-path fuzz/Cargo.toml --example seed_corpus`.
//! It replaces `fuzz/corpus/<target>/seed-*` of every target, or only of the targets named
//! after `--` (e.g. `-- sse_parser`). The test keys and times match the targets' own.

use std::fs;
use std::path::{Path, PathBuf};

use mrtr_gateway::mrtr::{
    AnswerLimits, Binding, CodecSettings, Journal, KeyRing, KeySecret, LegacyVersion, Replay, StateCodec,
};
use mrtr_gateway::protocol::jsonrpc::{
    error_bytes, notification_bytes, request_bytes, result_bytes, ErrorObject,
};
use mrtr_gateway::protocol::methods::MrtrMethod;
use mrtr_gateway::protocol::RequestId;
use serde_json::{json, Value};

const NOW: u64 = 1_800_000_000;

fn key(byte: u8, label: Option<&str>) -> KeySecret {
    KeySecret::new([byte; 32], label.map(str::to_owned)).expect("test key")
}

/// The same ring as the targets: the newer key seals, the older one still opens.
fn codec() -> StateCodec {
    let ring = KeyRing::new(vec![key(0x42, None), key(0x17, Some("old"))]).expect("ring");
    StateCodec::new(ring, CodecSettings::default())
}

struct Out {
    dir: PathBuf,
    count: usize,
    /// Named on the command line, or no target was named.
    enabled: bool,
}

impl Out {
    fn new(root: &Path, target: &str) -> Self {
        let named: Vec<String> = std::env::args().skip(1).collect();
        let enabled = named.is_empty() || named.iter().any(|n| n == target);
        let dir = root.join(target);
        if !enabled {
            return Self { dir, count: 0, enabled };
        }
        fs::create_dir_all(&dir).expect("corpus directory");
        for entry in fs::read_dir(&dir).expect("corpus directory").flatten() {
            if entry.file_name().to_string_lossy().starts_with("seed-") {
                fs::remove_file(entry.path()).expect("old seed");
            }
        }
        Self { dir, count: 0, enabled }
    }

    fn report(&self) {
        if self.enabled {
            println!("{}: {} seeds", self.dir.display(), self.count);
        }
    }

    fn put(&mut self, name: &str, bytes: &[u8]) {
        if !self.enabled {
            return;
        }
        self.count += 1;
        fs::write(self.dir.join(format!("seed-{:02}-{name}", self.count)), bytes).expect("seed file");
    }
}

/// A journal after one round of replay: the questions a legacy tool asked, pending.
fn asked(questions: &[(&str, Value)]) -> Journal {
    let mut replay = Replay::new(Journal::new(), 16);
    for (method, params) in questions {
        replay.decide(method, Some(params)).expect("a question the gateway can embed");
    }
    replay.finish().journal
}

fn elicit(message: &str) -> (&'static str, Value) {
    (
        "elicitation/create",
        json!({"message": message, "requestedSchema": {"type": "object",
        "properties": {"city": {"type": "string"}}, "required": ["city"]}}),
    )
}

fn sample() -> (&'static str, Value) {
    (
        "sampling/createMessage",
        json!({"messages": [{"role": "user",
        "content": {"type": "text", "text": "Summarise"}}], "maxTokens": 100}),
    )
}

fn roots() -> (&'static str, Value) {
    ("roots/list", json!({}))
}

/// Answers every pending question of `journal` with a valid answer of its kind.
fn answers(journal: &Journal) -> Value {
    let mut map = serde_json::Map::new();
    for p in &journal.pending {
        let answer = match p.kind {
            mrtr_gateway::mrtr::InputKind::Elicitation => {
                json!({"action": "accept", "content": {"city": "Paris"}})
            }
            mrtr_gateway::mrtr::InputKind::Sampling => json!({"role": "assistant", "model": "m",
                "content": {"type": "text", "text": "Short."}}),
            mrtr_gateway::mrtr::InputKind::Roots => {
                json!({"roots": [{"uri": "file:///project", "name": "project"}]})
            }
        };
        map.insert(p.key.clone(), answer);
    }
    Value::Object(map)
}

fn seal_open_input(flags: u8, delta: i64, at: u8, claims: &[u8], responses: Option<&Value>) -> Vec<u8> {
    let mut out = vec![flags];
    out.extend_from_slice(&delta.to_le_bytes());
    out.push(at);
    out.extend_from_slice(claims);
    if let Some(r) = responses {
        out.push(0);
        out.extend_from_slice(&serde_json::to_vec(r).expect("json"));
    }
    out
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    let codec = codec();
    let mut tokens = Out::new(&root, "open_state");
    let mut sealed = Out::new(&root, "seal_open");

    let calls = [
        (
            "tools",
            MrtrMethod::ToolsCall,
            "get_weather",
            Some(json!({"name": "get_weather",
            "arguments": {"location": "New York"}})),
        ),
        (
            "prompts",
            MrtrMethod::PromptsGet,
            "greet",
            Some(json!({"name": "greet", "arguments": {"who": "Ann"}})),
        ),
        ("resources", MrtrMethod::ResourcesRead, "file:///a.txt", Some(json!({"uri": "file:///a.txt"}))),
    ];
    let journals = [
        ("fresh", Journal::new()),
        ("elicit", asked(&[elicit("Which city?")])),
        ("mixed", asked(&[elicit("Which city?"), sample(), roots(), elicit("Which city?")])),
    ];
    for (call, method, target, params) in &calls {
        let binding = Binding::new("alice", *method, target, params.as_ref());
        for (name, journal) in &journals {
            // The round after the questions were asked, and the one after they were answered.
            let mut answered = journal.clone();
            let responses = answers(journal);
            answered
                .accept_responses(responses.as_object(), LegacyVersion::V2025_11_25, &AnswerLimits::default())
                .expect("valid answers");
            for (round, j) in [(1, journal), (2, &answered)] {
                let token = codec.seal_at(&binding, round, j, NOW).expect("seal");
                tokens.put(&format!("{call}-{name}-r{round}"), token.as_bytes());
                let claims = codec.open_at(&token, &binding, NOW).expect("open");
                let bytes = serde_json::to_vec(&claims).expect("claims json");
                let label = format!("{call}-{name}-r{round}");
                // Relative time inside the window, with and without answers to the pending questions.
                sealed.put(&format!("{label}-ok"), &seal_open_input(0x02, 5, 0, &bytes, Some(&responses)));
                sealed.put(&format!("{label}-old-key"), &seal_open_input(0x03, 0, 1, &bytes, None));
            }
        }
    }
    // One of each refusal, from the same real claims.
    let binding = Binding::new("alice", MrtrMethod::ToolsCall, "get_weather", calls[0].3.as_ref());
    let journal = asked(&[elicit("Which city?"), roots()]);
    let token = codec.seal_at(&binding, 1, &journal, NOW).expect("seal");
    let claims = serde_json::to_vec(&codec.open_at(&token, &binding, NOW).expect("open")).expect("json");
    let ttl = codec.settings().ttl.as_secs() as i64;
    let skew = codec.settings().skew.as_secs() as i64;
    for (name, flags, delta, at) in [
        ("expired", 0x02, ttl + skew + 1, 0),
        ("not-yet-valid", 0x02, -skew - 1, 0),
        ("principal", 0x06, 0, 0),
        ("method", 0x0a, 0, 0),
        ("target", 0x12, 0, 0),
        ("arguments", 0x22, 0, 0),
        ("tampered", 0x42, 0, 40),
        ("absolute-now", 0x00, NOW as i64, 0),
    ] {
        sealed.put(name, &seal_open_input(flags, delta, at, &claims, None));
    }
    let text = String::from_utf8(claims).expect("claims are UTF-8");
    let version2 = text.replacen("\"v\":1", "\"v\":2", 1);
    sealed.put("version", &seal_open_input(0x02, 0, 0, version2.as_bytes(), None));
    sealed.put("trailing", &seal_open_input(0x02, 0, 0, format!("{text} {{}}").as_bytes(), None));
    sealed.put("not-json", &seal_open_input(0x00, 0, 0, b"not claims", None));

    let mut rpc = Out::new(&root, "jsonrpc_envelope");
    let params = json!({"name": "get_weather", "arguments": {"location": "New York", "days": 3, "f": 1.5},
        "_meta": {"progressToken": "p1"}, "requestState": token});
    rpc.put("request", &request_bytes(&RequestId::Number(7), "tools/call", Some(&params)));
    rpc.put("request-string-id", &request_bytes(&RequestId::String("a-1".into()), "tools/list", None));
    rpc.put(
        "notification",
        &notification_bytes(
            "notifications/progress",
            Some(&json!({"progressToken": 1,
        "progress": 0.5, "total": 1})),
        ),
    );
    let result = serde_json::value::to_raw_value(&json!({"content": [{"type": "text", "text": "Sunny"}],
        "isError": false}))
    .expect("raw");
    rpc.put("result", &result_bytes(&RequestId::Number(0), &result));
    let error = ErrorObject {
        code: -32602,
        message: "invalid or expired requestState".into(),
        data: Some(json!({"reason": "expired"})),
    };
    rpc.put("error", &error_bytes(Some(&RequestId::String("x".into())), &error));
    rpc.put("error-null-id", &error_bytes(None, &error));

    let mut front = Out::new(&root, "front_validate");
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}, "sampling": {}, "roots": {}},
        "progressToken": 7});
    for (name, method, header_name, params) in [
        (
            "tools-call",
            "tools/call",
            Some("get_weather"),
            json!({"name": "get_weather", "arguments": {}, "_meta": meta}),
        ),
        ("prompts-get", "prompts/get", Some("greet"), json!({"name": "greet", "_meta": meta})),
        (
            "resources-read",
            "resources/read",
            Some("=?base64?ZmlsZTovLy/DqQ==?="),
            json!({"uri": "file:///é", "_meta": meta}),
        ),
        ("tools-list", "tools/list", None, json!({"_meta": meta})),
        ("discover", "server/discover", None, json!({"_meta": meta})),
        (
            "old-version",
            "tools/list",
            None,
            json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2025-11-25",
            "io.modelcontextprotocol/clientCapabilities": {}}}),
        ),
    ] {
        let version = params["_meta"]["io.modelcontextprotocol/protocolVersion"].as_str().expect("version");
        let mut text = format!("{method}\nmcp-protocol-version: {version}\nmcp-method: {method}\n");
        if let Some(h) = header_name {
            text.push_str(&format!("mcp-name: {h}\n"));
        }
        text.push_str("accept: application/json, text/event-stream\n\n");
        text.push_str(&serde_json::to_string(&params).expect("json"));
        front.put(name, text.as_bytes());
    }
    front.put("no-headers", format!("tools/call\n\n{}", json!({"name": "x", "_meta": meta})).as_bytes());
    // A member named twice: the tree keeps the last, the front's index refuses it.
    let twice = format!("tools/call\nmcp-protocol-version: 2026-07-28\nmcp-method: tools/call\nmcp-name: a\n\n{{\"name\":\"a\",\"name\":\"a\",\"_meta\":{meta}}}");
    front.put("repeated-member", twice.as_bytes());

    for out in [&tokens, &sealed, &rpc, &front] {
        out.report();
    }
    sse_seeds(&root);
    header_seeds(&root);
    jwt_seeds(&root);
}

/// Streams as legacy servers send them; the first byte is the target's piece length.
fn sse_seeds(root: &Path) {
    let mut out = Out::new(root, "sse_parser");
    let content = serde_json::value::to_raw_value(&json!({"content": []})).expect("raw JSON");
    let result = String::from_utf8(result_bytes(&RequestId::Number(1), &content)).expect("utf-8");
    let streams = [
        format!("id: 0\nretry: 1000\ndata:\n\nid: 1\nevent: message\ndata: {result}\n\n"),
        format!("\u{feff}: comment\r\ndata: {result}\r\n\r\n"),
        "data: line one\rdata: line two\r\revent: ping\ndata\n\n".to_owned(),
        format!("id: 7\ndata: {}\n\n", "x".repeat(300)),
    ];
    for (i, stream) in streams.iter().enumerate() {
        for piece in [0u8, 2, 255] {
            out.put(&format!("stream{i}-piece{piece}"), &[&[piece], stream.as_bytes()].concat());
        }
    }
    out.report();
}

/// Mirrored header values: plain, and the sentinel form of non-ASCII and edge-space text.
fn header_seeds(root: &Path) {
    use base64::engine::general_purpose::STANDARD;
    use base64::Engine as _;
    let mut out = Out::new(root, "header_value");
    for text in ["tools/call", "get_weather", "=?base64?x?="] {
        out.put("plain", text.as_bytes());
    }
    for text in ["café ☕", " padded ", "=?base64?", "line\nbreak"] {
        out.put("sentinel", format!("=?base64?{}?=", STANDARD.encode(text)).as_bytes());
    }
    out.report();
}

/// Bearer headers with JWTs signed by the fuzz gateway's secret, and ones it must refuse.
fn jwt_seeds(root: &Path) {
    use jsonwebtoken::{encode, Algorithm, EncodingKey, Header};
    let mut out = Out::new(root, "jwt_header");
    let key = EncodingKey::from_secret(b"mrtr-gateway-fuzz-hs256-secret");
    let claims = [
        json!({"sub": "alice", "iss": "https://issuer.test", "exp": 4_000_000_000u64}),
        json!({"sub": "bob", "exp": 4_000_000_000u64, "aud": "mrtr"}),
        json!({"sub": "carol", "exp": 1}),
        json!({"iss": "no-subject", "exp": 4_000_000_000u64}),
    ];
    for (i, c) in claims.iter().enumerate() {
        let token = encode(&Header::new(Algorithm::HS256), c, &key).expect("HS256 token");
        out.put(&format!("hs256-{i}"), format!("Bearer {token}").as_bytes());
    }
    let other = encode(&Header::new(Algorithm::HS384), &claims[0], &key).expect("HS384 token");
    out.put("hs384", format!("bearer {other}").as_bytes());
    out.put(
        "alg-none",
        b"Bearer eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0.eyJzdWIiOiJhIiwiZXhwIjo0MDAwMDAwMDAwfQ.",
    );
    out.put("basic", b"Basic YWxhZGRpbjpvcGVuc2VzYW1l");
    out.report();
}
