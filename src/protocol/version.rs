//! The legacy protocol revisions the upstream client can negotiate, and what each brought.
//! Shared vocabulary of every layer (defaults, config, the sealed core, the upstream client),
//! so it lives here at the bottom rather than in the core that first needed it.

/// The legacy revision an upstream session negotiated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LegacyVersion {
    V2025_11_25,
    V2025_06_18,
    V2025_03_26,
    /// The first revision, the one HTTP+SSE servers speak: no elicitation, and the same client
    /// capability shape as 2025-03-26 (`sampling`, `roots`).
    V2024_11_05,
}

// === impl LegacyVersion ===

impl LegacyVersion {
    /// Every revision the upstream client can negotiate, newest first.
    pub const ALL: [Self; 4] = [Self::V2025_11_25, Self::V2025_06_18, Self::V2025_03_26, Self::V2024_11_05];

    /// Parses a negotiated `protocolVersion`; `None` for versions the gateway cannot speak.
    pub fn parse(version: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.as_str() == version)
    }

    /// The wire spelling (the only place it is written).
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::V2025_11_25 => "2025-11-25",
            Self::V2025_06_18 => "2025-06-18",
            Self::V2025_03_26 => "2025-03-26",
            Self::V2024_11_05 => "2024-11-05",
        }
    }

    /// Sampling content arrays, tool use and URL elicitation arrived in 2025-11-25.
    pub(crate) fn has_2025_11_features(self) -> bool {
        matches!(self, Self::V2025_11_25)
    }

    /// Elicitation arrived in 2025-06-18.
    pub(crate) fn has_elicitation(self) -> bool {
        !matches!(self, Self::V2025_03_26 | Self::V2024_11_05)
    }
}
