use serde_json::json;

use super::*;

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
        denied.challenge.to_str().unwrap(),
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
    assert!(check_legacy_body(&g, call("echo").to_string().as_bytes()).is_ok());
    assert!(check_legacy_body(&g, call("rm").to_string().as_bytes()).is_err());
    assert!(check_legacy_body(&g, json!([call("echo"), call("rm")]).to_string().as_bytes()).is_err());
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}});
    assert!(check_legacy_body(&g, init.to_string().as_bytes()).is_ok());
    assert!(check_legacy_body(&g, b"").is_ok());
    assert!(check_legacy_body(&g, b"{not json").is_err());
    assert!(check_legacy_body(&Grants::unrestricted(), b"{not json").is_ok());
}
