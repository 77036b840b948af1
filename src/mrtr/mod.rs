//! The sealed replay core: how a stateless gateway resumes a legacy call across
//! `input_required` rounds (SEP-2322, Multi Round-Trip Requests).
//!
//! A legacy server asks its questions in the middle of a call; a 2026-07-28 client answers
//! them on a retry that may reach any replica. Nothing is kept in the gateway: the answers
//! travel in a journal sealed into `requestState`, and each retry replays the call upstream,
//! answering the repeated questions from the journal. This module owns the pieces of that
//! protocol that need no I/O: canonical digests, the key ring, the state codec, the journal,
//! replay decisions, translation of the embedded requests, and the sealed `Mcp-Session-Id` of
//! relayed legacy clients. Time is always passed in as unix
//! seconds; nothing here reads a clock or touches the network.
//!
//! Replaying repeats the upstream side effects that happen before the first question; that is
//! the price of statelessness. Park mode avoids it by keeping the call running on one replica;
//! the state then also carries a park handle ([`park`]), and the journal still, for replay.

pub mod answers;
pub mod canonical;
pub mod claims;
pub mod codec;
mod envelope;
pub mod journal;
pub mod keyring;
pub mod park;
pub mod replay;
pub mod replica_auth;
mod sealed_id;
pub mod session_id;
pub mod task_id;
pub mod task_record;
pub mod translate;

pub use canonical::{arguments_digest, question_digest, Digest};
pub use claims::{next_round, request_state, Binding, ClaimsError, StateClaims};
pub use codec::{CodecSettings, StateCodec, StateError};
pub use journal::{input_responses, Accepted, AnswerLimits, InputError, Journal};
pub use keyring::{parse_key_lines, KeyError, KeyId, KeyRing, KeySecret, LiveRing};
pub use park::{CallId, ParkHandle};
pub use replay::{Decision, Offered, Replay, ReplayError, RoundOutcome, UrlVerdict};
pub use session_id::{Reach, SessionClaims, SessionIdError, SessionSealer};
pub use task_id::{TaskClaims, TaskIdError, TaskSealer};
pub use task_record::TaskRecordSealer;
pub use translate::{url_elicitations, InputKind, LegacyVersion, TranslateError};
