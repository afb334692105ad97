//! The small HTTP/1.1 server (hyper) behind `--metrics` and `--status`: one route function
//! answers every request, within limits a slow client cannot outlast ([`EndpointLimits`]).

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Request, Response};
use std::sync::Arc;
use std::time::Duration;

/// What one client may hold of an endpoint: connections at once (more are closed at once),
/// the time to send a request's header, and a connection's whole life.
#[derive(Debug, Clone, Copy)]
pub struct EndpointLimits {
    pub max_connections: usize,
    pub header_timeout: Duration,
    pub lifetime: Duration,
}

impl EndpointLimits {
    /// 16 connections, 5 s for a header, 30 s per connection: a Prometheus scrape or a
    /// page's poll needs one connection and milliseconds; a slow client (slowloris) holds
    /// nothing for long.
    pub const DEFAULT: EndpointLimits = EndpointLimits {
        max_connections: 16,
        header_timeout: Duration::from_secs(5),
        lifetime: Duration::from_secs(30),
    };
}

/// An endpoint's answer to a request (its body is not read: every route is a GET).
pub type Route =
    Arc<dyn Fn(&Request<hyper::body::Incoming>) -> Response<Full<Bytes>> + Send + Sync>;

/// Serves `route` on `listener` until the task is dropped, within `limits`; `what` names
/// the endpoint in the log (`metrics`, `status page`).
pub async fn serve_http(
    listener: tokio::net::TcpListener,
    what: &'static str,
    limits: EndpointLimits,
    route: Route,
) {
    let slots = Arc::new(tokio::sync::Semaphore::new(limits.max_connections));
    let mut warned = false;
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(x) => x,
            Err(e) => {
                log::warn!("{what}: accept: {e}");
                // sleep: an accept error (EMFILE) repeats at once; give the host a moment.
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            if !warned {
                log::warn!(
                    "{what}: {} connections open, closing {peer} (and more, said once)",
                    limits.max_connections
                );
                warned = true;
            }
            drop(stream);
            continue;
        };
        let route = route.clone();
        tokio::spawn(async move {
            let _slot = slot;
            let service = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                let resp = route(&req);
                async move { Ok::<_, std::convert::Infallible>(resp) }
            });
            let io = hyper_util::rt::TokioIo::new(stream);
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(limits.header_timeout)
                .serve_connection(io, service);
            match tokio::time::timeout(limits.lifetime, conn).await {
                Ok(Err(e)) => log::debug!("{what}: {peer}: {e}"),
                Err(_) => log::debug!("{what}: {peer}: closed after {:?}", limits.lifetime),
                Ok(Ok(())) => {}
            }
        });
    }
}

/// A response with `status`, `content_type` and `body`.
pub fn respond(
    status: hyper::StatusCode,
    content_type: &str,
    body: impl Into<Bytes>,
) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = status;
    if let Ok(v) = hyper::header::HeaderValue::from_str(content_type) {
        r.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
    }
    r
}
