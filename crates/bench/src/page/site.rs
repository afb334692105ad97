//! The page `nena bench page` loads and the server host's side of it: an HTML document on
//! `www.example.test` naming [`OBJECTS`] objects of 15-30 KB (incompressible), every other
//! one on `www.example.test` and the rest on `img.example.test`; served over HTTP/1.1
//! (hyper, keep-alive) on [`HTTP_PORT`] of the server host by [`serve`], each object only
//! under its own host name. The loader gets the same [`Page`] to check every byte.

use crate::peers::traffic::Server;
use anyhow::Result;
use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response, StatusCode};
use nena_lab::Lab;
use std::net::SocketAddrV4;
use std::sync::Arc;

/// Objects on the page.
pub const OBJECTS: usize = 30;
/// The web server's port on the server host.
pub const HTTP_PORT: u16 = 8080;
/// The host name of the document and of half the objects.
pub const WWW: &str = "www.example.test";
/// The host name of the other half.
pub const IMG: &str = "img.example.test";
/// The document's path.
pub const INDEX: &str = "/index.html";

/// The page: the document and every object, by host name and path.
#[derive(Debug)]
pub struct Page {
    /// The web server's port, in every URL of the document.
    pub port: u16,
    pub html: Bytes,
    /// (host name, path, body), in the document's order.
    pub objects: Vec<(&'static str, String, Bytes)>,
}

impl Page {
    /// The page with its URLs on `port`, the same every time.
    pub fn new(port: u16) -> Page {
        let objects: Vec<(&'static str, String, Bytes)> = (0..OBJECTS)
            .map(|i| {
                let host = if i % 2 == 0 { WWW } else { IMG };
                (host, format!("/o{i}.bin"), Bytes::from(object_body(i)))
            })
            .collect();
        let mut html = String::from(
            "<!doctype html><html><head><title>nena bench page</title></head><body>\n",
        );
        for (host, path, _) in &objects {
            html += &format!("<img src=\"http://{host}:{port}{path}\">\n");
        }
        html += "</body></html>\n";
        Page {
            port,
            html: Bytes::from(html),
            objects,
        }
    }

    /// The body served for `host` (without a port) and `path`.
    pub fn body(&self, host: &str, path: &str) -> Option<&Bytes> {
        if host == WWW && path == INDEX {
            return Some(&self.html);
        }
        self.objects
            .iter()
            .find(|(h, p, _)| *h == host && p == path)
            .map(|(_, _, b)| b)
    }

    /// Bytes of the document and every object.
    pub fn bytes(&self) -> u64 {
        self.html.len() as u64 + self.objects.iter().map(|o| o.2.len() as u64).sum::<u64>()
    }
}

/// Object `i`: 15,360 to 30,720 incompressible bytes of a stream of its own.
fn object_body(i: usize) -> Vec<u8> {
    let len = 15 * 1024 + (i * 4099) % (15 * 1024 + 1);
    crate::bytes::test_bytes((i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15), len)
}

/// The page served on `addr` of the server host (HTTP/1.1, keep-alive) until dropped.
pub fn serve(lab: &Lab, addr: SocketAddrV4, page: Arc<Page>) -> Result<Server> {
    Server::start(lab, addr, "the web server", move |s| {
        let page = page.clone();
        async move {
            s.set_nodelay(true)?;
            let svc = hyper::service::service_fn(move |req| {
                let page = page.clone();
                async move { Ok::<_, std::convert::Infallible>(answer(&page, &req)) }
            });
            hyper::server::conn::http1::Builder::new()
                .keep_alive(true)
                .serve_connection(hyper_util::rt::TokioIo::new(s), svc)
                .await?;
            Ok(())
        }
    })
}

/// The response to one request: the body its Host header (port removed) and path name, or
/// 404.
pub(super) fn answer<B>(page: &Page, req: &Request<B>) -> Response<Full<Bytes>> {
    let host = req
        .headers()
        .get(hyper::header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(|h| h.rsplit_once(':').map_or(h, |(name, _)| name))
        .unwrap_or("");
    match page.body(host, req.uri().path()) {
        Some(b) => Response::new(Full::new(b.clone())),
        None => {
            let mut r = Response::new(Full::new(Bytes::from_static(b"not here\n")));
            *r.status_mut() = StatusCode::NOT_FOUND;
            r
        }
    }
}

/// Every name under `example.test` answered with `addr` by dnsmasq: its arguments, for
/// one listening on `addr` only, with no upstream and no file of this host read.
pub fn dnsmasq_args(addr: std::net::Ipv4Addr) -> Vec<String> {
    [
        "--keep-in-foreground",
        "--no-resolv",
        "--no-hosts",
        "--no-poll",
        "--bind-interfaces",
        "--user=root",
        "--pid-file=",
        "--log-facility=-",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([
        format!("--listen-address={addr}"),
        format!("--address=/example.test/{addr}"),
    ])
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_has_thirty_distinct_objects_of_15_to_30_kb_on_two_names() {
        let p = Page::new(HTTP_PORT);
        assert_eq!(p.objects.len(), OBJECTS);
        let on = |name: &str| p.objects.iter().filter(|o| o.0 == name).count();
        assert_eq!((on(WWW), on(IMG)), (15, 15));
        for (h, path, b) in &p.objects {
            assert!((15 * 1024..=30 * 1024).contains(&b.len()), "{path}");
            assert!(p.html.windows(path.len()).any(|w| w == path.as_bytes()));
            assert_eq!(p.body(h, path), Some(b));
            let other = if *h == WWW { IMG } else { WWW };
            assert_eq!(p.body(other, path), None, "{path} only on its own name");
        }
        let mut heads: Vec<&[u8]> = p.objects.iter().map(|o| &o.2[..32]).collect();
        heads.sort();
        heads.dedup();
        assert_eq!(heads.len(), OBJECTS, "every object its own bytes");
        assert_eq!(p.body(WWW, INDEX), Some(&p.html));
        assert_eq!(p.body(IMG, INDEX), None);
        // Incompressible: every byte value, few repeats.
        let b = &p.objects[3].2;
        assert!(b.windows(2).filter(|w| w[0] == w[1]).count() < b.len() / 100);
        assert_eq!(Page::new(HTTP_PORT).bytes(), p.bytes());
    }

    #[test]
    fn requests_are_answered_by_host_name_and_path() {
        let p = Page::new(HTTP_PORT);
        let req = |host: &str, path: &str| {
            Request::builder()
                .uri(path)
                .header("host", host)
                .body(())
                .unwrap()
        };
        let r = answer(&p, &req("img.example.test:8080", "/o1.bin"));
        assert_eq!(r.status(), StatusCode::OK);
        let r = answer(&p, &req("www.example.test:8080", "/o1.bin"));
        assert_eq!(r.status(), StatusCode::NOT_FOUND);
        let r = answer(&p, &req("www.example.test", INDEX));
        assert_eq!(r.status(), StatusCode::OK);
    }
}
