//! The `--metrics` endpoint: `GET /metrics` served as OpenMetrics text over HTTP/1.1
//! ([`crate::ops::http`]), within limits a slow scraper cannot outlast.

use super::counters::Metrics;
pub use crate::ops::http::EndpointLimits;
use crate::ops::http::{respond, serve_http, Route};
use anyhow::{Context, Result};
use std::net::SocketAddr;
use std::sync::Arc;

/// The content type of OpenMetrics text, version 1.0.0.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
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
    use hyper::StatusCode;
    let route: Route = Arc::new(move |req| {
        if req.uri().path() == "/metrics" {
            respond(StatusCode::OK, CONTENT_TYPE, metrics.encode())
        } else {
            respond(
                StatusCode::NOT_FOUND,
                "text/plain",
                "nena serves /metrics only\n",
            )
        }
    });
    serve_http(listener, "metrics", limits, route).await
}

/// Binds `addr` for [`serve`] (so that a taken port is an error at start, not later).
pub async fn bind(addr: SocketAddr) -> Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("--metrics {addr}: cannot listen"))
}
