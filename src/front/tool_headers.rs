//! The per-replica catalogue of the upstream's tool header annotations (`x-mcp-header`), so that
//! a `tools/call` can be checked against its `Mcp-Param-*` headers without asking the upstream
//! each time.
//!
//! It is filled from every relayed `tools/list` page ([`ToolHeaders::learn`]), and when a call
//! names a tool it has not seen, from one upstream listing shared by every caller that waits
//! for it ([`ToolHeaders::fetch_once`]: single-flight, bounded in time, and not repeated for a
//! while after a complete listing, so calls naming unknown tools cannot make the gateway list
//! the upstream's tools once each). A `notifications/tools/list_changed` that reaches the
//! gateway on any upstream session empties it ([`ToolsChanged`]). A tool without annotations
//! costs an atomic load and one hash lookup under a read lock on the call's path. The catalogue is bounded: past
//! [`defaults::TOOL_HEADERS_MAX_TOOLS`] an arbitrary entry makes room.

mod annotation;

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

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
use crate::upstream::{ToolsChanged, UpstreamError};

/// What the catalogue knows about one tool.
#[derive(Debug)]
enum Entry {
    /// No `x-mcp-header` annotation: nothing to check.
    Plain,
    Mirrored(Box<[HeaderParam]>),
    /// Left out of `tools/list`; a call to it is refused.
    Invalid,
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
    tools: RwLock<HashMap<Box<str>, Entry>>,
    /// Held while one caller lists the upstream's tools; holds the last complete listing.
    listing: Mutex<Option<Listed>>,
    limits: Limits,
    changed: ToolsChanged,
    /// The count of `changed` the entries are from.
    seen: AtomicU64,
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
    name: String,
    #[serde(rename = "inputSchema", borrow, default)]
    input_schema: Option<&'a RawValue>,
}

// === impl ToolHeaders ===

impl ToolHeaders {
    /// An empty catalogue, emptied again whenever `changed` counts a change.
    pub fn new(limits: Limits, changed: ToolsChanged) -> Self {
        let seen = AtomicU64::new(changed.count());
        Self { tools: RwLock::new(HashMap::new()), listing: Mutex::new(None), limits, changed, seen }
    }

    /// Forgets every tool once the upstream said its tools changed.
    fn follow_changes(&self) {
        let now = self.changed.count();
        // A load first: the call path only reads, and the shared line stays unwritten.
        if self.seen.load(Ordering::Acquire) != now && self.seen.swap(now, Ordering::AcqRel) != now {
            self.forget();
        }
    }

    /// Checks a `tools/call` of `name`'s headers against its `arguments`; `None` when the
    /// catalogue has not seen the tool.
    pub fn check(
        &self,
        name: &str,
        map: &HeaderMap,
        arguments: Option<&Value>,
    ) -> Option<Result<(), FrontError>> {
        self.follow_changes();
        let tools = self.tools.read();
        Some(match tools.get(name)? {
            Entry::Plain => Ok(()),
            Entry::Mirrored(params) => validate::check_params(map, params, arguments),
            Entry::Invalid => Err(FrontError::InvalidParams(format!(
                "tool {name:?} is not available: its x-mcp-header annotations are invalid"
            ))),
        })
    }

    /// Records the annotations of every tool of one `tools/list` page; returns the names of the
    /// tools whose annotations are invalid (to leave out), logging each one once.
    pub fn learn(&self, page: &RawValue) -> HashSet<String> {
        self.follow_changes();
        let Ok(page) = serde_json::from_str::<Page<'_>>(page.get()) else { return HashSet::new() };
        let mut hidden = HashSet::new();
        let mut tools = self.tools.write();
        for tool in page.tools {
            let entry = match tool.input_schema.filter(|s| s.get().contains(annotation::KEYWORD)) {
                None => Entry::Plain,
                Some(schema) => match read_annotations(schema) {
                    Ok(params) if params.is_empty() => Entry::Plain,
                    Ok(params) => Entry::Mirrored(params.into()),
                    Err(reason) => {
                        if !matches!(tools.get(tool.name.as_str()), Some(Entry::Invalid)) {
                            tracing::warn!(tool = %tool.name, %reason, "left a tool out of tools/list: invalid x-mcp-header annotation");
                        }
                        hidden.insert(tool.name.clone());
                        Entry::Invalid
                    }
                },
            };
            self.insert(&mut tools, tool.name, entry);
        }
        hidden
    }

    fn insert(&self, tools: &mut HashMap<Box<str>, Entry>, name: String, entry: Entry) {
        if tools.len() >= self.limits.max_tools && !tools.contains_key(name.as_str()) {
            let evicted = tools.keys().next().cloned();
            if let Some(key) = evicted {
                tools.remove(&key);
            }
        }
        tools.insert(name.into_boxed_str(), entry);
    }

    /// Runs `list` (an upstream listing that feeds [`Self::learn`]) unless `name` became known
    /// meanwhile or a listing completed less than `refetch_after` ago with no list change since. One listing at a time;
    /// the others wait for it, all within `fetch_timeout`. A JSON-RPC error from the upstream
    /// (no `tools/list` there) counts as a complete listing of no tools.
    pub async fn fetch_once<F, Fut>(&self, name: &str, list: F) -> Result<(), FrontError>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<(), FrontError>>,
    {
        let run = async {
            let mut last = self.listing.lock().await;
            if self.tools.read().contains_key(name) {
                return Ok(());
            }
            let changes = self.changed.count();
            let recent = |l: &Listed| l.at.elapsed() < self.limits.refetch_after && l.changes == changes;
            if last.as_ref().is_some_and(recent) {
                return Ok(());
            }
            match list().await {
                Ok(()) | Err(FrontError::Upstream(_)) => {
                    *last = Some(Listed { at: Instant::now(), changes });
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
        self.tools.write().clear();
    }

    /// How many tools the catalogue holds.
    pub fn len(&self) -> usize {
        self.tools.read().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn read_annotations(schema: &RawValue) -> Result<Vec<HeaderParam>, AnnotationError> {
    match serde_json::from_str::<Value>(schema.get()) {
        Ok(schema) => header_params(&schema),
        Err(_) => Ok(Vec::new()),
    }
}

#[cfg(test)]
mod tests;
