//! The proxy server's side of a DNS session (op 6): each query of the session is sent to the
//! server's own resolver, the first `nameserver` of its /etc/resolv.conf (under `ip netns
//! exec`: the namespace's /etc/netns/NS/resolv.conf), by [`crate::dns::exchange`] (UDP
//! from a socket connected to it, again over TCP when the answer comes truncated); an
//! answer is passed back only once it matches the query (ID and question,
//! [`crate::dns::check_answer`]). A query the resolver does not answer in time is answered
//! SERVFAIL, so the application moves on instead of waiting.

use crate::dns::{self, read_frame, write_frame, ExchangeError, Question, Step, QUERY_TIMEOUT};
use crate::error::{Doing, During, Error, ProxyFault, Result, Timeout};
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};

/// The server's resolver.
#[derive(Debug, Clone, Copy)]
pub struct Upstream {
    pub nameserver: SocketAddr,
    pub timeout: Duration,
}

impl Upstream {
    /// The first nameserver of /etc/resolv.conf, port 53.
    pub fn system() -> Result<Upstream> {
        let path = std::path::Path::new("/etc/resolv.conf");
        let text = std::fs::read_to_string(path).during(Doing::ReadingFile {
            path: path.to_path_buf(),
        })?;
        let ip =
            dns::nameservers(&text)
                .first()
                .copied()
                .ok_or_else(|| ProxyFault::NoNameserver {
                    path: path.to_path_buf(),
                })?;
        Ok(Upstream {
            nameserver: SocketAddr::new(ip, 53),
            timeout: QUERY_TIMEOUT,
        })
    }

    /// The answer to `query` (already checked: `q`), or why there is none.
    pub async fn resolve(&self, q: &Question, query: &[u8]) -> Result<Vec<u8>> {
        let ns = self.nameserver;
        let until = tokio::time::Instant::now() + self.timeout;
        dns::exchange(ns, None, q, query, until)
            .await
            .map_err(|e| match e {
                ExchangeError::NoAnswer => Timeout::Nameserver {
                    ns,
                    query: q.to_string(),
                    after: self.timeout,
                }
                .into(),
                ExchangeError::Io { step, error } => {
                    let doing = match step {
                        Step::Reach => Doing::ReachingNameserver { ns },
                        Step::Send => Doing::SendingTo { ns },
                        Step::Receive => Doing::ReceivingFrom { ns },
                        Step::TcpConnect => Doing::ConnectingOverTcp { ns },
                        Step::Tcp => return Error::from(error),
                    };
                    Error::from(error).during(doing)
                }
                ExchangeError::Closed => ProxyFault::NameserverClosed { ns }.into(),
                ExchangeError::Answer(e) => Error::from(e).during(Doing::AskingOverTcp { ns }),
            })
    }
}

/// Answers the queries of a DNS session until the client ends it: each one checked, asked
/// of `upstream`, answered (SERVFAIL when the resolver failed). Returns the number answered;
/// fails on a message that is not a query (the session ends).
pub async fn serve<R, W>(reader: &mut R, writer: &mut W, upstream: &Upstream) -> Result<u64>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut answered = 0;
    while let Some(query) = read_frame(reader).await.during(Doing::ReadingDnsQuery)? {
        let q = dns::check_query(&query).during(Doing::CheckingDnsQuery)?;
        let answer = match upstream.resolve(&q, &query).await {
            Ok(a) => a,
            Err(e) => {
                log::warn!("DNS {q}: {e:#}; answered SERVFAIL");
                dns::servfail(&q)
            }
        };
        write_frame(writer, &answer).await?;
        answered += 1;
    }
    Ok(answered)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::op::{Message, MessageType, OpCode, Query, ResponseCode};
    use hickory_proto::rr::{Name, RecordType};
    use tokio::io::AsyncWriteExt;
    use tokio::net::UdpSocket;

    fn query(id: u16) -> Vec<u8> {
        let mut m = Message::new(id, MessageType::Query, OpCode::Query);
        m.add_query(Query::query(
            Name::from_ascii("files.example.test.").unwrap(),
            RecordType::A,
        ));
        m.to_vec().unwrap()
    }

    /// A resolver on loopback that answers with a wrong ID first, then truncated (UDP),
    /// then in full over TCP: the session gets the TCP answer.
    #[tokio::test]
    async fn a_truncated_answer_is_asked_again_over_tcp_and_checked() {
        let udp = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let ns = udp.local_addr().unwrap();
        let tcp = tokio::net::TcpListener::bind(ns).await.unwrap();
        let fake = tokio::spawn(async move {
            let mut buf = [0u8; 512];
            let (n, peer) = udp.recv_from(&mut buf).await.unwrap();
            let q = Message::from_vec(&buf[..n]).unwrap();
            let mut wrong = Message::response(q.metadata.id.wrapping_add(1), OpCode::Query);
            wrong.add_query(q.queries[0].clone());
            udp.send_to(&wrong.to_vec().unwrap(), peer).await.unwrap();
            let mut tc = Message::response(q.metadata.id, OpCode::Query);
            tc.metadata.truncation = true;
            tc.add_query(q.queries[0].clone());
            udp.send_to(&tc.to_vec().unwrap(), peer).await.unwrap();
            let (mut s, _) = tcp.accept().await.unwrap();
            let again = read_frame(&mut s).await.unwrap().unwrap();
            assert_eq!(&again[..], &buf[..n], "the same query over TCP");
            let mut full = Message::response(q.metadata.id, OpCode::Query);
            full.metadata.response_code = ResponseCode::NXDomain;
            full.add_query(q.queries[0].clone());
            write_frame(&mut s, &full.to_vec().unwrap()).await.unwrap();
        });
        let up = Upstream {
            nameserver: ns,
            timeout: Duration::from_secs(5),
        };
        // The session: one query in, its answer out, then the client's end.
        let (mut client, server) = tokio::io::duplex(4096);
        let (mut sr, mut sw) = tokio::io::split(server);
        let serving = tokio::spawn(async move { serve(&mut sr, &mut sw, &up).await });
        write_frame(&mut client, &query(4711)).await.unwrap();
        let answer = read_frame(&mut client).await.unwrap().unwrap();
        let m = Message::from_vec(&answer).unwrap();
        assert_eq!(m.metadata.id, 4711);
        assert!(!m.metadata.truncation);
        assert_eq!(m.metadata.response_code, ResponseCode::NXDomain);
        client.shutdown().await.unwrap();
        drop(client);
        assert_eq!(serving.await.unwrap().unwrap(), 1);
        fake.await.unwrap();
    }

    /// A resolver that never answers: the application gets SERVFAIL, not silence; and a
    /// message that is no query ends the session.
    #[tokio::test]
    async fn no_answer_is_servfail_and_junk_ends_the_session() {
        let silent = UdpSocket::bind("127.0.0.1:0").await.unwrap();
        let up = Upstream {
            nameserver: silent.local_addr().unwrap(),
            timeout: Duration::from_millis(200),
        };
        let (mut client, server) = tokio::io::duplex(4096);
        let (mut sr, mut sw) = tokio::io::split(server);
        let serving = tokio::spawn(async move { serve(&mut sr, &mut sw, &up).await });
        write_frame(&mut client, &query(7)).await.unwrap();
        let answer = read_frame(&mut client).await.unwrap().unwrap();
        let m = Message::from_vec(&answer).unwrap();
        assert_eq!(m.metadata.id, 7);
        assert_eq!(m.metadata.response_code, ResponseCode::ServFail);
        write_frame(&mut client, &[0xffu8; 20]).await.unwrap();
        let e = serving.await.unwrap().unwrap_err();
        assert!(format!("{e:#}").contains("query"), "{e:#}");
    }
}
