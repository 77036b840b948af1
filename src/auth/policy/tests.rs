use serde_json::json;

use super::*;
use crate::legacy::LegacyBody;

fn rule(
    scopes: &[&str],
    methods: &[&str],
    tools: &[&str],
    prompts: &[&str],
    resources: &[&str],
) -> RuleConfig {
    let v = |s: &[&str]| s.iter().map(|x| (*x).to_owned()).collect();
    RuleConfig {
        scopes: v(scopes),
        claims: Default::default(),
        methods: v(methods),
        tools: v(tools),
        prompts: v(prompts),
        resources: v(resources),
        ..RuleConfig::default()
    }
}

fn policy() -> Arc<Policy> {
    let rules = [
        rule(&["read"], &["tools/list", "tools/call"], &["echo", "weather_*"], &[], &[]),
        rule(&["docs"], &["*"], &[], &["summary"], &["demo://docs/*"]),
        RuleConfig {
            claims: [("role".to_owned(), "admin".to_owned())].into(),
            ..rule(&[], &["*"], &["*"], &["*"], &["*"])
        },
    ];
    Policy::compile(&rules, Some("https://gw.test/.well-known/oauth-protected-resource/mcp".into())).unwrap()
}

fn grants(claims: serde_json::Value) -> Grants {
    policy().grants(claims.as_object().unwrap())
}

#[test]
fn no_rules_allow_everything() {
    assert!(Policy::compile(&[], None).is_none());
    assert!(Grants::unrestricted().check("tools/call", Some(&json!({"name": "x"}))).is_ok());
}

#[test]
fn scopes_pick_the_rules_and_the_rules_pick_the_targets() {
    let g = grants(json!({"scope": "read"}));
    assert!(g.check("tools/call", Some(&json!({"name": "weather_today"}))).is_ok());
    assert!(g.check("tools/call", Some(&json!({"name": "delete_all"}))).is_err());
    assert!(g.check("prompts/get", Some(&json!({"name": "summary"}))).is_err());
    assert!(g.check("server/discover", None).is_ok(), "discovery is always allowed");
    let docs = grants(json!({"scp": ["docs"]}));
    assert!(docs.check("resources/read", Some(&json!({"uri": "demo://docs/a/b"}))).is_ok());
    assert!(docs.check("resources/read", Some(&json!({"uri": "demo://secret"}))).is_err());
    assert!(docs
        .check("completion/complete", Some(&json!({"ref": {"type": "ref/prompt", "name": "summary"}})))
        .is_ok());
    assert!(docs
        .check("completion/complete", Some(&json!({"ref": {"type": "ref/prompt", "name": "x"}})))
        .is_err());
}

#[test]
fn claims_match_strings_and_lists() {
    assert!(grants(json!({"role": "admin"})).check("tools/call", Some(&json!({"name": "x"}))).is_ok());
    assert!(grants(json!({"role": ["user", "admin"]}))
        .check("tools/call", Some(&json!({"name": "x"})))
        .is_ok());
    assert!(grants(json!({"role": "user"})).check("tools/call", Some(&json!({"name": "x"}))).is_err());
}

#[test]
fn the_challenge_names_the_scopes_that_would_allow_the_call() {
    let denied = grants(json!({})).check("tools/call", Some(&json!({"name": "echo"}))).unwrap_err();
    assert_eq!(
        denied.challenge.as_ref().unwrap().to_str().unwrap(),
        r#"Bearer error="insufficient_scope", scope="read", resource_metadata="https://gw.test/.well-known/oauth-protected-resource/mcp""#
    );
    assert_eq!(
        denied.message,
        r#"forbidden: tools/call of tool "echo" is outside this client's authorization"#
    );
    assert_eq!(denied.method, "tools/call");
}

#[test]
fn lists_leave_out_what_may_not_be_used() {
    let g = grants(json!({"scope": "read"}));
    let raw = RawValue::from_string(
        json!({"tools": [{"name": "echo"}, {"name": "rm"}, {"name": "weather_x"}]}).to_string(),
    )
    .unwrap();
    let v: Value = serde_json::from_str(g.filter_list("tools/list", raw).get()).unwrap();
    assert_eq!(v, json!({"tools": [{"name": "echo"}, {"name": "weather_x"}]}));
    let docs = grants(json!({"scope": "docs"}));
    let raw = RawValue::from_string(
        json!({"resourceTemplates": [{"uriTemplate": "demo://docs/{id}"}, {"uriTemplate": "demo://x/{id}"}]})
            .to_string(),
    )
    .unwrap();
    let v: Value = serde_json::from_str(docs.filter_list("resources/templates/list", raw).get()).unwrap();
    assert_eq!(v, json!({"resourceTemplates": [{"uriTemplate": "demo://docs/{id}"}]}));
    let untouched = r#"{"tools": [{"name": "rm"}]}"#;
    let raw = RawValue::from_string(untouched.into()).unwrap();
    assert_eq!(Grants::unrestricted().filter_list("tools/list", raw).get(), untouched);
}

#[test]
fn legacy_bodies_are_checked_message_by_message() {
    let g = grants(json!({"scope": "read"}));
    let call =
        |name: &str| json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": name}});
    let check = |g: &Grants, body: &[u8]| check_legacy_body(g, &LegacyBody::parse(body));
    assert!(check(&g, call("echo").to_string().as_bytes()).is_ok());
    assert!(check(&g, call("rm").to_string().as_bytes()).is_err());
    assert!(check(&g, json!([call("echo"), call("rm")]).to_string().as_bytes()).is_err());
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}});
    assert!(check(&g, init.to_string().as_bytes()).is_ok());
    assert!(check(&g, b"").is_ok());
    assert!(check(&g, b"{not json").is_err());
    assert!(check(&Grants::unrestricted(), b"{not json").is_ok());
}

/// A method the 2026-07-28 front does not know is checked like any other: with rules, one no
/// applicable rule names is refused, and a resource subscription needs its resource.
#[test]
fn legacy_only_methods_are_held_to_the_rules() {
    let message = |method: &str, params: serde_json::Value| {
        json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string()
    };
    let read = grants(json!({"scope": "read"}));
    for method in ["resources/subscribe", "logging/setLevel", "sampling/createMessage", "x/custom"] {
        let body = message(method, json!({"uri": "demo://docs/a", "level": "debug"}));
        let denied = check_legacy_body(&read, &LegacyBody::parse(body.as_bytes())).unwrap_err();
        assert!(denied.message.starts_with("forbidden: "), "{}", denied.message);
    }
    let denied = read.check("logging/setLevel", Some(&json!({"level": "debug"}))).unwrap_err();
    assert_eq!(denied.method, "logging/setLevel");
    assert_eq!(denied.message, "forbidden: logging/setLevel is outside this client's authorization");
    assert_eq!(read.check("x/custom", None).unwrap_err().method, "request", "a fixed label");
    let docs = grants(json!({"scope": "docs"}));
    assert!(docs.check("resources/subscribe", Some(&json!({"uri": "demo://docs/a"}))).is_ok());
    assert!(docs.check("resources/subscribe", Some(&json!({"uri": "demo://secret"}))).is_err());
    assert!(docs.check("resources/unsubscribe", Some(&json!({"uri": "demo://secret"}))).is_err());
    assert!(docs.check("logging/setLevel", None).is_ok(), "its rule allows every method");
}

/// What every authenticated client may send, rules or not: the handshake, pings,
/// notifications and its answers to server requests; nothing else.
#[test]
fn the_handshake_pings_notifications_and_answers_are_always_allowed() {
    let nobody = grants(json!({}));
    for method in
        ["initialize", "ping", "server/discover", "notifications/initialized", "notifications/cancelled"]
    {
        assert!(nobody.check(method, None).is_ok(), "{method}");
    }
    let answer = json!({"jsonrpc": "2.0", "id": 3, "result": {"action": "accept"}}).to_string();
    assert!(check_legacy_body(&nobody, &LegacyBody::parse(answer.as_bytes())).is_ok());
    assert!(nobody.check("tools/list", None).is_err());
    assert!(nobody.check("initialized", None).is_err(), "only the notifications/ prefix passes");
}

/// Deny lists win over every allow of every applicable rule, in checks and in lists, and a
/// refusal by one names no scope: holding more scopes never lifts it.
#[test]
fn a_deny_wins_over_every_allow() {
    let v = |s: &[&str]| s.iter().map(|x| (*x).to_owned()).collect::<Vec<_>>();
    let rules = [
        RuleConfig {
            deny_tools: v(&["admin_*"]),
            deny_prompts: v(&["internal"]),
            deny_resources: v(&["secret://*"]),
            ..rule(&[], &["*"], &["*"], &["*"], &["*"])
        },
        rule(&["admin"], &["*"], &["admin_*"], &[], &[]),
    ];
    let policy = Policy::compile(&rules, None).unwrap();
    for claims in [json!({}), json!({"scope": "admin"})] {
        let g = policy.grants(claims.as_object().unwrap());
        assert!(g.check("tools/call", Some(&json!({"name": "echo"}))).is_ok());
        let denied = g.check("tools/call", Some(&json!({"name": "admin_reset"}))).unwrap_err();
        assert_eq!(
            denied.challenge.as_ref().unwrap().to_str().unwrap(),
            r#"Bearer error="insufficient_scope""#,
            "{claims}"
        );
        assert!(g.check("prompts/get", Some(&json!({"name": "internal"}))).is_err());
        let completion = json!({"ref": {"type": "ref/prompt", "name": "internal"}});
        assert!(g.check("completion/complete", Some(&completion)).is_err());
        assert!(g.check("resources/read", Some(&json!({"uri": "secret://k"}))).is_err());
        assert!(g.check("resources/subscribe", Some(&json!({"uri": "secret://k"}))).is_err());
        assert!(g.check("resources/read", Some(&json!({"uri": "demo://k"}))).is_ok());
        assert!(g.check("tools/list", None).is_ok(), "a deny of names leaves methods alone");
        let mut listed = json!({"tools": [{"name": "echo"}, {"name": "admin_reset"}, {"name": "admin"}]});
        assert_eq!(g.retain_listed("tools/list", &mut listed), 1);
        assert_eq!(listed, json!({"tools": [{"name": "echo"}, {"name": "admin"}]}));
        let mut templates =
            json!({"resourceTemplates": [{"uriTemplate": "secret://{k}"}, {"uriTemplate": "x://{k}"}]});
        assert_eq!(g.retain_listed("resources/templates/list", &mut templates), 1);
    }
}

/// A deny in a rule that does not apply to the principal denies nothing.
#[test]
fn a_deny_of_a_rule_that_does_not_apply_is_ignored() {
    let rules = [
        rule(&[], &["*"], &["*"], &[], &[]),
        RuleConfig { deny_tools: vec!["echo".into()], ..rule(&["guest"], &["*"], &[], &[], &[]) },
    ];
    let policy = Policy::compile(&rules, None).unwrap();
    let member = policy.grants(json!({"scope": "member"}).as_object().unwrap());
    assert!(member.check("tools/call", Some(&json!({"name": "echo"}))).is_ok());
    let guest = policy.grants(json!({"scope": "guest"}).as_object().unwrap());
    assert!(guest.check("tools/call", Some(&json!({"name": "echo"}))).is_err());
}

/// A claim condition names a string; a boolean or number claim holds it when it reads the same.
#[test]
fn claims_match_booleans_and_numbers_by_their_text() {
    let rule = |claim: &str, want: &str| RuleConfig {
        claims: [(claim.to_owned(), want.to_owned())].into(),
        ..rule(&[], &["*"], &["*"], &[], &[])
    };
    let p = Policy::compile(&[rule("verified", "true"), rule("level", "3")], None).unwrap();
    let allowed = |claims: serde_json::Value| {
        p.grants(claims.as_object().unwrap()).check("tools/call", Some(&json!({"name": "x"}))).is_ok()
    };
    assert!(allowed(json!({"verified": true})));
    assert!(!allowed(json!({"verified": false})));
    assert!(allowed(json!({"level": 3})));
    assert!(!allowed(json!({"level": 4})));
    assert!(!allowed(json!({"level": "three"})));
}

#[test]
fn restriction_is_known_and_the_legacy_relay_filters_lists_through_its_trait() {
    assert!(!Grants::unrestricted().is_restricted());
    let g = grants(json!({"scope": "read"}));
    assert!(g.is_restricted());
    let mut listed = json!({"tools": [{"name": "echo"}, {"name": "rm"}, {"name": "mv"}]});
    assert_eq!(crate::legacy::ListFilter::retain_listed(&g, "tools/list", &mut listed), 2);
    assert_eq!(listed, json!({"tools": [{"name": "echo"}]}));
}

/// The legacy-only subscription methods keep their own names in the message and the metric.
#[test]
fn subscription_refusals_name_their_method() {
    let read = grants(json!({"scope": "read"}));
    for method in ["resources/subscribe", "resources/unsubscribe"] {
        let denied = read.check(method, Some(&json!({"uri": "demo://secret"}))).unwrap_err();
        assert_eq!(denied.method, method);
        assert!(
            denied.message.starts_with(&format!("forbidden: {method} of resource")),
            "{}",
            denied.message
        );
    }
}
