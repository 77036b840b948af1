//! Authorization: `[[auth.rules]]` compiled once into patterns, the rules that apply to one
//! principal (its [`Grants`], chosen by its scopes and claims when it authenticates), the check
//! of one call, and the filter that leaves out of a list result what the principal may not use.
//!
//! A rule applies to a principal holding all its scopes and all its claims; it allows the
//! methods it names (default every method) and, for a method that targets something
//! (`tools/call`, `prompts/get`, `resources/read`, `completion/complete`,
//! `resources/subscribe`, `resources/unsubscribe`), only the tools, prompts and resources it
//! names. With no rules configured everything is allowed; with rules, what no applicable rule
//! allows is refused, whichever entrance (2026-07-28 or legacy) and whichever method: a method
//! the 2026-07-28 front does not know (`logging/setLevel`, say) is checked like any other.
//!
//! A rule's `deny_*` lists win over every allow: a tool, prompt or resource that any applicable
//! rule denies is refused and left out of lists, whatever the other rules allow. A principal
//! gains rules by holding more scopes and never loses one, so no scope lifts a deny: a refusal
//! by a deny names no scope in its challenge.
//!
//! Always allowed, because a client cannot speak at all without them and they reach nothing of
//! the upstream's: `server/discover`, `initialize`, `ping`, notifications (`notifications/…`),
//! and a legacy client's JSON-RPC responses (its answers to the server's requests, which carry
//! no method).

use std::collections::BTreeSet;
use std::sync::Arc;

use http::HeaderValue;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::glob::Pattern;
use crate::config::RuleConfig;
use crate::legacy::LegacyBody;
use crate::protocol::log_level::SET_LEVEL;
use crate::protocol::methods::{self, ListMethod};

/// The compiled rules.
#[derive(Debug)]
pub struct Policy {
    rules: Vec<Rule>,
    /// `resource_metadata="…"` for the challenge, when the metadata document is served.
    metadata_url: Option<String>,
    /// Whether clients authenticate with bearer tokens, so that a refusal carries a challenge.
    bearer: bool,
}

#[derive(Debug)]
struct Rule {
    scopes: Vec<String>,
    claims: Vec<(String, String)>,
    methods: Vec<Pattern>,
    allow: Names,
    deny: Names,
}

/// Patterns of tool names, prompt names and resource URIs.
#[derive(Debug)]
struct Names {
    tools: Vec<Pattern>,
    prompts: Vec<Pattern>,
    resources: Vec<Pattern>,
}

/// What one call targets, for the rule lists that govern it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target<'a> {
    None,
    Tool(&'a str),
    Prompt(&'a str),
    Resource(&'a str),
}

/// The rules that apply to one principal; `policy: None` allows everything. Cloned per
/// request, so the indices are shared rather than copied.
#[derive(Debug, Clone, Default)]
pub struct Grants {
    policy: Option<Arc<Policy>>,
    rules: Arc<[usize]>,
}

/// A call outside the principal's rules: the client's message and the 403 challenge (none
/// without authentication: no token would change the answer).
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct Denied {
    pub message: String,
    pub challenge: Option<HeaderValue>,
    /// The method refused (a fixed name), for the metric.
    pub method: &'static str,
}

// === impl Policy ===

impl Policy {
    /// Compiles `rules`; `None` when there are none (everything allowed).
    pub fn compile(rules: &[RuleConfig], metadata_url: Option<String>) -> Option<Arc<Self>> {
        if rules.is_empty() {
            return None;
        }
        let patterns = |v: &[String]| v.iter().map(|p| Pattern::new(p)).collect::<Vec<_>>();
        let names = |tools: &[String], prompts: &[String], resources: &[String]| Names {
            tools: patterns(tools),
            prompts: patterns(prompts),
            resources: patterns(resources),
        };
        let rules = rules
            .iter()
            .map(|r| Rule {
                scopes: r.scopes.clone(),
                claims: r.claims.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
                methods: patterns(&r.methods),
                allow: names(&r.tools, &r.prompts, &r.resources),
                deny: names(&r.deny_tools, &r.deny_prompts, &r.deny_resources),
            })
            .collect();
        Some(Arc::new(Self { rules, metadata_url, bearer: true }))
    }

    /// Compiles the rules of a gateway without authentication: they hold every client alike,
    /// and a refusal carries no bearer challenge.
    pub fn compile_anonymous(rules: &[RuleConfig]) -> Option<Arc<Self>> {
        let mut policy = Arc::into_inner(Self::compile(rules, None)?)?;
        policy.bearer = false;
        Some(Arc::new(policy))
    }

    /// The grants of a principal with these token claims.
    pub fn grants(self: &Arc<Self>, claims: &Map<String, Value>) -> Grants {
        let scopes = scopes(claims);
        let rules = (0..self.rules.len()).filter(|&i| self.rules[i].applies(&scopes, claims)).collect();
        Grants { policy: Some(self.clone()), rules }
    }

    /// The refusal of `method` on `target`; `by_deny` when a rule of the principal's denies it,
    /// which no further scope would lift.
    fn denied(&self, method: &str, target: Target<'_>, by_deny: bool) -> Denied {
        // The scopes of every rule that would allow this call: what the client could ask for.
        let wanted: BTreeSet<&str> = match by_deny {
            true => BTreeSet::new(),
            false => self
                .rules
                .iter()
                .filter(|r| r.allows(method, target))
                .flat_map(|r| r.scopes.iter().map(String::as_str))
                .collect(),
        };
        let mut challenge = String::from(r#"Bearer error="insufficient_scope""#);
        if !wanted.is_empty() {
            challenge.push_str(&format!(r#", scope="{}""#, wanted.into_iter().collect::<Vec<_>>().join(" ")));
        }
        if let Some(url) = &self.metadata_url {
            challenge.push_str(&format!(r#", resource_metadata="{url}""#));
        }
        let what = match target {
            Target::None => String::new(),
            Target::Tool(n) => format!(" of tool {:?}", clip(n)),
            Target::Prompt(n) => format!(" of prompt {:?}", clip(n)),
            Target::Resource(u) => format!(" of resource {:?}", clip(u)),
        };
        Denied {
            message: format!("forbidden: {}{what} is outside this client's authorization", fixed(method)),
            challenge: self.bearer.then(|| {
                HeaderValue::from_str(&challenge)
                    .unwrap_or(HeaderValue::from_static(r#"Bearer error="insufficient_scope""#))
            }),
            method: fixed(method),
        }
    }
}

// === impl Rule ===

impl Rule {
    fn applies(&self, scopes: &BTreeSet<&str>, claims: &Map<String, Value>) -> bool {
        self.scopes.iter().all(|s| scopes.contains(s.as_str()))
            && self.claims.iter().all(|(k, v)| claims.get(k).is_some_and(|c| claim_has(c, v)))
    }

    fn allows(&self, method: &str, target: Target<'_>) -> bool {
        self.methods.iter().any(|p| p.matches(method)) && self.allow.names(target).unwrap_or(true)
    }

    fn denies(&self, target: Target<'_>) -> bool {
        self.deny.names(target).unwrap_or(false)
    }
}

// === impl Names ===

impl Names {
    /// Whether a pattern names `target`; `None` for a method that targets nothing.
    fn names(&self, target: Target<'_>) -> Option<bool> {
        let any = |ps: &[Pattern], s: &str| ps.iter().any(|p| p.matches(s));
        match target {
            Target::None => None,
            Target::Tool(n) => Some(any(&self.tools, n)),
            Target::Prompt(n) => Some(any(&self.prompts, n)),
            Target::Resource(u) => Some(any(&self.resources, u)),
        }
    }
}

// === impl Grants ===

impl Grants {
    /// Everything allowed (no rules, or an unauthenticated deployment).
    pub fn unrestricted() -> Self {
        Self::default()
    }

    /// Whether rules are in force (so results may differ between principals).
    pub fn is_restricted(&self) -> bool {
        self.policy.is_some()
    }

    /// Checks one request of `method` with `params`, whatever the method. The methods of
    /// [`always_allowed`] pass: they name no tool, prompt or resource, and a client needs them
    /// to begin and to keep its session.
    pub fn check(&self, method: &str, params: Option<&Value>) -> Result<(), Denied> {
        let Some(policy) = &self.policy else { return Ok(()) };
        if always_allowed(method) {
            return Ok(());
        }
        let target = target(method, params);
        if self.allows(policy, method, target) {
            return Ok(());
        }
        Err(policy.denied(method, target, self.denies(policy, target)))
    }

    /// A list result without the items the principal may not use (tools, prompts, resources
    /// and resource templates); other results, and every result when nothing is restricted,
    /// are returned untouched.
    pub fn filter_list(&self, method: &str, raw: Box<RawValue>) -> Box<RawValue> {
        if self.policy.is_none() || ListMethod::of(method).is_none() {
            return raw;
        }
        let Ok(mut result) = serde_json::from_str::<Value>(raw.get()) else { return raw };
        self.retain_listed(method, &mut result);
        RawValue::from_string(result.to_string()).unwrap_or(raw)
    }

    /// Removes from the list result `result` of `method` the items the principal may not use;
    /// returns how many it removed (0 for any other method, or when nothing is restricted).
    pub fn retain_listed(&self, method: &str, result: &mut Value) -> usize {
        let (Some(policy), Some(kind)) = (&self.policy, ListMethod::of(method)) else { return 0 };
        let Some(Value::Array(items)) = result.get_mut(kind.field()) else { return 0 };
        let before = items.len();
        items.retain(|item| {
            let name = item.get(kind.key()).and_then(Value::as_str).unwrap_or_default();
            self.allows(policy, kind.call(), listed(kind, name))
        });
        before - items.len()
    }

    /// Allowed: some applicable rule allows it and none denies it.
    fn allows(&self, policy: &Policy, method: &str, target: Target<'_>) -> bool {
        self.rules.iter().any(|&i| policy.rules[i].allows(method, target)) && !self.denies(policy, target)
    }

    fn denies(&self, policy: &Policy, target: Target<'_>) -> bool {
        self.rules.iter().any(|&i| policy.rules[i].denies(target))
    }
}

/// The rule target of a listed item of `kind`.
fn listed(kind: ListMethod, name: &str) -> Target<'_> {
    match kind {
        ListMethod::Tools => Target::Tool(name),
        ListMethod::Prompts => Target::Prompt(name),
        ListMethod::Resources | ListMethod::Templates => Target::Resource(name),
    }
}

impl crate::legacy::ListFilter for Grants {
    fn retain_listed(&self, method: &str, result: &mut Value) -> usize {
        Grants::retain_listed(self, method, result)
    }
}

/// Checks every message of a legacy client's body (one message or a batch) that names a
/// method, whatever the method; see [`always_allowed`] for what passes without a rule. A
/// message without a method (the client's answer to a server request) passes. A body that is
/// not JSON is refused while rules are in force, so nothing unchecked reaches the upstream.
pub fn check_legacy_body(grants: &Grants, body: &LegacyBody) -> Result<(), Denied> {
    let Some(policy) = &grants.policy else { return Ok(()) };
    match body {
        LegacyBody::Empty => Ok(()),
        LegacyBody::NotJson => Err(policy.denied("request", Target::None, false)),
        LegacyBody::Messages(messages) => {
            for m in messages {
                let Some(method) = m.get("method").and_then(Value::as_str) else { continue };
                grants.check(method, m.get("params"))?;
            }
            Ok(())
        }
    }
}

/// The methods every authenticated client may send, rules or not: `server/discover`,
/// `initialize`, `ping` and notifications. None names a tool, prompt or resource.
fn always_allowed(method: &str) -> bool {
    matches!(method, methods::DISCOVER | methods::INITIALIZE | methods::PING)
        || method.starts_with(NOTIFICATIONS)
}

const NOTIFICATIONS: &str = "notifications/";

/// What a request targets. A target that is missing or not a string is checked as the empty
/// name (which only a `*` pattern allows); such a request fails its own validation anyway.
fn target<'a>(method: &str, params: Option<&'a Value>) -> Target<'a> {
    let field =
        |v: Option<&'a Value>, k: &str| v.and_then(|p| p.get(k)).and_then(Value::as_str).unwrap_or("");
    match method {
        methods::TOOLS_CALL => Target::Tool(field(params, "name")),
        methods::PROMPTS_GET => Target::Prompt(field(params, "name")),
        methods::RESOURCES_READ | methods::RESOURCES_SUBSCRIBE | methods::RESOURCES_UNSUBSCRIBE => {
            Target::Resource(field(params, "uri"))
        }
        methods::COMPLETION_COMPLETE => {
            let reference = params.and_then(|p| p.get("ref"));
            match reference.and_then(|r| r.get("type")).and_then(Value::as_str) {
                Some("ref/prompt") => Target::Prompt(field(reference, "name")),
                _ => Target::Resource(field(reference, "uri")),
            }
        }
        _ => Target::None,
    }
}

/// The token's scopes: `scope` (space-separated, RFC 8693/9068) or `scp` (a list or a string).
fn scopes(claims: &Map<String, Value>) -> BTreeSet<&str> {
    let mut out = BTreeSet::new();
    for claim in ["scope", "scp"] {
        match claims.get(claim) {
            Some(Value::String(s)) => out.extend(s.split_whitespace()),
            Some(Value::Array(a)) => out.extend(a.iter().filter_map(Value::as_str)),
            _ => {}
        }
    }
    out
}

/// A claim holds `want`: it is that string (or number or boolean), or a list holding it.
fn claim_has(claim: &Value, want: &str) -> bool {
    match claim {
        Value::String(s) => s == want,
        Value::Array(items) => items.iter().any(|i| claim_has(i, want)),
        Value::Bool(b) => want.parse::<bool>().is_ok_and(|w| w == *b),
        Value::Number(n) => n.to_string() == want,
        _ => false,
    }
}

/// The method's own fixed name, so a message and a metric label never carry client text: a
/// method of either era's clients, or `request` for any other.
fn fixed(method: &str) -> &'static str {
    if let Some(m) = crate::protocol::methods::FrontMethod::parse(method) {
        return m.label();
    }
    match method {
        methods::RESOURCES_SUBSCRIBE => methods::RESOURCES_SUBSCRIBE,
        methods::RESOURCES_UNSUBSCRIBE => methods::RESOURCES_UNSUBSCRIBE,
        SET_LEVEL => SET_LEVEL,
        _ => "request",
    }
}

/// At most 128 characters of a client-given name, for the message.
fn clip(s: &str) -> String {
    s.chars().take(128).collect()
}

#[cfg(test)]
mod tests;
