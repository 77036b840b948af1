//! Which rounds park: `mrtr.mode` and `mrtr.tool_modes` name the mode of each tool (prompt or
//! resource target alike); in `auto` mode a tool parks when `mrtr.side_effecting` lists it or
//! when replaying it has diverged on this replica (its questions changed between runs, so a
//! replay may never finish, and whatever it did before asking ran twice). The set of diverged
//! tools is per replica and bounded, like the divergence metric's labels.

use std::collections::HashSet;

use parking_lot::Mutex;

use crate::config::{MrtrMode, ParkConfig};
use crate::defaults::MAX_DIVERGENCE_TOOLS;

/// The park decision of one replica.
pub(super) struct ParkPolicy {
    cfg: ParkConfig,
    diverged: Mutex<HashSet<String>>,
}

// === impl ParkPolicy ===

impl ParkPolicy {
    pub(super) fn new(cfg: ParkConfig) -> Self {
        Self { cfg, diverged: Mutex::new(HashSet::new()) }
    }

    /// True when a round of `target` should end with its call parked.
    pub(super) fn parks(&self, target: &str) -> bool {
        match self.cfg.mode_of(target) {
            MrtrMode::Replay => false,
            MrtrMode::Park => true,
            MrtrMode::Auto => {
                self.cfg.side_effecting.iter().any(|t| t == target) || self.diverged.lock().contains(target)
            }
        }
    }

    /// A replay of `target` diverged on this replica.
    pub(super) fn diverged(&self, target: &str) {
        let mut seen = self.diverged.lock();
        if seen.len() < MAX_DIVERGENCE_TOOLS {
            seen.insert(target.to_owned());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(mode: MrtrMode) -> ParkPolicy {
        ParkPolicy::new(ParkConfig {
            mode,
            tool_modes: vec![("always".into(), MrtrMode::Park), ("never".into(), MrtrMode::Replay)],
            side_effecting: vec!["pay".into()],
            ..ParkConfig::default()
        })
    }

    #[test]
    fn overrides_win_over_the_mode() {
        let p = policy(MrtrMode::Replay);
        assert!(p.parks("always") && !p.parks("pay") && !p.parks("other"));
        let p = policy(MrtrMode::Park);
        assert!(p.parks("other") && !p.parks("never"));
    }

    #[test]
    fn auto_parks_side_effecting_and_diverged_tools() {
        let p = policy(MrtrMode::Auto);
        assert!(p.parks("pay"), "marked side-effecting");
        assert!(!p.parks("flaky"));
        p.diverged("flaky");
        assert!(p.parks("flaky"), "diverged on this replica");
        assert!(!p.parks("never"), "an explicit replay override stays replay");
    }

    #[test]
    fn the_diverged_tools_remembered_are_bounded() {
        let p = policy(MrtrMode::Auto);
        for n in 0..MAX_DIVERGENCE_TOOLS {
            p.diverged(&format!("tool-{n}"));
        }
        let last = format!("tool-{}", MAX_DIVERGENCE_TOOLS - 1);
        assert!(p.parks("tool-0") && p.parks(&last), "up to the bound, each is remembered");
        p.diverged("one-more");
        assert!(!p.parks("one-more"), "past the bound, a new tool is not");
        p.diverged("tool-0");
        assert!(p.parks("tool-0"));
    }
}
