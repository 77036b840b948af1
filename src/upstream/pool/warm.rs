//! Keeping stdio processes warm: started ahead of demand, so that a call which finds no idle
//! session of its key does not pay the process start.
//!
//! # What "warm" means
//! A warm process has been spawned, and its stdin writer, stdout reader and stderr log run, but
//! it has not been sent `initialize`. The first call that finds no idle session of its key
//! takes it and initialises it declaring that call's own client capabilities.
//!
//! Why not keep sessions initialised ahead instead: the capabilities declared at `initialize`
//! and the principal make up the pool key, and neither is known before a call comes. A
//! session initialised ahead would serve only the one key guessed for it, and a wrong guess
//! leaves a process nobody may use. A process waiting for `initialize` serves any key. And the
//! start is what costs: a Node server loads its modules for hundreds of milliseconds before it
//! reads stdin, while `initialize` and the settling `ping` are two round trips on a pipe. So a
//! warm lease pays those two round trips and never the start, whichever client comes. A server
//! that acts on `notifications/initialized` (the filesystem server asks `roots/list`) does so
//! at the lease, exactly as after a cold start.
//!
//! # Bounds
//! At most `pool_min_warm` processes are kept warm. They count against `pool_max_sessions` and
//! only fill free room: a warm process never evicts an idle session or keeps a call waiting
//! (a call that must start a session takes a warm one instead). One task per pool refills when
//! a process was taken or room was freed, and checks periodically for warm processes that died.
//! A process that died while warm, or a spawn that failed, backs the refill off (doubling, up
//! to a bound), so a broken command is not restarted in a loop. Shutdown
//! ([`super::Pool::close_idle`]) stops the warm processes and the refill; dropping the pool
//! stops them too.

use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::sync::Notify;

use super::PoolInner;
use crate::upstream::session::Spare;

/// How often the task looks for warm processes that died, when nothing wakes it.
const CHECK: Duration = Duration::from_secs(1);
/// The refill's back-off after a death or a failed spawn: first, and most.
const BACKOFF_MIN: Duration = Duration::from_millis(200);
const BACKOFF_MAX: Duration = Duration::from_secs(30);

/// How one refill went.
#[derive(Debug, PartialEq, Eq)]
enum Fill {
    /// Full, or no room.
    Done,
    /// A warm process had died, or a spawn failed: wait before the next attempt.
    Troubled,
    /// The pool shut down, or its transport has no warm sessions: the task ends.
    Over,
}

/// Keeps `pool` at its minimum of warm processes until it shuts down or is dropped.
pub(super) async fn keep_warm(pool: Weak<PoolInner>, rewarm: Arc<Notify>) {
    let mut backoff = BACKOFF_MIN;
    loop {
        let fill = match pool.upgrade() {
            Some(inner) => inner.fill(),
            None => return,
        };
        match fill {
            Fill::Over => return,
            Fill::Done => {
                backoff = BACKOFF_MIN;
                tokio::select! {
                    biased;
                    () = rewarm.notified() => {}
                    () = tokio::time::sleep(CHECK) => {}
                }
            }
            Fill::Troubled => {
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(BACKOFF_MAX);
            }
        }
    }
}

/// Logs warm processes found dead when a call came for one.
pub(super) fn log_dead(dead: &[Spare]) {
    for spare in dead {
        tracing::warn!(pid = spare.pid(), "a warm upstream process ended before its first call");
    }
}

// === impl PoolInner ===

impl PoolInner {
    /// Drops dead warm processes and starts new ones up to the minimum, within free room.
    ///
    /// Each start happens under the pool's lock, so no call can take the room meanwhile and
    /// the total bound holds exactly; starting a process (fork and exec) returns in about a
    /// millisecond, and the child's own start-up runs afterwards, unlocked.
    fn fill(&self) -> Fill {
        let min = self.settings().pool_min_warm;
        let max = self.settings().pool_max_sessions;
        let mut state = self.state.lock();
        if state.closed {
            return Fill::Over;
        }
        let (alive, dead): (Vec<_>, Vec<_>) = state.warm.drain(..).partition(Spare::is_alive);
        state.warm.extend(alive);
        let died = std::mem::take(&mut state.warm_died) + dead.len();
        log_dead(&dead);
        let mut fill = if died > 0 { Fill::Troubled } else { Fill::Done };
        while state.warm.len() < min && state.total() < max {
            match self.transport.prestart() {
                None => {
                    fill = Fill::Over;
                    break;
                }
                Some(Ok(spare)) => state.warm.push_back(spare),
                Some(Err(e)) => {
                    tracing::warn!(error = %e, "could not start a warm upstream process");
                    fill = Fill::Troubled;
                    break;
                }
            }
        }
        self.admission.metrics().warm.set(state.warm.len() as i64);
        fill
    }
}

#[cfg(test)]
pub(super) mod tests {
    use std::time::Duration;

    use serde_json::json;
    use tracing::Level;

    use super::*;
    use crate::logging::captured::{capture, logged};
    use crate::upstream::{Lease, Pool, PoolKey, StdioSettings, UpstreamError, UpstreamSettings};

    /// The pool key of the tests' calls.
    fn key() -> PoolKey {
        named("p")
    }

    /// What a call that finds no idle session takes: the oldest warm process.
    fn take_warm(pool: &Pool) -> Spare {
        match pool.inner.acquire_pooled(&key(), false) {
            super::super::Step::Warm(spare) => spare,
            _ => panic!("a call without an idle session takes a warm process"),
        }
    }

    /// Lets the pool's refill task run, with no time passing on the paused clock.
    async fn turns() {
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
    }

    fn stdio(program: &str, args: &[&str], min_warm: usize) -> UpstreamSettings {
        let stdio = StdioSettings::new(program, args.iter().map(|a| a.to_string()).collect());
        UpstreamSettings { pool_min_warm: min_warm, ..UpstreamSettings::stdio(stdio) }
    }

    /// Kills the pool's one warm process and waits until its reader has seen it end; its pid.
    /// Real time, not the paused clock (which a yield does not move): the kernel ends the
    /// process, and its stdout reader, run at each yield, sees it.
    async fn kill_the_warm_process(pool: &Pool) -> u32 {
        let warm: Vec<u32> = pool.inner.state.lock().warm.iter().map(Spare::pid).collect();
        let [pid] = warm[..] else { panic!("one warm process: {warm:?}") };
        let killed = std::process::Command::new("kill").args(["-KILL", &pid.to_string()]).status();
        assert!(killed.is_ok_and(|s| s.success()));
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while pool.inner.state.lock().warm.front().is_some_and(Spare::is_alive) {
            assert!(std::time::Instant::now() < deadline, "the killed process never ended");
            std::thread::sleep(Duration::from_millis(2));
            tokio::task::yield_now().await;
        }
        pid
    }

    /// After a death, the refill backs off: the next process taken is replaced only after
    /// 200 ms. Closes the pool.
    async fn backs_off_after_a_death(pool: Pool) {
        let warm = || pool.inner.state.lock().warm.len();
        let spare = take_warm(&pool);
        turns().await;
        assert_eq!(warm(), 0, "backing off after a death");
        tokio::time::advance(BACKOFF_MIN).await;
        turns().await;
        assert_eq!(warm(), 1, "refilled once the back-off is over");
        spare.close().await;
        pool.close_idle().await;
    }

    /// A command that cannot start is tried again after 0.2, 0.4, 0.8, 1.6 s...: five
    /// attempts in the first 3.2 s (the sixth comes after 6 s), not a loop. The clock is moved
    /// by hand, in steps of 10 ms (a wake-up can come a step late): a refill that never waited
    /// would keep the runtime busy, and a paused clock then never moves by itself.
    #[tokio::test(start_paused = true)]
    async fn a_command_that_cannot_start_is_retried_ever_more_slowly() {
        let (captured, _guard) = capture(Level::WARN);
        let pool = Pool::new(stdio("/nonexistent/mrtr-no-such-server", &[], 1)).unwrap();
        for _ in 0..320 {
            tokio::time::advance(Duration::from_millis(10)).await;
        }
        let attempts = captured.text().matches("could not start a warm upstream process").count();
        assert_eq!(attempts, 5, "{}", captured.text());
        drop(pool);
    }

    /// Taking a warm process wakes the refill at once: the next is started with no time passing
    /// (the periodic check would start it only a second later).
    #[tokio::test(start_paused = true)]
    async fn taking_a_warm_process_starts_the_next_at_once() {
        let pool = Pool::new(stdio("/bin/sleep", &["30"], 1)).unwrap();
        let warm = || pool.inner.state.lock().warm.len();
        turns().await;
        assert_eq!(warm(), 1, "the first warm process");
        let spare = take_warm(&pool);
        assert_eq!(warm(), 0);
        turns().await;
        assert_eq!(warm(), 1, "refilled at once");
        spare.close().await;
        pool.close_idle().await;
    }

    /// Warm processes fill only free room: with two places, one taken by a starting session,
    /// one warm process is kept, not two.
    #[tokio::test(start_paused = true)]
    async fn a_starting_session_counts_against_the_room_for_warm_processes() {
        let settings = UpstreamSettings { pool_max_sessions: 2, ..stdio("/bin/sleep", &["30"], 2) };
        let pool = Pool::new(settings).unwrap();
        let warm = || pool.inner.state.lock().warm.len();
        turns().await;
        assert_eq!(warm(), 2, "both places warm at first");
        assert_eq!(pool.size(), 2, "warm processes count in the pool's size");
        let spare = take_warm(&pool);
        turns().await;
        assert_eq!(warm(), 1, "the other place is the starting session's");
        spare.close().await;
        pool.close_idle().await;
    }

    /// A call that finds the warm process dead (and starts a session of its own) wakes the
    /// refill at once too.
    #[tokio::test(start_paused = true)]
    async fn a_warm_process_found_dead_by_a_call_is_replaced_at_once() {
        let pool = Pool::new(stdio("/bin/sleep", &["30"], 1)).unwrap();
        let warm = || pool.inner.state.lock().warm.iter().map(Spare::pid).collect::<Vec<_>>();
        turns().await;
        let pid = kill_the_warm_process(&pool).await;
        let step = pool.inner.acquire_pooled(&key(), false);
        assert!(matches!(step, super::super::Step::Start), "no warm process left to take");
        turns().await;
        assert!(matches!(warm()[..], [next] if next != pid), "replaced at once: {:?}", warm());
        backs_off_after_a_death(pool).await;
    }

    /// A warm process that dies while no call wants it is found by the periodic check, which
    /// logs it, starts the next at once, and backs off before another refill.
    #[tokio::test(start_paused = true)]
    async fn a_warm_process_that_dies_unused_is_found_and_replaced_by_the_check() {
        let (captured, _guard) = capture(Level::WARN);
        let pool = Pool::new(stdio("/bin/sleep", &["30"], 1)).unwrap();
        let warm = || pool.inner.state.lock().warm.iter().map(Spare::pid).collect::<Vec<_>>();
        turns().await;
        let pid = kill_the_warm_process(&pool).await;
        assert_eq!(warm(), [pid], "nothing looked yet");
        tokio::time::advance(CHECK).await;
        turns().await;
        assert!(matches!(warm()[..], [next] if next != pid), "replaced at the check: {:?}", warm());
        assert!(captured.text().contains(&format!("pid={pid}")), "{}", captured.text());
        backs_off_after_a_death(pool).await;
    }

    /// A legacy server in `sh`, enough for a session: it answers `initialize` and `ping`, and
    /// ends with its stdin.
    const SH_SERVER: &str = r#"while IFS= read -r line; do
  id=$(printf '%s' "$line" | sed -n 's/.*"id":\([0-9][0-9]*\).*/\1/p')
  case "$line" in
    *'"method":"initialize"'*) printf '{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"sh","version":"1"}}}\n' "$id";;
    *'"method":"ping"'*) printf '{"jsonrpc":"2.0","id":%s,"result":{}}\n' "$id";;
  esac
done"#;

    /// The `sh` server's pool: one process kept warm, `max` sessions, each idle for at most
    /// `idle` (the reaper looks every `idle` / 2).
    pub(in crate::upstream::pool) fn sh_pool(max: usize, idle: Duration) -> Pool {
        let settings = UpstreamSettings {
            pool_max_sessions: max,
            pool_idle_timeout: idle,
            ..stdio("/bin/sh", &["-c", SH_SERVER], 1)
        };
        Pool::new(settings).unwrap()
    }

    /// The pool key of `principal`'s calls.
    pub(in crate::upstream::pool) fn named(principal: &str) -> PoolKey {
        (Arc::from(principal), 0)
    }

    /// Moves the paused clock on by `by`, in steps of 7 ms (the refill's 1 s check then seldom
    /// falls in the step where the reaper runs), until `done` holds; false if it never did.
    async fn advance_until(by: Duration, done: impl Fn() -> bool) -> bool {
        let step = Duration::from_millis(7);
        let mut moved = Duration::ZERO;
        while moved < by {
            tokio::time::advance(step).await;
            turns().await;
            moved += step;
            if done() {
                return true;
            }
        }
        false
    }

    /// The reaper's eviction of an idle session wakes the refill at once: the room it leaves is
    /// a warm process's, with no more time passing (the periodic check would take up to 1 s).
    /// The session is opened on the real clock (a handshake is real I/O), then the clock stops.
    #[tokio::test]
    async fn an_idle_session_evicted_by_the_reaper_makes_room_for_a_warm_process_at_once() {
        let pool = sh_pool(1, Duration::from_secs(10));
        let (idle, warm) = (|| pool.inner.state.lock().idle.len(), || pool.inner.state.lock().warm.len());
        let lease = pool.lease(named("a"), &json!({})).await.unwrap();
        tokio::time::pause();
        drop(lease);
        assert_eq!((idle(), warm()), (1, 0), "the one place is the idle session's");
        // Stale from 10 s on, found at the reaper's next look, at most 5 s later.
        let evicted = advance_until(Duration::from_millis(15_100), || idle() == 0).await;
        assert!(evicted, "evicted within 15 s of its last use");
        assert_eq!(warm(), 1, "a warm process in its place at once");
        pool.close_idle().await;
    }

    /// So does a call that finds a stale idle session and drops it: here while it reuses
    /// another, so that only the dropped session can wake the refill.
    #[tokio::test]
    async fn a_stale_session_dropped_by_a_call_makes_room_for_a_warm_process_at_once() {
        let pool = sh_pool(2, Duration::from_secs(60));
        let (idle, warm) = (|| pool.inner.state.lock().idle.len(), || pool.inner.state.lock().warm.len());
        let stale = pool.lease(named("a"), &json!({})).await.unwrap();
        let fresh = pool.lease(named("b"), &json!({})).await.unwrap();
        tokio::time::pause();
        // The reaper runs every 30 s from the pool's start. Dropped 15 s in, the stale session
        // reaches its 60 s half-way between two runs, away from either.
        assert!(!advance_until(Duration::from_secs(15), || false).await);
        drop(stale);
        assert!(!advance_until(Duration::from_secs(59), || idle() == 0).await, "not stale yet");
        drop(fresh);
        assert!(!advance_until(Duration::from_secs(2), || idle() < 2).await, "no reaper run since");
        assert_eq!((idle(), warm()), (2, 0), "both places are idle sessions'");
        let step = pool.inner.acquire_pooled(&named("b"), false);
        assert!(matches!(step, super::super::Step::Reuse(_)), "the fresh session is reused");
        turns().await;
        assert_eq!((idle(), warm()), (0, 1), "the stale one dropped, a warm process in its place at once");
        drop(step);
        pool.close_idle().await;
    }

    /// A warm process that dies at its `initialize` gives way to a process started for the
    /// call, which the call then gets: the failure was that process's, not the upstream's.
    #[tokio::test]
    async fn a_warm_process_that_dies_at_its_initialize_gives_way_to_a_fresh_one() {
        let (pool, lease) = lease_after_a_warm_process_that("read -r line; exit 3").await;
        assert!(lease.is_ok(), "the call's own process served it: {:?}", lease.err());
        let opened = &pool.inner.admission.metrics().opened;
        assert_eq!(opened.with_label_values(&["cold"]).get(), 1);
        assert_eq!(opened.with_label_values(&["warm"]).get(), 0);
        drop(lease);
        pool.close_idle().await;
    }

    /// One that refuses its `initialize` speaks for the upstream: the call gets the refusal,
    /// and no other process is tried.
    #[tokio::test]
    async fn a_warm_process_that_refuses_its_initialize_fails_the_call() {
        let refuse = r#"read -r line; echo '{"jsonrpc":"2.0","id":0,"error":{"code":-32603,"message":"no"}}'; read -r line"#;
        let (pool, lease) = lease_after_a_warm_process_that(refuse).await;
        assert!(matches!(lease, Err(UpstreamError::Initialize(_))), "{lease:?}");
        assert_eq!(pool.inner.admission.metrics().opened.with_label_values(&["cold"]).get(), 0);
        pool.close_idle().await;
    }

    /// A pool keeping one process warm whose first process runs `first` (any other is the `sh`
    /// server), and a call's lease once that process is warm.
    async fn lease_after_a_warm_process_that(first: &str) -> (Pool, Result<Lease, UpstreamError>) {
        let dir = tempfile::tempdir().unwrap();
        let mark = dir.path().join("first");
        let script = format!(r#"mkdir "$0" 2>/dev/null && {{ {first}; exit 3; }}; {SH_SERVER}"#);
        let pool = Pool::new(stdio("/bin/sh", &["-c", &script, mark.to_str().unwrap()], 1)).unwrap();
        turns().await;
        assert_eq!(pool.inner.state.lock().warm.len(), 1, "the warm process, started first");
        // Its mark made before the call's own process could race it for the mark.
        let marked = tokio::time::timeout(Duration::from_secs(5), async {
            while !mark.exists() {
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        });
        assert!(marked.await.is_ok(), "the warm process runs its script");
        let lease = pool.lease(named("a"), &json!({})).await;
        (pool, lease)
    }

    /// Only a pool asked to keep processes warm runs the task that keeps them: besides the
    /// reaper of idle sessions, one task more with a warm process to keep, none without.
    #[tokio::test]
    async fn the_keep_warm_task_runs_only_when_a_process_is_to_be_kept_warm() {
        let tasks = || tokio::runtime::Handle::current().metrics().num_alive_tasks();
        for (min_warm, spawned) in [(0, 1), (1, 2)] {
            let before = tasks();
            let pool = Pool::new(stdio("/bin/sleep", &["30"], min_warm)).unwrap();
            assert_eq!(tasks(), before + spawned, "pool_min_warm {min_warm}");
            pool.close_idle().await;
        }
    }

    /// A warm process found dead is logged with its pid.
    #[tokio::test]
    async fn a_warm_process_found_dead_is_logged_with_its_pid() {
        let spare = crate::upstream::tests::spare_of("/bin/true", &[]);
        let ended = tokio::time::timeout(Duration::from_secs(5), async {
            while spare.is_alive() {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        });
        assert!(ended.await.is_ok(), "/bin/true ends at once");
        let ((), text) = logged(Level::WARN, || log_dead(std::slice::from_ref(&spare)));
        assert!(text.contains("a warm upstream process ended before its first call"), "{text}");
        assert!(text.contains(&format!("pid={}", spare.pid())), "{text}");
    }
}
