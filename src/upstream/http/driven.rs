//! The HTTP/1.1 client of a plain `http://` upstream, whose connections are driven by the
//! request that uses them instead of by a task of their own.
//!
//! `hyper-util`'s pooled client spawns every connection as a task: a request is handed to that
//! task to be written, and the response head and every body chunk are handed back. On a plain
//! call that is three thread wake-ups between the request's task and the connection's, which
//! the proxy bench showed to be much of the gateway's added latency (docs/src/benchmarks.md, "A
//! plain call").
//! Here a request leases an idle connection (or opens one, through the same bounded connector),
//! and polls the connection itself while it waits for the head, and its body polls it while it
//! is read; the kernel's readiness wakes the one task that waits.
//!
//! A connection goes back to the idle stack when its body has ended (read to its end, or empty
//! and dropped) and is closed when a body is dropped before its end, as with `hyper-util`. Idle
//! connections are taken newest first, and ones idle for longer than `pool_idle_timeout` are
//! closed when the stack is next used. An idle connection nobody polls notices that the server
//! closed it only when it is next leased: it is then closed and the request goes to the next one,
//! as it does when a request could not be written on a reused connection.
//!
//! `https://` upstreams keep `hyper-util`'s client (TLS, HTTP/2 by ALPN): see [`super::transport`].

use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::header::HOST;
use http::uri::{Authority, PathAndQuery};
use http::{HeaderValue, Request, Response, Uri};
use http_body_util::Full;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::client::conn::http1;
use parking_lot::Mutex;
use tokio::time::Instant;
use tower::Service;

use crate::outbound::{LimitedConnector, LimitedIo};
use crate::upstream::UpstreamError;

type Conn = http1::Connection<LimitedIo, Full<Bytes>>;

/// Most frames read, without waiting, from a body dropped before its end (see its `Drop`).
const DROP_READ_FRAMES: usize = 4;

/// The driven client of one upstream origin, shared by the transport's clones.
#[derive(Clone)]
pub(crate) struct Driven {
    connector: LimitedConnector,
    authority: Authority,
    host: HeaderValue,
    idle: Arc<IdleStack>,
}

/// One connection: its sender and the connection future that does its I/O.
struct Link {
    send: http1::SendRequest<Full<Bytes>>,
    /// `None` once the connection future has completed: it is dropped at once, which is what
    /// tells the sender (and a request queued on it) that the connection is closed. Kept after
    /// it completed, it would leave a request sent to it waiting for an answer nobody reads.
    conn: Option<Conn>,
}

/// Connections waiting for a request, newest last.
struct IdleStack {
    links: Mutex<Vec<(Box<Link>, Instant)>>,
    timeout: Duration,
    max: usize,
}

/// A response body read over a driven connection; it gives its connection back when it ends.
pub(crate) struct DrivenBody {
    incoming: Incoming,
    /// Boxed once when connected, so that a body stays small and moving it costs nothing.
    link: Option<Box<Link>>,
    idle: Arc<IdleStack>,
}

/// The body of an upstream response, from either client.
pub(crate) enum UpstreamBody {
    Pooled(Incoming),
    Driven(DrivenBody),
}

// === impl Driven ===

impl Driven {
    /// A client for `url`'s origin, keeping at most `max_idle` idle connections for at most
    /// `idle_timeout` each.
    pub(crate) fn new(
        connector: LimitedConnector,
        url: &Uri,
        idle_timeout: Duration,
        max_idle: usize,
    ) -> Result<Self, UpstreamError> {
        let authority = url
            .authority()
            .cloned()
            .ok_or_else(|| UpstreamError::Settings(format!("upstream url {url} has no host")))?;
        let host = HeaderValue::from_str(authority.as_str())
            .map_err(|_| UpstreamError::Settings(format!("upstream url {url} has an invalid host")))?;
        let idle = IdleStack { links: Mutex::new(Vec::new()), timeout: idle_timeout, max: max_idle.max(1) };
        Ok(Self { connector, authority, host, idle: Arc::new(idle) })
    }

    /// Sends `req` (an absolute URI on this client's origin) on an idle connection, or on a new
    /// one, and returns the response head; its body drives the connection from then on.
    pub(crate) async fn request(
        &self,
        req: Request<Full<Bytes>>,
    ) -> Result<Response<UpstreamBody>, UpstreamError> {
        let target = req.uri().clone();
        let mut req = self.origin_form(req)?;
        loop {
            let (mut link, reused) = match self.idle.take() {
                Some(link) => (link, true),
                None => (self.connect(&target).await?, false),
            };
            if let Err(e) = link.ready().await {
                if reused {
                    continue; // the server closed it while it was idle: try the next one
                }
                return Err(UpstreamError::Transport(e.into()));
            }
            match link.send(req).await {
                Ok(resp) => {
                    let idle = self.idle.clone();
                    return Ok(resp.map(|incoming| {
                        UpstreamBody::Driven(DrivenBody { incoming, link: Some(link), idle })
                    }));
                }
                Err(mut e) => match e.take_message() {
                    // Not written: a reused connection closed under it. Each retry uses up an
                    // idle connection, and a new one is never retried, so this ends.
                    Some(back) if reused => req = back,
                    _ => return Err(UpstreamError::Transport(e.into_error().into())),
                },
            }
        }
    }

    /// The request line in origin form and a `Host` header, as `hyper-util` sends them (a
    /// server may route an absolute-form target wrongly); the connector gets the absolute URI.
    fn origin_form(&self, mut req: Request<Full<Bytes>>) -> Result<Request<Full<Bytes>>, UpstreamError> {
        if req.uri().authority() != Some(&self.authority) {
            return Err(UpstreamError::Settings(format!(
                "request to {} is not on the upstream's origin {}",
                req.uri(),
                self.authority
            )));
        }
        let path = req.uri().path_and_query().cloned().unwrap_or_else(|| PathAndQuery::from_static("/"));
        *req.uri_mut() = Uri::from(path);
        req.headers_mut().entry(HOST).or_insert_with(|| self.host.clone());
        Ok(req)
    }

    async fn connect(&self, uri: &Uri) -> Result<Box<Link>, UpstreamError> {
        let io =
            self.connector.clone().call(uri.clone()).await.map_err(|e| UpstreamError::Connect(e.into()))?;
        let (send, conn) = http1::handshake(io).await.map_err(|e| UpstreamError::Connect(e.into()))?;
        Ok(Box::new(Link { send, conn: Some(conn) }))
    }
}

// === impl Link ===

impl Link {
    /// Polls the connection's I/O, unless it is closed; drops it when it completes (a server
    /// that closed the connection while it was idle is noticed here, when it is next leased).
    fn drive(&mut self, cx: &mut Context<'_>) {
        if let Some(conn) = &mut self.conn {
            if Pin::new(conn).poll(cx).is_ready() {
                self.conn = None;
            }
        }
    }

    fn is_closed(&self) -> bool {
        self.conn.is_none() || self.send.is_closed()
    }

    async fn ready(&mut self) -> hyper::Result<()> {
        poll_fn(|cx| {
            self.drive(cx);
            self.send.poll_ready(cx)
        })
        .await
    }

    /// Writes the request and waits for the response head, driving the connection meanwhile.
    async fn send(
        &mut self,
        req: Request<Full<Bytes>>,
    ) -> Result<Response<Incoming>, hyper::client::conn::TrySendError<Request<Full<Bytes>>>> {
        let mut head = std::pin::pin!(self.send.try_send_request(req));
        poll_fn(|cx| {
            // The connection first: it writes the request and reads the head it then delivers.
            self.drive(cx);
            head.as_mut().poll(cx)
        })
        .await
    }
}

// === impl IdleStack ===

impl IdleStack {
    fn take(&self) -> Option<Box<Link>> {
        let mut links = self.links.lock();
        Self::expire(&mut links, self.timeout);
        links.pop().map(|(link, _)| link)
    }

    fn put(&self, link: Box<Link>) {
        if link.is_closed() {
            return;
        }
        let mut links = self.links.lock();
        Self::expire(&mut links, self.timeout);
        if links.len() >= self.max {
            links.remove(0);
        }
        links.push((link, Instant::now()));
    }

    /// Closes the connections idle for longer than `timeout` (the oldest are first).
    fn expire(links: &mut Vec<(Box<Link>, Instant)>, timeout: Duration) {
        let fresh = links.iter().position(|(_, since)| since.elapsed() < timeout).unwrap_or(links.len());
        links.drain(..fresh);
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.links.lock().len()
    }
}

// === impl DrivenBody ===

impl DrivenBody {
    fn poll_frame(&mut self, cx: &mut Context<'_>) -> Poll<Option<hyper::Result<Frame<Bytes>>>> {
        let mut frame = Pin::new(&mut self.incoming).poll_frame(cx);
        if frame.is_pending() {
            if let Some(link) = &mut self.link {
                // The connection reads what the body waits for, then the body takes it.
                link.drive(cx);
                frame = Pin::new(&mut self.incoming).poll_frame(cx);
            }
        }
        match &frame {
            Poll::Ready(None) => self.give_back(),
            Poll::Ready(Some(Err(_))) => self.link = None,
            _ => {}
        }
        frame
    }

    fn give_back(&mut self) {
        if let Some(link) = self.link.take() {
            self.idle.put(link);
        }
    }
}

impl Drop for DrivenBody {
    fn drop(&mut self) {
        // A short body is often dropped unread (a 202, an `{}` whose status was all a caller
        // needed). What has already arrived is read without waiting, and if that ends the body
        // its connection is free; otherwise it is closed with the body, as a body dropped
        // before its end is.
        let mut cx = Context::from_waker(std::task::Waker::noop());
        for _ in 0..DROP_READ_FRAMES {
            if self.link.is_none() || self.incoming.is_end_stream() {
                break;
            }
            match self.poll_frame(&mut cx) {
                Poll::Ready(Some(Ok(_))) => {}
                _ => break,
            }
        }
        if self.incoming.is_end_stream() {
            self.give_back();
        }
    }
}

// === impl UpstreamBody ===

impl Body for UpstreamBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<hyper::Result<Frame<Bytes>>>> {
        match self.get_mut() {
            Self::Pooled(body) => Pin::new(body).poll_frame(cx),
            Self::Driven(body) => body.poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Self::Pooled(body) => body.is_end_stream(),
            Self::Driven(body) => body.incoming.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Self::Pooled(body) => body.size_hint(),
            Self::Driven(body) => body.incoming.size_hint(),
        }
    }
}

#[cfg(test)]
mod tests;
