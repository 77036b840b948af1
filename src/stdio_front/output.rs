//! stdout: one task owns it and writes the lines every request sends it, each whole and in the
//! order it was sent, flushing whenever nothing more is queued. A request's lines stay in order
//! (progress before its result); lines of different requests interleave as they finish.

use bytes::Bytes;
use tokio::io::{AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

/// Lines queued for stdout before a request waits to send more.
pub(super) const QUEUE: usize = 64;

/// Writes every line received until all senders are gone.
pub(super) async fn write_lines<W: AsyncWrite + Unpin>(
    mut out: W,
    mut lines: mpsc::Receiver<Bytes>,
) -> std::io::Result<()> {
    while let Some(line) = lines.recv().await {
        out.write_all(&line).await?;
        out.write_all(b"\n").await?;
        if lines.is_empty() {
            out.flush().await?;
        }
    }
    out.flush().await
}

/// One JSON message as one line. In valid JSON a raw CR or LF can only be whitespace between
/// tokens (a string holds them escaped), so turning them into spaces keeps the message intact;
/// an upstream that pretty-prints its results cannot break the framing.
pub(super) fn one_line(mut message: Vec<u8>) -> Bytes {
    for b in &mut message {
        if *b == b'\n' || *b == b'\r' {
            *b = b' ';
        }
    }
    Bytes::from(message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newlines_between_tokens_become_spaces() {
        let pretty = b"{\n  \"a\": \"x\\ny\"\r\n}".to_vec();
        let line = one_line(pretty);
        assert!(!line.contains(&b'\n'));
        let v: serde_json::Value = serde_json::from_slice(&line).unwrap();
        assert_eq!(v["a"], "x\ny");
    }

    #[tokio::test]
    async fn lines_are_written_whole_and_in_order() {
        let (tx, rx) = mpsc::channel(4);
        let (mut read, write) = tokio::io::duplex(1024);
        let writer = tokio::spawn(write_lines(write, rx));
        tx.send(Bytes::from_static(b"{\"n\":1}")).await.unwrap();
        tx.send(Bytes::from_static(b"{\"n\":2}")).await.unwrap();
        drop(tx);
        writer.await.unwrap().unwrap();
        let mut text = String::new();
        tokio::io::AsyncReadExt::read_to_string(&mut read, &mut text).await.unwrap();
        assert_eq!(text, "{\"n\":1}\n{\"n\":2}\n");
    }
}
