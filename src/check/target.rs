//! Which server the check runs against, and its configuration: the gateway's own (file,
//! environment, flags), the server named by `--upstream`, `--upstream-sse`,
//! `--upstream-command` or a command after `--`, or, with none, the embedded demo server.

use crate::config::{environment, CheckArgs, Cli, Config, ConfigError, UpstreamTarget};

/// How the report names the server and its transport.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub display: String,
    pub transport: &'static str,
}

/// The configuration of a check: the gateway's, with the server of `args` when a command
/// follows `--`.
pub fn config(cli: &Cli, args: &CheckArgs) -> Result<Config, ConfigError> {
    let mut overrides = cli.overrides();
    if !args.command.is_empty() {
        let named = [("--upstream", &cli.upstream), ("--upstream-sse", &cli.upstream_sse)]
            .into_iter()
            .chain([("--upstream-command", &cli.upstream_command)])
            .find(|(_, v)| v.is_some());
        if let Some((flag, _)) = named {
            return Err(ConfigError::invalid(
                "check",
                format!("name the server once: {flag} or a command after --"),
            ));
        }
        overrides.push(("upstream.command", command_line(&args.command)));
    }
    Config::load_from(cli.config.as_deref(), &overrides, environment())
}

// === impl Target ===

impl Target {
    /// The server `cfg` names (`None` for the embedded demo).
    pub fn of(cfg: &Config) -> Option<Self> {
        match &cfg.upstream.target {
            UpstreamTarget::Command(c) => {
                let words = std::iter::once(&c.program).chain(&c.args).map(|w| shown(w)).collect::<Vec<_>>();
                Some(Self { display: words.join(" "), transport: "stdio" })
            }
            UpstreamTarget::Url(u) => Some(Self { display: u.to_string(), transport: "streamable-http" }),
            UpstreamTarget::Sse(u) => Some(Self { display: u.to_string(), transport: "http+sse" }),
            UpstreamTarget::Embedded => None,
        }
    }
}

/// `argv` as one `upstream.command` line: each word single-quoted, so the configuration's
/// splitter gives back exactly these words.
fn command_line(argv: &[String]) -> String {
    argv.iter().map(|w| format!("'{}'", w.replace('\'', r"'\''"))).collect::<Vec<_>>().join(" ")
}

/// A word as a shell user would type it: quoted when it holds a space or a quote.
fn shown(word: &str) -> String {
    if word.is_empty() || word.contains(|c: char| c.is_whitespace() || c == '\'' || c == '"') {
        format!("'{}'", word.replace('\'', r"'\''"))
    } else {
        word.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::config::Mode;

    fn check(argv: &[&str]) -> Result<Config, ConfigError> {
        let cli = Cli::parse_from(argv);
        let Some(Mode::Check(args)) = &cli.mode else { panic!("not a check") };
        config(&cli, args)
    }

    #[test]
    fn the_words_after_the_double_dash_are_the_command_exactly() {
        let cfg = check(&["mrtr-gateway", "check", "--", "python3", "my server.py", "it's", ""]).unwrap();
        let UpstreamTarget::Command(c) = &cfg.upstream.target else { panic!("not a command") };
        assert_eq!(c.program, "python3");
        assert_eq!(c.args, ["my server.py", "it's", ""]);
        let target = Target::of(&cfg).unwrap();
        assert_eq!(target.display, r#"python3 'my server.py' 'it'\''s' ''"#);
        assert_eq!(target.transport, "stdio");
    }

    #[test]
    fn a_server_is_named_once() {
        let url = check(&["mrtr-gateway", "check", "--upstream", "http://127.0.0.1:9/mcp"]).unwrap();
        assert_eq!(Target::of(&url).unwrap().transport, "streamable-http");
        let sse = check(&["mrtr-gateway", "check", "--upstream-sse", "http://127.0.0.1:9/sse"]).unwrap();
        assert_eq!(Target::of(&sse).unwrap().transport, "http+sse");
        let both = check(&["mrtr-gateway", "check", "--upstream", "http://127.0.0.1:9/mcp", "--", "x"]);
        assert!(both.unwrap_err().to_string().contains("name the server once"));
        assert_eq!(Target::of(&check(&["mrtr-gateway", "check"]).unwrap()), None, "the embedded demo");
    }
}
