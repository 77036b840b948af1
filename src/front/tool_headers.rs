//! The per-replica catalogue of the upstream's tool header annotations (`x-mcp-header`), so that
//! a `tools/call` can be checked against its `Mcp-Param-*` headers without asking the upstream
//! each time.
//!
//! It is kept per pool key, (principal, capability set), the unit the upstream sessions are:
//! a legacy server may list different tools, or the same tool with different annotations, to
//! different clients, so what one principal's listing taught is never applied to another's
//! calls (nor a tool one of them sees as invalid hidden from the other).
//!
//! It is filled from every relayed `tools/list` page ([`ToolHeaders::learn`]), and when a call
//! names a tool it has not seen, from one upstream listing shared by every caller that waits
//! for it ([`ToolHeaders::fetch_once`]: single-flight, bounded in time, and not repeated for a
//! while after a complete listing, so calls naming unknown tools cannot make the gateway list
//! the upstream's tools once each). A `notifications/tools/list_changed` that reaches the
//! gateway on any upstream session empties it ([`ToolsChanged`]). A tool without annotations
//! costs an atomic load and two hash lookups under a read lock on the call's path. The catalogue
//! is bounded: past [`defaults::TOOL_HEADERS_MAX_TOOLS`] entries in all, an arbitrary one makes
//! room.

mod annotation;

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use foldhash::fast::RandomState as FoldHash;
use http::HeaderMap;
use parking_lot::RwLock;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::Value;
use tokio::sync::Mutex;
use tokio::time::Instant;

pub use annotation::{header_params, AnnotationError, HeaderParam};

use super::validate;
use crate::defaults;
use crate::error::FrontError;
use crate::schema::{Checker, OutputSchema, Page as CheckedPage, Refusal};
use crate::upstream::{PoolKey, ToolsChanged, UpstreamError};

/// What the catalogue knows about one tool.
#[derive(Debug)]
struct Entry {
    headers: Headers,
    /// Its compiled `outputSchema`: a call's `structuredContent` is checked against it.
    output: Option<Arc<OutputSchema>>,
}

/// A tool's `x-mcp-header` annotations, or why it is not offered.
#[derive(Debug)]
enum Headers {
    /// No `x-mcp-header` annotation: nothing to check.
    Plain,
    Mirrored(Box<[HeaderParam]>),
    /// Left out of `tools/list` (invalid annotations, or refused by the schema checks); a call
    /// to it is refused.
    Invalid(Refusal),
}

/// The bounds of a catalogue.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub max_tools: usize,
    /// Bound on one upstream listing, waiting for another caller's included.
    pub fetch_timeout: Duration,
    /// After a complete listing, a call naming an unknown tool lists again only this much later.
    pub refetch_after: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_tools: defaults::TOOL_HEADERS_MAX_TOOLS,
            fetch_timeout: defaults::TOOL_LIST_FETCH_TIMEOUT,
            refetch_after: defaults::TOOL_LIST_REFETCH_AFTER,
        }
    }
}

/// The catalogue; one per front.
pub struct ToolHeaders {
    tools: RwLock<Tools>,
    /// Held while one caller lists the upstream's tools; holds each key's last complete listing.
    listing: Mutex<HashMap<PoolKey, Listed>>,
    limits: Limits,
    changed: ToolsChanged,
    /// The count of `changed` the entries are from.
    seen: AtomicU64,
    /// The 2026-07-28 checks of the pages it learns from (cached per distinct page).
    schema: Checker,
}

/// Every key's tools, and how many entries they are in all.
#[derive(Default)]
struct Tools {
    /// foldhash (seeded per process) on the call's path: the keys are the gateway's pool keys
    /// and the upstream's tool names, bounded by `max_tools`.
    by_key: HashMap<PoolKey, HashMap<Box<str>, Entry, FoldHash>, FoldHash>,
    len: usize,
}

/// A complete listing of the upstream's tools.
#[derive(Debug, Clone, Copy)]
struct Listed {
    at: Instant,
    /// The count of list changes when it began.
    changes: u64,
}

/// The few fields of a `tools/list` result the catalogue reads; schemas are parsed only when
/// they mention the annotation.
#[derive(Deserialize)]
struct Page<'a> {
    #[serde(borrow, default)]
    tools: Vec<ToolView<'a>>,
}

#[derive(Deserialize)]
struct ToolView<'a> {
    /// Absent on a tool the schema checks refuse: it is skipped, not the whole page.
    #[serde(default)]
    name: Option<String>,
    #[serde(rename = "inputSchema", borrow, default)]
    input_schema: Option<&'a RawValue>,
}

// === impl ToolHeaders ===

impl ToolHeaders {
    /// An empty catalogue, emptied again whenever `changed` counts a change.
    pub fn new(limits: Limits, changed: ToolsChanged) -> Self {
        let seen = AtomicU64::new(changed.count());
        let (tools, listing) = (RwLock::default(), Mutex::default());
        Self { tools, listing, limits, changed, seen, schema: Checker::default() }
    }

    /// Forgets every tool once the upstream said its tools changed.
    fn follow_changes(&self) {
        let now = self.changed.count();
        // A load first: the call path only reads, and the shared line stays unwritten.
        if self.seen.load(Ordering::Acquire) != now && self.seen.swap(now, Ordering::AcqRel) != now {
            self.forget();
        }
    }

    /// The schema checks of the pages this catalogue learns from.
    pub fn schema(&self) -> &Checker {
        &self.schema
    }

    /// Checks a `tools/call` of `name`'s headers against its `arguments`; `None` when the
    /// catalogue has not seen the tool listed to `key`. The tests' shorthand for [`Self::lookup`].
    #[cfg(test)]
    pub fn check(
        &self,
        key: &PoolKey,
        name: &str,
        map: &HeaderMap,
        arguments: Option<&Value>,
    ) -> Option<Result<(), FrontError>> {
        let text = arguments.map(Value::to_string);
        self.lookup(key, name, Some(map), text.as_deref()).map(|checked| checked.map(|_| ()))
    }

    /// What a `tools/call` of `name` needs from the catalogue: a refusal when the tool is not
    /// offered, its headers checked against its `arguments` (unless `map` is `None`: a front
    /// whose headers are made from the body), and its compiled `outputSchema`. `None` when the
    /// catalogue has not seen the tool listed to `key`.
    pub fn lookup(
        &self,
        key: &PoolKey,
        name: &str,
        map: Option<&HeaderMap>,
        arguments: Option<&str>,
    ) -> Option<Result<Option<Arc<OutputSchema>>, FrontError>> {
        self.follow_changes();
        let tools = self.tools.read();
        let entry = tools.by_key.get(key)?.get(name)?;
        Some(match (&entry.headers, map) {
            (Headers::Invalid(reason), _) => Err(FrontError::InvalidParams(format!(
                "tool {} is not available: {}",
                validate::quoted(name),
                reason.describe()
            ))),
            (Headers::Mirrored(params), Some(map)) => mirrored_arguments(arguments)
                .and_then(|arguments| validate::check_params(map, params, arguments.as_ref()))
                .map(|()| entry.output.clone()),
            (Headers::Plain | Headers::Mirrored(_), _) => Ok(entry.output.clone()),
        })
    }

    /// Records the annotations of every tool of one `tools/list` page listed to `key`; returns
    /// the names of the tools whose annotations are invalid (to leave out), logging each one
    /// once per key.
    pub fn learn(&self, key: &PoolKey, page: &RawValue) -> HashSet<String> {
        let checked = self.schema.tools(page, false);
        self.learn_checked(key, page, &checked)
    }

    /// [`Self::learn`], with the page's schema check already made: tools it refused are
    /// recorded as not offered, and the others with their compiled `outputSchema`.
    pub fn learn_checked(&self, key: &PoolKey, page: &RawValue, checked: &CheckedPage) -> HashSet<String> {
        self.follow_changes();
        let Ok(page) = serde_json::from_str::<Page<'_>>(page.get()) else { return HashSet::new() };
        let facts: HashMap<&str, _> =
            checked.tools.iter().filter_map(|t| Some((t.name.as_deref()?, t))).collect();
        let mut hidden = HashSet::new();
        let mut tools = self.tools.write();
        for tool in page.tools {
            let Some(name) = tool.name else { continue };
            let fact = facts.get(name.as_str());
            let headers = match tool.input_schema.filter(|s| s.get().contains(annotation::KEYWORD)) {
                None => Headers::Plain,
                Some(schema) => match read_annotations(schema) {
                    Ok(params) if params.is_empty() => Headers::Plain,
                    Ok(params) => Headers::Mirrored(params.into()),
                    Err(reason) => {
                        let known = tools.get(key, &name).map(|e| &e.headers);
                        if !matches!(known, Some(Headers::Invalid(Refusal::HeaderAnnotationInvalid))) {
                            tracing::warn!(tool = %name, %reason, "left a tool out of tools/list: invalid x-mcp-header annotation");
                        }
                        hidden.insert(name.clone());
                        Headers::Invalid(Refusal::HeaderAnnotationInvalid)
                    }
                },
            };
            let headers = match fact.and_then(|f| f.refused) {
                Some(refusal) if !matches!(headers, Headers::Invalid(_)) => Headers::Invalid(refusal),
                _ => headers,
            };
            let output = fact.and_then(|f| f.output.clone());
            tools.insert(key, name, Entry { headers, output }, self.limits.max_tools);
        }
        hidden
    }

    /// Runs `list` (an upstream listing to `key` that feeds [`Self::learn`]) unless `name`
    /// became known to `key` meanwhile or `key`'s listing completed less than `refetch_after`
    /// ago with no list change since. One listing at a time; the others wait for it, all within
    /// `fetch_timeout`. A JSON-RPC error from the upstream (no `tools/list` there) counts as a
    /// complete listing of no tools.
    pub async fn fetch_once<F, Fut>(&self, key: &PoolKey, name: &str, list: F) -> Result<(), FrontError>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<(), FrontError>>,
    {
        let run = async {
            let mut listed = self.listing.lock().await;
            if self.tools.read().get(key, name).is_some() {
                return Ok(());
            }
            let changes = self.changed.count();
            let recent = |l: &Listed| l.at.elapsed() < self.limits.refetch_after && l.changes == changes;
            if listed.get(key).is_some_and(recent) {
                return Ok(());
            }
            match list().await {
                Ok(()) | Err(FrontError::Upstream(_)) => {
                    // Only recent listings matter: older ones go, so the map stays small.
                    listed.retain(|_, l| recent(l));
                    listed.insert(key.clone(), Listed { at: Instant::now(), changes });
                    Ok(())
                }
                Err(e) => Err(e),
            }
        };
        let bound = self.limits.fetch_timeout;
        tokio::time::timeout(bound, run)
            .await
            .unwrap_or_else(|_| Err(FrontError::UpstreamTimeout(UpstreamError::Timeout(bound))))
    }

    /// Forgets every tool: calls of them list the upstream's tools again.
    pub fn forget(&self) {
        *self.tools.write() = Tools::default();
    }

    /// How many tools the catalogue holds, for all keys.
    pub fn len(&self) -> usize {
        self.tools.read().len
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

// === impl Tools ===

impl Tools {
    fn get(&self, key: &PoolKey, name: &str) -> Option<&Entry> {
        self.by_key.get(key)?.get(name)
    }

    /// Records `name`'s entry for `key`; at `max` entries in all, an arbitrary one makes room.
    fn insert(&mut self, key: &PoolKey, name: String, entry: Entry, max: usize) {
        if self.len >= max && self.get(key, &name).is_none() {
            self.evict_one();
        }
        let tools = self.by_key.entry(key.clone()).or_default();
        if tools.insert(name.into_boxed_str(), entry).is_none() {
            self.len += 1;
        }
    }

    fn evict_one(&mut self) {
        let Some(key) = self.by_key.keys().next().cloned() else { return };
        let Some(tools) = self.by_key.get_mut(&key) else { return };
        if let Some(name) = tools.keys().next().cloned() {
            tools.remove(&name);
            self.len -= 1;
        }
        if tools.is_empty() {
            self.by_key.remove(&key);
        }
    }
}

fn read_annotations(schema: &RawValue) -> Result<Vec<HeaderParam>, AnnotationError> {
    match serde_json::from_str::<Value>(schema.get()) {
        Ok(schema) => header_params(&schema),
        Err(_) => Ok(Vec::new()),
    }
}

/// A call's `arguments` (their JSON text) as the tree its headers are checked against. A member
/// named twice is refused: the check would read one, the server (sent the text) maybe the other.
fn mirrored_arguments(arguments: Option<&str>) -> Result<Option<Value>, FrontError> {
    arguments
        .map(crate::protocol::params::tree_without_repeats)
        .transpose()
        .map_err(|e| FrontError::InvalidParams(format!("params.arguments: {e}")))
}

#[cfg(test)]
mod tests;
