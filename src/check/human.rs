//! The report for people: the two views side by side, then each section of the JSON report in
//! a few lines, and the verdict last. Also where the report goes: the readable one to stdout,
//! the JSON one to a file or, alone, to stdout.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;

use serde_json::Value;

use super::exit;

/// Rounds of one run shown in the readable report (the JSON report has them all).
const SHOWN_ROUNDS: usize = 3;
/// Names shown of a change made to many items.
const SHOWN_NAMES: usize = 6;
use super::report::{CallReport, Counts, Difference, Finding, Question, Report};

/// Writes `report` (as JSON to `json`, when asked: `Some(None)` is stdout) and returns the exit
/// status it calls for.
pub(super) fn write(report: &Report, json: Option<Option<&Path>>) -> std::io::Result<i32> {
    let text = serde_json::to_string_pretty(report).map_err(std::io::Error::other)? + "\n";
    match json {
        Some(None) => std::io::stdout().write_all(text.as_bytes())?,
        Some(Some(path)) => {
            std::fs::write(path, &text)?;
            std::io::stdout().write_all(render(report).as_bytes())?;
        }
        None => std::io::stdout().write_all(render(report).as_bytes())?,
    }
    Ok(if report.ok { exit::OK } else { exit::BREAKS })
}

/// The readable report.
pub(super) fn render(r: &Report) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "mrtr-gateway check: {} ({})\n", r.server, r.transport);
    side_by_side(&mut out, r);
    differences(&mut out, r);
    tasks(&mut out, r);
    findings(&mut out, "Repairs by the gateway", &r.repairs);
    findings(&mut out, "Refusals by the gateway", &r.refusals);
    findings(&mut out, "Sensitive questions", &r.sensitive);
    let _ = writeln!(out, "Invalid schemas:{}", if r.invalid_schemas.is_empty() { " none" } else { "" });
    for s in &r.invalid_schemas {
        let _ = writeln!(out, "  {}: {}", s.tool, s.problem);
    }
    calls(&mut out, &r.calls);
    let _ = match r.breaks {
        0 => writeln!(out, "\nResult: nothing breaks for a 2026-07-28 client (exit status 0)."),
        n => writeln!(out, "\nResult: {n} thing(s) break for a 2026-07-28 client (exit status 1)."),
    };
    out
}

fn side_by_side(out: &mut String, r: &Report) {
    let counts = |c: &Counts| [c.tools, c.prompts, c.resources, c.resource_templates].map(count);
    let labels =
        ["protocol version", "server", "capabilities", "tools", "prompts", "resources", "resource templates"];
    let column = |s: &super::report::Side| {
        let [tools, prompts, resources, templates] = counts(&s.counts);
        [
            s.protocol_version.clone(),
            server(&s.server_info),
            capabilities(&s.capabilities),
            tools,
            prompts,
            resources,
            templates,
        ]
    };
    let (direct, gateway) = (column(&r.direct), column(&r.gateway));
    let width = direct.iter().map(|d| d.chars().count()).max().unwrap_or(0).max("directly".len()) + 2;
    let _ = writeln!(out, "  {:<20}{:<width$}through the gateway", "", "directly");
    for ((label, d), g) in labels.iter().zip(direct).zip(gateway) {
        let _ = writeln!(out, "  {label:<20}{d:<width$}{g}");
    }
    for (side, errors) in [("directly", &r.direct.errors), ("through the gateway", &r.gateway.errors)] {
        for e in errors {
            let _ = writeln!(out, "  {} failed {side}: {}", e.list, e.message);
        }
    }
    out.push('\n');
}

fn differences(out: &mut String, r: &Report) {
    let _ = writeln!(out, "Differences: {} ({} break)", r.differences.len(), r.breaks);
    // The same change to many items (a field the gateway drops from every tool) is one line.
    let mut groups: Vec<(&Difference, Vec<&str>)> = Vec::new();
    for d in &r.differences {
        let same = |g: &&mut (&Difference, Vec<&str>)| {
            let k = g.0;
            (k.kind, k.change, &k.detail, k.breaks) == (d.kind, d.change, &d.detail, d.breaks)
        };
        match groups.iter_mut().find(same) {
            Some(group) => group.1.push(&d.name),
            None => groups.push((d, vec![&d.name])),
        }
    }
    for (d, names) in groups {
        let mark = if d.breaks { "BREAKS " } else { "" };
        let _ = match names.as_slice() {
            [one] => writeln!(out, "  {mark}{} {one} {}: {}", d.kind, d.change, d.detail),
            many => writeln!(
                out,
                "  {mark}{} {}: {} ({} of them: {})",
                d.kind,
                d.change,
                d.detail,
                many.len(),
                names_of(many)
            ),
        };
    }
}

/// The first [`SHOWN_NAMES`] names, and how many more.
fn names_of(names: &[&str]) -> String {
    let shown = names.iter().take(SHOWN_NAMES).copied().collect::<Vec<_>>().join(", ");
    match names.len().saturating_sub(SHOWN_NAMES) {
        0 => shown,
        more => format!("{shown}, … {more} more"),
    }
}

fn tasks(out: &mut String, r: &Report) {
    let _ = writeln!(out, "Tools that need tasks:{}", if r.needs_tasks.is_empty() { " none" } else { "" });
    for t in &r.needs_tasks {
        let through =
            if t.through_gateway { "listed through the gateway" } else { "not listed through the gateway" };
        let _ = writeln!(out, "  {} (taskSupport {:?}): {through}", t.tool, t.task_support);
    }
}

fn findings(out: &mut String, title: &str, list: &[Finding]) {
    let _ = writeln!(out, "{title}:{}", if list.is_empty() { " none" } else { "" });
    for f in list {
        let _ = writeln!(out, "  {}: {} × {}", f.tool, f.reason, f.count);
    }
}

fn calls(out: &mut String, calls: &[CallReport]) {
    let _ = writeln!(
        out,
        "Calls tried:{}",
        if calls.is_empty() { " none (give some with --calls FILE)" } else { "" }
    );
    for c in calls {
        let _ = writeln!(out, "  {} {}", c.tool, c.arguments);
        let error = |e: &Option<String>| e.as_deref().map(|e| format!(" ({e})")).unwrap_or_default();
        let _ = writeln!(
            out,
            "    directly: {}{}, {} question(s){}",
            c.direct.outcome.as_str(),
            error(&c.direct.error),
            c.direct.questions.len(),
            questions(&c.direct.questions)
        );
        for (i, run) in c.gateway.iter().enumerate() {
            let _ = writeln!(
                out,
                "    through the gateway, run {}: {}{}{} after {} round(s){}",
                i + 1,
                run.outcome.as_str(),
                if run.task { " as a task" } else { "" },
                error(&run.error),
                run.rounds.len(),
                rounds(&run.rounds)
            );
        }
        if let Some(t) = &c.tasks {
            let _ = writeln!(
                out,
                "    tasks in the gateway: {} created, {} completed, {} failed, {} cancelled, {} input round(s)",
                t.created, t.completed, t.failed, t.cancelled, t.input_rounds
            );
        }
        let verdict =
            c.verdict.as_deref().map(|v| format!("; the gateway's verdict: {v}")).unwrap_or_default();
        let as_tasks = !c.gateway.is_empty() && c.gateway.iter().all(|r| r.task);
        let replay = match (c.stable, c.park_advised) {
            (true, _) if as_tasks => "it ran as a task, nothing replayed, alike each time".to_owned(),
            (true, _) => "replay is stable".to_owned(),
            (false, true) => {
                format!("replay is not stable ({} divergence(s)): park this tool", c.divergences)
            }
            (false, false) => "the runs differ".to_owned(),
        };
        let _ = writeln!(out, "    {replay}{verdict}");
    }
}

/// The questions of the first [`SHOWN_ROUNDS`] rounds, one round after the other.
fn rounds(rounds: &[Vec<Question>]) -> String {
    if rounds.is_empty() {
        return String::new();
    }
    let shown: Vec<String> =
        rounds.iter().take(SHOWN_ROUNDS).map(|q| questions(q).trim_start_matches(": ").to_owned()).collect();
    let more = match rounds.len().saturating_sub(SHOWN_ROUNDS) {
        0 => String::new(),
        n => format!(" | … {n} more round(s)"),
    };
    format!(": {}{more}", shown.join(" | "))
}

fn questions(list: &[Question]) -> String {
    if list.is_empty() {
        return String::new();
    }
    format!(": {}", list.iter().map(|q| q.summary.as_str()).collect::<Vec<_>>().join("; "))
}

fn server(info: &Value) -> String {
    let name = info.get("name").and_then(Value::as_str).unwrap_or("?");
    match info.get("version").and_then(Value::as_str) {
        Some(v) => format!("{name} {v}"),
        None => name.to_owned(),
    }
}

fn capabilities(caps: &Value) -> String {
    let names: Vec<&str> =
        caps.as_object().map(|m| m.keys().map(String::as_str).collect()).unwrap_or_default();
    if names.is_empty() {
        "none".to_owned()
    } else {
        names.join(", ")
    }
}

fn count(n: Option<usize>) -> String {
    n.map_or_else(|| "-".to_owned(), |n| n.to_string())
}
