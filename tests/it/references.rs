//! The references of the book cannot drift from the code: the configuration reference against
//! the serde structs and the validated defaults, the metrics reference against the registered
//! series, and the CLI reference against clap's definition and `--help`. Each list is derived
//! from the code, never copied into a test.

mod cli;
mod config;
mod keys;
mod metrics;
mod tables;
