//! Method names of both protocol eras and their classification for the front.

/// Client → server methods of 2026-07-28.
pub const DISCOVER: &str = "server/discover";
pub const TOOLS_CALL: &str = "tools/call";
pub const TOOLS_LIST: &str = "tools/list";
pub const PROMPTS_GET: &str = "prompts/get";
pub const PROMPTS_LIST: &str = "prompts/list";
pub const RESOURCES_READ: &str = "resources/read";
pub const RESOURCES_LIST: &str = "resources/list";
pub const RESOURCES_TEMPLATES_LIST: &str = "resources/templates/list";
pub const COMPLETION_COMPLETE: &str = "completion/complete";
pub const SUBSCRIPTIONS_LISTEN: &str = "subscriptions/listen";
/// The tasks extension's methods (`io.modelcontextprotocol/tasks`).
pub const TASKS_GET: &str = "tasks/get";
pub const TASKS_UPDATE: &str = "tasks/update";
pub const TASKS_CANCEL: &str = "tasks/cancel";

/// Server → client requests of the legacy era (embedded as `inputRequests` in 2026-07-28).
pub const ELICITATION_CREATE: &str = "elicitation/create";
pub const SAMPLING_CREATE_MESSAGE: &str = "sampling/createMessage";
pub const ROOTS_LIST: &str = "roots/list";

/// Legacy lifecycle and utility methods.
pub const INITIALIZE: &str = "initialize";
pub const INITIALIZED: &str = "notifications/initialized";
pub const PING: &str = "ping";
pub const CANCELLED: &str = "notifications/cancelled";
pub const PROGRESS: &str = "notifications/progress";
pub const MESSAGE: &str = "notifications/message";
/// Legacy (2025-11-25) completion of a URL elicitation; removed in 2026-07-28.
pub const ELICITATION_COMPLETE: &str = "notifications/elicitation/complete";
pub const TOOLS_LIST_CHANGED: &str = "notifications/tools/list_changed";
pub const PROMPTS_LIST_CHANGED: &str = "notifications/prompts/list_changed";
pub const RESOURCES_LIST_CHANGED: &str = "notifications/resources/list_changed";
pub const RESOURCES_UPDATED: &str = "notifications/resources/updated";
/// Legacy (2025-11-25) experimental tasks: the request that waits for a task's result (and
/// carries its questions); the extension removed it.
pub const TASKS_RESULT: &str = "tasks/result";
/// Legacy resource subscriptions, which `subscriptions/listen` is bridged onto.
pub const RESOURCES_SUBSCRIBE: &str = "resources/subscribe";
pub const RESOURCES_UNSUBSCRIBE: &str = "resources/unsubscribe";

/// The four list methods whose results name tools, prompts, resources and resource templates:
/// what the authorization rules filter and the check compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListMethod {
    Tools,
    Prompts,
    Resources,
    Templates,
}

// === impl ListMethod ===

impl ListMethod {
    pub const ALL: [Self; 4] = [Self::Tools, Self::Prompts, Self::Resources, Self::Templates];

    /// The list method named `method`, if it is one.
    pub fn of(method: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|kind| kind.method() == method)
    }

    pub fn method(self) -> &'static str {
        match self {
            Self::Tools => TOOLS_LIST,
            Self::Prompts => PROMPTS_LIST,
            Self::Resources => RESOURCES_LIST,
            Self::Templates => RESOURCES_TEMPLATES_LIST,
        }
    }

    /// The field of the result holding the list.
    pub fn field(self) -> &'static str {
        match self {
            Self::Tools => "tools",
            Self::Prompts => "prompts",
            Self::Resources => "resources",
            Self::Templates => "resourceTemplates",
        }
    }

    /// The field of an item that names it.
    pub fn key(self) -> &'static str {
        match self {
            Self::Tools | Self::Prompts => "name",
            Self::Resources => "uri",
            Self::Templates => "uriTemplate",
        }
    }

    /// The method that uses a listed item.
    pub fn call(self) -> &'static str {
        match self {
            Self::Tools => TOOLS_CALL,
            Self::Prompts => PROMPTS_GET,
            Self::Resources | Self::Templates => RESOURCES_READ,
        }
    }
}
/// The first message of a 2026-07-28 listen stream.
pub const SUBSCRIPTIONS_ACKNOWLEDGED: &str = "notifications/subscriptions/acknowledged";

/// How the front treats a client method.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FrontMethod {
    /// `server/discover`, synthesised by the gateway.
    Discover,
    /// A method that may answer `input_required` (`tools/call`, `prompts/get`, `resources/read`).
    Mrtr(MrtrMethod),
    /// A relayed method that must never answer `input_required`.
    Relay(RelayMethod),
    /// `subscriptions/listen`: a long-lived stream of notifications.
    Listen,
    /// A method of the tasks extension, about one task.
    Task(TaskMethod),
}

/// The tasks extension's methods (the legacy `tasks/result` and `tasks/list` are not among
/// them: the extension removed both).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TaskMethod {
    Get,
    Update,
    Cancel,
}

/// The three methods that may return `input_required` (SEP-2322).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MrtrMethod {
    ToolsCall,
    PromptsGet,
    ResourcesRead,
}

/// Relayed list-like methods.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RelayMethod {
    ToolsList,
    PromptsList,
    ResourcesList,
    ResourcesTemplatesList,
    CompletionComplete,
}

impl FrontMethod {
    /// Classifies a 2026-07-28 client method; `None` for unknown or removed methods.
    pub fn parse(method: &str) -> Option<Self> {
        Some(match method {
            DISCOVER => Self::Discover,
            TOOLS_CALL => Self::Mrtr(MrtrMethod::ToolsCall),
            PROMPTS_GET => Self::Mrtr(MrtrMethod::PromptsGet),
            RESOURCES_READ => Self::Mrtr(MrtrMethod::ResourcesRead),
            TOOLS_LIST => Self::Relay(RelayMethod::ToolsList),
            PROMPTS_LIST => Self::Relay(RelayMethod::PromptsList),
            RESOURCES_LIST => Self::Relay(RelayMethod::ResourcesList),
            RESOURCES_TEMPLATES_LIST => Self::Relay(RelayMethod::ResourcesTemplatesList),
            COMPLETION_COMPLETE => Self::Relay(RelayMethod::CompletionComplete),
            SUBSCRIPTIONS_LISTEN => Self::Listen,
            TASKS_GET => Self::Task(TaskMethod::Get),
            TASKS_UPDATE => Self::Task(TaskMethod::Update),
            TASKS_CANCEL => Self::Task(TaskMethod::Cancel),
            _ => return None,
        })
    }

    /// The fixed metric label of this method.
    pub fn label(self) -> &'static str {
        match self {
            Self::Discover => DISCOVER,
            Self::Mrtr(m) => m.name(),
            Self::Relay(r) => r.name(),
            Self::Listen => SUBSCRIPTIONS_LISTEN,
            Self::Task(t) => t.name(),
        }
    }
}

impl TaskMethod {
    /// The wire name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Get => TASKS_GET,
            Self::Update => TASKS_UPDATE,
            Self::Cancel => TASKS_CANCEL,
        }
    }
}

impl MrtrMethod {
    /// The wire name.
    pub fn name(self) -> &'static str {
        match self {
            Self::ToolsCall => TOOLS_CALL,
            Self::PromptsGet => PROMPTS_GET,
            Self::ResourcesRead => RESOURCES_READ,
        }
    }

    /// A stable one-byte code, used inside sealed state.
    pub fn code(self) -> u8 {
        match self {
            Self::ToolsCall => 1,
            Self::PromptsGet => 2,
            Self::ResourcesRead => 3,
        }
    }

    /// The `params` field naming the target (`Mcp-Name` source).
    pub fn target_field(self) -> &'static str {
        match self {
            Self::ToolsCall | Self::PromptsGet => "name",
            Self::ResourcesRead => "uri",
        }
    }

    /// The `params` field holding the arguments bound into the state digest, if any.
    pub fn arguments_field(self) -> Option<&'static str> {
        match self {
            Self::ToolsCall | Self::PromptsGet => Some("arguments"),
            Self::ResourcesRead => None,
        }
    }
}

impl RelayMethod {
    /// The wire name.
    pub fn name(self) -> &'static str {
        match self {
            Self::ToolsList => TOOLS_LIST,
            Self::PromptsList => PROMPTS_LIST,
            Self::ResourcesList => RESOURCES_LIST,
            Self::ResourcesTemplatesList => RESOURCES_TEMPLATES_LIST,
            Self::CompletionComplete => COMPLETION_COMPLETE,
        }
    }

    /// Whether the 2026-07-28 result must carry `ttlMs`/`cacheScope` (caching.mdx).
    pub fn cacheable(self) -> bool {
        !matches!(self, Self::CompletionComplete)
    }
}

/// True for the server → client request methods MRTR can embed.
pub fn is_input_method(method: &str) -> bool {
    matches!(method, ELICITATION_CREATE | SAMPLING_CREATE_MESSAGE | ROOTS_LIST)
}
