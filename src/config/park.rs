//! The validated park settings: how each tool's rounds end (`mrtr.mode`, `mrtr.tool_modes`,
//! `mrtr.side_effecting`), the park registry's bounds, and how replicas reach each other's
//! parked calls (`[cluster]`). Read by the bridge's park policy and by the internal listener.

use std::net::SocketAddr;
use std::time::Duration;

use http::Uri;

/// How a round of a tool ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MrtrMode {
    /// Cancel the upstream call; the retry replays it from the journal.
    Replay,
    /// Keep the upstream call running on this replica until the retry.
    Park,
    /// Park a tool marked side-effecting or seen diverging on this replica; replay the others.
    Auto,
}

/// `mrtr.mode` and its companions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParkConfig {
    pub mode: MrtrMode,
    /// (tool name, mode), overriding `mode`.
    pub tool_modes: Vec<(String, MrtrMode)>,
    /// Tools `auto` parks from their first round.
    pub side_effecting: Vec<String>,
    pub timeout: Duration,
    pub max_parked: usize,
    /// Most calls of one principal parked at once; at most `max_parked`.
    pub max_parked_per_principal: usize,
}

/// `[cluster]`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClusterConfig {
    /// This replica's internal listener as others reach it; `None`: no forwarding.
    pub advertise_url: Option<Uri>,
    /// Where the internal listener binds (set exactly when `advertise_url` is).
    pub listen: Option<SocketAddr>,
    pub connect_timeout: Duration,
    /// Until a forwarded retry's owner took it (its response head), connect included.
    pub accept_timeout: Duration,
    /// The internal listener's certificate and key: it serves TLS (`advertise_url` is then
    /// `https://`).
    pub tls: Option<super::TlsFiles>,
    /// What a forwarded retry trusts when its owner is `https://`.
    pub forward_tls: crate::config::tls::TlsSettings,
}

// === impl MrtrMode ===

impl MrtrMode {
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "replay" => Some(Self::Replay),
            "park" => Some(Self::Park),
            "auto" => Some(Self::Auto),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Replay => "replay",
            Self::Park => "park",
            Self::Auto => "auto",
        }
    }
}

// === impl ParkConfig ===

impl Default for ParkConfig {
    fn default() -> Self {
        Self {
            mode: MrtrMode::Replay,
            tool_modes: Vec::new(),
            side_effecting: Vec::new(),
            timeout: crate::defaults::PARK_TIMEOUT,
            max_parked: crate::defaults::MAX_PARKED,
            max_parked_per_principal: crate::defaults::MAX_PARKED,
        }
    }
}

impl ParkConfig {
    /// The mode configured for `tool`.
    pub fn mode_of(&self, tool: &str) -> MrtrMode {
        self.tool_modes.iter().find(|(name, _)| name == tool).map_or(self.mode, |(_, mode)| *mode)
    }

    /// True when any tool may be parked, so the registry is worth building.
    pub fn may_park(&self) -> bool {
        self.mode != MrtrMode::Replay || self.tool_modes.iter().any(|(_, m)| *m != MrtrMode::Replay)
    }
}
