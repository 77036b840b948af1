//! What the demo server offers: its tools, prompt, resource and completions, and which client
//! capability each needs.
//!
//! Like the reference server, a tool that sends a server → client request only exists in a
//! session whose `initialize` declared the capability that request needs; the gateway must
//! therefore declare upstream the capabilities of the client it serves. The names here are a
//! contract with the integration tests and the book (docs/src/getting-started.md lists them).

use serde_json::{json, Value};

use super::resources::COUNTER_URI;
use super::session::ClientCaps;

/// The one prompt.
pub(crate) const GREETING_PROMPT: &str = "greeting_prompt";
/// The one resource.
pub(crate) const PROFILE_URI: &str = "demo://profile";
/// Values `completion/complete` offers for the prompt's `style` argument.
const STYLES: &[&str] = &["formal", "friendly", "funny", "pirate"];

/// Every tool of the demo server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tool {
    Echo,
    Greet,
    ConfirmTwice,
    Summarize,
    ListRoots,
    AskThree,
    CountDown,
    UrlLogin,
    FlakyQuestion,
    Hang,
    Die,
    BumpCounter,
    PlaceOrder,
}

/// The client capability a tool needs before it is offered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Need {
    Nothing,
    Elicitation,
    UrlElicitation,
    Sampling,
    Roots,
    All,
}

// === impl Tool ===

impl Tool {
    pub(crate) const ALL: [Tool; 13] = [
        Tool::Echo,
        Tool::Greet,
        Tool::ConfirmTwice,
        Tool::Summarize,
        Tool::ListRoots,
        Tool::AskThree,
        Tool::CountDown,
        Tool::UrlLogin,
        Tool::FlakyQuestion,
        Tool::Hang,
        Tool::Die,
        Tool::BumpCounter,
        Tool::PlaceOrder,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Tool::Echo => "echo",
            Tool::Greet => "greet",
            Tool::ConfirmTwice => "confirm_twice",
            Tool::Summarize => "summarize",
            Tool::ListRoots => "list_roots",
            Tool::AskThree => "ask_three",
            Tool::CountDown => "count_down",
            Tool::UrlLogin => "url_login",
            Tool::FlakyQuestion => "flaky_question",
            Tool::Hang => "hang",
            Tool::Die => "die",
            Tool::BumpCounter => "bump_counter",
            Tool::PlaceOrder => "place_order",
        }
    }

    pub(crate) fn parse(name: &str) -> Option<Tool> {
        Tool::ALL.into_iter().find(|tool| tool.name() == name)
    }

    /// Position in [`Tool::ALL`], used to index counters.
    pub(crate) fn index(self) -> usize {
        self as usize
    }

    /// Whether a session with these capabilities has this tool.
    pub(crate) fn offered(self, caps: ClientCaps) -> bool {
        match self.need() {
            Need::Nothing => true,
            Need::Elicitation => caps.elicitation,
            Need::UrlElicitation => caps.elicitation_url,
            Need::Sampling => caps.sampling,
            Need::Roots => caps.roots,
            Need::All => caps.elicitation && caps.sampling && caps.roots,
        }
    }

    fn need(self) -> Need {
        match self {
            Tool::Greet | Tool::ConfirmTwice | Tool::FlakyQuestion | Tool::PlaceOrder => Need::Elicitation,
            Tool::UrlLogin => Need::UrlElicitation,
            Tool::Summarize => Need::Sampling,
            Tool::ListRoots => Need::Roots,
            Tool::AskThree => Need::All,
            Tool::Echo | Tool::CountDown | Tool::Hang | Tool::Die | Tool::BumpCounter => Need::Nothing,
        }
    }

    fn description(self) -> &'static str {
        match self {
            Tool::Echo => "Echoes the message back.",
            Tool::Greet => "Asks the user's name (form elicitation) and greets them.",
            Tool::ConfirmTwice => "Asks a name, then asks to confirm it: two sequential elicitations.",
            Tool::Summarize => "Asks the client's model to summarize the text (sampling).",
            Tool::ListRoots => "Lists the client's roots (roots/list on the standalone GET stream).",
            Tool::AskThree => "Sends an elicitation, a sampling request and roots/list at once.",
            Tool::CountDown => "Counts down, sending progress notifications, then answers.",
            Tool::UrlLogin => "Asks the user to log in through a URL-mode elicitation.",
            Tool::FlakyQuestion => "Asks a question that differs on every run.",
            Tool::Hang => "Never answers until cancelled.",
            Tool::Die => "Drops the response stream mid-call, as a crashing server would.",
            Tool::BumpCounter => "Adds one to demo://counter and notifies the sessions subscribed to it.",
            Tool::PlaceOrder => "Places an order (a side effect, counted), then asks for a delivery note.",
        }
    }

    fn input_schema(self) -> Value {
        match self {
            Tool::Echo => object(json!({"message": {"type": "string"}}), &["message"]),
            Tool::Summarize => object(json!({"text": {"type": "string"}}), &["text"]),
            Tool::CountDown => object(
                json!({
                    "steps": {"type": "integer", "minimum": 0, "maximum": 100},
                    "delay_ms": {"type": "integer", "minimum": 0, "maximum": 10000}
                }),
                &["steps"],
            ),
            _ => object(json!({}), &[]),
        }
    }

    fn definition(self) -> Value {
        json!({
            "name": self.name(),
            "description": self.description(),
            "inputSchema": self.input_schema(),
        })
    }
}

fn object(properties: Value, required: &[&str]) -> Value {
    json!({"type": "object", "properties": properties, "required": required})
}

/// The `tools/list` result for a session.
pub(crate) fn tools_list(caps: ClientCaps) -> Value {
    let tools: Vec<Value> =
        Tool::ALL.into_iter().filter(|tool| tool.offered(caps)).map(Tool::definition).collect();
    json!({ "tools": tools })
}

/// The prompt and the resource ask a name, so they exist only with elicitation.
fn has_elicitation_content(caps: ClientCaps) -> bool {
    caps.elicitation
}

/// The `prompts/list` result for a session.
pub(crate) fn prompts_list(caps: ClientCaps) -> Value {
    if !has_elicitation_content(caps) {
        return json!({"prompts": []});
    }
    json!({"prompts": [{
        "name": GREETING_PROMPT,
        "description": "Asks the user's name and writes a greeting request in the chosen style.",
        "arguments": [{"name": "style", "description": "Tone of the greeting", "required": false}],
    }]})
}

/// Whether `prompts/get` may serve this prompt in this session.
pub(crate) fn prompt_offered(name: &str, caps: ClientCaps) -> bool {
    name == GREETING_PROMPT && has_elicitation_content(caps)
}

/// The `resources/list` result for a session: the profile where elicitation is declared, and
/// the counter (its value in its description, so the list changes with it).
pub(crate) fn resources_list(caps: ClientCaps, counter: u64) -> Value {
    let mut resources = Vec::with_capacity(2);
    if has_elicitation_content(caps) {
        resources.push(json!({
            "uri": PROFILE_URI,
            "name": "profile",
            "description": "A profile that asks whose it is when read.",
            "mimeType": "text/plain",
        }));
    }
    resources.push(json!({
        "uri": COUNTER_URI,
        "name": "counter",
        "description": format!("A counter that bump_counter adds one to; now {counter}."),
        "mimeType": "text/plain",
    }));
    json!({ "resources": resources })
}

/// Whether `resources/read` (and `resources/subscribe`) may serve this URI in this session.
pub(crate) fn resource_offered(uri: &str, caps: ClientCaps) -> bool {
    uri == COUNTER_URI || (uri == PROFILE_URI && has_elicitation_content(caps))
}

/// The `resources/templates/list` result: the demo has no templates.
pub(crate) fn resource_templates_list() -> Value {
    json!({"resourceTemplates": []})
}

/// The `completion/complete` result; `None` when the reference names no prompt of ours.
pub(crate) fn complete(params: Option<&Value>) -> Option<Value> {
    let params = params?;
    let reference = params.get("ref")?;
    let is_ours = reference.get("type").and_then(Value::as_str) == Some("ref/prompt")
        && reference.get("name").and_then(Value::as_str) == Some(GREETING_PROMPT);
    if !is_ours {
        return None;
    }
    let argument = params.get("argument");
    let name = argument.and_then(|a| a.get("name")).and_then(Value::as_str);
    let prefix = argument.and_then(|a| a.get("value")).and_then(Value::as_str).unwrap_or("");
    let values: Vec<&str> = match name {
        Some("style") => STYLES.iter().copied().filter(|s| s.starts_with(prefix)).collect(),
        _ => Vec::new(),
    };
    Some(json!({"completion": {"values": values, "total": values.len(), "hasMore": false}}))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &Value) -> Vec<&str> {
        list["tools"].as_array().unwrap().iter().map(|tool| tool["name"].as_str().unwrap()).collect()
    }

    #[test]
    fn tools_are_gated_by_capability() {
        let bare = tools_list(ClientCaps::default());
        assert_eq!(names(&bare), ["echo", "count_down", "hang", "die", "bump_counter"]);
        let full = ClientCaps { elicitation: true, elicitation_url: true, sampling: true, roots: true };
        assert_eq!(names(&tools_list(full)).len(), Tool::ALL.len());
        let form_only = ClientCaps { elicitation: true, ..ClientCaps::default() };
        let listed = tools_list(form_only);
        assert!(names(&listed).contains(&"greet"));
        assert!(!names(&listed).contains(&"url_login"));
        assert!(!names(&listed).contains(&"ask_three"));
    }

    #[test]
    fn names_round_trip_and_index_matches_position() {
        for (position, tool) in Tool::ALL.into_iter().enumerate() {
            assert_eq!(Tool::parse(tool.name()), Some(tool));
            assert_eq!(tool.index(), position);
        }
        assert_eq!(Tool::parse("nope"), None);
    }

    #[test]
    fn completion_filters_styles_by_prefix() {
        let params = json!({
            "ref": {"type": "ref/prompt", "name": GREETING_PROMPT},
            "argument": {"name": "style", "value": "f"}
        });
        let result = complete(Some(&params)).unwrap();
        assert_eq!(result["completion"]["values"], json!(["formal", "friendly", "funny"]));
        let other = json!({"ref": {"type": "ref/prompt", "name": "other"}, "argument": {}});
        assert!(complete(Some(&other)).is_none());
    }
}
