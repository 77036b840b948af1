//! The `mrtr-gateway` binary: parse flags, load and validate the configuration, start logging,
//! run the gateway (the HTTP front, or the stdio front with `stdio`) until SIGTERM or SIGINT, or
//! for the stdio front until stdin ends; with `healthcheck`, probe a running gateway's
//! `/healthz` instead; with `check`, report on a legacy server's readiness for migration.
//! Everything else lives in the library.

use std::time::Duration;

use mrtr_gateway::config::{Cli, Config, Mode};
use mrtr_gateway::logging::{self, Sink};

/// `EX_USAGE`: the configuration is wrong.
const EX_USAGE: i32 = 64;
/// `EX_SOFTWARE`: the gateway could not start.
const EX_SOFTWARE: i32 = 70;
/// `healthcheck`: the admin listener did not answer `/healthz` with 200.
const EX_UNHEALTHY: i32 = 1;
/// How long the runtime waits for blocking work at exit: a read of stdin blocked in its own
/// thread cannot be cancelled and must not hold the process.
const RUNTIME_EXIT: Duration = Duration::from_millis(100);

fn main() {
    let cli = Cli::parse_args();
    if let Some(Mode::Check(args)) = &cli.mode {
        std::process::exit(mrtr_gateway::check::main(&cli, args));
    }
    let cfg = match Config::load(&cli) {
        Ok(cfg) => cfg,
        Err(e) => {
            eprintln!("mrtr-gateway: invalid configuration: {e}");
            std::process::exit(EX_USAGE);
        }
    };
    if cli.check_config {
        println!("{cfg:#?}");
        return;
    }
    if cli.mode == Some(Mode::Healthcheck) {
        if let Err(e) = mrtr_gateway::healthcheck::check(cfg.admin_listen) {
            eprintln!("mrtr-gateway: unhealthy: {e}");
            std::process::exit(EX_UNHEALTHY);
        }
        return;
    }
    let stdio = cli.mode == Some(Mode::Stdio);
    logging::init(&cfg.log, if stdio { Sink::Stderr } else { Sink::Stdout });
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("mrtr-gateway: cannot start the runtime: {e}");
            std::process::exit(EX_SOFTWARE);
        }
    };
    let signal = mrtr_gateway::shutdown_signal();
    let result = if stdio {
        runtime.block_on(mrtr_gateway::app::run_stdio(cfg, signal))
    } else {
        runtime.block_on(mrtr_gateway::app::run(cfg, signal))
    };
    runtime.shutdown_timeout(RUNTIME_EXIT);
    if let Err(e) = result {
        // Once, on stderr, where a supervisor and a terminal both look: a log line beside it
        // said the same thing twice.
        eprintln!("mrtr-gateway: {e}");
        std::process::exit(EX_SOFTWARE);
    }
}
