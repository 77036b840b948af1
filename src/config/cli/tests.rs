use std::collections::HashMap;

use super::*;
use crate::config::{environment, Config, UpstreamTarget};

/// The flags that set no configuration key, and so have no environment variable.
const FLAG_ONLY: [&str; 4] = ["config", "check_config", "help", "version"];

fn parse(args: &[&str]) -> Cli {
    let matches = Cli::command_with_defaults().try_get_matches_from(args).unwrap();
    Cli::from_arg_matches(&matches).unwrap()
}

#[test]
fn every_flag_sets_a_key_or_is_listed_as_flag_only() {
    let cmd = Cli::command_with_defaults();
    for arg in cmd.get_arguments().filter(|a| a.get_long().is_some()) {
        let id = arg.get_id().as_str();
        let keyed = KEY_FLAGS.iter().any(|f| f.id == id);
        assert!(keyed != FLAG_ONLY.contains(&id), "--{id}: in KEY_FLAGS or in FLAG_ONLY, not both");
    }
}

/// Each entry reads its own field: `--flag value` overrides exactly the entry's key.
#[test]
fn each_flag_overrides_its_own_key() {
    for flag in &KEY_FLAGS {
        let cli = parse(&["mrtr-gateway", &flag.flag(), "v"]);
        assert_eq!(cli.overrides(), [(flag.key, "v".to_owned())], "{}", flag.flag());
    }
}

/// The environment variable `--help` names sets the same key as the flag.
#[test]
fn each_flags_environment_variable_sets_its_key() {
    for flag in &KEY_FLAGS {
        let env = HashMap::from([(flag.env(), "v".to_owned())]);
        let built = config::Config::builder().add_source(environment().source(Some(env))).build().unwrap();
        assert_eq!(built.get_string(flag.key).unwrap(), "v", "{} {}", flag.env(), flag.key);
    }
    assert_eq!(flag_for("front.listen").as_deref(), Some("--listen"));
    assert_eq!(flag_for("cluster.listen"), None);
}

/// What `--help` calls each flag's default is what a gateway configured by nothing gets.
#[test]
fn the_defaults_help_shows_are_those_of_an_empty_configuration() {
    let c = Config::load_from(None, &[], environment().source(Some(HashMap::new()))).unwrap();
    let shown = |key: &str| KEY_FLAGS.iter().find(|f| f.key == key).unwrap().default;
    assert_eq!(c.front.listen.to_string(), shown("front.listen"));
    assert_eq!(c.admin_listen.map(|a| a.to_string()).as_deref(), Some(shown("admin.listen")));
    assert_eq!(c.log.filter, shown("log.level"));
    assert_eq!(if c.log.json { "json" } else { "text" }, shown("log.format"));
    assert_eq!(c.upstream.target, UpstreamTarget::Embedded);
    assert!(shown("upstream.url").contains("embedded demo"));
    assert!(c.state.key_file.is_none() && c.state.keys.is_empty());
    assert!(shown("state.key_file").contains("ephemeral"));
    assert!(c.cluster.advertise_url.is_none());
}

#[test]
fn help_names_each_default_and_environment_variable() {
    let help = Cli::command_with_defaults().render_help().to_string();
    for flag in &KEY_FLAGS {
        let tail = format!("[default: {}] [env: {}]", flag.default, flag.env());
        assert!(help.contains(&tail), "{}: {help}", flag.flag());
    }
    assert!(help.contains("[default: 127.0.0.1:8080] [env: MRTR_GATEWAY__FRONT__LISTEN]"), "{help}");
}
