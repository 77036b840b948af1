//! What the gateway relays from a legacy server to 2026-07-28 clients, held against the
//! 2026-07-28 schema (`spec.rs`, the definitions it checks, as JSON Schema): tool, prompt and resource
//! lists, tool results' `structuredContent` against the tool's `outputSchema`, and the
//! questions. What can be repaired without changing its meaning is repaired; what cannot is
//! refused with a fixed reason ([`Repair`], [`Refusal`]), which the callers count per tool
//! (`crate::tool_report`) and name to the client. Questions that ask for secrets are found
//! here too ([`sensitive`]). Legacy clients of the relay are never shown any of this: they
//! speak legacy.
//!
//! Why a module of its own, with no I/O: the checks are pure functions of what the upstream
//! sent, used by the front (lists), the bridge (questions, results) and the migration report,
//! and the checker is a real JSON Schema implementation (`jsonschema`), never a hand-written
//! one. The costly parts are done once: the schema's definitions are compiled on first use, a
//! tool's `outputSchema` once per distinct schema ([`output`]), and a whole list page once
//! per distinct page ([`Checker`], bounded by [`defaults::SCHEMA_MAX_PAGES`]).

mod items;
pub mod name;
mod output;
pub mod question;
mod reason;
pub mod sensitive;
mod spec;
mod tools;

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use serde_json::value::RawValue;
use serde_json::Value;
use sha2::{Digest as _, Sha256};

pub use output::{refused_result, OutputSchema};
pub use reason::{Finding, ListKind, Refusal, Repair};
pub use sensitive::{Sensitive, SensitiveAction, SensitivePolicy};
pub use tools::CheckedTool;

use crate::defaults;
use items::conform;
use spec::Def;

/// The check of one relayed list page, shared by every relay of the same page text.
#[derive(Debug, Default)]
pub struct Page {
    /// The page as a 2026-07-28 client may see it; `None` when it needs no change.
    pub text: Option<Box<RawValue>>,
    /// `tools/list`: every listed tool, refused ones included, in order.
    pub tools: Vec<CheckedTool>,
    /// Prompt and resource lists: what was repaired and refused, with the detail of each
    /// refusal for the log.
    pub items: Vec<(Finding, String)>,
    /// Some tool name must be encoded before a client sees it ([`encode_names`]).
    pub encode_names: bool,
}

/// Checks list pages, remembering the last [`defaults::SCHEMA_MAX_PAGES`] distinct ones.
#[derive(Default)]
pub struct Checker {
    pages: Mutex<HashMap<[u8; 32], Arc<Page>>>,
    compiled: output::Compiled,
}

// === impl Checker ===

impl Checker {
    /// The check of a `tools/list` page. With `tasks` (the gateway serves legacy task tools as
    /// tasks of the 2026-07-28 tasks extension) a tool's `execution` is kept, and a tool that can
    /// only run as a task is listed; without it both are the legacy hint a client cannot act on.
    pub fn tools(&self, raw: &RawValue, tasks: bool) -> Arc<Page> {
        let tag: &[u8] = if tasks { b"tools+tasks" } else { b"tools" };
        self.cached(tag, raw, || self.check_tools(raw, tasks))
    }

    /// The check of a prompts, resources or resource templates list page.
    pub fn list(&self, kind: ListKind, raw: &RawValue) -> Arc<Page> {
        self.cached(kind.as_str().as_bytes(), raw, || check_list(kind, raw))
    }

    fn cached(&self, tag: &[u8], raw: &RawValue, check: impl FnOnce() -> Page) -> Arc<Page> {
        let digest: [u8; 32] = Sha256::new().chain_update(tag).chain_update(raw.get()).finalize().into();
        if let Some(page) = self.pages.lock().get(&digest) {
            return page.clone();
        }
        let page = Arc::new(check());
        let mut pages = self.pages.lock();
        if pages.len() >= defaults::SCHEMA_MAX_PAGES {
            if let Some(evicted) = pages.keys().next().copied() {
                pages.remove(&evicted);
            }
        }
        pages.insert(digest, page.clone());
        page
    }

    fn check_tools(&self, raw: &RawValue, tasks: bool) -> Page {
        let Ok(mut result) = serde_json::from_str::<Value>(raw.get()) else { return Page::default() };
        let Some(Value::Array(list)) = result.get_mut("tools") else { return Page::default() };
        let mut page = Page::default();
        let mut changed = false;
        let mut kept = Vec::with_capacity(list.len());
        for mut tool in list.drain(..) {
            let checked = tools::check(&mut tool, &self.compiled, tasks);
            changed |= !checked.repairs.is_empty() || checked.refused.is_some();
            page.encode_names |= checked.encode_name;
            if checked.refused.is_none() {
                kept.push(tool);
            }
            page.tools.push(checked);
        }
        *list = kept;
        if changed {
            page.text = RawValue::from_string(result.to_string()).ok();
        }
        page
    }
}

fn check_list(kind: ListKind, raw: &RawValue) -> Page {
    let (field, def) = match kind {
        ListKind::Prompts => ("prompts", Def::Prompt),
        ListKind::Resources => ("resources", Def::Resource),
        ListKind::ResourceTemplates => ("resourceTemplates", Def::ResourceTemplate),
    };
    let Ok(mut result) = serde_json::from_str::<Value>(raw.get()) else { return Page::default() };
    let Some(Value::Array(list)) = result.get_mut(field) else { return Page::default() };
    let mut page = Page::default();
    let mut repairs = Vec::new();
    list.retain_mut(|item| {
        let outcome = match item.as_object_mut() {
            Some(object) => conform(def, object, &mut repairs),
            None => Err(items::Refused::new(refusal_of_non_object(def), "the item is not a JSON object")),
        };
        match outcome {
            Ok(()) => true,
            Err(why) => {
                page.items.push((Finding::Refusal(why.reason), why.detail));
                false
            }
        }
    });
    page.items.extend(repairs.into_iter().map(|r| (Finding::Repair(r), String::new())));
    if !page.items.is_empty() {
        page.text = RawValue::from_string(result.to_string()).ok();
    }
    page
}

fn refusal_of_non_object(def: Def) -> Refusal {
    match def {
        Def::Resource | Def::ResourceTemplate => Refusal::UriInvalid,
        _ => Refusal::NameInvalid,
    }
}

/// A `tools/list` page with every name that cannot travel in `Mcp-Name` encoded (see [`name`]),
/// the upstream's name kept as the `title` when the tool has none; returns the upstream names
/// it encoded. Done after the authorization rules filtered the page, which match the
/// upstream's names.
pub fn encode_names(raw: Box<RawValue>) -> (Box<RawValue>, Vec<String>) {
    let Ok(mut result) = serde_json::from_str::<Value>(raw.get()) else { return (raw, Vec::new()) };
    let mut encoded = Vec::new();
    if let Some(Value::Array(list)) = result.get_mut("tools") {
        for tool in list.iter_mut().filter_map(Value::as_object_mut) {
            let Some(upstream) = tool.get("name").and_then(Value::as_str).map(str::to_owned) else {
                continue;
            };
            if name::travels(&upstream) {
                continue;
            }
            tool.insert("name".to_owned(), Value::String(name::encode(&upstream)));
            if !tool.contains_key("title") {
                tool.insert("title".to_owned(), Value::String(upstream.clone()));
            }
            encoded.push(upstream);
        }
    }
    if encoded.is_empty() {
        return (raw, encoded);
    }
    match RawValue::from_string(result.to_string()) {
        Ok(text) => (text, encoded),
        Err(_) => (raw, Vec::new()),
    }
}

#[cfg(test)]
mod tests;
