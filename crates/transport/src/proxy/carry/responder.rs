//! `nena run`'s DNS responder: what the command's DNS queries reach instead of a resolver.
//! The cgroup's BPF programs send its UDP datagrams to port 53 here (a socket on 127.0.0.1
//! and one on ::1), and the proxy hands over its redirected TCP connections to port 53
//! ([`Responder::serve_tcp`]); `nena gateway` answers its LAN's queries with it too. Each
//! query is checked ([`crate::dns::check_query`]), carried in a nena session to the proxy
//! server (op 6), which asks its own resolver, and the answer is checked against the query
//! (ID and question) before the application gets it. When anything fails the application
//! gets SERVFAIL at once. No query leaves this host but inside a nena session.
//!
//! A DNS session carries one query at a time and is kept after its answer for the next
//! ([`IDLE_SESSIONS`] at most, each for [`KEEP`]): a lookup then costs one round trip
//! instead of a session's opening each (two round trips and the open request's). A kept
//! session that fails is dropped and the query asked again in a new one.

use crate::conn::{ClientConn, ClientOptions, END_WITHIN};
use crate::dns::{self, read_frame, write_frame, Question};
use crate::error::{Doing, During, Error, ProxyFault, Result, Timeout};
use crate::ops::metrics::{Metrics, Tally};
use crate::proxy::open::open_service;
use crate::wire::Service;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpStream, UdpSocket};
use tokio::sync::Semaphore;
use tokio::time::Instant;

/// Counters of a responder (the final log line of `nena run`).
#[derive(Debug, Default)]
pub struct ResponderStats {
    /// Queries answered by the proxy server's resolver.
    pub answered: AtomicU64,
    /// Queries answered SERVFAIL here (the session or the check failed).
    pub failed: AtomicU64,
    /// Datagrams that were no DNS query (dropped).
    pub dropped: AtomicU64,
}

/// DNS sessions kept open for the next queries, at most.
pub const IDLE_SESSIONS: usize = 4;
/// How long a DNS session is kept for another query after its last answer.
pub const KEEP: Duration = Duration::from_secs(20);

/// Carries DNS queries to the proxy server at `opts.remote`.
pub struct Responder {
    opts: Arc<ClientOptions>,
    connecting: Arc<Semaphore>,
    metrics: Option<Arc<Metrics>>,
    /// Sessions that answered their last query, with when.
    idle: Mutex<Vec<(Instant, ClientConn)>>,
    /// How many of them are kept ([`IDLE_SESSIONS`] unless [`Responder::keeping`] says).
    keep_at_most: usize,
    pub stats: ResponderStats,
}

impl std::fmt::Debug for Responder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Responder")
            .field("remote", &self.opts.remote)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl Responder {
    pub fn new(
        opts: Arc<ClientOptions>,
        connecting: Arc<Semaphore>,
        metrics: Option<Arc<Metrics>>,
    ) -> Responder {
        Responder {
            opts,
            connecting,
            metrics,
            idle: Mutex::new(Vec::new()),
            keep_at_most: IDLE_SESSIONS,
            stats: ResponderStats::default(),
        }
    }

    /// Keeps up to `n` sessions for the next queries instead of [`IDLE_SESSIONS`]: a
    /// caller that lets `n` queries be in flight at once (the gateway's cap) then reuses
    /// its sessions instead of ending all but a few after each answer and opening new ones
    /// for the next queries, so the sessions it holds on the proxy server stay at most
    /// twice `n` (in use and kept) however fast the queries come.
    pub fn keeping(mut self, n: usize) -> Responder {
        self.keep_at_most = n.max(1);
        self
    }

    /// The answer the application gets for `query`: the server resolver's, or SERVFAIL.
    /// `None` for a message that is no query (nothing to answer).
    pub async fn answer(&self, query: &[u8]) -> Option<Vec<u8>> {
        self.answer_opening(query, None).await
    }

    /// As [`answer`](Self::answer), a new session (when no kept one is free) opened only
    /// with a permit of `opening`: the gateway's per-host limit on sessions being opened,
    /// so one LAN host's queries never hold more handshakes at once than it allows.
    pub async fn answer_opening(
        &self,
        query: &[u8],
        opening: Option<&Semaphore>,
    ) -> Option<Vec<u8>> {
        let q = match dns::check_query(query) {
            Ok(q) => q,
            Err(e) => {
                self.stats.dropped.fetch_add(1, Ordering::Relaxed);
                log::warn!("DNS: {e}; dropped");
                return None;
            }
        };
        let wait = self.opts.timeout + dns::QUERY_TIMEOUT + Duration::from_secs(2);
        let carried = tokio::time::timeout(wait, self.carry(&q, query, opening))
            .await
            .unwrap_or_else(|_| Err(Timeout::DnsAnswer { after: wait }.into()));
        match carried {
            Ok(a) => {
                self.stats.answered.fetch_add(1, Ordering::Relaxed);
                log::info!("DNS {q}: answered through nena ({} B)", a.len());
                Some(a)
            }
            Err(e) => {
                self.stats.failed.fetch_add(1, Ordering::Relaxed);
                log::warn!("DNS {q}: {e:#}; answered SERVFAIL");
                Some(dns::servfail(&q))
            }
        }
    }

    /// One query in a kept DNS session, or in a new one (op 6), its answer checked; the
    /// session is kept for the next query.
    async fn carry(
        &self,
        q: &Question,
        query: &[u8],
        opening: Option<&Semaphore>,
    ) -> Result<Vec<u8>> {
        if let Some(mut c) = self.kept() {
            match ask(&mut c, q, query).await {
                Ok(answer) => {
                    self.keep(c);
                    return Ok(answer);
                }
                // The server may have ended it meanwhile: ask again in a new session.
                Err(e) => log::debug!("DNS {q}: the kept session failed ({e:#}); a new one"),
            }
        }
        let tally = Tally::begin(self.metrics.as_ref());
        let done = async {
            let permit = match opening {
                Some(o) => Some(
                    o.acquire()
                        .await
                        .map_err(|_| Error::from(ProxyFault::GatewayClosing))?,
                ),
                None => None,
            };
            let mut c = open_service(Service::Dns, &self.opts, &self.connecting, &tally)
                .await
                .map_err(|(_, e)| e)?;
            drop(permit);
            let answer = ask(&mut c, q, query).await?;
            Ok((answer, c))
        }
        .await;
        tally.finish(&done);
        let (answer, c) = done?;
        self.keep(c);
        Ok(answer)
    }

    /// The most recently used kept session still within [`KEEP`]; older ones are ended.
    fn kept(&self) -> Option<ClientConn> {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        ClientConn::end_stale(&mut idle, KEEP);
        idle.pop().map(|(_, c)| c)
    }

    /// End every kept session cleanly (the proxy server then logs what each answered),
    /// each within `limit`.
    pub async fn close(&self, limit: Duration) {
        let kept = std::mem::take(&mut *self.idle.lock().unwrap_or_else(|e| e.into_inner()));
        for (_, c) in kept {
            c.end(limit).await;
        }
    }

    /// Keep `c` for another query, unless [`IDLE_SESSIONS`] are kept already (then it is
    /// ended cleanly).
    fn keep(&self, c: ClientConn) {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        if idle.len() < self.keep_at_most {
            idle.push((Instant::now(), c));
        } else {
            c.end_later(END_WITHIN);
        }
    }

    /// Answers the datagrams of `sock` (the loopback socket the BPF programs send DNS to)
    /// until the task is dropped, each query in a task of its own.
    pub async fn serve_udp(self: Arc<Self>, sock: UdpSocket) -> Result<()> {
        let sock = Arc::new(sock);
        let mut buf = vec![0u8; 65535];
        loop {
            let (n, peer) = sock.recv_from(&mut buf).await.during(Doing::DnsResponder)?;
            let query = buf[..n].to_vec();
            let (me, sock) = (self.clone(), sock.clone());
            tokio::spawn(async move {
                if let Some(a) = me.answer(&query).await {
                    // What the application takes over UDP, else TC (it asks again over TCP).
                    let a = dns::fit_udp(a, dns::udp_limit(&query));
                    if let Err(e) = sock.send_to(&a, peer).await {
                        log::warn!("DNS answer to {peer}: {e}");
                    }
                }
            });
        }
    }

    /// A redirected TCP connection to port 53: each query framed as DNS over TCP is
    /// answered in turn until the application ends its side. Returns the queries answered.
    pub async fn serve_tcp(&self, mut plain: TcpStream) -> Result<u64> {
        let mut n = 0;
        while let Some(query) = read_frame(&mut plain).await.during(Doing::DnsOverTcp)? {
            let Some(a) = self.answer(&query).await else {
                return Err(ProxyFault::DnsNotQuery.into());
            };
            write_frame(&mut plain, &a).await?;
            n += 1;
        }
        let _ = plain.shutdown().await;
        Ok(n)
    }
}

/// One query on `c` and its answer, checked against the query.
async fn ask(c: &mut ClientConn, q: &Question, query: &[u8]) -> Result<Vec<u8>> {
    write_frame(&mut c.writer, query).await?;
    let answer = read_frame(&mut c.reader)
        .await?
        .ok_or(ProxyFault::DnsUnanswered)?;
    dns::check_answer(q, &answer).during(Doing::CheckingDnsAnswer)?;
    Ok(answer)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::op::{Message, MessageType, OpCode, Query, ResponseCode};
    use hickory_proto::rr::{Name, RecordType};

    fn responder(remote: &str) -> Responder {
        let mut opts = ClientOptions::new(
            remote.parse().unwrap(),
            Default::default(),
            vec![nena_proto::Mode::Aead],
        );
        opts.timeout = Duration::from_secs(2);
        Responder::new(Arc::new(opts), Arc::new(Semaphore::new(4)), None)
    }

    /// What is no query gets no answer (and is counted); a query whose session cannot be
    /// opened (nothing listens at the proxy server's address) is answered SERVFAIL at once,
    /// with its ID and question, over UDP and over TCP.
    #[tokio::test]
    async fn junk_is_dropped_and_a_failed_session_is_servfail() {
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let at = closed.local_addr().unwrap().to_string();
        drop(closed);
        let r = Arc::new(responder(&at));
        assert_eq!(r.answer(b"no DNS message").await, None);
        assert_eq!(r.stats.dropped.load(Ordering::Relaxed), 1);

        let mut m = Message::new(0x5151, MessageType::Query, OpCode::Query);
        m.add_query(Query::query(
            Name::from_ascii("files.example.test.").unwrap(),
            RecordType::A,
        ));
        let query = m.to_vec().unwrap();
        let udp = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let at = udp.local_addr().unwrap();
        let serving = tokio::spawn(r.clone().serve_udp(udp));
        let app = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        app.send_to(&query, at).await.unwrap();
        let mut buf = [0u8; 512];
        let (n, from) = tokio::time::timeout(Duration::from_secs(10), app.recv_from(&mut buf))
            .await
            .expect("an answer, not silence")
            .unwrap();
        assert_eq!(from, at);
        let a = Message::from_vec(&buf[..n]).unwrap();
        assert_eq!(a.metadata.id, 0x5151);
        assert_eq!(a.metadata.response_code, ResponseCode::ServFail);
        assert_eq!(a.queries, m.queries);
        serving.abort();

        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let at = l.local_addr().unwrap();
        let app = tokio::spawn(async move {
            let mut s = TcpStream::connect(at).await.unwrap();
            write_frame(&mut s, &query).await.unwrap();
            let a = read_frame(&mut s).await.unwrap().unwrap();
            s.shutdown().await.unwrap();
            a
        });
        let (plain, _) = l.accept().await.unwrap();
        assert_eq!(r.serve_tcp(plain).await.unwrap(), 1);
        let a = Message::from_vec(&app.await.unwrap()).unwrap();
        assert_eq!(a.metadata.response_code, ResponseCode::ServFail);
        assert_eq!(r.stats.failed.load(Ordering::Relaxed), 2);
    }
}
