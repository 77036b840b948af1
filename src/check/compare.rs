//! Every difference between the server seen directly and through the gateway, and which of them
//! break something for a 2026-07-28 client. A difference breaks when:
//! - a tool, prompt, resource or resource template listed directly is missing through the
//!   gateway;
//! - a list (or `initialize`) that answers directly fails through the gateway;
//! - the gateway's schema checks refused something (`/admin/tools`);
//! - a tried call that completes directly (a result, even a tool error) fails through the
//!   gateway (a JSON-RPC error, no answer), or ends in a tool error only there.
//!
//! Everything else is listed without breaking: items only the gateway lists, items it changed
//! (a repaired schema, a field that no longer exists, task support it does not bridge),
//! capabilities it does not offer, and calls that asked other questions.

use serde_json::Value;

use super::lists::{Items, ListInfo, ListKind};
use super::report::{CallReport, Difference, Finding, Outcome, Side};

/// The differences of the two views' lists, capabilities and list errors.
pub(super) fn views(direct: (&Side, &Items), gateway: (&Side, &Items)) -> Vec<Difference> {
    let mut out = Vec::new();
    failed_lists(direct.0, gateway.0, &mut out);
    for kind in ListKind::ALL {
        if let (Some(d), Some(g)) = (direct.1.get(kind), gateway.1.get(kind)) {
            items(kind, d, g, &mut out);
        }
    }
    capabilities(&direct.0.capabilities, &gateway.0.capabilities, &mut out);
    out
}

/// A refusal of the schema checks breaks the item it refused.
pub(super) fn refusals(refusals: &[Finding]) -> Vec<Difference> {
    refusals
        .iter()
        .map(|f| Difference {
            kind: "refusal",
            name: f.tool.clone(),
            change: "refused",
            detail: format!("the gateway refused it {} time(s): {}", f.count, f.reason),
            breaks: true,
        })
        .collect()
}

/// The differences of one tried call.
pub(super) fn call(report: &CallReport) -> Vec<Difference> {
    let mut out = Vec::new();
    let direct = report.direct.outcome;
    if let Some(run) = report.gateway.iter().find(|r| r.outcome != direct) {
        let breaks =
            direct != Outcome::Error && (run.outcome == Outcome::Error || run.outcome == Outcome::ToolError);
        let why = run.error.as_deref().map(|e| format!(": {e}")).unwrap_or_default();
        let detail =
            format!("{} directly, {} through the gateway{why}", direct.as_str(), run.outcome.as_str());
        out.push(Difference { kind: "call", name: report.tool.clone(), change: "failed", detail, breaks });
    }
    let mut asked_directly = report.direct.questions.clone();
    asked_directly.sort();
    if let Some(first) = report.gateway.first() {
        let mut asked = first.rounds.concat();
        asked.sort();
        if asked != asked_directly && first.outcome != Outcome::Error {
            let detail = format!(
                "{} question(s) directly, {} through the gateway in {} round(s)",
                asked_directly.len(),
                asked.len(),
                first.rounds.len()
            );
            out.push(Difference {
                kind: "questions",
                name: report.tool.clone(),
                change: "changed",
                detail,
                breaks: false,
            });
        }
    }
    out
}

fn failed_lists(direct: &Side, gateway: &Side, out: &mut Vec<Difference>) {
    for error in &gateway.errors {
        let works_directly = !direct.errors.iter().any(|e| e.list == error.list);
        out.push(Difference {
            kind: "list",
            name: error.list.to_owned(),
            change: "failed",
            detail: format!("through the gateway: {}", error.message),
            breaks: works_directly,
        });
    }
}

fn items(kind: ListKind, direct: &[Value], gateway: &[Value], out: &mut Vec<Difference>) {
    let find = |list: &[Value], name: &str| list.iter().find(|i| kind.name_of(i) == name).cloned();
    for item in direct {
        let name = kind.name_of(item);
        let Some(relayed) = find(gateway, &name) else {
            let detail = match task_support(item) {
                Some("required") => {
                    "missing through the gateway: it needs tasks (taskSupport \"required\")".to_owned()
                }
                _ => "missing through the gateway".to_owned(),
            };
            out.push(Difference { kind: kind.item(), name, change: "missing", detail, breaks: true });
            continue;
        };
        if let Some(detail) = changed(item, &relayed) {
            out.push(Difference { kind: kind.item(), name, change: "changed", detail, breaks: false });
        }
    }
    for item in gateway {
        let name = kind.name_of(item);
        if find(direct, &name).is_none() {
            let detail = "listed through the gateway only".to_owned();
            out.push(Difference { kind: kind.item(), name, change: "added", detail, breaks: false });
        }
    }
}

/// What the gateway changed in an item: the fields it dropped, added or rewrote.
fn changed(direct: &Value, relayed: &Value) -> Option<String> {
    let (Some(d), Some(g)) = (direct.as_object(), relayed.as_object()) else { return None };
    let mut notes = Vec::new();
    for (field, value) in d {
        match g.get(field) {
            None => notes.push(format!("{field} dropped")),
            Some(v) if v != value => notes.push(format!("{field} changed")),
            Some(_) => {}
        }
    }
    notes.extend(g.keys().filter(|k| !d.contains_key(*k)).map(|k| format!("{k} added")));
    (!notes.is_empty()).then(|| notes.join(", "))
}

fn capabilities(direct: &Value, gateway: &Value, out: &mut Vec<Difference>) {
    let (Some(d), Some(g)) = (direct.as_object(), gateway.as_object()) else { return };
    for (name, value) in d {
        let (change, detail) = match g.get(name) {
            None => ("missing", "not offered through the gateway".to_owned()),
            Some(v) if v != value => ("changed", format!("{value} directly, {v} through the gateway")),
            Some(_) => continue,
        };
        out.push(Difference { kind: "capability", name: name.clone(), change, detail, breaks: false });
    }
    for name in g.keys().filter(|k| !d.contains_key(*k)) {
        let detail = "offered through the gateway only".to_owned();
        out.push(Difference {
            kind: "capability",
            name: name.clone(),
            change: "added",
            detail,
            breaks: false,
        });
    }
}

/// A tool's `execution.taskSupport`.
pub(super) fn task_support(tool: &Value) -> Option<&str> {
    tool.get("execution")?.get("taskSupport")?.as_str()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::check::report::{DirectCall, GatewayRun, ListError, Question};

    fn side(errors: Vec<ListError>, capabilities: Value) -> Side {
        Side { errors, capabilities, ..Side::default() }
    }

    #[test]
    fn a_missing_item_breaks_and_a_changed_or_added_one_does_not() {
        let direct = Items {
            tools: Some(vec![
                json!({"name": "a", "inputSchema": {"type": "object"}}),
                json!({"name": "t", "execution": {"taskSupport": "required"}}),
                json!({"name": "o", "execution": {"taskSupport": "optional"}}),
            ]),
            ..Items::default()
        };
        let gateway = Items {
            tools: Some(vec![
                json!({"name": "a", "inputSchema": {"type": "object"}}),
                json!({"name": "o"}),
                json!({"name": "z"}),
            ]),
            ..Items::default()
        };
        let caps = json!({"tools": {}});
        let diffs = views((&side(vec![], caps.clone()), &direct), (&side(vec![], caps), &gateway));
        let brief: Vec<_> = diffs.iter().map(|d| (d.name.as_str(), d.change, d.breaks)).collect();
        assert_eq!(brief, [("t", "missing", true), ("o", "changed", false), ("z", "added", false)]);
        assert!(diffs[0].detail.contains("needs tasks"), "{}", diffs[0].detail);
        assert_eq!(diffs[1].detail, "execution dropped");
    }

    #[test]
    fn a_list_that_fails_only_through_the_gateway_breaks_and_capabilities_only_differ() {
        let failed = |list| ListError { list, message: "boom".into() };
        let direct = side(vec![failed("prompts")], json!({"tools": {"listChanged": true}, "logging": {}}));
        let gateway = side(vec![failed("prompts"), failed("resources")], json!({"tools": {}}));
        let diffs = views((&direct, &Items::default()), (&gateway, &Items::default()));
        let brief: Vec<_> = diffs.iter().map(|d| (d.kind, d.name.as_str(), d.change, d.breaks)).collect();
        assert_eq!(
            brief,
            [
                ("list", "prompts", "failed", false),
                ("list", "resources", "failed", true),
                ("capability", "logging", "missing", false),
                ("capability", "tools", "changed", false),
            ]
        );
    }

    #[test]
    fn a_call_breaks_when_it_fails_only_through_the_gateway() {
        let q = |s: &str| Question { method: "elicitation/create".into(), summary: s.into() };
        let run =
            |outcome, rounds: Vec<Vec<Question>>| GatewayRun { outcome, rounds, error: None, task: false };
        let report = |direct, gateway| CallReport {
            tool: "greet".into(),
            arguments: json!({}),
            direct: DirectCall { outcome: direct, questions: vec![q("form: name?")], error: None },
            gateway,
            stable: true,
            divergences: 0,
            verdict: None,
            advice: None,
            park_advised: false,
            tasks: None,
        };
        let same = report(Outcome::Complete, vec![run(Outcome::Complete, vec![vec![q("form: name?")]])]);
        assert!(call(&same).is_empty());
        let broken = report(Outcome::Complete, vec![run(Outcome::Error, vec![])]);
        assert_eq!(call(&broken).iter().map(|d| (d.kind, d.breaks)).collect::<Vec<_>>(), [("call", true)]);
        let both = report(Outcome::Error, vec![run(Outcome::Complete, vec![vec![q("form: other?")]])]);
        let diffs = call(&both);
        assert_eq!(
            diffs.iter().map(|d| (d.kind, d.breaks)).collect::<Vec<_>>(),
            [("call", false), ("questions", false)]
        );
    }
}
