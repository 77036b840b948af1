use super::*;
use crate::config::Config;

fn jwt(toml: &str) -> Result<JwtConfig, String> {
    match Config::from_toml(&format!("[auth]\nmode = \"jwt\"\n{toml}")) {
        Ok(Config { auth: AuthConfig::Jwt(j), .. }) => Ok(*j),
        Ok(_) => Err("not jwt".into()),
        Err(e) => Err(e.to_string()),
    }
}

#[test]
fn a_full_auth_section_validates_with_its_defaults() {
    let j = jwt(r#"
        jwks_url = "https://issuer.example/jwks.json"
        issuer = "https://issuer.example"
        resource = "https://mcp.example.com/mcp"
        authorization_servers = ["https://issuer.example"]
        [[auth.rules]]
        scopes = ["mcp:tools"]
        tools = ["echo", "weather_*"]
        [[auth.rules]]
        claims = { role = "admin" }
        methods = ["tools/*"]
    "#)
    .unwrap();
    assert_eq!(j.audience.as_deref(), Some("https://mcp.example.com/mcp"), "aud defaults to the resource");
    assert_eq!(j.issuer.as_deref(), Some("https://issuer.example"));
    assert_eq!(j.leeway, d::AUTH_LEEWAY);
    let remote = j.remote.unwrap();
    assert_eq!(remote.source, KeySource::Jwks("https://issuer.example/jwks.json".parse().unwrap()));
    assert_eq!(
        (remote.min_refresh, remote.max_stale, remote.wait),
        (d::JWKS_MIN_REFRESH, d::JWKS_MAX_STALE, d::JWKS_WAIT)
    );
    assert_eq!(j.resource.unwrap().bearer_methods_supported, vec!["header".to_owned()]);
    assert_eq!(j.rules.len(), 2);
    assert_eq!(j.rules[0].methods, vec!["*".to_owned()], "methods default to every method");
    assert_eq!(j.rules[1].claims.get("role").map(String::as_str), Some("admin"));
}

#[test]
fn discovery_needs_an_issuer_and_excludes_a_jwks_url() {
    let j = jwt("issuer = \"https://issuer.example\"\noidc_discovery = true").unwrap();
    assert_eq!(j.remote.unwrap().source, KeySource::Discovery("https://issuer.example".into()));
    assert!(jwt("oidc_discovery = true").unwrap_err().starts_with("auth.oidc_discovery:"));
    let both =
        jwt("issuer = \"https://i.example\"\noidc_discovery = true\njwks_url = \"https://i.example/j\"");
    assert!(both.unwrap_err().starts_with("auth.jwks_url:"));
}

#[test]
fn key_sources_must_be_https_unless_on_loopback() {
    assert!(jwt("jwks_url = \"http://issuer.example/jwks\"").unwrap_err().starts_with("auth.jwks_url:"));
    assert!(jwt("jwks_url = \"http://127.0.0.1:8000/jwks\"").is_ok());
    assert!(jwt("jwks_url = \"http://localhost:8000/jwks\"").is_ok());
    let plain_issuer = jwt("issuer = \"http://issuer.example\"\noidc_discovery = true");
    assert!(plain_issuer.unwrap_err().starts_with("auth.issuer:"));
}

#[test]
fn bad_values_name_their_field() {
    let e = |t: &str| jwt(&format!("jwt_hs256_secret = \"s\"\n{t}")).unwrap_err();
    assert!(e("issuer = \"a\"\njwt_issuer = \"b\"").starts_with("auth.issuer:"));
    assert!(e("resource = \"/mcp\"").starts_with("auth.resource:"));
    assert!(e("resource = \"https://gw.example/mcp\"\nbearer_methods_supported = [\"query\"]")
        .starts_with("auth.bearer_methods_supported:"));
    assert!(e("rules = [{ tools = [\"\"] }]").starts_with("auth.rules[0]:"));
    assert!(e("jwks_url = \"https://i.example/j\"\njwks_min_refresh_secs = 0")
        .starts_with("auth.jwks_min_refresh_secs:"));
    assert!(e("rules = [{ tool = [\"x\"] }]").contains("tool"), "unknown rule fields are refused");
}

#[test]
fn static_keys_may_sit_beside_each_other() {
    let j = jwt("jwt_hs256_secret = \"s\"").unwrap();
    assert_eq!(j.keys.len(), 1);
    assert!(j.keys[0].algorithms.contains(&Algorithm::HS512));
    assert!(j.remote.is_none() && j.resource.is_none() && j.rules.is_empty());
}

#[test]
fn the_shipped_example_configuration_validates() {
    let text =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/config/gateway.example.toml")).unwrap();
    Config::from_toml(&text).unwrap();
}

#[test]
fn deny_lists_validate_like_the_allow_lists() {
    let j = jwt("jwt_hs256_secret = \"s\"\n[[auth.rules]]\ntools = [\"*\"]\ndeny_tools = [\"admin_*\"]\n\
                 deny_prompts = [\"p\"]\ndeny_resources = [\"secret://*\"]")
    .unwrap();
    let rule = &j.rules[0];
    assert_eq!(
        (rule.deny_tools.as_slice(), rule.deny_prompts.as_slice()),
        (&["admin_*".to_owned()][..], &["p".to_owned()][..])
    );
    assert_eq!(rule.deny_resources, vec!["secret://*".to_owned()]);
    let e = jwt("jwt_hs256_secret = \"s\"\nrules = [{ deny_tools = [\"\"] }]").unwrap_err();
    assert!(e.starts_with("auth.rules[0]:"), "{e}");
}

/// Without authentication the rules filter for every client; a rule naming scopes or claims
/// could never apply to `anonymous`, so it is refused rather than ignored.
#[test]
fn rules_without_authentication_name_no_scope_or_claim() {
    let c = Config::from_toml("[[auth.rules]]\ntools = [\"*\"]\ndeny_tools = [\"rm\"]").unwrap();
    let AuthConfig::None { rules } = &c.auth else { panic!("not anonymous") };
    assert_eq!(rules[0].deny_tools, vec!["rm".to_owned()]);
    assert_eq!(c.auth.rules().len(), 1);
    for bad in ["scopes = [\"a\"]", "claims = { role = \"admin\" }"] {
        let e =
            Config::from_toml(&format!("[[auth.rules]]\ntools = [\"*\"]\n{bad}")).unwrap_err().to_string();
        assert!(e.starts_with("auth.rules[0]:") && e.contains("auth.mode = \"jwt\""), "{e}");
    }
    assert!(Config::from_toml("").unwrap().auth.rules().is_empty());
}
