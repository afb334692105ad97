//! The `--metrics` endpoint: `GET /metrics` served as OpenMetrics text over HTTP/1.1
//! (hyper), within limits a slow scraper cannot outlast.

use super::counters::Metrics;
use anyhow::{Context, Result};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// The content type of OpenMetrics text, version 1.0.0.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// What one scraper may hold of the metrics endpoint: connections at once (more are closed
/// at once), the time to send a request's header, and a connection's whole life.
#[derive(Debug, Clone, Copy)]
pub struct EndpointLimits {
    pub max_connections: usize,
    pub header_timeout: Duration,
    pub lifetime: Duration,
}

impl EndpointLimits {
    /// 16 connections, 5 s for a header, 30 s per connection: a Prometheus scrape needs one
    /// connection and milliseconds; a slow client (slowloris) holds nothing for long.
    pub const DEFAULT: EndpointLimits = EndpointLimits {
        max_connections: 16,
        header_timeout: Duration::from_secs(5),
        lifetime: Duration::from_secs(30),
    };
}

/// Serves `GET /metrics` (any other path: 404) on `listener` until the task is dropped,
/// within [`EndpointLimits::DEFAULT`].
pub async fn serve(listener: tokio::net::TcpListener, metrics: Arc<Metrics>) {
    serve_within(listener, metrics, EndpointLimits::DEFAULT).await
}

/// [`serve`] within `limits`.
pub async fn serve_within(
    listener: tokio::net::TcpListener,
    metrics: Arc<Metrics>,
    limits: EndpointLimits,
) {
    use http_body_util::Full;
    use hyper::body::Bytes;
    use hyper::{Request, Response, StatusCode};
    let slots = Arc::new(tokio::sync::Semaphore::new(limits.max_connections));
    let mut warned = false;
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(x) => x,
            Err(e) => {
                log::warn!("metrics: accept: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            if !warned {
                log::warn!(
                    "metrics: {} connections open, closing {peer} (and more, said once)",
                    limits.max_connections
                );
                warned = true;
            }
            drop(stream);
            continue;
        };
        let metrics = metrics.clone();
        tokio::spawn(async move {
            let _slot = slot;
            let service = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                let metrics = metrics.clone();
                async move {
                    let resp = if req.uri().path() == "/metrics" {
                        Response::builder()
                            .header(hyper::header::CONTENT_TYPE, CONTENT_TYPE)
                            .body(Full::new(Bytes::from(metrics.encode())))
                    } else {
                        Response::builder()
                            .status(StatusCode::NOT_FOUND)
                            .body(Full::new(Bytes::from_static(
                                b"nena serves /metrics only\n",
                            )))
                    };
                    resp
                }
            });
            let io = hyper_util::rt::TokioIo::new(stream);
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(limits.header_timeout)
                .serve_connection(io, service);
            match tokio::time::timeout(limits.lifetime, conn).await {
                Ok(Err(e)) => log::debug!("metrics: {peer}: {e}"),
                Err(_) => log::debug!("metrics: {peer}: closed after {:?}", limits.lifetime),
                Ok(Ok(())) => {}
            }
        });
    }
}

/// Binds `addr` for [`serve`] (so that a taken port is an error at start, not later).
pub async fn bind(addr: SocketAddr) -> Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("--metrics {addr}: cannot listen"))
}
