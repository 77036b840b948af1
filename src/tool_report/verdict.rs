//! The one-line verdict of a tool in the migration report: what an operator should do about it
//! before the legacy server is ported. The rules are checked in order and the first that holds
//! wins, so a tool that diverges is reported as such even when its calls also fail (a tool whose
//! question changes on every run fails at the round cap).

use serde::Serialize;

use crate::defaults;

/// The figures a verdict is drawn from.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Figures {
    pub completed: u64,
    pub failed: u64,
    /// Rounds that ended with questions.
    pub rounds: u64,
    pub divergences: u64,
    /// Mean rounds per completed call.
    pub mean_rounds: Option<f64>,
    /// Tasks created (of the tasks extension).
    pub tasks: u64,
}

/// What the report advises for one tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Verdict {
    /// A replay asked a question the previous run had not asked.
    #[serde(rename = "diverges")]
    Diverges,
    /// More than half of its finished calls failed.
    #[serde(rename = "failing")]
    Failing,
    /// Its completed calls take [`defaults::TOOL_REPORT_MANY_ROUNDS`] rounds or more on average.
    #[serde(rename = "many rounds")]
    ManyRounds,
    /// It asks questions, and its calls complete by replay.
    #[serde(rename = "in-band friendly")]
    InBandFriendly,
    /// It asked questions, but no call of it has completed on this replica.
    #[serde(rename = "unfinished")]
    Unfinished,
    /// It runs as a task of the tasks extension, and asks nothing in-line.
    #[serde(rename = "task")]
    Task,
    /// It never asks the client anything.
    #[serde(rename = "plain")]
    Plain,
    /// The `(other)` entry: the sum of the tools past the report's bound.
    #[serde(rename = "folded")]
    Folded,
}

// === impl Verdict ===

impl Verdict {
    pub(super) fn of(f: &Figures) -> Self {
        let finished = f.completed + f.failed;
        if f.divergences > 0 {
            Self::Diverges
        } else if f.failed > 0 && 2 * f.failed > finished {
            Self::Failing
        } else if f.mean_rounds.is_some_and(|m| m >= defaults::TOOL_REPORT_MANY_ROUNDS) {
            Self::ManyRounds
        } else if f.rounds > 0 && f.completed > 0 {
            Self::InBandFriendly
        } else if f.rounds > 0 {
            Self::Unfinished
        } else if f.tasks > 0 {
            Self::Task
        } else {
            Self::Plain
        }
    }

    /// What to do about it, in one sentence.
    pub fn advice(self) -> &'static str {
        match self {
            Self::Diverges => {
                "its questions change between runs, so replay cannot resume it: park it, or make its \
                 questions depend only on its arguments and earlier answers"
            }
            Self::Failing => {
                "most of its calls fail: read the gateway's request log lines and the upstream's own log"
            }
            Self::ManyRounds => {
                "each round runs the call again from the top: have it ask its questions at once, park \
                 it, or port it first"
            }
            Self::InBandFriendly => {
                "its calls complete by replay: it can stay on replay until the server is ported"
            }
            Self::Unfinished => {
                "it asked questions but no call of it has completed here yet (clients gave up, or \
                 their retries reached another replica)"
            }
            Self::Task => {
                "it runs as a task: its questions are answered live through tasks/update and nothing \
                 is replayed, so it can stay behind the gateway until the server is ported"
            }
            Self::Plain => "it never asks the client anything: the gateway relays it as it is",
            Self::Folded => {
                "the sum of the tools past the report's bound, and of the runs of tools that have no \
                 entry yet: see the gateway's request log lines for their names"
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figures(completed: u64, failed: u64, rounds: u64, divergences: u64, mean: f64) -> Figures {
        Figures {
            completed,
            failed,
            rounds,
            divergences,
            mean_rounds: (completed > 0).then_some(mean),
            tasks: 0,
        }
    }

    #[test]
    fn the_first_rule_that_holds_wins() {
        assert_eq!(Verdict::of(&figures(0, 1, 8, 8, 0.0)), Verdict::Diverges);
        assert_eq!(Verdict::of(&figures(1, 2, 1, 0, 1.0)), Verdict::Failing);
        assert_eq!(Verdict::of(&figures(2, 2, 2, 0, 1.0)), Verdict::InBandFriendly, "half is not most");
        assert_eq!(Verdict::of(&figures(1, 0, 3, 0, 3.0)), Verdict::ManyRounds);
        assert_eq!(Verdict::of(&figures(1, 0, 2, 0, 2.0)), Verdict::InBandFriendly);
        assert_eq!(Verdict::of(&figures(0, 0, 1, 0, 0.0)), Verdict::Unfinished);
        assert_eq!(Verdict::of(&figures(3, 0, 0, 0, 0.0)), Verdict::Plain);
        assert_eq!(Verdict::of(&Figures::default()), Verdict::Plain);
        let tasks = Figures { tasks: 2, ..figures(3, 0, 0, 0, 0.0) };
        assert_eq!(Verdict::of(&tasks), Verdict::Task, "a task tool that asks nothing in-line");
        assert_eq!(Verdict::of(&Figures { tasks: 2, ..figures(1, 0, 1, 0, 1.0) }), Verdict::InBandFriendly);
    }
}
