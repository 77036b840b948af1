//! The metrics reference (`docs/src/operations.md`) against the series the gateway registers
//! ([`Metrics::series`]), both ways, names and label sets; and what a running gateway serves on
//! `/metrics` against that same list, so the list cannot miss a family the gateway exports.

use std::collections::{BTreeMap, BTreeSet};

use http::StatusCode;
use mrtr_gateway::metrics::Metrics;
use serde_json::json;

use super::tables::{chapter, code_spans, table};
use crate::common::client::admin_get;
use crate::common::{answer_all, Client, Harness, TestResult};
use crate::it::form_only;

type Families = BTreeMap<String, BTreeSet<String>>;

/// Every registered series and its label names.
fn registered() -> Families {
    let metrics = Metrics::new().expect("metrics");
    metrics.series().iter().map(|s| (s.name.clone(), s.labels.iter().cloned().collect())).collect()
}

/// Every row of the reference: the series and its label names (`—` for none).
fn documented() -> Families {
    let text = chapter("operations.md");
    table(&text, &["metric", "labels", "meaning"])
        .into_iter()
        .map(|cells| {
            let name = code_spans(&cells[0]).into_iter().next().unwrap_or_default();
            (name, code_spans(&cells[1]).into_iter().collect())
        })
        .collect()
}

#[test]
fn every_registered_series_is_in_the_reference_and_back() {
    let (code, docs) = (registered(), documented());
    let differ: Vec<String> = code
        .keys()
        .chain(docs.keys())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .filter(|name| code.get(*name) != docs.get(*name))
        .map(|name| format!("{name}: registered {:?}, documented {:?}", code.get(name), docs.get(name)))
        .collect();
    assert!(differ.is_empty(), "the metrics reference and the code disagree:\n{}", differ.join("\n"));
}

#[tokio::test]
async fn a_running_gateway_serves_only_registered_series() -> TestResult {
    let code = registered();
    let h = Harness::start().await?;
    // A plain call and a round with its retry: requests, durations, questions, seals, opens,
    // the pool and the migration report's series get values.
    assert_eq!(h.client.call_tool("echo", json!({"message": "m"})).send().await?.text()?, "Echo: m");
    let call = || h.client.call_tool("greet", json!({})).caps(form_only());
    let (questions, state) = call().send().await?.input_required()?;
    let done = call().state(&state).responses(answer_all(&questions)).send().await?;
    assert!(done.text()?.starts_with("Hello, "), "the round completes");
    let addr = h.gateway.admin_addr.expect("an admin listener");
    let (status, text) = admin_get(&Client::new(String::new()), addr, "/metrics").await?;
    assert_eq!(status, StatusCode::OK);
    let served = served_families(&text, &code);
    assert!(served.len() >= 15, "too few families served to mean anything: {served:?}");
    for (name, labels) in &served {
        let known = code.get(name).unwrap_or_else(|| panic!("/metrics serves {name}, which no list has"));
        assert!(labels.is_subset(known), "{name} is served with labels {labels:?}, registered {known:?}");
    }
    h.stop().await
}

/// The families of a text exposition and the label names seen on each (a histogram's
/// `_bucket`, `_sum` and `_count` lines counted under its own name, without `le`).
fn served_families(text: &str, code: &Families) -> Families {
    let mut out = Families::new();
    for line in text.lines().filter(|l| !l.starts_with('#') && !l.is_empty()) {
        let name_end = line.find(['{', ' ']).unwrap_or(line.len());
        let mut name = &line[..name_end];
        for suffix in ["_bucket", "_sum", "_count"] {
            if let Some(base) = name.strip_suffix(suffix).filter(|b| code.contains_key(*b)) {
                name = base;
            }
        }
        let labels = line[name_end..]
            .strip_prefix('{')
            .and_then(|rest| rest.split_once('}'))
            .map(|(inside, _)| inside.split(',').filter_map(|pair| pair.split_once('=')).map(|(k, _)| k))
            .into_iter()
            .flatten()
            .filter(|label| *label != "le")
            .map(str::to_owned);
        out.entry(name.to_owned()).or_default().extend(labels);
    }
    out
}
