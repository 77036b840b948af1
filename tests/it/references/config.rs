//! The configuration reference (`docs/src/configuration.md`) against the code, both ways: every
//! key of the raw configuration ([`super::keys::config_keys`]) has a row and every row is a key;
//! each row's environment variable is the key's; each documented default is what the gateway
//! uses when the key is unset. A default is checked where the key takes effect: the test looks
//! for a setting ([`CONTEXTS`]) in which another value of the key changes the validated
//! configuration, then requires the documented value to change nothing there, and the same
//! other value given through the environment variable to equal it given in the file.

use std::collections::BTreeSet;
use std::io::Write as _;

use mrtr_gateway::config::raw::RawConfig;
use mrtr_gateway::config::{environment, Config};

use super::keys::{config_keys, Kind};
use super::tables::{chapter, code_spans, table};

/// Settings under which the keys of one feature take effect (each a list of `key = value`
/// lines at the root of a TOML file): the defaults alone, a stdio upstream, JWT with remote
/// keys and a resource, tracing, the cluster link, single use, and an `https://` upstream.
const CONTEXTS: &[&[&str]] = &[
    &[],
    &["upstream.command = \"legacy-server --stdio\""],
    &[
        "auth.mode = \"jwt\"",
        "auth.jwks_url = \"http://127.0.0.1:9/jwks.json\"",
        "auth.resource = \"https://gateway.example/mcp\"",
    ],
    &["tracing.otlp_endpoint = \"http://127.0.0.1:4318\""],
    &["cluster.advertise_url = \"http://127.0.0.1:9443\"", "cluster.listen = \"127.0.0.1:9443\""],
    &["state.single_use = true", "state.redis_url = \"redis://127.0.0.1:6379\""],
    &["upstream.url = \"https://127.0.0.1:8443/mcp\""],
];

/// One row of the reference.
struct Row {
    key: String,
    default: String,
    env: String,
}

fn rows() -> Vec<Row> {
    let text = chapter("configuration.md");
    table(&text, &["key", "default", "environment variable", "meaning"])
        .into_iter()
        .map(|cells| {
            let key = code_spans(&cells[0]).into_iter().next().unwrap_or_default();
            // `upstream.headers.<name>`: the key is the table, `<name>` its entries.
            let key = key.split(".<").next().unwrap_or_default().to_owned();
            Row { key, default: cells[1].clone(), env: cells[2].clone() }
        })
        .collect()
}

/// `MRTR_GATEWAY__SECTION__KEY` for `section.key`.
fn env_name(key: &str) -> String {
    format!("MRTR_GATEWAY__{}", key.replace('.', "__").to_uppercase())
}

#[test]
fn every_key_in_the_code_is_in_the_reference_and_back() {
    let code: BTreeSet<String> = config_keys().into_keys().collect();
    let documented: BTreeSet<String> = rows().into_iter().map(|r| r.key).collect();
    let missing: Vec<_> = code.difference(&documented).collect();
    let unknown: Vec<_> = documented.difference(&code).collect();
    assert!(missing.is_empty(), "keys of src/config/raw.rs missing from the reference: {missing:?}");
    assert!(unknown.is_empty(), "keys of the reference the code does not read: {unknown:?}");
}

#[test]
fn every_key_names_its_environment_variable() {
    let kinds = config_keys();
    let mut wrong = Vec::new();
    for row in rows() {
        let Some(kind) = kinds.get(&row.key) else { continue };
        let name = env_name(&row.key);
        let ok = match kind {
            Kind::Scalar | Kind::List => row.env == format!("`{name}`"),
            Kind::Map => row.env.starts_with(&format!("`{name}__<")),
            Kind::Tables => row.env == "—",
        };
        if !ok {
            wrong.push(format!("{}: {:?} (want {name}, {kind:?})", row.key, row.env));
        }
    }
    assert!(wrong.is_empty(), "wrong environment variables:\n{}", wrong.join("\n"));
}

#[test]
fn every_list_key_can_be_given_as_a_comma_separated_variable() {
    let lists: Vec<String> =
        config_keys().into_iter().filter(|(_, kind)| *kind == Kind::List).map(|(key, _)| key).collect();
    assert!(lists.len() >= 5, "the list keys were found: {lists:?}");
    let refused: Vec<String> = lists
        .iter()
        .filter_map(|key| {
            let vars = config::Map::from([(env_name(key), "a,b".to_owned())]);
            let raw = config::Config::builder().add_source(environment().source(Some(vars))).build();
            raw.and_then(|c| c.try_deserialize::<RawConfig>())
                .err()
                .map(|e| format!("{}: {e}", env_name(key)))
        })
        .collect();
    assert!(refused.is_empty(), "list variables the configuration refuses:\n{}", refused.join("\n"));
}

#[test]
fn every_documented_default_is_the_one_the_gateway_uses() {
    let mut wrong = Vec::new();
    let mut checked = 0;
    for row in rows() {
        let Some(default) = Literal::parse(&row.default) else { continue };
        checked += 1;
        if let Err(e) = check_default(&row.key, &default) {
            wrong.push(format!("{}: {e}", row.key));
        }
    }
    assert!(checked >= 60, "only {checked} defaults read: is the table's default column empty?");
    assert!(wrong.is_empty(), "defaults the reference gets wrong:\n{}", wrong.join("\n"));
}

/// Finds a context in which `key` takes effect, and checks `default` (and the environment
/// variable) there.
fn check_default(key: &str, default: &Literal) -> Result<(), String> {
    for context in CONTEXTS.iter().filter(|c| !c.iter().any(|l| l.starts_with(&format!("{key} ")))) {
        let base =
            load(context, None).map_err(|e| format!("the test's context {context:?} is invalid: {e}"))?;
        // A key refused in this context (one that applies only with another setting) is
        // looked at where it applies.
        let Ok(with_default) = load(context, Some((key, default))) else { continue };
        let others: Vec<_> =
            default.others().into_iter().map(|o| (load(context, Some((key, &o))), o)).collect();
        if others.iter().all(|(loaded, _)| loaded.as_ref() == Ok(&base)) {
            continue; // no effect here: look further
        }
        if with_default != base {
            return Err(format!("setting it to {} changes the configuration", default.toml()));
        }
        // The environment has no way to say an empty list.
        let expressible = |o: &Literal| !matches!(o, Literal::List(items) if items.is_empty());
        return match others.iter().find(|(loaded, o)| loaded.is_ok() && expressible(o)) {
            Some((Ok(in_file), other)) => check_env(context, key, other, in_file),
            _ => Ok(()),
        };
    }
    Err("no other value changes the configuration in any of the test's contexts: add one".into())
}

/// `key = other` given as its environment variable gives the same configuration as in the file.
fn check_env(context: &[&str], key: &str, other: &Literal, in_file: &str) -> Result<(), String> {
    let mut file = tempfile::NamedTempFile::new().map_err(|e| e.to_string())?;
    file.write_all(context.join("\n").as_bytes()).map_err(|e| e.to_string())?;
    let vars = config::Map::from([(env_name(key), other.env())]);
    let from_env = Config::load_from(Some(file.path()), &[], environment().source(Some(vars)))
        .map_err(|e| format!("{}={} is refused: {e}", env_name(key), other.env()))?;
    if format!("{from_env:?}") == in_file {
        Ok(())
    } else {
        Err(format!("{}={} is not read as {key} = {}", env_name(key), other.env(), other.toml()))
    }
}

/// The validated configuration of `context` plus `set`, as `--check-config` prints it.
fn load(context: &[&str], set: Option<(&str, &Literal)>) -> Result<String, String> {
    let mut lines: Vec<String> = context.iter().map(|l| (*l).to_owned()).collect();
    if let Some((key, value)) = set {
        lines.push(format!("{key} = {}", value.toml()));
    }
    Config::from_toml(&lines.join("\n")).map(|c| format!("{c:?}")).map_err(|e| e.to_string())
}

/// A default as the reference writes it: `` `4 MiB` ``, `` `true` ``, `` `["PATH", "HOME"]` ``,
/// `` `127.0.0.1:8080` ``; `—` (optionally followed by words) when there is none.
#[derive(Debug, Clone, PartialEq)]
enum Literal {
    Bool(bool),
    Int(i64),
    Float(f64),
    List(Vec<String>),
    Str(String),
}

impl Literal {
    fn parse(cell: &str) -> Option<Self> {
        if cell.starts_with('—') {
            return None;
        }
        let text = code_spans(cell).into_iter().next().unwrap_or_else(|| cell.to_owned());
        let unit = |suffix: &str, factor: i64| {
            text.strip_suffix(suffix).and_then(|n| n.trim().parse::<i64>().ok()).map(|n| n * factor)
        };
        Some(if let Some(n) = unit(" KiB", 1024).or_else(|| unit(" MiB", 1024 * 1024)) {
            Self::Int(n)
        } else if let Ok(b) = text.parse() {
            Self::Bool(b)
        } else if let Ok(n) = text.parse() {
            Self::Int(n)
        } else if let (true, Ok(x)) = (text.contains('.') && !text.contains(':'), text.parse()) {
            Self::Float(x)
        } else if let Some(items) = text.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
            let items = items.split(',').map(|i| i.trim().trim_matches('"').to_owned());
            Self::List(items.filter(|i| !i.is_empty()).collect())
        } else {
            Self::Str(text)
        })
    }

    fn toml(&self) -> String {
        match self {
            Self::Bool(b) => b.to_string(),
            Self::Int(n) => n.to_string(),
            Self::Float(x) => format!("{x:?}"),
            Self::List(items) => serde_json::to_string(items).unwrap_or_default(),
            Self::Str(s) => serde_json::to_string(s).unwrap_or_default(),
        }
    }

    fn env(&self) -> String {
        match self {
            Self::List(items) => items.join(","),
            Self::Str(s) => s.clone(),
            other => other.toml(),
        }
    }

    /// Values other than this one, to see whether the key takes effect.
    fn others(&self) -> Vec<Self> {
        match self {
            Self::Bool(b) => vec![Self::Bool(!b)],
            Self::Int(n) => [n + 1, n - 1].into_iter().filter(|m| *m >= 0).map(Self::Int).collect(),
            Self::Float(x) => vec![Self::Float(x / 2.0)],
            Self::List(items) if items.is_empty() => vec![Self::List(vec!["x".into()])],
            Self::List(items) => {
                let longer = items.iter().cloned().chain(["x".to_owned()]).collect();
                vec![Self::List(longer), Self::List(items[..items.len() - 1].to_vec())]
            }
            Self::Str(s) => match s.parse::<std::net::SocketAddr>() {
                Ok(mut addr) => {
                    addr.set_port(addr.port() + 1);
                    vec![Self::Str(addr.to_string())]
                }
                Err(_) => vec![Self::Str(format!("{s}x"))],
            },
        }
    }
}

#[test]
fn defaults_are_read_as_the_reference_writes_them() {
    assert_eq!(Literal::parse("`4 MiB`"), Some(Literal::Int(4 << 20)));
    assert_eq!(Literal::parse("`64 KiB` (a note)"), Some(Literal::Int(64 << 10)));
    assert_eq!(Literal::parse("`1.0`"), Some(Literal::Float(1.0)));
    assert_eq!(
        Literal::parse("`[\"PATH\", \"HOME\"]`"),
        Some(Literal::List(vec!["PATH".into(), "HOME".into()]))
    );
    assert_eq!(Literal::parse("`[]`"), Some(Literal::List(vec![])));
    assert_eq!(Literal::parse("`127.0.0.1:8080`"), Some(Literal::Str("127.0.0.1:8080".into())));
    assert_eq!(Literal::parse("`2025-11-25`"), Some(Literal::Str("2025-11-25".into())));
    assert_eq!(Literal::parse("— (the embedded demo)"), None);
}
