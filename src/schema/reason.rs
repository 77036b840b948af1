//! The fixed reasons of every repair and refusal: each is a metric label, a key of the
//! migration report (`GET /admin/tools`) and a word of the log line, so they are closed enums
//! with snake_case spellings that never come from input. `docs/src/schema-repairs.md` has the
//! table of what each one means.

/// A change the gateway made to what it relays so that it is valid 2026-07-28, without
/// changing what it means.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Repair {
    /// A tool's `inputSchema` had no `type` (or there was no `inputSchema`): `"type": "object"`
    /// was added, which is what tool arguments always are.
    InputTypeAdded,
    /// A tool's `outputSchema` had no `type`: `"type": "object"` was added (a legacy
    /// `structuredContent` is always an object).
    OutputTypeAdded,
    /// A field the 2026-07-28 schema no longer has (a tool's `execution`) was removed.
    ObsoleteFieldDropped,
    /// An optional field whose value the 2026-07-28 schema does not allow was removed.
    InvalidFieldDropped,
    /// A tool name that cannot travel as a plain `Mcp-Name` header value was encoded.
    NameEncoded,
    /// An elicitation's `requestedSchema` had no `type`: `"type": "object"` was added.
    QuestionTypeAdded,
}

/// Why the gateway refused something a legacy server sent: a tool left out of `tools/list`,
/// a list item left out, a result or a question refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Refusal {
    /// An item without a usable name (absent, not a string, empty), or not an object at all.
    NameInvalid,
    /// A tool's `inputSchema` is not an object or not a valid JSON Schema.
    InputSchemaInvalid,
    /// A tool's `inputSchema` describes something other than an object.
    InputSchemaNotObject,
    /// A tool's `outputSchema` is not an object or not a valid JSON Schema (a `$ref` that does
    /// not resolve inside it included).
    OutputSchemaInvalid,
    /// A tool that can only be called as a legacy task (`execution.taskSupport: "required"`).
    TaskRequired,
    /// A tool whose `x-mcp-header` annotations are invalid.
    HeaderAnnotationInvalid,
    /// A resource without a usable `uri` (a template without a `uriTemplate`).
    UriInvalid,
    /// A tool result whose `structuredContent` does not match the tool's `outputSchema`.
    StructuredContentInvalid,
    /// A question (elicitation, sampling) that is not valid 2026-07-28.
    QuestionInvalid,
}

/// One repair or refusal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Finding {
    Repair(Repair),
    Refusal(Refusal),
}

/// The list a prompt or resource finding is counted under (tools are counted per tool).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ListKind {
    Prompts,
    Resources,
    ResourceTemplates,
}

// === impl Repair ===

impl Repair {
    pub const ALL: [Self; 6] = [
        Self::InputTypeAdded,
        Self::OutputTypeAdded,
        Self::ObsoleteFieldDropped,
        Self::InvalidFieldDropped,
        Self::NameEncoded,
        Self::QuestionTypeAdded,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::InputTypeAdded => "input_type_added",
            Self::OutputTypeAdded => "output_type_added",
            Self::ObsoleteFieldDropped => "obsolete_field_dropped",
            Self::InvalidFieldDropped => "invalid_field_dropped",
            Self::NameEncoded => "name_encoded",
            Self::QuestionTypeAdded => "question_type_added",
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }
}

// === impl Refusal ===

impl Refusal {
    pub const ALL: [Self; 9] = [
        Self::NameInvalid,
        Self::InputSchemaInvalid,
        Self::InputSchemaNotObject,
        Self::OutputSchemaInvalid,
        Self::TaskRequired,
        Self::HeaderAnnotationInvalid,
        Self::UriInvalid,
        Self::StructuredContentInvalid,
        Self::QuestionInvalid,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::NameInvalid => "name_invalid",
            Self::InputSchemaInvalid => "input_schema_invalid",
            Self::InputSchemaNotObject => "input_schema_not_object",
            Self::OutputSchemaInvalid => "output_schema_invalid",
            Self::TaskRequired => "task_required",
            Self::HeaderAnnotationInvalid => "header_annotation_invalid",
            Self::UriInvalid => "uri_invalid",
            Self::StructuredContentInvalid => "structured_content_invalid",
            Self::QuestionInvalid => "question_invalid",
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }

    /// What is wrong, in words a client may read (nothing the upstream wrote).
    pub fn describe(self) -> &'static str {
        match self {
            Self::NameInvalid => "it has no usable name",
            Self::InputSchemaInvalid => "its inputSchema is not a valid JSON Schema object",
            Self::InputSchemaNotObject => "its inputSchema does not describe an object",
            Self::OutputSchemaInvalid => "its outputSchema is not a valid JSON Schema",
            Self::TaskRequired => "it can only be called as a legacy task",
            Self::HeaderAnnotationInvalid => "its x-mcp-header annotations are invalid",
            Self::UriInvalid => "it has no usable URI",
            Self::StructuredContentInvalid => "its structuredContent does not match its outputSchema",
            Self::QuestionInvalid => "it asked a question that is not valid MCP 2026-07-28",
        }
    }
}

// === impl Finding ===

impl Finding {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Repair(r) => r.as_str(),
            Self::Refusal(r) => r.as_str(),
        }
    }
}

// === impl ListKind ===

impl ListKind {
    pub const ALL: [Self; 3] = [Self::Prompts, Self::Resources, Self::ResourceTemplates];

    /// The report's key, and (in parentheses) the metric's `tool` label.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Prompts => "prompts",
            Self::Resources => "resources",
            Self::ResourceTemplates => "resource_templates",
        }
    }

    /// The `tool` label of this list's series: parenthesised, like the report's `(other)`.
    pub fn label(self) -> &'static str {
        match self {
            Self::Prompts => "(prompts)",
            Self::Resources => "(resources)",
            Self::ResourceTemplates => "(resource_templates)",
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indexes_follow_all_and_spellings_are_snake_case() {
        for (i, r) in Repair::ALL.into_iter().enumerate() {
            assert_eq!(r.index(), i);
        }
        for (i, r) in Refusal::ALL.into_iter().enumerate() {
            assert_eq!(r.index(), i);
        }
        let words = Repair::ALL.iter().map(|r| r.as_str()).chain(Refusal::ALL.iter().map(|r| r.as_str()));
        for word in words {
            assert!(word.chars().all(|c| c.is_ascii_lowercase() || c == '_'), "{word}");
        }
    }
}
