//! The four lists the check reads on each side (tools, prompts, resources, resource
//! templates), page by page, and what each item is called. The two sides differ only in how
//! one page is asked for ([`Lister`]): a legacy session directly, a 2026-07-28 request through
//! the gateway.

use serde_json::{json, Value};

use super::report::{Counts, ListError};

/// Most pages read of one list: a server whose cursor never ends cannot hold the check.
const MAX_PAGES: usize = 64;

/// One of the lists.
pub(super) use crate::protocol::methods::ListMethod as ListKind;

/// The items of each list; `None` for a list not offered, or that failed.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Items {
    pub tools: Option<Vec<Value>>,
    pub prompts: Option<Vec<Value>>,
    pub resources: Option<Vec<Value>>,
    pub templates: Option<Vec<Value>>,
}

/// Asks one page of a list.
pub(super) trait Lister {
    /// The result of `method` with `cursor`, or why it failed.
    async fn page(&self, method: &'static str, cursor: Option<&str>) -> Result<Value, String>;
}

// === impl ListKind ===

/// What the check needs of a list beyond its method.
pub(super) trait ListInfo {
    /// The server capability that offers it.
    fn capability(self) -> &'static str;
    /// Its name in the report.
    fn label(self) -> &'static str;
    /// What one of its items is called in the report's differences.
    fn item(self) -> &'static str;
    /// The name of one of its items (empty when it has none).
    fn name_of(self, item: &Value) -> String;
}

impl ListInfo for ListKind {
    fn capability(self) -> &'static str {
        match self {
            Self::Tools => "tools",
            Self::Prompts => "prompts",
            Self::Resources | Self::Templates => "resources",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Self::Tools => "tools",
            Self::Prompts => "prompts",
            Self::Resources => "resources",
            Self::Templates => "resource_templates",
        }
    }

    fn item(self) -> &'static str {
        match self {
            Self::Tools => "tool",
            Self::Prompts => "prompt",
            Self::Resources => "resource",
            Self::Templates => "resource_template",
        }
    }

    fn name_of(self, item: &Value) -> String {
        item.get(self.key()).and_then(Value::as_str).unwrap_or_default().to_owned()
    }
}

// === impl Items ===

impl Items {
    pub(super) fn get(&self, kind: ListKind) -> Option<&Vec<Value>> {
        match kind {
            ListKind::Tools => self.tools.as_ref(),
            ListKind::Prompts => self.prompts.as_ref(),
            ListKind::Resources => self.resources.as_ref(),
            ListKind::Templates => self.templates.as_ref(),
        }
    }

    fn slot(&mut self, kind: ListKind) -> &mut Option<Vec<Value>> {
        match kind {
            ListKind::Tools => &mut self.tools,
            ListKind::Prompts => &mut self.prompts,
            ListKind::Resources => &mut self.resources,
            ListKind::Templates => &mut self.templates,
        }
    }

    pub(super) fn counts(&self) -> Counts {
        Counts {
            tools: self.tools.as_ref().map(Vec::len),
            prompts: self.prompts.as_ref().map(Vec::len),
            resources: self.resources.as_ref().map(Vec::len),
            resource_templates: self.templates.as_ref().map(Vec::len),
        }
    }

    /// The tool named `name`, if listed.
    pub(super) fn tool(&self, name: &str) -> Option<&Value> {
        self.tools.as_ref()?.iter().find(|t| ListKind::Tools.name_of(t) == name)
    }
}

/// Reads every list `capabilities` offers, through `lister`.
pub(super) async fn read_all(lister: &impl Lister, capabilities: &Value) -> (Items, Vec<ListError>) {
    let mut items = Items::default();
    let mut errors = Vec::new();
    for kind in ListKind::ALL {
        if capabilities.get(kind.capability()).is_none() {
            continue;
        }
        match read(lister, kind).await {
            Ok(list) => *items.slot(kind) = Some(list),
            Err(message) => errors.push(ListError { list: kind.label(), message }),
        }
    }
    (items, errors)
}

async fn read(lister: &impl Lister, kind: ListKind) -> Result<Vec<Value>, String> {
    let mut all = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let page = lister.page(kind.method(), cursor.as_deref()).await?;
        match page.get(kind.field()) {
            Some(Value::Array(items)) => all.extend(items.iter().cloned()),
            _ => return Err(format!("the result has no `{}` list", kind.field())),
        }
        cursor = page.get("nextCursor").and_then(Value::as_str).map(str::to_owned);
        if cursor.is_none() {
            return Ok(all);
        }
    }
    Err(format!("more than {MAX_PAGES} pages"))
}

/// The params of a list request for `cursor`.
pub(super) fn params(cursor: Option<&str>) -> Value {
    match cursor {
        Some(c) => json!({ "cursor": c }),
        None => json!({}),
    }
}
