//! Test-only helpers of the authenticator's unit tests: a key source on 127.0.0.1 (a JWKS and
//! an issuer's discovery document, answered by path from a table the test may change, every
//! GET counted), and a log sink to read what a test logged.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The most a request head may take; a key fetch is one short GET.
const MAX_HEAD: usize = 16 * 1024;

type Routes = Arc<Mutex<HashMap<String, (u16, String)>>>;

/// A key source answering GETs by path (404 for any other path).
pub(super) struct KeyServer {
    addr: SocketAddr,
    routes: Routes,
    hits: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl KeyServer {
    pub(super) async fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the key source");
        let addr = listener.local_addr().expect("its address");
        let routes = Routes::default();
        let hits = Arc::<Mutex<Vec<String>>>::default();
        let task = tokio::spawn(serve(listener, routes.clone(), hits.clone()));
        Self { addr, routes, hits, task }
    }

    /// From now on, answers GET `path` with `status` and `body`.
    pub(super) fn answer(&self, path: &str, status: u16, body: impl Into<String>) {
        self.routes.lock().insert(path.to_owned(), (status, body.into()));
    }

    pub(super) fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// How many GETs of `path` were received.
    pub(super) fn hits(&self, path: &str) -> usize {
        self.hits.lock().iter().filter(|p| *p == path).count()
    }
}

impl Drop for KeyServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(listener: TcpListener, routes: Routes, hits: Arc<Mutex<Vec<String>>>) {
    while let Ok((conn, _)) = listener.accept().await {
        tokio::spawn(answer(conn, routes.clone(), hits.clone()));
    }
}

async fn answer(mut conn: TcpStream, routes: Routes, hits: Arc<Mutex<Vec<String>>>) {
    let mut head = Vec::new();
    let mut chunk = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match conn.read(&mut chunk).await {
            Ok(n) if n > 0 && head.len() + n <= MAX_HEAD => head.extend_from_slice(&chunk[..n]),
            _ => return,
        }
    }
    let path = String::from_utf8_lossy(&head).split(' ').nth(1).unwrap_or_default().to_owned();
    hits.lock().push(path.clone());
    let (status, body) = routes.lock().get(&path).cloned().unwrap_or((404, String::new()));
    let reply = format!(
        "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
         connection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = conn.write_all(reply.as_bytes()).await;
}

/// Log lines written by a subscriber of [`LogSink::subscriber`], plain text.
#[derive(Clone, Default)]
pub(super) struct LogSink(Arc<Mutex<Vec<u8>>>);

impl LogSink {
    pub(super) fn subscriber(&self) -> impl tracing::Subscriber + Send + Sync {
        let sink = self.clone();
        tracing_subscriber::fmt().with_ansi(false).with_writer(move || sink.clone()).finish()
    }

    pub(super) fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock()).into_owned()
    }
}

impl std::io::Write for LogSink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
