use super::*;

fn err(toml: &str) -> String {
    Config::from_toml(toml).unwrap_err().to_string()
}

#[test]
fn empty_config_takes_defaults() {
    let c = Config::from_toml("").unwrap();
    assert_eq!(c.front.listen.to_string(), "127.0.0.1:8080");
    assert_eq!(c.admin_listen.unwrap().to_string(), "127.0.0.1:9090");
    assert_eq!(c.upstream.target, UpstreamTarget::Embedded);
    assert_eq!(c.mrtr.max_rounds, d::MAX_ROUNDS);
    assert_eq!(c.state.ttl, d::STATE_TTL);
    assert_eq!(c.upstream.protocol_version, LegacyVersion::V2025_11_25);
    assert!(c.state.keys.is_empty());
    assert_eq!(c.front.cache_scope, CacheScope::Private);
}

/// The config's fallbacks, the core's `Default`s and the upstream client's settings are the
/// same numbers: each has one definition, in `crate::defaults`.
#[test]
fn every_layer_takes_the_same_defaults() {
    use crate::mrtr::{AnswerLimits, CodecSettings};
    use crate::upstream::UpstreamSettings;
    let c = Config::from_toml("").unwrap();
    let answers = AnswerLimits::default();
    assert_eq!(c.mrtr.max_answer_bytes, answers.max_answer_bytes);
    assert_eq!(answers.max_answer_bytes, 64 * 1024);
    let codec = CodecSettings::default();
    assert_eq!((c.state.ttl, c.state.clock_skew), (codec.ttl, codec.skew));
    assert_eq!(c.state.max_token_bytes, codec.max_token_bytes);
    assert_eq!(codec.max_token_bytes, 256 * 1024);
    let upstream = UpstreamSettings::new(Uri::from_static("http://127.0.0.1:1/mcp"));
    assert_eq!(c.upstream.request_timeout, upstream.request_timeout);
    assert_eq!(upstream.request_timeout, Duration::from_secs(120));
    assert_eq!(c.upstream.connect_timeout, upstream.connect_timeout);
    assert_eq!(c.upstream.pool_max_sessions, upstream.pool_max_sessions);
    assert_eq!(upstream.pool_max_sessions, 128);
    assert_eq!(c.upstream.pool_idle, upstream.pool_idle_timeout);
    assert_eq!(c.upstream.protocol_version, upstream.preferred_version);
}

/// The URI parser alone calls `localhost:3901/mcp` an "invalid format".
#[test]
fn an_upstream_url_without_a_scheme_is_refused_saying_so() {
    assert_eq!(
        err("[upstream]\nurl = \"localhost:3901/mcp\""),
        "upstream.url: \"localhost:3901/mcp\" has no scheme: write the URL with http:// or https://, \
         e.g. \"http://localhost:3901/mcp\""
    );
    let sse = err("[upstream]\nsse_url = \"127.0.0.1:3001/sse\"");
    assert!(sse.starts_with("upstream.sse_url: \"127.0.0.1:3001/sse\" has no scheme"), "{sse}");
    let bad = err("[upstream]\nurl = \"http://a b/mcp\"");
    assert!(bad.starts_with("upstream.url: \"http://a b/mcp\" is not a URL: "), "{bad}");
}

#[test]
fn errors_name_the_field() {
    assert!(err("[front]\nlisten = \"nope\"").starts_with("front.listen:"));
    assert!(err("[upstream]\nurl = \"ftp://x\"").starts_with("upstream.url:"));
    assert!(err("[upstream]\nprotocol_version = \"2026-07-28\"").starts_with("upstream.protocol_version:"));
    assert!(err("[mrtr]\nmax_rounds = 0").starts_with("mrtr.max_rounds:"));
    assert!(err("[front]\ncache_scope = \"shared\"").starts_with("front.cache_scope:"));
    assert!(err("[auth]\nmode = \"jwt\"").starts_with("auth.jwt_hs256_secret:"));
    assert!(
        err("[upstream.headers]\n\"mcp-session-id\" = \"x\"").starts_with("upstream.headers.mcp-session-id:")
    );
}

#[test]
fn a_call_becomes_a_task_before_its_request_times_out() {
    let late = err("[upstream]\nrequest_timeout_ms = 5000\n[tasks]\nlong_after_ms = 5000");
    assert!(
        late.starts_with("tasks.long_after_ms:") && late.contains("upstream.request_timeout_ms"),
        "{late}"
    );
    let ok =
        Config::from_toml("[upstream]\nrequest_timeout_ms = 5000\n[tasks]\nlong_after_ms = 4999").unwrap();
    assert_eq!(ok.tasks.long_after, Some(Duration::from_millis(4999)));
}

#[test]
fn unknown_fields_are_refused() {
    let e = err("[front]\nlisten_addr = \"127.0.0.1:1\"");
    assert!(e.contains("listen_addr"), "{e}");
}

#[test]
fn secrets_are_redacted_in_debug() {
    let c = Config::from_toml(
        "[upstream]\nurl = \"http://127.0.0.1:1/mcp\"\n[upstream.headers]\nx-api-key = \"sk-live-123\"\n\
         [state]\nkeys = [\"c2VjcmV0LWtleS1tYXRlcmlhbC0wMDAwMDAwMDAwMDA=\"]\n[auth]\nmode = \"jwt\"\njwt_hs256_secret = \"hs-secret\"",
    )
    .unwrap();
    let dbg = format!("{c:?}");
    for secret in ["sk-live-123", "c2VjcmV0", "hs-secret"] {
        assert!(!dbg.contains(secret), "{secret} leaked in {dbg}");
    }
}

#[test]
fn key_file_lines_are_read_with_their_line_numbers() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("keys");
    let (k1, k2) = ("new:".to_owned() + &"A".repeat(43), "old:".to_owned() + &"B".repeat(42) + "A");
    std::fs::write(&path, format!("# rotation\n{k1}\n\n{k2}\n")).unwrap();
    let c = Config::from_toml(&format!("[state]\nkey_file = {:?}", path.display().to_string())).unwrap();
    assert_eq!(c.state.keys.len(), 2);
    assert!(c.state.keys[0].source.ends_with("line 2"));
    assert_eq!(c.state.keys[1].text.expose(), k2);
}

#[test]
fn env_and_flags_override_the_file_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gw.toml");
    std::fs::write(&path, "[front]\nlisten = \"127.0.0.1:1000\"\n[mrtr]\nmax_rounds = 3\n").unwrap();
    let env = std::collections::HashMap::from([
        ("MRTR_GATEWAY__FRONT__LISTEN".to_owned(), "127.0.0.1:2000".to_owned()),
        ("MRTR_GATEWAY__MRTR__GATHER_WINDOW_MS".to_owned(), "5".to_owned()),
    ]);
    let env = environment().source(Some(env));
    let c = Config::load_from(Some(&path), &[], env.clone()).unwrap();
    assert_eq!(c.front.listen.to_string(), "127.0.0.1:2000");
    assert_eq!(c.mrtr.gather_window, Duration::from_millis(5));
    assert_eq!(c.mrtr.max_rounds, 3);
    let c = Config::load_from(Some(&path), &[("front.listen", "127.0.0.1:3000".into())], env).unwrap();
    assert_eq!(c.front.listen.to_string(), "127.0.0.1:3000");
}

#[test]
fn unknown_environment_variables_are_refused() {
    let env = std::collections::HashMap::from([("MRTR_GATEWAY__FRONT__LISTN".to_owned(), "x".to_owned())]);
    let e = Config::load_from(None, &[], environment().source(Some(env))).unwrap_err().to_string();
    assert!(e.contains("listn"), "{e}");
}

#[test]
fn shipped_config_files_parse() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/config");
    let mut seen = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            let text = std::fs::read_to_string(&path).unwrap();
            Config::from_toml(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            seen += 1;
        }
    }
    assert!(seen > 0, "no config file in config/");
}

#[test]
fn bad_keys_fail_at_load_naming_their_source() {
    let e = err("[state]\nkeys = [\"not-base64!\"]");
    assert!(e.starts_with("state.keys[0]:"), "{e}");
    let e = err("[state]\nkeys = [\"c2hvcnQ=\"]");
    assert!(e.starts_with("state.keys[0]:") && e.contains("32 bytes"), "{e}");
    let key = "A".repeat(43);
    let e = err(&format!("[state]\nkeys = [\"{key}\", \"{key}\"]"));
    assert!(e.starts_with("state.keys:"), "{e}");
    assert!(!e.contains(&key));
}

#[test]
fn upstream_connections_follow_the_pool_and_the_listen_sessions() {
    // Legacy clients off here: their sessions are counted apart below.
    let no_legacy = "[legacy]\nenabled = false\n";
    let c = Config::from_toml(&format!("{no_legacy}[upstream]\npool_max_sessions = 10")).unwrap();
    assert_eq!(
        c.upstream.max_connections, 100,
        "two per session (10 pooled, 16 listening), 16 spare, 32 connects"
    );
    assert_eq!((c.upstream.pool_max_queued, c.upstream.max_connecting), (1024, 32));
    let e = err("[upstream]\npool_max_sessions = 10\nmax_connections = 52");
    assert!(e.starts_with("upstream.max_connections:") && e.contains("(10 + 16)"), "{e}");
    assert!(Config::from_toml("[upstream]\npool_max_sessions = 10\nmax_connections = 53").is_ok());
    let four = format!("{no_legacy}[upstream]\npool_max_sessions = 10\n[subscriptions]\nmax_sessions = 4");
    assert_eq!(Config::from_toml(&four).unwrap().upstream.max_connections, 76);
    let off = format!("{no_legacy}[subscriptions]\nenabled = false\n[upstream]\npool_max_sessions = 10");
    assert_eq!(Config::from_toml(&off).unwrap().upstream.max_connections, 68, "no listen session when off");
    assert!(Config::from_toml(&format!("{off}\nmax_connections = 21")).is_ok());
    assert!(err("[upstream]\nmax_connecting = 0").starts_with("upstream.max_connecting:"));
}

/// The legacy relay counts its connections against the upstream's bound, so the default bound
/// makes room for two per legacy session as well.
#[test]
fn upstream_connections_make_room_for_legacy_sessions() {
    let legacy = "[legacy]\nmax_sessions = 8\n[upstream]\npool_max_sessions = 10";
    assert_eq!(
        Config::from_toml(legacy).unwrap().upstream.max_connections,
        116,
        "100 and two per legacy session"
    );
}

#[test]
fn an_https_upstream_and_its_tls_files_are_read_into_settings() {
    let c = Config::from_toml(
        "[upstream]\nurl = \"https://mcp.example:8443/mcp\"\n[upstream.tls]\nplatform_roots = false\n\
         ca_file = \"ca.pem\"\nclient_cert_file = \"c.pem\"\nclient_key_file = \"c.key\"\n",
    )
    .unwrap();
    assert!(matches!(&c.upstream.target, UpstreamTarget::Url(u) if u.scheme_str() == Some("https")));
    assert!(!c.upstream.tls.platform_roots);
    assert_eq!(c.upstream.tls.ca_file.as_deref(), Some(std::path::Path::new("ca.pem")));
    let id = c.upstream.tls.client_identity.as_ref().unwrap();
    assert_eq!((id.cert_file.to_str(), id.key_file.to_str()), (Some("c.pem"), Some("c.key")));
    assert!(Config::from_toml("").unwrap().upstream.tls.platform_roots, "platform roots by default");
}

#[test]
fn a_client_certificate_needs_its_key_and_the_url_a_known_scheme() {
    let e = err("[upstream.tls]\nclient_cert_file = \"c.pem\"\n");
    assert!(e.contains("upstream.tls.client_key_file"), "{e}");
    let e = err("[upstream.tls]\nclient_key_file = \"c.key\"\n");
    assert!(e.contains("upstream.tls.client_cert_file"), "{e}");
    let e = err("[upstream]\nurl = \"ftp://mcp.example/mcp\"\n");
    assert!(e.contains("upstream.url"), "{e}");
}

#[test]
fn an_sse_url_is_its_own_upstream_kind_and_excludes_the_others() {
    let c = Config::from_toml("[upstream]\nsse_url = \"http://127.0.0.1:3001/sse\"").unwrap();
    assert_eq!(c.upstream.target, UpstreamTarget::Sse(Uri::from_static("http://127.0.0.1:3001/sse")));
    let both = err("[upstream]\nurl = \"http://127.0.0.1:1/mcp\"\nsse_url = \"http://127.0.0.1:1/sse\"");
    assert!(both.contains("upstream.sse_url") && both.contains("set one of"), "{both}");
    let with_command = err("[upstream]\nsse_url = \"http://127.0.0.1:1/sse\"\ncommand = [\"x\"]");
    assert!(with_command.contains("set one of"), "{with_command}");
    let https = Config::from_toml("[upstream]\nsse_url = \"https://example.test/sse\"").unwrap();
    assert!(matches!(&https.upstream.target, UpstreamTarget::Sse(u) if u.scheme_str() == Some("https")));
    let ftp = err("[upstream]\nsse_url = \"ftp://example.test/sse\"");
    assert!(ftp.contains("upstream.sse_url"), "{ftp}");
}

#[test]
fn gather_knobs_are_bounded_by_the_window() {
    let c = Config::from_toml("").unwrap();
    assert_eq!((c.mrtr.gather_idle, c.mrtr.gather_memory_tools), (d::GATHER_IDLE, d::GATHER_MEMORY_TOOLS));
    let c = Config::from_toml("[mrtr]\ngather_window_ms = 2").unwrap();
    assert_eq!(c.mrtr.gather_idle, Duration::from_millis(2), "the default gap shrinks to a shorter window");
    let c = Config::from_toml("[mrtr]\ngather_idle_ms = 8\ngather_memory_tools = 0").unwrap();
    assert_eq!((c.mrtr.gather_idle, c.mrtr.gather_memory_tools), (Duration::from_millis(8), 0));
    assert!(err("[mrtr]\ngather_window_ms = 10\ngather_idle_ms = 11").starts_with("mrtr.gather_idle_ms:"));
    assert!(err("[mrtr]\ngather_idle_ms = 0").starts_with("mrtr.gather_idle_ms:"));
    assert_eq!(Config::from_toml("").unwrap().mrtr.gather_recheck_every, d::GATHER_RECHECK_EVERY);
    let c = Config::from_toml("[mrtr]\ngather_recheck_every = 1").unwrap();
    assert_eq!(c.mrtr.gather_recheck_every, 1);
    assert!(err("[mrtr]\ngather_recheck_every = 0").starts_with("mrtr.gather_recheck_every:"));
    let c = Config::from_toml("[mrtr.gather_expect]\nask_Three = 3").unwrap();
    assert_eq!(c.mrtr.gather_expect, [("ask_Three".to_owned(), 3)], "tool names keep their case");
    let e = err("[mrtr]\nmax_questions_per_round = 2\n[mrtr.gather_expect]\nask_three = 3");
    assert!(e.starts_with("mrtr.gather_expect.ask_three:"), "{e}");
}

#[test]
fn the_per_key_bound_and_warm_processes_are_checked_against_the_pool() {
    let c = Config::from_toml("[upstream]\npool_max_sessions = 8").unwrap();
    assert_eq!((c.upstream.pool_max_per_key, c.upstream.pool_min_warm), (8, d::POOL_MIN_WARM));
    let upstream = crate::upstream::UpstreamSettings::new(Uri::from_static("http://127.0.0.1:1/mcp"));
    assert_eq!(upstream.pool_max_per_key, upstream.pool_max_sessions, "no bound of its own by default");
    let c = Config::from_toml("[upstream]\ncommand = [\"srv\"]\npool_max_per_key = 2\npool_min_warm = 3")
        .unwrap();
    assert_eq!((c.upstream.pool_max_per_key, c.upstream.pool_min_warm), (2, 3));
    let e = err("[upstream]\npool_max_sessions = 4\npool_max_per_key = 5");
    assert!(e.starts_with("upstream.pool_max_per_key:"), "{e}");
    assert!(err("[upstream]\npool_max_per_key = 0").starts_with("upstream.pool_max_per_key:"));
    let e = err("[upstream]\ncommand = [\"srv\"]\npool_max_sessions = 2\npool_min_warm = 3");
    assert!(e.starts_with("upstream.pool_min_warm:"), "{e}");
    let e = err("[upstream]\nurl = \"http://127.0.0.1:1/mcp\"\npool_min_warm = 1");
    assert!(e.contains("stdio upstream"), "{e}");
}

#[test]
fn the_mode_and_the_advertised_url_come_from_the_environment_and_the_flag() {
    let env = std::collections::HashMap::from([
        ("MRTR_GATEWAY__MRTR__MODE".to_owned(), "park".to_owned()),
        ("MRTR_GATEWAY__CLUSTER__LISTEN".to_owned(), "127.0.0.1:9443".to_owned()),
    ]);
    let flag = [("cluster.advertise_url", "http://127.0.0.1:9443".to_owned())];
    let c = Config::load_from(None, &flag, environment().source(Some(env))).unwrap();
    assert_eq!(c.mrtr.park.mode, crate::config::MrtrMode::Park);
    assert_eq!(c.cluster.advertise_url.map(|u| u.to_string()).as_deref(), Some("http://127.0.0.1:9443/"));
    let cli = crate::config::Cli { advertise_url: Some("http://a:1".into()), ..Default::default() };
    assert!(cli.overrides().contains(&("cluster.advertise_url", "http://a:1".to_owned())));
}

#[test]
fn connection_deadlines_default_and_refuse_zero() {
    let c = Config::from_toml("").unwrap();
    assert_eq!((c.front.handshake_timeout, c.front.idle_timeout), (d::HANDSHAKE_TIMEOUT, d::IDLE_TIMEOUT));
    assert_eq!(c.cluster.accept_timeout, d::FORWARD_ACCEPT_TIMEOUT);
    let c = Config::from_toml("[front]\nhandshake_timeout_ms = 300\nidle_timeout_ms = 700").unwrap();
    assert_eq!((c.front.handshake_timeout.as_millis(), c.front.idle_timeout.as_millis()), (300, 700));
    assert!(err("[front]\nhandshake_timeout_ms = 0").starts_with("front.handshake_timeout_ms:"));
    assert!(err("[front]\nidle_timeout_ms = 0").starts_with("front.idle_timeout_ms:"));
    let e = err("[cluster]\nforward_connect_timeout_ms = 900\nforward_accept_timeout_ms = 800");
    assert!(e.starts_with("cluster.forward_accept_timeout_ms:"), "{e}");
    let c = Config::from_toml("[cluster]\nforward_accept_timeout_ms = 1000").unwrap();
    assert_eq!(c.cluster.accept_timeout.as_millis(), 1000);
}

/// Per-principal shares: a quarter of their total by default when clients authenticate, all of
/// it when every client is `anonymous`; set, each is positive and at most its total, and an error
/// names the key.
#[test]
fn principal_shares_default_with_auth_and_are_checked_against_their_totals() {
    let open = Config::from_toml("").unwrap();
    assert_eq!(open.upstream.pool_max_per_principal, open.upstream.pool_max_sessions);
    assert_eq!(open.legacy.max_sessions_per_principal, open.legacy.max_sessions);
    assert_eq!(open.mrtr.park.max_parked_per_principal, open.mrtr.park.max_parked);
    let jwt = "[auth]\nmode = \"jwt\"\njwt_hs256_secret = \"a-secret-of-the-tests\"\n";
    let c = Config::from_toml(jwt).unwrap();
    assert_eq!(c.upstream.pool_max_per_principal, d::POOL_MAX_SESSIONS / 4);
    assert_eq!(c.legacy.max_sessions_per_principal, d::LEGACY_MAX_SESSIONS / 4);
    assert_eq!(c.mrtr.park.max_parked_per_principal, d::MAX_PARKED / 4);
    let c = Config::from_toml(&format!("{jwt}[legacy]\nmax_sessions = 2")).unwrap();
    assert_eq!(c.legacy.max_sessions_per_principal, 1, "at least one");
    let set = "[upstream]\npool_max_per_principal = 3\n[legacy]\nmax_sessions_per_principal = 5\n[mrtr]\nmax_parked_per_principal = 7";
    let c = Config::from_toml(set).unwrap();
    let shares = (
        c.upstream.pool_max_per_principal,
        c.legacy.max_sessions_per_principal,
        c.mrtr.park.max_parked_per_principal,
    );
    assert_eq!(shares, (3, 5, 7));
    let cases = [
        (
            "[upstream]\npool_max_sessions = 4\npool_max_per_principal = 5",
            "upstream.pool_max_per_principal: must not exceed upstream.pool_max_sessions (4)",
        ),
        (
            "[legacy]\nmax_sessions = 4\nmax_sessions_per_principal = 5",
            "legacy.max_sessions_per_principal: must not exceed legacy.max_sessions (4)",
        ),
        (
            "[mrtr]\nmax_parked = 4\nmax_parked_per_principal = 5",
            "mrtr.max_parked_per_principal: must not exceed mrtr.max_parked (4)",
        ),
        ("[legacy]\nmax_sessions_per_principal = 0", "legacy.max_sessions_per_principal: must be positive"),
    ];
    for (toml, want) in cases {
        assert_eq!(err(toml), want);
    }
    let upstream = crate::upstream::UpstreamSettings::new(Uri::from_static("http://127.0.0.1:1/mcp"));
    assert_eq!(upstream.pool_max_per_principal, upstream.pool_max_sessions, "no share of its own by default");
}

#[test]
fn sensitive_forms_policy_is_typed_with_one_default() {
    use crate::schema::SensitivePolicy;
    assert_eq!(Config::from_toml("").unwrap().elicitation.sensitive, SensitivePolicy::Warn);
    let c = Config::from_toml("[elicitation]\nsensitive = \"refuse\"").unwrap();
    assert_eq!(c.elicitation.sensitive, SensitivePolicy::Refuse);
    assert!(err("[elicitation]\nsensitive = \"block\"").starts_with("elicitation.sensitive:"));
    let env = std::collections::HashMap::from([(
        "MRTR_GATEWAY__ELICITATION__SENSITIVE".to_owned(),
        "refuse".to_owned(),
    )]);
    let c = Config::load_from(None, &[], environment().source(Some(env))).unwrap();
    assert_eq!(c.elicitation.sensitive, SensitivePolicy::Refuse);
}
