//! The `mrtr-gateway` binary: parse flags, load and validate the configuration, start logging,
//! run the gateway until SIGTERM or SIGINT. Everything else lives in the library.

use clap::Parser;
use mrtr_gateway::config::{Cli, Config};

/// `EX_USAGE`: the configuration is wrong.
const EX_USAGE: i32 = 64;
/// `EX_SOFTWARE`: the gateway could not start.
const EX_SOFTWARE: i32 = 70;

fn main() {
    let cli = Cli::parse();
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
    mrtr_gateway::logging::init(&cfg.log);
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("mrtr-gateway: cannot start the runtime: {e}");
            std::process::exit(EX_SOFTWARE);
        }
    };
    if let Err(e) = runtime.block_on(mrtr_gateway::app::run(cfg, mrtr_gateway::shutdown_signal())) {
        tracing::error!(error = %e, "mrtr-gateway failed to start");
        eprintln!("mrtr-gateway: {e}");
        std::process::exit(EX_SOFTWARE);
    }
}
