//! What this replica remembers of each tool's rounds: how many questions the tool asked at once
//! in each round of its last call, so the next call's round waits for that many and then ends at
//! once (see `gather.rs`). One lookup in `mrtr.gather_recheck_every` of a tool is a recheck: its
//! round still waits the idle gap after the count, so a tool that now asks more at once is
//! learned rather than split into an extra round forever.
//!
//! Why per replica and bounded: this is a hint, never state a call depends on. A replica that
//! has not seen a tool (a fresh pod, an evicted entry) falls back on the idle gap alone, and the
//! worst a stale hint costs is one gather window. The number of tools remembered is capped
//! (`mrtr.gather_memory_tools`), the least recently used is forgotten first, and targets with
//! long names (resource URIs can be anything) are not remembered at all. Counts configured in
//! `mrtr.gather_expect` stand in for every round not yet seen, and are never forgotten.

use std::collections::HashMap;

use parking_lot::Mutex;

use crate::protocol::methods;

/// Longest tool name, prompt name or resource URI remembered, in bytes.
const MAX_KEY_BYTES: usize = 256;
/// Rounds remembered per tool (`mrtr.max_rounds` is at most 64).
const MAX_ROUNDS: usize = 64;

/// How many questions a round is expected to ask at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Expected {
    pub count: usize,
    /// This round still waits the idle gap once `count` are in.
    pub recheck: bool,
}

/// Per-tool question counts, shared by every run of one bridge.
#[derive(Debug)]
pub(super) struct GatherMemory {
    cap: usize,
    /// One lookup of a remembered count in this many is a recheck (1: every one).
    recheck_every: u64,
    /// Configured counts, by memory key.
    seeds: HashMap<String, usize>,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// Bumped on every use; the entry with the oldest tick is forgotten first.
    tick: u64,
    tools: HashMap<String, Entry>,
}

#[derive(Debug)]
struct Entry {
    /// Questions asked at once in each round; 0 where unknown.
    rounds: Vec<u16>,
    used: u64,
    /// Lookups that found a count, for choosing the rechecks.
    lookups: u64,
}

// === impl GatherMemory ===

impl GatherMemory {
    /// Remembers at most `cap` tools (0 remembers none), and the configured `(tool, count)`s;
    /// one lookup in `recheck_every` of a remembered count is a recheck.
    pub(super) fn new(cap: usize, tools: &[(String, usize)], recheck_every: usize) -> Self {
        let seeds = tools.iter().map(|(tool, n)| (key(methods::TOOLS_CALL, tool), *n)).collect();
        let recheck_every = u64::try_from(recheck_every.max(1)).unwrap_or(u64::MAX);
        Self { cap, recheck_every, seeds, inner: Mutex::new(Inner::default()) }
    }

    /// How many questions `key` asked at once in `round` last time, or is configured to ask.
    /// A configured count is always a recheck until the tool is seen: it is a guess.
    pub(super) fn expected(&self, key: &str, round: u32) -> Option<Expected> {
        self.learned(key, round)
            .or_else(|| self.seeds.get(key).map(|&count| Expected { count, recheck: true }))
    }

    fn learned(&self, key: &str, round: u32) -> Option<Expected> {
        let mut inner = self.inner.lock();
        let tick = inner.next_tick();
        let entry = inner.tools.get_mut(key)?;
        entry.used = tick;
        let count = *entry.rounds.get(usize::try_from(round).ok()?)?;
        if count == 0 {
            return None;
        }
        entry.lookups += 1;
        let recheck = entry.lookups % self.recheck_every == 0;
        Some(Expected { count: usize::from(count), recheck })
    }

    /// Records that `key` asked `asked` questions at once in `round`, where `expected` were
    /// waited for. The count only grows (a round that ended on the idle gap may have missed a
    /// slow question, never invented one), except when fewer than expected came in the whole
    /// window: then the tool asks fewer now.
    pub(super) fn record(&self, key: &str, round: u32, asked: usize, expected: Option<usize>) {
        let Ok(round) = usize::try_from(round) else { return };
        if self.cap == 0 || key.len() > MAX_KEY_BYTES || round >= MAX_ROUNDS || asked == 0 {
            return;
        }
        let count = u16::try_from(asked).unwrap_or(u16::MAX);
        let mut inner = self.inner.lock();
        let tick = inner.next_tick();
        if !inner.tools.contains_key(key) && inner.tools.len() >= self.cap {
            inner.forget_oldest();
        }
        let entry = inner.tools.entry(key.to_owned()).or_insert_with(|| Entry {
            rounds: Vec::new(),
            used: 0,
            lookups: 0,
        });
        if entry.rounds.len() <= round {
            entry.rounds.resize(round + 1, 0);
        }
        let fewer = expected.is_some_and(|n| asked < n);
        let slot = &mut entry.rounds[round];
        *slot = if fewer { count } else { count.max(*slot) };
        entry.used = tick;
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.inner.lock().tools.len()
    }
}

// === impl Inner ===

impl Inner {
    fn next_tick(&mut self) -> u64 {
        self.tick += 1;
        self.tick
    }

    /// A linear scan: it runs only when a new tool arrives at a full memory.
    fn forget_oldest(&mut self) {
        let oldest = self.tools.iter().min_by_key(|(_, e)| e.used).map(|(k, _)| k.clone());
        if let Some(key) = oldest {
            self.tools.remove(&key);
        }
    }
}

/// The memory key of a front request: its method and its target.
pub(super) fn key(method: &str, target: &str) -> String {
    format!("{method} {target}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The remembered count alone, whether or not this lookup is a recheck.
    fn count(m: &GatherMemory, key: &str, round: u32) -> Option<usize> {
        m.expected(key, round).map(|e| e.count)
    }

    #[test]
    fn remembers_per_round_and_the_latest_count() {
        let m = GatherMemory::new(4, &[], 16);
        assert_eq!(m.expected("t", 0), None);
        m.record("t", 0, 3, None);
        m.record("t", 2, 1, None);
        assert_eq!(count(&m, "t", 0), Some(3));
        assert_eq!(m.expected("t", 1), None, "a round never seen is unknown");
        assert_eq!(count(&m, "t", 2), Some(1));
        m.record("t", 0, 2, None);
        assert_eq!(count(&m, "t", 0), Some(3), "a round cut short does not lower it");
        m.record("t", 0, 2, Some(3));
        assert_eq!(count(&m, "t", 0), Some(2), "fewer than expected in the whole window lowers it");
    }

    #[test]
    fn one_lookup_in_n_of_a_tool_is_a_recheck() {
        let m = GatherMemory::new(4, &[], 4);
        m.record("t", 0, 1, None);
        m.record("u", 0, 1, None);
        let rechecks: Vec<bool> = (0..8).map(|_| m.expected("t", 0).unwrap().recheck).collect();
        assert_eq!(rechecks, [false, false, false, true, false, false, false, true]);
        assert!(!m.expected("u", 0).unwrap().recheck, "each tool counts its own lookups");
        assert_eq!(m.expected("t", 1), None, "an unknown round is no lookup");
        assert!(!m.expected("t", 0).unwrap().recheck);
        let every = GatherMemory::new(4, &[], 1);
        every.record("t", 0, 1, None);
        assert!((0..3).all(|_| every.expected("t", 0).unwrap().recheck), "1: every round rechecks");
    }

    #[test]
    fn forgets_the_least_recently_used_tool_when_full() {
        let m = GatherMemory::new(2, &[], 16);
        m.record("a", 0, 1, None);
        m.record("b", 0, 2, None);
        assert_eq!(count(&m, "a", 0), Some(1)); // `a` is now the most recent
        m.record("c", 0, 3, None);
        assert_eq!(m.len(), 2);
        assert_eq!(m.expected("b", 0), None, "b was the least recently used");
        assert_eq!(count(&m, "a", 0), Some(1));
        assert_eq!(count(&m, "c", 0), Some(3));
    }

    #[test]
    fn configured_counts_stand_in_for_unseen_rounds() {
        let m = GatherMemory::new(0, &[("ask_three".to_owned(), 3)], 16);
        let k = key(methods::TOOLS_CALL, "ask_three");
        assert_eq!(m.expected(&k, 0), Some(Expected { count: 3, recheck: true }), "a guess rechecks");
        assert_eq!(count(&m, &k, 5), Some(3));
        assert_eq!(m.expected(&key(methods::PROMPTS_GET, "ask_three"), 0), None);
        let m = GatherMemory::new(4, &[("ask_three".to_owned(), 3)], 16);
        m.record(&k, 0, 2, Some(3));
        assert_eq!(
            m.expected(&k, 0),
            Some(Expected { count: 2, recheck: false }),
            "what was seen wins over what was configured"
        );
        assert_eq!(count(&m, &k, 1), Some(3));
    }

    #[test]
    fn bounded_inputs_are_not_remembered() {
        let m = GatherMemory::new(0, &[], 16);
        m.record("a", 0, 1, None);
        assert_eq!(m.expected("a", 0), None, "a zero cap remembers nothing");
        let m = GatherMemory::new(8, &[], 16);
        let long = "x".repeat(MAX_KEY_BYTES + 1);
        m.record(&long, 0, 1, None);
        m.record("a", 64, 1, None);
        m.record("b", 0, 0, None);
        assert_eq!(m.len(), 0);
        m.record("c", 0, 100_000, None);
        assert_eq!(count(&m, "c", 0), Some(usize::from(u16::MAX)));
        let longest = "x".repeat(MAX_KEY_BYTES);
        m.record(&longest, 63, 2, None);
        assert_eq!(
            count(&m, &longest, 63),
            Some(2),
            "a key of the longest length and the last round are kept"
        );
    }

    #[test]
    fn the_one_forgotten_is_always_the_least_recently_used() {
        // Every tool but one is used again before a new one comes: whichever that one is, it
        // alone goes (by use, not by the map's order, which no test could rely on).
        let tools = ["a", "b", "c", "d", "e", "f", "g", "h"];
        for stale in tools {
            let m = GatherMemory::new(tools.len(), &[], 16);
            for t in tools {
                m.record(t, 0, 1, None);
            }
            for t in tools.iter().filter(|t| **t != stale) {
                assert_eq!(count(&m, t, 0), Some(1));
            }
            m.record("new", 0, 1, None);
            assert_eq!(m.expected(stale, 0), None, "{stale} was the least recently used");
            for t in tools.iter().filter(|t| **t != stale) {
                assert_eq!(count(&m, t, 0), Some(1), "{t} was used since");
            }
        }
    }
}
