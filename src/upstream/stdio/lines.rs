//! Newline-delimited framing of a child's output, with a bound on a line's length: a broken or
//! hostile process cannot make the gateway buffer without limit.
//!
//! [`LineReader::next`] is cancel-safe (a `select!` may drop it between lines or inside one):
//! the unfinished line lives in the reader, and input is consumed only once it has been copied.

use std::io;

use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};

/// One framed line.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Line {
    /// A line without its `\n`.
    Text(Vec<u8>),
    /// A line longer than the bound; the rest of it is skipped.
    TooLong,
}

/// Reads lines of at most `max` bytes.
pub(crate) struct LineReader<R> {
    reader: BufReader<R>,
    line: Vec<u8>,
    max: usize,
    /// Inside a line already reported as too long.
    discarding: bool,
}

// === impl LineReader ===

impl<R: AsyncRead + Unpin> LineReader<R> {
    pub(crate) fn new(inner: R, max: usize) -> Self {
        Self { reader: BufReader::new(inner), line: Vec::new(), max, discarding: false }
    }

    /// The next line, or `None` at the end of the stream (a last line without `\n` counts).
    pub(crate) async fn next(&mut self) -> io::Result<Option<Line>> {
        loop {
            let buf = self.reader.fill_buf().await?;
            if buf.is_empty() {
                let last = std::mem::take(&mut self.line);
                let skipped = std::mem::take(&mut self.discarding);
                return Ok((!last.is_empty() && !skipped).then_some(Line::Text(last)));
            }
            let newline = memchr::memchr(b'\n', buf);
            let chunk = &buf[..newline.unwrap_or(buf.len())];
            let overflow = !self.discarding && self.line.len() + chunk.len() > self.max;
            if !self.discarding && !overflow {
                self.line.extend_from_slice(chunk);
            }
            let used = newline.map_or(buf.len(), |i| i + 1);
            self.reader.consume(used);
            if overflow {
                self.line = Vec::new();
                self.discarding = newline.is_none();
                return Ok(Some(Line::TooLong));
            }
            if newline.is_some() {
                if std::mem::take(&mut self.discarding) {
                    continue;
                }
                return Ok(Some(Line::Text(std::mem::take(&mut self.line))));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use tokio::task::JoinHandle;

    use super::*;

    async fn all(input: &'static [u8], max: usize) -> Vec<Line> {
        let mut reader = LineReader::new(input, max);
        let mut out = Vec::new();
        while let Some(line) = reader.next().await.unwrap() {
            out.push(line);
        }
        out
    }

    fn text(s: &str) -> Line {
        Line::Text(s.as_bytes().to_vec())
    }

    #[tokio::test]
    async fn lines_are_split_and_a_last_partial_line_counts() {
        assert_eq!(all(b"a\n\nbc\nd", 8).await, vec![text("a"), text(""), text("bc"), text("d")]);
    }

    #[tokio::test]
    async fn an_overlong_line_is_reported_once_and_skipped() {
        let got = all(b"ok\n0123456789\nafter\nabcd\n", 4).await;
        assert_eq!(got, vec![text("ok"), Line::TooLong, Line::TooLong, text("abcd")]);
        assert_eq!(all(b"0123456789", 4).await, vec![Line::TooLong]);
    }

    /// A reader of `bytes` written into a 3-byte pipe, which hands it every line in pieces,
    /// and the writer's task.
    fn piped(bytes: &'static [u8], max: usize) -> (LineReader<tokio::io::DuplexStream>, JoinHandle<()>) {
        let (mut tx, rx) = tokio::io::duplex(3);
        let writer = tokio::spawn(async move {
            use tokio::io::AsyncWriteExt;
            tx.write_all(bytes).await.unwrap();
        });
        (LineReader::new(rx, max), writer)
    }

    #[tokio::test]
    async fn an_overlong_line_across_reads_leaves_nothing_of_it_to_the_next_line() {
        // The reader learns the line is too long long before its end.
        let (mut reader, writer) = piped(b"0123456789abcdef\nok\n", 4);
        assert_eq!(reader.next().await.unwrap(), Some(Line::TooLong));
        assert_eq!(reader.next().await.unwrap(), Some(text("ok")));
        writer.await.unwrap();
        assert_eq!(reader.next().await.unwrap(), None);
    }

    #[tokio::test]
    async fn a_line_split_across_reads_is_joined() {
        let (mut reader, writer) = piped(b"{\"a\":1}\nlonger line\n", 64);
        assert_eq!(reader.next().await.unwrap(), Some(text("{\"a\":1}")));
        assert_eq!(reader.next().await.unwrap(), Some(text("longer line")));
        writer.await.unwrap();
        assert_eq!(reader.next().await.unwrap(), None);
    }
}
