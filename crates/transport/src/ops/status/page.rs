//! `--status ADDR:PORT`: the status page, one self-contained HTML page (no asset from
//! elsewhere: its script and style are inline, its chart is SVG it draws) that polls
//! `status.json` twice a second, a [`Snapshot`] and five minutes of [`History`].
//!
//! Who may read it: on a loopback address, whoever reaches the port on this host, but only
//! by an IP literal or `localhost` as the Host (a web page cannot rebind a name of its own to
//! 127.0.0.1 to read it); elsewhere only with `--status-token-file`, whose token the URL
//! carries (`?token=...`). Every answer forbids framing, caching and referrers.

use super::watch::{History, Snapshot, Watch};
use crate::ops::http::{respond, serve_http, EndpointLimits, Route};
use crate::wire::AccessToken;
use anyhow::{bail, Context, Result};
use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Response, StatusCode};
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::sync::Arc;

/// The page.
pub const PAGE: &str = include_str!("page.html");

/// What `status.json` answers.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StatusJson {
    pub status: Snapshot,
    pub history: History,
}

/// Binds `addr` for the page: a non-loopback address only with a token.
pub async fn bind(
    addr: SocketAddr,
    token: Option<&AccessToken>,
) -> Result<tokio::net::TcpListener> {
    if !addr.ip().to_canonical().is_loopback() && token.is_none() {
        bail!(
            "--status {addr} is not a loopback address: the page tells the command's paths, \
             addresses and server to whoever reaches it; give --status-token-file FILE (the \
             URL then carries ?token=...), or listen on 127.0.0.1"
        );
    }
    tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("--status {addr}: cannot listen"))
}

/// Serves the page of `watch` on `listener` until the task is dropped.
pub async fn serve(
    listener: tokio::net::TcpListener,
    watch: Arc<Watch>,
    token: Option<AccessToken>,
) {
    let route: Route = Arc::new(move |req| {
        let host = req
            .headers()
            .get(hyper::header::HOST)
            .and_then(|h| h.to_str().ok());
        answer(
            req.uri().path(),
            req.uri().query(),
            host,
            token.as_ref(),
            &|| StatusJson {
                status: watch.snapshot(),
                history: watch.history(),
            },
        )
    });
    serve_http(listener, "status page", EndpointLimits::DEFAULT, route).await
}

/// Whether `host` (a Host header) names this host by an IP literal or `localhost`.
fn literal_host(host: &str) -> bool {
    if let Some(rest) = host.strip_prefix('[') {
        return rest
            .split_once(']')
            .is_some_and(|(a, _)| a.parse::<std::net::Ipv6Addr>().is_ok());
    }
    let name = host.rsplit_once(':').map_or(host, |(h, _)| h);
    name.eq_ignore_ascii_case("localhost") || name.parse::<std::net::Ipv4Addr>().is_ok()
}

/// Whether the query carries `token` (its `token` parameter, percent-decoded or as
/// written: a base64 token's `+` is a space once decoded).
fn carries(query: Option<&str>, token: &AccessToken) -> bool {
    let Some(q) = query else { return false };
    let decoded = form_urlencoded::parse(q.as_bytes())
        .filter(|(k, _)| k == "token")
        .any(|(_, v)| {
            AccessToken::new(v.as_bytes().to_vec()).is_ok_and(|t| token.admits(Some(&t)))
        });
    let raw = q
        .split('&')
        .filter_map(|kv| kv.strip_prefix("token="))
        .any(|v| AccessToken::new(v.as_bytes().to_vec()).is_ok_and(|t| token.admits(Some(&t))));
    decoded || raw
}

/// The answer to `GET path?query` with Host `host`.
fn answer(
    path: &str,
    query: Option<&str>,
    host: Option<&str>,
    token: Option<&AccessToken>,
    status: &dyn Fn() -> StatusJson,
) -> Response<Full<Bytes>> {
    let text = "text/plain; charset=utf-8";
    let allowed = match token {
        Some(t) => carries(query, t),
        None => host.is_some_and(literal_host),
    };
    let mut r = if !allowed {
        let why = if token.is_some() {
            "this status page needs its token: open it as /?token=... (the content of \
             --status-token-file)\n"
        } else {
            "open this status page by the address it listens on (an IP address or \
             localhost), not by a name\n"
        };
        respond(StatusCode::FORBIDDEN, text, why)
    } else {
        match path {
            "/" | "/index.html" => respond(StatusCode::OK, "text/html; charset=utf-8", PAGE),
            "/status.json" => match serde_json::to_vec(&status()) {
                Ok(body) => respond(StatusCode::OK, "application/json", body),
                Err(e) => respond(StatusCode::INTERNAL_SERVER_ERROR, text, e.to_string()),
            },
            _ => respond(
                StatusCode::NOT_FOUND,
                text,
                "the status page is / and /status.json\n",
            ),
        }
    };
    let h = r.headers_mut();
    for (k, v) in [
        (
            "content-security-policy",
            "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; \
             connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
        ),
        ("x-frame-options", "DENY"),
        ("referrer-policy", "no-referrer"),
        ("cache-control", "no-store"),
        ("x-content-type-options", "nosniff"),
    ] {
        h.insert(k, hyper::header::HeaderValue::from_static(v));
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn empty() -> StatusJson {
        StatusJson {
            status: Snapshot::default(),
            history: History::default(),
        }
    }

    fn code(
        path: &str,
        query: Option<&str>,
        host: Option<&str>,
        token: Option<&AccessToken>,
    ) -> u16 {
        answer(path, query, host, token, &empty).status().as_u16()
    }

    /// Without a token: the page and its JSON by an IP literal or localhost; a name (DNS
    /// rebinding) and no Host are refused.
    #[test]
    fn loopback_answers_by_address_only() {
        for host in [
            "127.0.0.1:8080",
            "localhost:8080",
            "[::1]:8080",
            "LOCALHOST",
            "198.18.1.2",
        ] {
            assert_eq!(code("/", None, Some(host), None), 200, "{host}");
        }
        assert_eq!(code("/status.json", None, Some("127.0.0.1:1"), None), 200);
        assert_eq!(code("/nope", None, Some("127.0.0.1:1"), None), 404);
        for host in ["evil.example:8080", "127.0.0.1.evil.example", "[::1"] {
            assert_eq!(code("/", None, Some(host), None), 403, "{host}");
        }
        assert_eq!(code("/", None, None, None), 403);
    }

    /// With a token: only a query that carries it, percent-encoded or as written.
    #[test]
    fn a_token_is_needed_when_there_is_one() {
        let t = AccessToken::new(b"abc+def/ghi=jklmnop".to_vec()).unwrap();
        let h = Some("router.lan:8080");
        assert_eq!(code("/", None, h, Some(&t)), 403);
        assert_eq!(
            code("/", Some("token=wrong-token-xxxxxx"), h, Some(&t)),
            403
        );
        assert_eq!(
            code("/", Some("token=abc%2Bdef%2Fghi%3Djklmnop"), h, Some(&t)),
            200
        );
        assert_eq!(
            code(
                "/status.json",
                Some("x=1&token=abc+def/ghi=jklmnop"),
                h,
                Some(&t)
            ),
            200
        );
    }

    /// The page is self-contained (nothing fetched from elsewhere) and every answer forbids
    /// framing and caching.
    #[test]
    fn the_page_loads_nothing_from_elsewhere() {
        for needle in [
            "src=\"http",
            "href=\"http",
            "@import",
            "url(http",
            "src=\"//",
        ] {
            assert!(!PAGE.contains(needle), "{needle}");
        }
        let r = answer("/", None, Some("127.0.0.1"), None, &empty);
        assert_eq!(r.headers()["x-frame-options"], "DENY");
        assert!(r.headers()["content-security-policy"]
            .to_str()
            .unwrap()
            .contains("default-src 'none'"));
    }

    /// A non-loopback address without a token is refused at start.
    #[tokio::test]
    async fn a_public_address_needs_a_token() {
        let e = bind("0.0.0.0:0".parse().unwrap(), None).await.unwrap_err();
        assert!(e.to_string().contains("--status-token-file"), "{e}");
        let l = bind("127.0.0.1:0".parse().unwrap(), None).await.unwrap();
        assert!(l.local_addr().unwrap().ip().is_loopback());
    }
}
