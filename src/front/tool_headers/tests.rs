use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use http::HeaderValue;
use serde_json::json;

use super::*;

fn page(tools: Value) -> Box<RawValue> {
    RawValue::from_string(json!({ "tools": tools }).to_string()).unwrap()
}

fn region_tool(name: &str) -> Value {
    json!({"name": name, "inputSchema": {"type": "object",
        "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}}})
}

fn with_region(value: &str) -> HeaderMap {
    let mut map = HeaderMap::new();
    map.insert("mcp-param-region", HeaderValue::from_str(value).unwrap());
    map
}

fn key() -> PoolKey {
    (std::sync::Arc::from("alice"), 0)
}

fn catalogue() -> ToolHeaders {
    ToolHeaders::new(Limits::default(), ToolsChanged::default())
}

#[test]
fn unseen_tools_are_unknown_and_seen_ones_checked() {
    let c = catalogue();
    let args = json!({"region": "us"});
    assert!(c.check(&key(), "sql", &HeaderMap::new(), Some(&args)).is_none());
    let hidden = c.learn(
        &key(),
        &page(json!([region_tool("sql"), {"name": "plain", "inputSchema": {"type": "object"}}])),
    );
    assert!(hidden.is_empty());
    assert_eq!((c.len(), c.is_empty()), (2, false), "the two tools listed");
    assert!(c.check(&key(), "plain", &HeaderMap::new(), Some(&args)).unwrap().is_ok());
    assert!(c.check(&key(), "sql", &with_region("us"), Some(&args)).unwrap().is_ok());
    let e = c.check(&key(), "sql", &HeaderMap::new(), Some(&args)).unwrap().unwrap_err();
    assert_eq!(e.code(), -32020);
}

#[test]
fn mirrored_arguments_that_name_a_member_twice_are_refused() {
    let c = catalogue();
    c.learn(&key(), &page(json!([region_tool("sql"), {"name": "plain", "inputSchema": {"type": "object"}}])));
    let twice = r#"{"region":"us","region":"eu"}"#;
    let e = c.lookup(&key(), "sql", Some(&with_region("us")), Some(twice)).unwrap().unwrap_err();
    assert!(matches!(&e, FrontError::InvalidParams(m) if m.contains("more than once")), "{e:?}");
    let nested = r#"{"region":"us","deep":{"k":1,"k":2}}"#;
    assert!(c.lookup(&key(), "sql", Some(&with_region("us")), Some(nested)).unwrap().is_err());
    assert!(c.lookup(&key(), "sql", Some(&with_region("us")), Some(r#"{"region":"us"}"#)).unwrap().is_ok());
    // A tool with no mirrored headers does not read its arguments.
    assert!(c.lookup(&key(), "plain", Some(&HeaderMap::new()), Some(twice)).unwrap().is_ok());
}

#[test]
fn invalid_tools_are_hidden_and_refused() {
    let c = catalogue();
    let bad = json!({"name": "bad", "inputSchema": {"type": "object",
        "properties": {"n": {"type": "number", "x-mcp-header": "N"}}}});
    let hidden = c.learn(&key(), &page(json!([bad, region_tool("good")])));
    assert_eq!(hidden, HashSet::from(["bad".to_owned()]));
    let e = c.check(&key(), "bad", &HeaderMap::new(), None).unwrap().unwrap_err();
    assert_eq!(e.code(), -32602);
    // A tool refused for its annotations and for something else is refused for its annotations.
    let both = json!({"name": "both", "execution": {"taskSupport": "required"}, "inputSchema": {"type": "object",
        "properties": {"n": {"type": "number", "x-mcp-header": "N"}}}});
    assert_eq!(c.learn(&key(), &page(json!([both]))), HashSet::from(["both".to_owned()]));
    let e = c.check(&key(), "both", &HeaderMap::new(), None).unwrap().unwrap_err();
    let annotations = crate::schema::Refusal::HeaderAnnotationInvalid.describe();
    assert!(e.to_string().contains(annotations), "{e}");
    // A later listing where it became valid makes it callable.
    assert!(c.learn(&key(), &page(json!([region_tool("bad")]))).is_empty());
    assert!(c.check(&key(), "bad", &with_region("us"), Some(&json!({"region": "us"}))).unwrap().is_ok());
}

#[test]
fn the_catalogue_is_bounded() {
    let c = ToolHeaders::new(Limits { max_tools: 3, ..Limits::default() }, ToolsChanged::default());
    let tools: Vec<Value> = (0..10).map(|i| json!({"name": format!("t{i}")})).collect();
    c.learn(&key(), &page(Value::Array(tools)));
    assert_eq!(c.len(), 3);
    c.forget();
    assert!(c.is_empty());
}

/// The catalogue's checker is one for every listing: a page seen before is not checked again.
#[test]
fn a_page_listed_again_is_checked_once() {
    let c = catalogue();
    let listed = page(json!([region_tool("a")]));
    let (first, again) = (c.schema().tools(&listed, false), c.schema().tools(&listed, false));
    assert!(Arc::ptr_eq(&first, &again));
}

#[test]
fn pages_that_are_not_tool_lists_teach_nothing() {
    let c = catalogue();
    assert!(c.learn(&key(), &RawValue::from_string("[1, 2]".into()).unwrap()).is_empty());
    assert!(c.is_empty());
}

#[tokio::test]
async fn concurrent_misses_list_once() {
    let c = Arc::new(catalogue());
    let lists = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let (c, lists) = (c.clone(), lists.clone());
        tasks.push(tokio::spawn(async move {
            let c2 = c.clone();
            c.fetch_once(&key(), "sql", || async move {
                lists.fetch_add(1, Ordering::SeqCst);
                tokio::task::yield_now().await;
                c2.learn(&key(), &page(json!([region_tool("sql")])));
                Ok(())
            })
            .await
        }));
    }
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    assert_eq!(lists.load(Ordering::SeqCst), 1);
    assert!(c.check(&key(), "sql", &with_region("us"), Some(&json!({"region": "us"}))).is_some());
}

#[tokio::test(start_paused = true)]
async fn an_unknown_tool_lists_again_only_after_the_pause() {
    let c = catalogue();
    let lists = AtomicUsize::new(0);
    let list = || async {
        lists.fetch_add(1, Ordering::SeqCst);
        Ok(())
    };
    c.fetch_once(&key(), "nope", list).await.unwrap();
    c.fetch_once(&key(), "nope", list).await.unwrap();
    assert_eq!(lists.load(Ordering::SeqCst), 1);
    tokio::time::advance(defaults::TOOL_LIST_REFETCH_AFTER).await;
    c.fetch_once(&key(), "nope", list).await.unwrap();
    assert_eq!(lists.load(Ordering::SeqCst), 2);
}

#[tokio::test(start_paused = true)]
async fn a_failed_listing_is_retried_and_an_upstream_error_is_not() {
    let c = catalogue();
    let e = c.fetch_once(&key(), "x", || async { Err(FrontError::Overloaded) }).await.unwrap_err();
    assert!(matches!(e, FrontError::Overloaded));
    let upstream = crate::protocol::jsonrpc::ErrorObject { code: -32601, message: "no".into(), data: None };
    c.fetch_once(&key(), "x", || async { Err(FrontError::Upstream(upstream)) }).await.unwrap();
    // The upstream answered: no new listing for a while.
    c.fetch_once(&key(), "x", || async { Err(FrontError::Overloaded) }).await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn a_listing_that_hangs_ends_at_the_bound() {
    let c = catalogue();
    let e = c.fetch_once(&key(), "x", std::future::pending).await.unwrap_err();
    assert!(matches!(e, FrontError::UpstreamTimeout(_)), "{e:?}");
}

#[tokio::test(start_paused = true)]
async fn a_list_change_forgets_every_tool_and_allows_a_new_listing() {
    let changed = ToolsChanged::default();
    let c = ToolHeaders::new(Limits::default(), changed.clone());
    let lists = AtomicUsize::new(0);
    let list = || async {
        lists.fetch_add(1, Ordering::SeqCst);
        c.learn(&key(), &page(json!([region_tool("sql")])));
        Ok(())
    };
    c.fetch_once(&key(), "sql", list).await.unwrap();
    assert!(c.check(&key(), "sql", &HeaderMap::new(), None).is_some());
    changed.note();
    assert!(c.check(&key(), "sql", &HeaderMap::new(), None).is_none(), "still known after a list change");
    // Within the pause, but the list changed since the last listing: it lists again.
    c.fetch_once(&key(), "sql", list).await.unwrap();
    assert_eq!(lists.load(Ordering::SeqCst), 2);
    assert!(c.check(&key(), "sql", &HeaderMap::new(), None).is_some());
}

#[test]
fn an_invalid_tool_is_logged_once_with_its_name_and_reason() {
    let bad = json!({"name": "bad_tool", "inputSchema": {"type": "object",
        "properties": {"n": {"type": "number", "x-mcp-header": "N"}}}});
    let c = catalogue();
    let ((), text) = crate::logging::captured::logged(tracing::Level::INFO, || {
        c.learn(&key(), &page(json!([bad.clone(), region_tool("good")])));
    });
    let logged: Vec<&str> = text.lines().collect();
    assert_eq!(logged.len(), 1, "logged when first seen: {text}");
    assert!(logged[0].contains("WARN") && logged[0].contains("bad_tool"), "{text}");
    assert!(logged[0].contains("is on a property of type \"number\""), "{text}");
    let ((), again) = crate::logging::captured::logged(tracing::Level::INFO, || {
        c.learn(&key(), &page(json!([bad.clone()])));
        c.learn(&key(), &page(json!([bad])));
    });
    assert_eq!(again, "", "never again while the catalogue knows it invalid");
}

#[tokio::test(start_paused = true)]
async fn each_principal_and_capability_set_has_its_own_catalogue() {
    let c = catalogue();
    let (bob, alice_sampling): (PoolKey, PoolKey) = ((Arc::from("bob"), 0), (Arc::from("alice"), 1));
    c.learn(&key(), &page(json!([region_tool("sql")])));
    c.learn(&bob, &page(json!([{"name": "sql", "inputSchema": {"type": "object"}}])));
    assert!(c.check(&key(), "sql", &HeaderMap::new(), Some(&json!({"region": "us"}))).unwrap().is_err());
    assert!(c.check(&bob, "sql", &HeaderMap::new(), Some(&json!({"region": "us"}))).unwrap().is_ok());
    assert!(c.check(&alice_sampling, "sql", &HeaderMap::new(), None).is_none(), "never listed to it");
    assert_eq!(c.len(), 2);
    // One key's recent listing does not stand for another's.
    let lists = AtomicUsize::new(0);
    let list = || async {
        lists.fetch_add(1, Ordering::SeqCst);
        Ok(())
    };
    c.fetch_once(&bob, "nope", list).await.unwrap();
    c.fetch_once(&alice_sampling, "nope", list).await.unwrap();
    c.fetch_once(&bob, "nope", list).await.unwrap();
    assert_eq!(lists.load(Ordering::SeqCst), 2);
}

#[test]
fn the_bound_counts_every_key_and_eviction_keeps_the_count() {
    let c = ToolHeaders::new(Limits { max_tools: 3, ..Limits::default() }, ToolsChanged::default());
    for principal in ["a", "b", "c", "d"] {
        let key: PoolKey = (Arc::from(principal), 0);
        c.learn(&key, &page(json!([{"name": "t1"}, {"name": "t2"}])));
        assert!(c.len() <= 3, "{}", c.len());
    }
    let last: PoolKey = (Arc::from("d"), 0);
    assert!(c.check(&last, "t2", &HeaderMap::new(), None).is_some(), "the newest entry stays");
    // Learning a tool a key already has takes no room.
    c.learn(&last, &page(json!([{"name": "t2"}])));
    assert_eq!(c.len(), 3);
}
