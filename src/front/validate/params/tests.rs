use http::{HeaderName, HeaderValue};
use serde_json::json;

use super::*;

fn param(name: &str, path: &[&str]) -> HeaderParam {
    HeaderParam {
        header: HeaderName::from_bytes(format!("mcp-param-{}", name.to_ascii_lowercase()).as_bytes())
            .unwrap(),
        name: name.into(),
        path: path.iter().map(|s| Box::<str>::from(*s)).collect(),
    }
}

fn headers(list: &[(&str, &str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (k, v) in list {
        map.append(HeaderName::from_bytes(k.as_bytes()).unwrap(), HeaderValue::from_str(v).unwrap());
    }
    map
}

fn check(list: &[(&str, &str)], args: Value) -> Result<(), FrontError> {
    let params = [param("Region", &["region"]), param("Shard", &["target", "shard"])];
    check_params(&headers(list), &params, Some(&args))
}

fn code(r: Result<(), FrontError>) -> (i64, u16) {
    let e = r.unwrap_err();
    (e.code(), e.status().as_u16())
}

#[test]
fn matching_headers_pass_in_any_case_of_name() {
    check(&[("Mcp-Param-Region", "us-west1")], json!({"region": "us-west1"})).unwrap();
    check(
        &[("MCP-PARAM-REGION", "us-west1"), ("mcp-param-shard", "42")],
        json!({"region": "us-west1", "target": {"shard": 42}}),
    )
    .unwrap();
}

#[test]
fn absent_and_null_values_expect_no_header() {
    check(&[], json!({})).unwrap();
    check(&[], json!({"region": null, "target": {}})).unwrap();
    check_params(&headers(&[]), &[param("Region", &["region"])], None).unwrap();
}

#[test]
fn a_value_without_its_header_is_a_mismatch() {
    let e = check(&[], json!({"region": "us-west1"})).unwrap_err();
    assert_eq!((e.code(), e.status().as_u16()), (-32020, 400));
    assert_eq!(
        e.to_string(),
        "header mismatch: missing Mcp-Param-Region header: arguments.region is present"
    );
}

#[test]
fn a_header_without_its_value_is_a_mismatch() {
    assert_eq!(code(check(&[("mcp-param-region", "us-west1")], json!({}))), (-32020, 400));
}

#[test]
fn different_values_are_a_mismatch() {
    assert_eq!(
        code(check(&[("mcp-param-region", "eu-west1")], json!({"region": "us-west1"}))),
        (-32020, 400)
    );
    // Values are case-sensitive.
    assert_eq!(
        code(check(&[("mcp-param-region", "US-WEST1")], json!({"region": "us-west1"}))),
        (-32020, 400)
    );
    let twice = [("mcp-param-region", "us-west1"), ("mcp-param-region", "us-west1")];
    assert_eq!(code(check(&twice, json!({"region": "us-west1"}))), (-32020, 400));
}

#[test]
fn base64_values_are_decoded_strictly() {
    check(&[("mcp-param-region", "=?base64?SGVsbG8sIOS4lueVjA==?=")], json!({"region": "Hello, 世界"}))
        .unwrap();
    check(&[("mcp-param-region", "=?base64?IHBhZGRlZCA=?=")], json!({"region": " padded "})).unwrap();
    // Without the full sentinel the value is literal.
    check(&[("mcp-param-region", "SGVsbG8=")], json!({"region": "SGVsbG8="})).unwrap();
    check(&[("mcp-param-region", "=?base64?SGVsbG8=")], json!({"region": "=?base64?SGVsbG8="})).unwrap();
    for bad in ["=?base64?SGVsbG8?=", "=?base64?SGVs!!!bG8=?=", "=?base64?/w==?="] {
        assert_eq!(
            code(check(&[("mcp-param-region", bad)], json!({"region": "Hello"}))),
            (-32020, 400),
            "{bad}"
        );
    }
}

#[test]
fn integers_compare_numerically_and_booleans_as_words() {
    let shard = |h: &str, v: Value| check(&[("mcp-param-shard", h)], json!({"target": {"shard": v}}));
    shard("42", json!(42)).unwrap();
    shard("42.0", json!(42)).unwrap();
    shard("-7", json!(-7)).unwrap();
    assert_eq!(code(shard("43", json!(42))), (-32020, 400));
    assert_eq!(code(shard("forty-two", json!(42))), (-32020, 400));
    assert_eq!(code(shard("9007199254740993", json!(9_007_199_254_740_993_u64))), (-32020, 400));
    let dry = |h: &str, v: Value| {
        check_params(&headers(&[("mcp-param-dry", h)]), &[param("Dry", &["dry"])], Some(&json!({"dry": v})))
    };
    dry("true", json!(true)).unwrap();
    dry("false", json!(false)).unwrap();
    assert_eq!(code(dry("True", json!(true))), (-32020, 400));
    assert_eq!(code(dry("true", json!({"a": 1}))), (-32020, 400));
}

#[test]
fn a_header_with_characters_outside_visible_ascii_is_a_mismatch() {
    let mut map = HeaderMap::new();
    map.insert("mcp-param-region", HeaderValue::from_bytes(b"caf\xe9").unwrap());
    let e =
        check_params(&map, &[param("Region", &["region"])], Some(&json!({"region": "café"}))).unwrap_err();
    assert_eq!((e.code(), e.status().as_u16()), (-32020, 400));
}
