//! The stdio transport: a legacy server started as a child process, spoken to with
//! newline-delimited JSON-RPC on its stdin and stdout: one message per line, with no newline
//! inside it, as the legacy revisions' stdio transport has it (docs/src/upstreams.md, "stdio
//! upstreams").
//!
//! One process is one legacy session, and the pool's lease gives it to one call at a time:
//! nothing on the wire ties a server request to the call that caused it, so the lease is what
//! attributes it. Pieces, bottom-up: [`lines`] frames output with a bound on a line;
//! [`process`] spawns the child with a clean environment, writes its stdin and logs its stderr;
//! [`supervisor`] reads its stdout, notices an exit, a closed stdout or an oversized line, fails
//! the calls in flight with what happened, and stops and reaps the process (close stdin, then
//! SIGTERM, then SIGKILL to its process group, each bounded); [`session`] is the session the
//! seam drives; [`tail`] keeps the last stderr lines for whoever must explain a failed start.

pub(crate) mod lines;
mod process;
mod session;
mod supervisor;
mod tail;

pub(crate) use session::{SpareProcess, Spawner, StdioSession};
pub use tail::StderrTail;
