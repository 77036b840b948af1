//! Test support: the log lines code writes, captured on the calling thread, so a test can check
//! what reaches the log (and what must not).
//!
//! One subscriber serves the whole test process, installed as the global default the first time
//! a test captures. It writes only on a thread that is capturing, at the level that thread asked
//! for; everywhere else it writes nothing. Its filter is asked at every event and span (and by
//! `tracing::enabled!`), never cached per callsite: every callsite's interest is "sometimes".
//! A subscriber set per test (`set_default`) does not give that. If a callsite first registers
//! on another thread while a test installs its subscriber, the callsite can keep a stale
//! "never" interest, and the very line that test reads is lost.

use std::cell::RefCell;
use std::io::Write;
use std::sync::{Arc, Once};

use parking_lot::Mutex;
use tracing::subscriber::Interest;
use tracing::{Level, Metadata, Subscriber};
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::Layer;

thread_local! {
    /// This thread's capture, while a [`Capturing`] guard lives.
    static CAPTURE: RefCell<Option<(Captured, Level)>> = const { RefCell::new(None) };
}

/// What a thread's capture wrote.
#[derive(Clone, Default)]
pub(crate) struct Captured(Arc<Mutex<Vec<u8>>>);

impl Captured {
    /// Everything written so far, as text.
    pub(crate) fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock()).into_owned()
    }
}

/// Ends this thread's capture when dropped.
pub(crate) struct Capturing(());

impl Drop for Capturing {
    fn drop(&mut self) {
        CAPTURE.with(|c| c.borrow_mut().take());
    }
}

/// Captures every log line at `level` and above written on this thread while the guard lives.
pub(crate) fn capture(level: Level) -> (Captured, Capturing) {
    install();
    let captured = Captured::default();
    CAPTURE.with(|c| *c.borrow_mut() = Some((captured.clone(), level)));
    (captured, Capturing(()))
}

/// Runs `f` with every log line at `level` and above captured: its value, and what it logged.
pub(crate) fn logged<R>(level: Level, f: impl FnOnce() -> R) -> (R, String) {
    let (captured, guard) = capture(level);
    let value = f();
    drop(guard);
    (value, captured.text())
}

fn install() {
    static INSTALLED: Once = Once::new();
    INSTALLED.call_once(|| {
        let lines = tracing_subscriber::fmt::layer().with_ansi(false).with_writer(ThreadSink);
        let subscriber = tracing_subscriber::registry().with(ThreadFilter).with(lines);
        tracing::subscriber::set_global_default(subscriber)
            .expect("no other global subscriber in the library's tests");
    });
}

/// The subscriber's filter: this thread's capture level, asked at every event and span.
struct ThreadFilter;

impl<S: Subscriber> Layer<S> for ThreadFilter {
    fn register_callsite(&self, _: &'static Metadata<'static>) -> Interest {
        Interest::sometimes()
    }

    fn enabled(&self, meta: &Metadata<'_>, _: Context<'_, S>) -> bool {
        wanted(meta)
    }
}

/// Whether this thread captures `meta`'s level.
fn wanted(meta: &Metadata<'_>) -> bool {
    CAPTURE.with(|c| c.borrow().as_ref().is_some_and(|(_, level)| meta.level() <= level))
}

/// Writes to the capture of the thread that formats the line (the thread of its event).
struct ThreadSink;

/// One line's writer: what the thread's capture holds when the line is written.
struct ThreadWriter(Option<Captured>);

impl<'a> MakeWriter<'a> for ThreadSink {
    type Writer = ThreadWriter;

    fn make_writer(&'a self) -> Self::Writer {
        ThreadWriter(CAPTURE.with(|c| c.borrow().as_ref().map(|(captured, _)| captured.clone())))
    }
}

impl Write for ThreadWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if let Some(captured) = &self.0 {
            captured.0.lock().extend_from_slice(buf);
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_capturing_thread_at_its_level_is_written() {
        let (value, text) = logged(Level::INFO, || {
            tracing::info!("kept");
            tracing::debug!("below the level");
            let other = std::thread::spawn(|| tracing::warn!("another thread"));
            other.join().unwrap();
            (tracing::enabled!(Level::INFO), tracing::enabled!(Level::DEBUG))
        });
        assert_eq!(value, (true, false));
        assert!(text.contains("kept"), "{text}");
        assert!(!text.contains("below the level") && !text.contains("another thread"), "{text}");
        tracing::info!("after the capture");
        assert!(!CAPTURE.with(|c| c.borrow().is_some()));
    }
}
