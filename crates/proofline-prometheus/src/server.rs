//! The `/metrics` and `/healthz` endpoint: one named thread with a single-threaded tokio
//! runtime and hyper. A scrape only encodes the registry.
//!
//! Bounded like a server on a network has to be ([`ServeOptions`]): open connections are
//! capped, a connection that sends nothing for the idle timeout is closed, so is one that
//! starts a request and does not finish its headers in time, and a failing `accept` (out of
//! file descriptors) closes the oldest idle connection or backs off instead of spinning.
//! Only idle connections are closed (between requests, or still sending a request's
//! headers, the oldest first); one whose request is being answered is not, until its
//! response body has been handed to the socket.

use std::collections::HashMap;
use std::convert::Infallible;
use std::io;
use std::net::{SocketAddr, TcpListener};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{ACCEPT, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::oneshot;

use crate::Metrics;
#[cfg(feature = "web-config")]
use crate::web::WebConfig;

/// Where the endpoint listens unless told otherwise: loopback only.
pub const DEFAULT_ADDR: &str = "127.0.0.1:9464";
/// Default [`ServeOptions::max_connections`].
pub const DEFAULT_MAX_CONNECTIONS: usize = 64;
/// Default [`ServeOptions::idle_timeout`]: longer than a scrape interval, so that a
/// Prometheus server keeps its connection between scrapes.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// Default [`ServeOptions::header_read_timeout`].
pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// The longest the accept loop waits after an error it cannot fix by closing an idle
/// connection (it starts at 5 ms and doubles).
pub const MAX_ACCEPT_BACKOFF: Duration = Duration::from_secs(1);
/// The answer to plain HTTP on a TLS port.
#[cfg(feature = "web-config")]
const PLAIN_TO_TLS: &[u8] = b"HTTP/1.0 400 Bad Request\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\nClient sent an HTTP request to an HTTPS server: use https://\n";

/// How often connections are checked against their timeouts.
const REAP_EVERY: Duration = Duration::from_millis(100);

/// The endpoint's limits and security: `ServeOptions::default()`, then what differs, e.g.
/// `ServeOptions::default().max_connections(16)`. Every connection it closes on its own is
/// idle (between requests, or still sending the headers of one); one whose request is being
/// answered is kept until its response body was handed over. The fields are private, so
/// that a new option is no breaking change.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    max_connections: usize,
    idle_timeout: Duration,
    header_read_timeout: Duration,
    #[cfg(feature = "web-config")]
    web: Option<Arc<WebConfig>>,
}

impl ServeOptions {
    /// Open connections at most (at least 1). A new one past the cap closes the connection
    /// idle the longest (a slow sender of headers counts from its first byte); when none is
    /// idle, the new one is closed at once. Default [`DEFAULT_MAX_CONNECTIONS`].
    pub fn max_connections(mut self, n: usize) -> Self {
        self.max_connections = n;
        self
    }

    /// A connection that sends nothing for this long between requests (or after
    /// connecting) is closed. Default [`DEFAULT_IDLE_TIMEOUT`].
    pub fn idle_timeout(mut self, timeout: Duration) -> Self {
        self.idle_timeout = timeout;
        self
    }

    /// A request's headers must be complete this long after its first byte, or the
    /// connection is closed (a slow client cannot hold one open by trickling bytes).
    /// Default [`DEFAULT_HEADER_READ_TIMEOUT`].
    pub fn header_read_timeout(mut self, timeout: Duration) -> Self {
        self.header_read_timeout = timeout;
        self
    }

    /// TLS, client certificates and basic authentication ([`WebConfig`]); without it (the
    /// default), plain HTTP: anyone who reaches the address may read. With TLS, the
    /// handshake counts as the start of the first request: it must end, and the request's
    /// headers with it, within the header-read timeout. (The `web-config` feature.)
    #[cfg(feature = "web-config")]
    pub fn web(mut self, web: Arc<WebConfig>) -> Self {
        self.web = Some(web);
        self
    }

    /// The web configuration given, if any.
    #[cfg(feature = "web-config")]
    pub fn web_config(&self) -> Option<&Arc<WebConfig>> {
        self.web.as_ref()
    }
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            header_read_timeout: DEFAULT_HEADER_READ_TIMEOUT,
            #[cfg(feature = "web-config")]
            web: None,
        }
    }
}

/// Why the endpoint could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// The address could not be bound (in use, or not a local address).
    #[error("cannot listen on {addr}: {source} (choose another address or port)")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// Why.
        source: io::Error,
    },
    /// The server thread or its runtime could not start.
    #[error("cannot start the metrics server: {0}")]
    Start(io::Error),
}

/// What the endpoint did with connections, since it started (kept for a debugger and
/// future metrics; nothing outside reads it).
#[derive(Debug, Default)]
pub(crate) struct ConnectionStats {
    /// Connections accepted.
    pub accepted: AtomicU64,
    /// Connections open now.
    pub open: AtomicU64,
    /// Closed for sending nothing within the idle timeout.
    pub closed_idle: AtomicU64,
    /// Closed for not finishing a request's headers within the header-read timeout.
    pub closed_header_timeout: AtomicU64,
    /// Idle connections closed to make room (the cap, or out of file descriptors).
    pub closed_for_room: AtomicU64,
    /// New connections closed at once: at the cap, with no idle one to close.
    pub refused_at_cap: AtomicU64,
    /// `accept` errors (e.g. out of file descriptors).
    pub accept_errors: AtomicU64,
}

/// A running endpoint; stops when dropped.
#[derive(Debug)]
#[must_use = "the endpoint stops when the MetricsServer is dropped: keep it as long as metrics are served"]
pub struct MetricsServer {
    addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl MetricsServer {
    /// The address it listens on (the real port when 0 was asked for).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting and waits for the server thread.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Serves `metrics` on `addr` (`/metrics`, `/healthz`) with the default [`ServeOptions`].
/// Binding happens before this returns, so an address in use is an immediate error.
pub fn serve(metrics: Arc<Metrics>, addr: SocketAddr) -> Result<MetricsServer, ServeError> {
    serve_with(metrics, addr, ServeOptions::default())
}

/// [`serve`], with limits of one's own.
pub fn serve_with(
    metrics: Arc<Metrics>,
    addr: SocketAddr,
    options: ServeOptions,
) -> Result<MetricsServer, ServeError> {
    let listener = TcpListener::bind(addr).map_err(|source| ServeError::Bind { addr, source })?;
    listener.set_nonblocking(true).map_err(ServeError::Start)?;
    let local = listener.local_addr().map_err(ServeError::Start)?;
    let (stop_tx, stop_rx) = oneshot::channel();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .map_err(ServeError::Start)?;
    let server = Server {
        metrics,
        options: ServeOptions {
            max_connections: options.max_connections.max(1),
            ..options
        },
        stats: Arc::new(ConnectionStats::default()),
        conns: Arc::new(Mutex::new(Conns::default())),
        busy_answers: Arc::default(),
    };
    let thread = std::thread::Builder::new()
        .name("proofline-metrics".into())
        .spawn(move || rt.block_on(server.accept_loop(listener, stop_rx)))
        .map_err(ServeError::Start)?;
    Ok(MetricsServer {
        addr: local,
        stop: Some(stop_tx),
        thread: Some(thread),
    })
}

/// What the reaper knows of one connection.
#[derive(Debug)]
struct ConnState {
    /// When the connection was accepted; the clock of `last` and `request_from`.
    origin: Instant,
    /// In a request: headers complete, response not yet handed over.
    busy: AtomicBool,
    /// Milliseconds since `origin` of the last activity that ends idleness: the accept, or
    /// the end of a response.
    last: AtomicU64,
    /// Milliseconds since `origin` + 1 of the first byte of a request whose headers are not
    /// complete yet; 0: none.
    request_from: AtomicU64,
}

impl ConnState {
    fn new() -> Self {
        ConnState {
            origin: Instant::now(),
            busy: AtomicBool::new(false),
            last: AtomicU64::new(0),
            request_from: AtomicU64::new(0),
        }
    }

    fn ms(&self) -> u64 {
        self.origin.elapsed().as_millis() as u64
    }

    /// Idle: not answering a request (nothing received since the last response, or only
    /// part of a request's headers). Returns since when (ms since `origin`): the last
    /// response, or the first byte of the headers still coming.
    fn idle_since(&self) -> Option<u64> {
        if self.busy.load(Ordering::Acquire) {
            return None;
        }
        match self.request_from.load(Ordering::Acquire) {
            0 => Some(self.last.load(Ordering::Acquire)),
            from => Some(from - 1),
        }
    }
}

/// A request whose headers are not all in this long after its first byte makes its
/// connection closable for room at the cap (ms).
const SLOW_REQUEST_MS: u64 = 1000;

/// The answer to a connection over the cap while every connection is in a request.
const BUSY: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nretry-after: 1\r\ncontent-type: text/plain\r\ncontent-length: 44\r\nconnection: close\r\n\r\ntoo many connections to /metrics; try again\n";

/// The open connections.
#[derive(Debug, Default)]
struct Conns {
    next_id: u64,
    open: HashMap<u64, (Arc<ConnState>, tokio::task::AbortHandle)>,
}

impl Conns {
    /// Closes, to make room, the connection idle the longest among those that may be: kept
    /// alive between two requests, or inside a request begun over [`SLOW_REQUEST_MS`] ago (a
    /// slow sender; a scraper sends its headers at once). False when none may.
    fn close_for_room(&mut self) -> bool {
        let oldest = self
            .open
            .iter()
            .filter(
                |(_, (st, _))| match st.request_from.load(Ordering::Acquire) {
                    0 => true,
                    from => st.ms() + 1 >= from + SLOW_REQUEST_MS,
                },
            )
            .filter_map(|(id, (st, _))| {
                st.idle_since()
                    .map(|since| (st.origin + Duration::from_millis(since), *id))
            })
            .min();
        match oldest.and_then(|(_, id)| self.open.remove(&id)) {
            Some((_, task)) => {
                task.abort();
                true
            }
            None => false,
        }
    }

    /// Closes the connection idle the longest (between requests, or inside one whose bytes
    /// stopped coming); false when none is idle.
    fn close_oldest_idle(&mut self) -> bool {
        let oldest = self
            .open
            .iter()
            .filter_map(|(id, (st, _))| {
                st.idle_since()
                    .map(|since| (st.origin + Duration::from_millis(since), *id))
            })
            .min();
        match oldest.and_then(|(_, id)| self.open.remove(&id)) {
            Some((_, task)) => {
                task.abort();
                true
            }
            None => false,
        }
    }
}

#[derive(Debug, Clone)]
struct Server {
    metrics: Arc<Metrics>,
    options: ServeOptions,
    stats: Arc<ConnectionStats>,
    conns: Arc<Mutex<Conns>>,
    /// 503 answers being written: bounded, so that a flood over the cap holds no more
    /// descriptors than the cap itself.
    busy_answers: Arc<std::sync::atomic::AtomicUsize>,
}

fn lock(m: &Mutex<Conns>) -> std::sync::MutexGuard<'_, Conns> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Server {
    async fn accept_loop(self, listener: TcpListener, mut stop: oneshot::Receiver<()>) {
        let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
            return;
        };
        let reaper = tokio::spawn(self.clone().reap());
        let mut backoff = Duration::ZERO;
        loop {
            tokio::select! {
                _ = &mut stop => break,
                accepted = listener.accept() => match accepted {
                    Ok((stream, _)) => {
                        backoff = Duration::ZERO;
                        self.admit(stream);
                    }
                    Err(_) => {
                        self.stats.accept_errors.fetch_add(1, Ordering::Relaxed);
                        // out of descriptors (or another transient error): an idle
                        // connection's descriptor lets the waiting one in at once
                        if lock(&self.conns).close_oldest_idle() {
                            self.stats.closed_for_room.fetch_add(1, Ordering::Relaxed);
                            self.stats.open.fetch_sub(1, Ordering::Relaxed);
                            tokio::task::yield_now().await;
                            continue;
                        }
                        backoff = (backoff * 2).clamp(Duration::from_millis(5), MAX_ACCEPT_BACKOFF);
                        tokio::select! {
                            _ = &mut stop => break,
                            _ = tokio::time::sleep(backoff) => {}
                        }
                    }
                }
            }
        }
        reaper.abort();
        for (_, (_, task)) in lock(&self.conns).open.drain() {
            task.abort();
        }
    }

    /// Answers a connection over the cap `503 Service Unavailable` with `Retry-After: 1` (plain
    /// HTTP only: behind TLS it is closed), reading what the client still sends for a short
    /// while so that closing does not reset the answer away.
    fn busy_answer(&self, mut stream: tokio::net::TcpStream) {
        #[cfg(feature = "web-config")]
        if self.options.web.as_ref().is_some_and(|w| w.tls()) {
            return;
        }
        let answering = self.busy_answers.clone();
        if answering.fetch_add(1, Ordering::AcqRel) >= self.options.max_connections {
            // as many being told already as the cap allows connections: closed unanswered
            answering.fetch_sub(1, Ordering::AcqRel);
            return;
        }
        tokio::spawn(async move {
            answer_and_close(&mut stream, BUSY, Duration::from_millis(200)).await;
            answering.fetch_sub(1, Ordering::AcqRel);
        });
    }

    /// Takes a new connection in, within the cap.
    fn admit(&self, stream: tokio::net::TcpStream) {
        self.stats.accepted.fetch_add(1, Ordering::Relaxed);
        // whole answers, written as they are ready: with Nagle, a TLS handshake's last small
        // write (the session tickets) held the response back for the client's delayed ACK
        // (40 ms at p90 for a scrape on a new connection)
        let _ = stream.set_nodelay(true);
        let mut conns = lock(&self.conns);
        if conns.open.len() >= self.options.max_connections {
            if conns.close_for_room() {
                self.stats.closed_for_room.fetch_add(1, Ordering::Relaxed);
                self.stats.open.fetch_sub(1, Ordering::Relaxed);
            } else {
                // every connection is in a request: none is cut; this one is told to come
                // back (503 with Retry-After, as a Prometheus scrape reads it: a failed
                // scrape, retried at the next interval), never reset unanswered
                self.stats.refused_at_cap.fetch_add(1, Ordering::Relaxed);
                drop(conns);
                self.busy_answer(stream);
                return;
            }
        }
        let st = Arc::new(ConnState::new());
        let id = conns.next_id;
        conns.next_id += 1;
        let io = Watched {
            inner: stream,
            st: st.clone(),
        };
        let m = self.metrics.clone();
        #[cfg(feature = "web-config")]
        let web = self.options.web.clone();
        #[cfg(feature = "web-config")]
        let metrics = self.metrics.clone();
        let service_state = st.clone();
        let this = self.conns.clone();
        let stats = self.stats.clone();
        let task = tokio::spawn(async move {
            #[cfg(feature = "web-config")]
            let tls = web.as_ref().and_then(|w| w.server_config());
            let service = service_fn(move |req| {
                let st = service_state.clone();
                st.busy.store(true, Ordering::Release);
                st.request_from.store(0, Ordering::Release);
                let m = m.clone();
                #[cfg(feature = "web-config")]
                let web = web.clone();
                async move {
                    #[cfg(feature = "web-config")]
                    if let Some(web) = &web {
                        if let Some(denied) = web.gate(req.headers(), &m).await {
                            return Ok(denied.map(|body| Watched { inner: body, st }));
                        }
                    }
                    handle(req, m).map(|r| r.map(|body| Watched { inner: body, st }))
                }
            });
            let connection = async {
                #[cfg(feature = "web-config")]
                if let Some(config) = tls {
                    if speaks_plain_http(&io).await {
                        answer_plain_http(io).await;
                        metrics.refused(crate::labels::Refused::TlsHandshake);
                    } else {
                        match tokio_rustls::TlsAcceptor::from(config).accept(io).await {
                            Ok(tls) => {
                                let _ = http1::Builder::new()
                                    .serve_connection(TokioIo::new(tls), service)
                                    .await;
                            }
                            Err(_) => metrics.refused(crate::labels::Refused::TlsHandshake),
                        }
                    }
                    return;
                }
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(io), service)
                    .await;
            };
            connection.await;
            if lock(&this).open.remove(&id).is_some() {
                stats.open.fetch_sub(1, Ordering::Relaxed);
            }
        });
        conns.open.insert(id, (st, task.abort_handle()));
        self.stats.open.fetch_add(1, Ordering::Relaxed);
    }

    /// Closes connections past their timeouts.
    async fn reap(self) {
        let idle = self.options.idle_timeout.as_millis() as u64;
        let header = self.options.header_read_timeout.as_millis() as u64;
        loop {
            tokio::time::sleep(REAP_EVERY).await;
            let mut conns = lock(&self.conns);
            conns.open.retain(|_, (st, task)| {
                let now = st.ms();
                let from = st.request_from.load(Ordering::Acquire);
                let verdict = if st.busy.load(Ordering::Acquire) {
                    None
                } else if from > 0 {
                    (now + 1 - from >= header).then_some(&self.stats.closed_header_timeout)
                } else {
                    (now.saturating_sub(st.last.load(Ordering::Acquire)) >= idle)
                        .then_some(&self.stats.closed_idle)
                };
                match verdict {
                    Some(counter) => {
                        counter.fetch_add(1, Ordering::Relaxed);
                        self.stats.open.fetch_sub(1, Ordering::Relaxed);
                        task.abort();
                        false
                    }
                    None => true,
                }
            });
        }
    }
}

/// A connection's stream, telling its state when a request's first byte arrives; or a
/// response's body, ending the request when it was written (dropped).
#[derive(Debug)]
struct Watched<T> {
    inner: T,
    st: Arc<ConnState>,
}

impl hyper::body::Body for Watched<Full<Bytes>> {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Bytes>, Infallible>>> {
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.inner.size_hint()
    }
}

impl<T> Drop for Watched<T> {
    fn drop(&mut self) {
        // a body is dropped when written (or its connection closed): the request is over
        if self.st.busy.swap(false, Ordering::AcqRel) {
            self.st.last.store(self.st.ms(), Ordering::Release);
        }
    }
}

impl AsyncRead for Watched<tokio::net::TcpStream> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before
            && !self.st.busy.load(Ordering::Acquire)
            && self.st.request_from.load(Ordering::Acquire) == 0
        {
            let at = self.st.ms() + 1;
            self.st.request_from.store(at, Ordering::Release);
        }
        r
    }
}

impl AsyncWrite for Watched<tokio::net::TcpStream> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// Whether a connection to the TLS port speaks plain HTTP: a TLS connection starts with a
/// handshake record (22).
#[cfg(feature = "web-config")]
async fn speaks_plain_http(io: &Watched<tokio::net::TcpStream>) -> bool {
    let mut first = [0u8; 1];
    matches!(io.inner.peek(&mut first).await, Ok(1) if first[0] != 22)
}

/// Tells a plain-HTTP client it reached a TLS port (as Go's servers do), and closes.
#[cfg(feature = "web-config")]
async fn answer_plain_http(mut io: Watched<tokio::net::TcpStream>) {
    answer_and_close(&mut io.inner, PLAIN_TO_TLS, Duration::from_secs(1)).await;
}

/// Writes `answer`, closes for writing, then reads what the client still sends until it
/// closes, `drain` at most: closing on unread bytes resets the connection, and the client
/// may lose the answer.
async fn answer_and_close(stream: &mut tokio::net::TcpStream, answer: &[u8], drain_for: Duration) {
    if stream.writable().await.is_ok() {
        let _ = stream.try_write(answer);
    }
    let _ = std::future::poll_fn(|cx| Pin::new(&mut *stream).poll_shutdown(cx)).await;
    let mut sink = [0u8; 4096];
    let reading = async {
        loop {
            if stream.readable().await.is_err() {
                return;
            }
            match stream.try_read(&mut sink) {
                Ok(0) => return,
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(_) => return,
            }
        }
    };
    let _ = tokio::time::timeout(drain_for, reading).await;
}

fn handle(
    req: Request<Incoming>,
    metrics: Arc<Metrics>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let reply = |status: StatusCode, ctype: &'static str, body: String| {
        let mut r = Response::new(Full::new(Bytes::from(body)));
        *r.status_mut() = status;
        r.headers_mut()
            .insert(CONTENT_TYPE, hyper::header::HeaderValue::from_static(ctype));
        r
    };
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return Ok(reply(
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain",
            "use GET\n".into(),
        ));
    }
    Ok(match req.uri().path() {
        "/metrics" => {
            let accept = req.headers().get(ACCEPT).and_then(|v| v.to_str().ok());
            let (body, ctype) = metrics.render(accept);
            reply(StatusCode::OK, ctype, body)
        }
        "/healthz" => reply(StatusCode::OK, "text/plain", "ok\n".into()),
        _ => reply(
            StatusCode::NOT_FOUND,
            "text/plain",
            "not found: try /metrics\n".into(),
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_endpoint_listens_on_loopback_unless_told_otherwise() {
        let addr: std::net::SocketAddr = DEFAULT_ADDR.parse().unwrap();
        assert!(addr.ip().is_loopback());
        assert_eq!(addr.port(), 9464);
    }
}
