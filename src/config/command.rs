//! The stdio upstream's settings as configured: the command (a list, or one line split the
//! way a shell would on whitespace and simple quotes, for `--upstream-command`), the child's
//! environment and working directory, validated with errors naming the field.
//!
//! The child's environment starts empty. Names under the gateway's own prefix are refused
//! outright, so no setting (state keys, JWT secrets) can be handed to it by mistake.

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::raw::{RawCommand, RawUpstream};
use super::{CommandConfig, ConfigError, Secret, ENV_PREFIX};
use crate::defaults as d;

/// The command to spawn, if one is configured; its environment settings need one.
pub(super) fn command(raw: &mut RawUpstream) -> Result<Option<CommandConfig>, ConfigError> {
    let Some(spec) = raw.command.take() else {
        return no_command(raw).map(|()| None);
    };
    if raw.url.is_some() {
        return Err(ConfigError::invalid(
            "upstream.command",
            "set upstream.url or upstream.command, not both",
        ));
    }
    let mut argv = match spec {
        RawCommand::Argv(list) => list,
        RawCommand::Line(line) => {
            split(&line).map_err(|reason| ConfigError::invalid("upstream.command", reason))?
        }
    };
    if argv.first().is_none_or(|p| p.is_empty()) {
        return Err(ConfigError::invalid("upstream.command", "names no program to run"));
    }
    let program = argv.remove(0);
    let max_line_bytes = raw.max_line_bytes.unwrap_or(d::MAX_LINE_BYTES);
    if max_line_bytes == 0 {
        return Err(ConfigError::invalid("upstream.max_line_bytes", "must be positive"));
    }
    Ok(Some(CommandConfig {
        program,
        args: argv,
        env: env(raw.env.take().unwrap_or_default())?,
        env_passthrough: passthrough(raw.env_passthrough.take())?,
        cwd: raw.cwd.take().map(cwd).transpose()?,
        max_line_bytes,
    }))
}

/// Settings that only a command uses, set without one, are a mistake worth naming.
fn no_command(raw: &RawUpstream) -> Result<(), ConfigError> {
    let stray = [
        ("upstream.env", raw.env.is_some()),
        ("upstream.env_passthrough", raw.env_passthrough.is_some()),
        ("upstream.cwd", raw.cwd.is_some()),
        ("upstream.max_line_bytes", raw.max_line_bytes.is_some()),
    ];
    match stray.into_iter().find(|(_, set)| *set) {
        Some((field, _)) => Err(ConfigError::invalid(field, "applies only with upstream.command")),
        None => Ok(()),
    }
}

fn env(raw: BTreeMap<String, Secret>) -> Result<Vec<(String, Secret)>, ConfigError> {
    raw.into_iter()
        .map(|(name, value)| {
            check_name(&format!("upstream.env.{name}"), &name)?;
            Ok((name, value))
        })
        .collect()
}

fn passthrough(raw: Option<Vec<String>>) -> Result<Vec<String>, ConfigError> {
    let names = raw.unwrap_or_else(|| d::ENV_PASSTHROUGH.iter().map(|&n| n.to_owned()).collect());
    for name in &names {
        check_name("upstream.env_passthrough", name)?;
    }
    Ok(names)
}

fn check_name(field: &str, name: &str) -> Result<(), ConfigError> {
    if name.is_empty() || name.contains(['=', '\0']) {
        return Err(ConfigError::invalid(field, format!("{name:?} is not an environment variable name")));
    }
    if name.to_ascii_uppercase().starts_with(ENV_PREFIX) {
        return Err(ConfigError::invalid(
            field,
            format!("{name:?} is the gateway's own setting and is never given to the upstream process"),
        ));
    }
    Ok(())
}

fn cwd(dir: String) -> Result<PathBuf, ConfigError> {
    let path = PathBuf::from(&dir);
    if !path.is_dir() {
        return Err(ConfigError::invalid("upstream.cwd", format!("{dir:?} is not a directory")));
    }
    Ok(path)
}

/// Splits a command line on whitespace. `'…'` is literal, `"…"` allows `\"` and `\\`, and a
/// backslash outside quotes escapes the next character. No variables, globs or pipes.
pub(super) fn split(line: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => words.extend(word.take()),
            '\'' => quoted(&mut chars, word.get_or_insert_with(String::new), '\'')?,
            '"' => quoted(&mut chars, word.get_or_insert_with(String::new), '"')?,
            '\\' => {
                let next = chars.next().ok_or("ends with a lone backslash")?;
                word.get_or_insert_with(String::new).push(next);
            }
            c => word.get_or_insert_with(String::new).push(c),
        }
    }
    words.extend(word);
    Ok(words)
}

/// Copies a quoted run up to its closing `quote` into `word`.
fn quoted(chars: &mut std::str::Chars<'_>, word: &mut String, quote: char) -> Result<(), String> {
    loop {
        match chars.next() {
            None => return Err(format!("unterminated {quote} quote")),
            Some(c) if c == quote => return Ok(()),
            Some('\\') if quote == '"' => match chars.next() {
                Some(c @ ('"' | '\\')) => word.push(c),
                Some(c) => {
                    word.push('\\');
                    word.push(c);
                }
                None => return Err(format!("unterminated {quote} quote")),
            },
            Some(c) => word.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::split;

    fn words(line: &str) -> Vec<String> {
        split(line).unwrap()
    }

    #[test]
    fn words_split_on_whitespace_and_quotes_group() {
        assert_eq!(words("npx -y  @scope/server\t/data"), ["npx", "-y", "@scope/server", "/data"]);
        assert_eq!(
            words(r#"python3 'my server.py' --name "a \"b\" c""#),
            ["python3", "my server.py", "--name", r#"a "b" c"#]
        );
        assert_eq!(words(r"run a\ b ''"), ["run", "a b", ""]);
        assert_eq!(words(r#"x "C:\dir""#), ["x", r"C:\dir"]);
        assert!(words("   ").is_empty());
    }

    #[test]
    fn broken_quoting_is_an_error() {
        assert_eq!(split("a 'b").unwrap_err(), "unterminated ' quote");
        assert!(split("a \"b").is_err());
        assert!(split("a \\").is_err());
    }
}

#[cfg(test)]
mod config_tests {
    use crate::config::{Config, UpstreamTarget};

    fn err(toml: &str) -> String {
        Config::from_toml(toml).unwrap_err().to_string()
    }

    #[test]
    fn a_command_becomes_a_stdio_target_with_a_clean_environment() {
        let c = Config::from_toml(
            "[upstream]\ncommand = [\"python3\", \"server.py\"]\nenv_passthrough = [\"PATH\"]\n\
             roots = [\"file:///srv/data\"]\n[upstream.env]\nAPI_KEY = \"k-secret\"",
        )
        .unwrap();
        let UpstreamTarget::Command(cmd) = &c.upstream.target else { panic!("not a command") };
        assert_eq!((cmd.program.as_str(), cmd.args.as_slice()), ("python3", &["server.py".to_owned()][..]));
        assert_eq!(cmd.env[0].0, "API_KEY", "names keep their case");
        assert_eq!(cmd.env_passthrough, ["PATH"]);
        assert_eq!(c.upstream.roots.as_deref(), Some(&["file:///srv/data".to_owned()][..]));
        assert!(!format!("{c:?}").contains("k-secret"));
        let line = Config::from_toml("[upstream]\ncommand = \"npx -y 'my server'\"").unwrap();
        let UpstreamTarget::Command(cmd) = line.upstream.target else { panic!("not a command") };
        assert_eq!(cmd.args, ["-y", "my server"]);
        assert_eq!(cmd.env_passthrough, ["PATH", "HOME"]);
    }

    #[test]
    fn stdio_errors_name_the_field() {
        let both = "[upstream]\nurl = \"http://127.0.0.1:1/mcp\"\ncommand = [\"x\"]";
        assert!(err(both).starts_with("upstream.command:"));
        assert!(err("[upstream]\ncommand = []").starts_with("upstream.command:"));
        assert!(err("[upstream]\ncommand = \"x 'y\"").starts_with("upstream.command:"));
        assert!(err("[upstream]\ncwd = \"/\"").starts_with("upstream.cwd:"));
        assert!(err("[upstream]\ncommand = [\"x\"]\ncwd = \"/no/such/dir\"").starts_with("upstream.cwd:"));
        let secret = "[upstream]\ncommand = [\"x\"]\nenv_passthrough = [\"MRTR_GATEWAY__STATE__KEYS\"]";
        assert!(err(secret).starts_with("upstream.env_passthrough:"));
        let bad = "[upstream]\ncommand = [\"x\"]\n[upstream.env]\n\"A=B\" = \"1\"";
        assert!(err(bad).starts_with("upstream.env.A=B:"));
        assert!(err("[upstream]\nroots = [\"/srv\"]").starts_with("upstream.roots:"));
    }
}
