//! End-to-end tests of the gateway: a real legacy server (the embedded demo) behind a real
//! gateway on loopback, driven by a small 2026-07-28 client over HTTP. One test binary, so the
//! harness in `common` is compiled once; `it` holds one file per behaviour area.

mod common;
mod it;
