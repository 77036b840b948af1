use serde_json::json;

use super::*;

fn params(text: &str) -> Params {
    Params::index(&RawValue::from_string(text.to_owned()).unwrap()).unwrap()
}

#[test]
fn members_and_meta_members_are_read_from_the_text() {
    let p = params(r#"{"name":"echo","arguments":{"a":[1,2]},"_meta":{"k":"v","n":3}}"#);
    assert_eq!(p.get("arguments"), Some(r#"{"a":[1,2]}"#));
    assert_eq!(p.str("name").unwrap().as_deref(), Some("echo"));
    assert_eq!(p.meta("n"), Some("3"));
    assert_eq!(p.meta("absent"), None);
    assert_eq!(p.get("absent"), None);
    assert!(p.meta_is_object());
    assert_eq!(p.str("arguments"), Err(NotAString));
}

#[test]
fn escaped_keys_and_strings_are_unescaped() {
    let p = params(r#"{"na\u006de":"ec\"ho","_meta":{"k\n":1}}"#);
    assert_eq!(p.str("name").unwrap().as_deref(), Some("ec\"ho"));
    assert_eq!(p.meta("k\n"), Some("1"));
    // Written again, the escaped key is escaped in the gateway's own spelling.
    let out = p.write(|_| true, |_| true);
    assert_eq!(
        serde_json::from_str::<Value>(out.as_str()).unwrap(),
        json!({"name": "ec\"ho", "_meta": {"k\n": 1}})
    );
}

#[test]
fn what_is_not_an_object_or_names_a_member_twice_is_refused() {
    for text in ["[1]", "3", "\"s\"", "null"] {
        let raw = RawValue::from_string(text.to_owned()).unwrap();
        assert_eq!(Params::index(&raw).unwrap_err(), ParamsError::NotObject, "{text}");
    }
    let twice = |text: &str| Params::index(&RawValue::from_string(text.to_owned()).unwrap()).unwrap_err();
    assert_eq!(twice(r#"{"name":"a","name":"b"}"#).to_string(), r#"params."name" appears more than once"#);
    // The same key spelled with an escape is the same key.
    assert!(matches!(twice(r#"{"name":"a","n\u0061me":"b"}"#), ParamsError::Repeated(_)));
    assert_eq!(twice(r#"{"_meta":{"k":1,"k":2}}"#).to_string(), r#"params._meta."k" appears more than once"#);
    let deep = tree_without_repeats(r#"{"a":[{"b":{"c":1,"c":2}}]}"#).unwrap_err();
    assert_eq!(deep.to_string(), r#"member "c" appears more than once"#);
    assert_eq!(
        tree_without_repeats(r#"{"a":[{"c":1},{"c":2}]}"#).unwrap(),
        json!({"a": [{"c": 1}, {"c": 2}]})
    );
    // Past the pairwise bound, the sorted comparison finds it too.
    let many: Vec<String> = (0..40).map(|i| format!("\"k{i}\":{i}")).collect();
    assert!(matches!(twice(&format!("{{{},\"k7\":0}}", many.join(","))), ParamsError::Repeated(_)));
    assert!(Params::index(&RawValue::from_string(format!("{{{}}}", many.join(","))).unwrap()).is_ok());
}

#[test]
fn written_params_keep_what_is_kept_in_order_and_copy_values_as_they_came() {
    let p = params(
        r#"{"name":"t","requestState":"s","arguments":{"x": 1.50},"_meta":{"io.x/a":1,"progressToken":3}}"#,
    );
    let out = p.write(|k| k != "requestState", |k| !k.starts_with("io.x/"));
    assert_eq!(out.as_str(), r#"{"name":"t","arguments":{"x": 1.50},"_meta":{"progressToken":3}}"#);
    // A `_meta` left with nothing is left out.
    let out = p.write(|_| true, |_| false);
    assert_eq!(out.as_str(), r#"{"name":"t","requestState":"s","arguments":{"x": 1.50}}"#);
    assert_eq!(params("{}").write(|_| true, |_| true).as_str(), "{}");
}

#[test]
fn removed_and_set_members_show_in_the_tree_and_the_text() {
    let mut p = params(r#"{"name":"enc","task":{"ttl":1},"arguments":{}}"#);
    assert_eq!(p.tree().unwrap(), &json!({"name": "enc", "task": {"ttl": 1}, "arguments": {}}));
    assert!(p.remove("task"));
    assert!(!p.remove("task"));
    p.set_str("name", "up\"stream");
    p.set_str("added", "x");
    assert_eq!(p.tree().unwrap(), &json!({"name": "up\"stream", "arguments": {}, "added": "x"}));
    assert_eq!(p.write(|_| true, |_| true).as_str(), r#"{"name":"up\"stream","arguments":{},"added":"x"}"#);
    assert_eq!(p.str("name").unwrap().as_deref(), Some("up\"stream"));
}

#[test]
fn a_tree_round_trips_through_the_index() {
    let v = json!({"name": "t", "arguments": {"deep": {"a": [1, {"b": null}]}}, "_meta": {}});
    let p = Params::of_value(&v).unwrap();
    assert_eq!(p.tree().unwrap(), &v);
    assert!(p.meta_is_object());
    assert!(!Params::of_value(&json!({"_meta": 1})).unwrap().meta_is_object());
}

#[test]
fn a_message_reads_its_params_indexed_and_params_of_another_shape_still_parse() {
    use crate::protocol::jsonrpc::{Envelope, Outgoing};
    let read = |body: &str| match Envelope::parse_indexed(body.as_bytes()).unwrap() {
        Envelope::Request(r) => r.params.map(|read| read.0),
        _ => panic!("not a request"),
    };
    let p = read(
        r#"{"jsonrpc":"2.0","id":1,"method":"m","params": { "a" : [1, 2] , "k\u0065y":"v","_meta":{"x":1}}}"#,
    )
    .unwrap()
    .unwrap();
    assert_eq!((p.get("a"), p.get("key"), p.meta("x")), (Some("[1, 2]"), Some("\"v\""), Some("1")));
    assert_eq!(p.tree().unwrap(), &json!({"a": [1, 2], "key": "v", "_meta": {"x": 1}}));
    for shape in ["[1,{\"a\":2}]", "3", "\"s\"", "true", "-1.5"] {
        let body = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"m","params":{shape}}}"#);
        assert_eq!(read(&body).unwrap().unwrap_err(), ParamsError::NotObject, "{shape}");
    }
    assert!(read(r#"{"jsonrpc":"2.0","id":1,"method":"m","params":null}"#).is_none());
    let twice = read(r#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":1,"a":2}}"#).unwrap();
    assert!(matches!(twice, Err(ParamsError::Repeated(_))));

    // Written out as a request, text params are copied in whole.
    let out = p.write(|k| k != "_meta", |_| false);
    let id = crate::protocol::RequestId::String("r\"1".into());
    let bytes = Outgoing::Text(&out).request_bytes(&id, "tools/call");
    let sent: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(
        sent,
        json!({"jsonrpc": "2.0", "id": "r\"1", "method": "tools/call", "params": {"a": [1, 2], "key": "v"}})
    );
    assert!(String::from_utf8(bytes).unwrap().contains(r#""params":{"a":[1, 2],"key":"v"}"#));
}

#[test]
fn json_no_tree_can_hold_is_unreadable_and_still_goes_upstream_whole() {
    let deep = format!("{}1{}", "[".repeat(200), "]".repeat(200));
    for member in [deep.as_str(), "1e400"] {
        let p = params(&format!(r#"{{"name":"t","x":{member}}}"#));
        let e = p.tree().unwrap_err();
        assert!(matches!(&e, ParamsError::Unreadable(m) if m.starts_with("\"x\"")), "{e:?}");
        assert!(p.write(|_| true, |_| true).as_str().contains(member));
        // Asked again, the tree is still refused, and the members the front reads still read.
        assert!(p.tree().is_err());
        assert_eq!(p.str("name").unwrap().as_deref(), Some("t"));
    }
}
