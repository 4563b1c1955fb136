//! The `/metrics` and `/healthz` endpoint: one named thread with a single-threaded tokio
//! runtime and hyper. A scrape only encodes the registry.

use std::convert::Infallible;
use std::io;
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::thread::JoinHandle;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{ACCEPT, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::sync::oneshot;

use crate::Metrics;

/// Where the endpoint listens unless told otherwise: loopback only.
pub const DEFAULT_ADDR: &str = "127.0.0.1:9464";

/// Why the endpoint could not start.
#[derive(Debug, thiserror::Error)]
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

/// Serves `metrics` on `addr` (`/metrics`, `/healthz`). Binding happens before this returns,
/// so an address in use is an immediate error.
pub fn serve(metrics: Arc<Metrics>, addr: SocketAddr) -> Result<MetricsServer, ServeError> {
    let listener = TcpListener::bind(addr).map_err(|source| ServeError::Bind { addr, source })?;
    listener.set_nonblocking(true).map_err(ServeError::Start)?;
    let local = listener.local_addr().map_err(ServeError::Start)?;
    let (stop_tx, stop_rx) = oneshot::channel();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_io()
        .enable_time()
        .build()
        .map_err(ServeError::Start)?;
    let thread = std::thread::Builder::new()
        .name("proofline-metrics".into())
        .spawn(move || rt.block_on(accept_loop(listener, metrics, stop_rx)))
        .map_err(ServeError::Start)?;
    Ok(MetricsServer {
        addr: local,
        stop: Some(stop_tx),
        thread: Some(thread),
    })
}

async fn accept_loop(
    listener: TcpListener,
    metrics: Arc<Metrics>,
    mut stop: oneshot::Receiver<()>,
) {
    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
        return;
    };
    loop {
        tokio::select! {
            _ = &mut stop => return,
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                let m = metrics.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |req| handle(req, m.clone()));
                    let _ = http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
                });
            }
        }
    }
}

async fn handle(
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
