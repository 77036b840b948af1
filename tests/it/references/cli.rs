//! The command line against its references, both ways: every flag and subcommand of the clap
//! definition (`src/config/cli.rs`) appears in `mrtr-gateway --help` and in the book's CLI
//! reference (`docs/src/configuration.md`), and every entry of that reference is one of them.

use std::collections::BTreeSet;
use std::process::Command;

use clap::CommandFactory as _;
use mrtr_gateway::config::Cli;

use super::tables::{chapter, code_spans, table};

/// `--flag` for every long option (the generated `--help` and `--version` included) and the
/// name of every subcommand but clap's own `help`.
fn defined() -> BTreeSet<String> {
    let mut command = Cli::command();
    command.build();
    let flags = command.get_arguments().filter_map(|a| a.get_long()).map(|l| format!("--{l}"));
    let subcommands = command.get_subcommands().map(|s| s.get_name().to_owned()).filter(|s| s != "help");
    flags.chain(subcommands).collect()
}

/// The first word of each row of the CLI reference: `--listen` of `` `--listen <ADDR>` ``.
fn documented() -> BTreeSet<String> {
    let text = chapter("configuration.md");
    table(&text, &["flag or subcommand", "configuration key", "meaning"])
        .into_iter()
        .filter_map(|cells| code_spans(&cells[0]).into_iter().next())
        .filter_map(|span| span.split_whitespace().next().map(str::to_owned))
        .collect()
}

#[test]
fn every_flag_is_in_the_cli_reference_and_back() {
    let (code, docs) = (defined(), documented());
    assert!(code.contains("--listen") && code.contains("stdio"), "the definition was read: {code:?}");
    let missing: Vec<_> = code.difference(&docs).collect();
    let unknown: Vec<_> = docs.difference(&code).collect();
    assert!(missing.is_empty(), "flags missing from the book's CLI reference: {missing:?}");
    assert!(unknown.is_empty(), "CLI reference entries the binary does not have: {unknown:?}");
}

#[test]
fn every_flag_is_in_the_help_output() {
    let out =
        Command::new(env!("CARGO_BIN_EXE_mrtr-gateway")).arg("--help").output().expect("the binary runs");
    assert!(out.status.success(), "--help exits 0");
    let help = String::from_utf8_lossy(&out.stdout);
    let words: BTreeSet<&str> =
        help.split(|c: char| c.is_whitespace() || c == ',' || c == '=' || c == '[').collect();
    let missing: Vec<_> = defined().into_iter().filter(|f| !words.contains(f.as_str())).collect();
    assert!(missing.is_empty(), "flags --help does not show: {missing:?}\n{help}");
}
