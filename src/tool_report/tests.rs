use std::time::Duration;

use super::*;
use crate::metrics::Metrics;

fn run(served: Served, rounds: u32, end: RunEnd) -> RunRecord {
    RunRecord {
        served: Some(served),
        rounds,
        diverged: false,
        end,
        tool_error: false,
        elapsed: Some(Duration::from_millis(4)),
    }
}

fn entry<'a>(report: &'a Report, tool: &str) -> &'a ToolSummary {
    report.tools.iter().find(|t| t.tool == tool).unwrap_or_else(|| panic!("no entry for {tool}"))
}

fn series(m: &Metrics, series: &str) -> f64 {
    let text = String::from_utf8(m.render()).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {series} in {text}"))
}

#[test]
fn tools_past_the_bound_fold_into_one_counted_entry() {
    let m = Metrics::new().unwrap();
    let max = defaults::TOOL_REPORT_MAX_TOOLS;
    for i in 0..max + 10 {
        m.tools.record(&format!("tool-{i:04}"), &run(Served::Direct, 0, RunEnd::Completed));
    }
    m.tools.record("tool-0000", &run(Served::Direct, 0, RunEnd::Completed));
    let report = m.tools.snapshot();
    assert_eq!(report.tools.len(), max + 1, "the bound, plus the (other) entry");
    let other = report.tools.last().unwrap();
    assert_eq!((other.tool.as_str(), other.folded, other.verdict), (OTHER, true, Verdict::Folded));
    assert_eq!((other.calls.completed, other.runs), (10, 10));
    assert_eq!(entry(&report, "tool-0000").calls.completed, 2, "a tool with an entry keeps it");
    assert!(report.tools[..max].windows(2).all(|w| w[0].tool < w[1].tool), "sorted by name");
    assert_eq!(series(&m, r#"mrtr_gateway_tool_calls_total{result="completed",tool="(other)"}"#), 10.0);
    assert_eq!(series(&m, r#"mrtr_gateway_tool_calls_total{result="completed",tool="tool-0000"}"#), 2.0);
    let labelled = String::from_utf8(m.render()).unwrap();
    let labels = labelled.lines().filter(|l| l.starts_with("mrtr_gateway_tool_runs_total{served=\"direct\""));
    assert_eq!(labels.count(), max + 1, "the tool label takes the report's names only");
}

#[test]
fn only_a_run_that_completed_or_asked_earns_an_entry() {
    let m = Metrics::new().unwrap();
    m.tools.record("no_such_tool", &run(Served::Direct, 0, RunEnd::Failed));
    m.tools.record("slow", &run(Served::Direct, 0, RunEnd::Abandoned));
    let unknown = RunRecord { tool_error: true, ..run(Served::Direct, 0, RunEnd::Completed) };
    m.tools.record("not_listed", &unknown);
    m.tools.record(
        &"x".repeat(defaults::TOOL_REPORT_MAX_NAME_BYTES + 1),
        &run(Served::Direct, 0, RunEnd::Completed),
    );
    let report = m.tools.snapshot();
    assert_eq!(report.tools.len(), 1, "{report:?}");
    let other = &report.tools[0];
    assert_eq!((other.calls.failed, other.calls.abandoned, other.calls.completed), (1, 1, 2));
    assert!(!m.tools.has_entry("not_listed"));

    m.tools.record("slow", &run(Served::Direct, 0, RunEnd::Asked { questions: 1 }));
    m.tools.record("slow", &run(Served::Replay, 1, RunEnd::Failed));
    m.tools.record_checking("not_listed", run(Served::Direct, 0, RunEnd::Completed), || false);
    assert!(m.tools.has_entry("not_listed"), "a result that is not a tool error earns it one");
    let asked = std::cell::Cell::new(false);
    m.tools.record_checking("not_listed", run(Served::Direct, 0, RunEnd::Completed), || asked.replace(true));
    assert!(!asked.get(), "a tool with an entry has its result left unread");
    let report = m.tools.snapshot();
    let slow = entry(&report, "slow");
    assert_eq!((slow.calls.failed, slow.calls.abandoned, slow.runs), (1, 0, 2));
}

#[test]
fn a_call_with_rounds_is_summed_per_call_and_per_round() {
    let m = Metrics::new().unwrap();
    let ask = |n| RunEnd::Asked { questions: n };
    // confirm_twice: two rounds of one question, then complete; twice.
    for _ in 0..2 {
        m.tools.record("confirm", &run(Served::Direct, 0, ask(1)));
        m.tools.record("confirm", &run(Served::Replay, 1, ask(1)));
        m.tools.record("confirm", &run(Served::Replay, 2, RunEnd::Completed));
    }
    // One call of three questions at once, served by a parked call.
    m.tools.record("ask_three", &run(Served::Direct, 0, ask(3)));
    m.tools.record("ask_three", &run(Served::Park, 1, RunEnd::Completed));
    let report = m.tools.snapshot();
    let confirm = entry(&report, "confirm");
    assert_eq!((confirm.calls.completed, confirm.runs), (2, 6));
    assert_eq!((confirm.served.direct, confirm.served.replay), (2, 4));
    let rounds = &confirm.rounds_per_call;
    assert_eq!((rounds.count, rounds.sum, rounds.mean, rounds.max), (2, 4, Some(2.0), Some(2)));
    let questions = &confirm.questions_per_round;
    assert_eq!((questions.count, questions.sum, questions.mean, questions.max), (4, 4, Some(1.0), Some(1)));
    assert_eq!(confirm.divergence_rate, Some(0.0));
    assert_eq!(confirm.verdict, Verdict::InBandFriendly);
    assert_eq!(confirm.latency_ms.max, Some(4.0));
    let three = entry(&report, "ask_three");
    assert_eq!((three.served.park, three.divergence_rate), (1, None), "no replay, no rate");
    assert_eq!(three.questions_per_round.max, Some(3));
    let json: serde_json::Value = serde_json::from_slice(&m.tools.to_json().unwrap()).unwrap();
    let histogram = &json["tools"][1]["rounds_per_call"]["histogram"];
    assert_eq!(histogram["2"], 2, "{json}");
    assert_eq!(series(&m, r#"mrtr_gateway_tool_call_rounds_sum{tool="confirm"}"#), 4.0);
    assert_eq!(series(&m, r#"mrtr_gateway_tool_round_questions_count{tool="confirm"}"#), 4.0);
    assert_eq!(series(&m, r#"mrtr_gateway_tool_runs_total{served="park",tool="ask_three"}"#), 1.0);
}

#[test]
fn divergences_are_counted_and_decide_the_verdict() {
    let m = Metrics::new().unwrap();
    m.tools.record("flaky", &run(Served::Direct, 0, RunEnd::Asked { questions: 1 }));
    let diverged = RunRecord { diverged: true, ..run(Served::Replay, 1, RunEnd::Asked { questions: 1 }) };
    m.tools.record("flaky", &diverged);
    m.tools.record("flaky", &RunRecord { diverged: true, ..run(Served::Replay, 2, RunEnd::Failed) });
    let report = m.tools.snapshot();
    let flaky = entry(&report, "flaky");
    assert_eq!((flaky.divergences, flaky.divergence_rate), (2, Some(1.0)));
    assert_eq!((flaky.verdict, flaky.calls.failed), (Verdict::Diverges, 1));
    assert_eq!(series(&m, r#"mrtr_gateway_tool_divergences_total{tool="flaky"}"#), 2.0);
}

#[test]
fn schema_findings_and_sensitive_questions_are_counted_per_tool_and_logged_once() {
    use crate::schema::{Finding, ListKind, Refusal, Repair, Sensitive, SensitiveAction};
    let m = Metrics::new().unwrap();
    let added = Finding::Repair(Repair::InputTypeAdded);
    m.tools.schema(Some("untyped"), added, "no type");
    m.tools.schema(Some("untyped"), added, "no type");
    m.tools.schema(Some("broken"), Finding::Refusal(Refusal::InputSchemaInvalid), "type 12");
    m.tools.schema(None, Finding::Refusal(Refusal::NameInvalid), "no name");
    m.tools.list(ListKind::Prompts, Finding::Repair(Repair::InvalidFieldDropped), "");
    m.tools.sensitive("login", Sensitive::PasswordFormat, SensitiveAction::Warned, "pw");
    m.tools.sensitive("login", Sensitive::PasswordFormat, SensitiveAction::Refused, "pw");
    let report = m.tools.snapshot();
    let untyped = entry(&report, "untyped");
    assert_eq!(untyped.schema.repairs.get("input_type_added"), Some(&2));
    assert!(untyped.schema.refusals.is_empty() && untyped.sensitive.is_empty());
    assert_eq!(entry(&report, "broken").schema.refusals.get("input_schema_invalid"), Some(&1));
    assert_eq!(entry(&report, OTHER).schema.refusals.get("name_invalid"), Some(&1));
    assert_eq!(entry(&report, "login").sensitive.get("password_format"), Some(&2));
    assert_eq!(report.lists["prompts"].repairs.get("invalid_field_dropped"), Some(&1));
    assert!(report.lists["resources"].repairs.is_empty());
    assert_eq!(
        series(&m, r#"mrtr_gateway_schema_repairs_total{reason="input_type_added",tool="untyped"}"#),
        2.0
    );
    assert_eq!(
        series(&m, r#"mrtr_gateway_schema_refusals_total{reason="name_invalid",tool="(other)"}"#),
        1.0
    );
    assert_eq!(
        series(&m, r#"mrtr_gateway_schema_repairs_total{reason="invalid_field_dropped",tool="(prompts)"}"#),
        1.0
    );
    let warned =
        r#"mrtr_gateway_sensitive_questions_total{action="warned",reason="password_format",tool="login"}"#;
    assert_eq!(series(&m, warned), 1.0);
    // Logged once per (tool, reason): the second sighting finds the pair remembered.
    assert!(!m.tools.table.lock().logged.first_unseen("untyped", "input_type_added"));
    let json: serde_json::Value = serde_json::from_slice(&m.tools.to_json().unwrap()).unwrap();
    let login = json["tools"].as_array().unwrap().iter().find(|t| t["tool"] == "login").unwrap();
    assert_eq!(login["schema"], serde_json::json!({"repairs": {}, "refusals": {}}));
    assert_eq!(login["sensitive"], serde_json::json!({"password_format": 2}));
    assert_eq!(json["lists"]["prompts"]["repairs"]["invalid_field_dropped"], 1, "{json}");
}

#[test]
fn the_memory_of_logged_pairs_is_bounded() {
    let m = Metrics::new().unwrap();
    let mut table = m.tools.table.lock();
    for i in 0..defaults::TOOL_REPORT_MAX_LOGGED {
        assert!(table.logged.first(&format!("t{i}"), "r"));
    }
    assert!(!table.logged.first("one more", "r"), "past the bound nothing new is logged");
}

#[test]
fn a_tools_tasks_are_counted_with_their_input_rounds() {
    let m = Metrics::new().unwrap();
    for event in [TaskEvent::Created, TaskEvent::InputRound, TaskEvent::InputRound, TaskEvent::Completed] {
        m.tools.task("research", event);
    }
    m.tools.task("research", TaskEvent::Created);
    m.tools.task("research", TaskEvent::Cancelled);
    m.tools.task("broken", TaskEvent::Created);
    m.tools.task("broken", TaskEvent::Failed);
    let report = m.tools.snapshot();
    let research = entry(&report, "research");
    let want = TaskSummary { created: 2, completed: 1, failed: 0, cancelled: 1, input_rounds: 2 };
    assert_eq!(research.tasks, want);
    assert_eq!((research.verdict, research.runs), (Verdict::Task, 0), "a task is not a run");
    assert_eq!((entry(&report, "broken").tasks.failed, entry(&report, "broken").verdict), (1, Verdict::Task));
    assert_eq!(series(&m, r#"mrtr_gateway_tool_tasks_total{event="input_rounds",tool="research"}"#), 2.0);
    let json: serde_json::Value = serde_json::from_slice(&m.tools.to_json().unwrap()).unwrap();
    let listed = json["tools"].as_array().unwrap().iter().find(|t| t["tool"] == "research").unwrap();
    assert_eq!(
        listed["tasks"],
        serde_json::json!({"created": 2, "completed": 1, "failed": 0, "cancelled": 1, "input_rounds": 2})
    );
    // Past the bound, tasks count in the (other) entry like everything else.
    for i in 0..defaults::TOOL_REPORT_MAX_TOOLS {
        m.tools.task(&format!("tool-{i:04}"), TaskEvent::Created);
    }
    assert_eq!(entry(&m.tools.snapshot(), OTHER).tasks.created, 2, "the two past the bound");
}
