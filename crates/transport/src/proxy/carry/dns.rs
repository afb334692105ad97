//! DNS messages as `nena run` and the proxy server judge them, sans-IO (hickory-proto
//! parses them; this module holds what nena decides): a query is one question with the
//! standard opcode; an answer is believed only when it is a response with the query's ID
//! and exactly its question; a failed resolution is answered SERVFAIL (the application
//! tries its next step at once instead of waiting for a timeout); the resolver is the first
//! `nameserver` of a resolv.conf.

use hickory_proto::op::{Message, MessageType, OpCode, Query, ResponseCode};
use std::net::IpAddr;
use thiserror::Error;

/// Why a query or an answer is not taken.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum DnsError {
    #[error("not a DNS message ({0})")]
    Malformed(String),
    #[error("a response where a query was expected")]
    NotQuery,
    #[error("a query with opcode {0} (only standard queries are carried)")]
    OpCode(String),
    #[error("a query with {0} questions (exactly one is carried)")]
    Questions(usize),
    #[error("an answer to another query (ID {got}, expected {want})")]
    OtherId { got: u16, want: u16 },
    #[error("a query where an answer was expected")]
    NotResponse,
    #[error("an answer to another question")]
    OtherQuestion,
}

/// A query that passed [`check_query`]: its ID and its one question.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Question {
    pub id: u16,
    pub query: Query,
}

impl std::fmt::Display for Question {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.query.query_type(), self.query.name())
    }
}

/// A standard query with exactly one question.
pub fn check_query(msg: &[u8]) -> Result<Question, DnsError> {
    let m = Message::from_vec(msg).map_err(|e| DnsError::Malformed(e.to_string()))?;
    if m.metadata.message_type != MessageType::Query {
        return Err(DnsError::NotQuery);
    }
    if m.metadata.op_code != OpCode::Query {
        return Err(DnsError::OpCode(format!("{:?}", m.metadata.op_code)));
    }
    if m.queries.len() != 1 {
        return Err(DnsError::Questions(m.queries.len()));
    }
    Ok(Question {
        id: m.metadata.id,
        query: m.queries[0].clone(),
    })
}

/// What an answer to `q` says about itself once it passed the checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Checked {
    /// TC: the answer did not fit a UDP datagram (ask again over TCP).
    pub truncated: bool,
}

/// The answer is a response to `q`: the same ID and exactly its question.
pub fn check_answer(q: &Question, answer: &[u8]) -> Result<Checked, DnsError> {
    let m = Message::from_vec(answer).map_err(|e| DnsError::Malformed(e.to_string()))?;
    if m.metadata.message_type != MessageType::Response {
        return Err(DnsError::NotResponse);
    }
    if m.metadata.id != q.id {
        return Err(DnsError::OtherId {
            got: m.metadata.id,
            want: q.id,
        });
    }
    if m.queries.len() != 1 || m.queries[0] != q.query {
        return Err(DnsError::OtherQuestion);
    }
    Ok(Checked {
        truncated: m.metadata.truncation,
    })
}

/// The largest answer the application takes over UDP for `query`: its EDNS payload size
/// (at least 512), else 512 (RFC 1035, RFC 6891).
pub fn udp_limit(query: &[u8]) -> usize {
    Message::from_vec(query)
        .ok()
        .and_then(|m| m.edns.map(|e| e.max_payload() as usize))
        .map_or(512, |n| n.max(512))
}

/// `answer` as a UDP answer to a query that takes at most `limit` bytes: unchanged when it
/// fits, else its header with TC set and its question only (the application asks again over
/// TCP, which `nena run` answers too). The server's resolver answered over TCP when its own
/// UDP answer was truncated, so the whole answer may be larger than the application's.
pub fn fit_udp(answer: Vec<u8>, limit: usize) -> Vec<u8> {
    if answer.len() <= limit {
        return answer;
    }
    let Ok(mut m) = Message::from_vec(&answer) else {
        return answer;
    };
    m.metadata.truncation = true;
    m.answers.clear();
    m.authorities.clear();
    m.additionals.clear();
    m.signature = None;
    // A header and a question parsed a moment ago always encode, and fit.
    m.to_vec().unwrap_or(answer)
}

/// The answer that tells the application its query failed (SERVFAIL), with its question.
pub fn servfail(q: &Question) -> Vec<u8> {
    let mut m = Message::error_msg(q.id, OpCode::Query, ResponseCode::ServFail);
    m.metadata.recursion_desired = true;
    m.metadata.recursion_available = true;
    m.add_query(q.query.clone());
    // A message built from a parsed question always encodes; an empty answer would only
    // make the application wait for its timeout.
    m.to_vec().unwrap_or_default()
}

/// The first `nameserver` of a resolv.conf (comments `#` and `;`; an IPv6 address may carry
/// a `%scope`, dropped). `None` when it names none.
pub fn first_nameserver(resolv_conf: &str) -> Option<IpAddr> {
    resolv_conf.lines().find_map(|line| {
        let line = line.split(['#', ';']).next()?;
        let mut words = line.split_whitespace();
        if words.next()? != "nameserver" {
            return None;
        }
        let addr = words.next()?;
        addr.split('%').next()?.parse().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::rr::{Name, RData, Record, RecordType};
    use std::net::Ipv4Addr;

    fn query(name: &str, ty: RecordType, id: u16) -> Vec<u8> {
        let mut m = Message::new(id, MessageType::Query, OpCode::Query);
        m.metadata.recursion_desired = true;
        m.add_query(Query::query(Name::from_ascii(name).unwrap(), ty));
        m.to_vec().unwrap()
    }

    fn answer(name: &str, id: u16, truncated: bool) -> Vec<u8> {
        let n = Name::from_ascii(name).unwrap();
        let mut m = Message::response(id, OpCode::Query);
        m.metadata.truncation = truncated;
        m.add_query(Query::query(n.clone(), RecordType::A));
        m.add_answer(Record::from_rdata(
            n,
            60,
            RData::A(Ipv4Addr::new(198, 18, 3, 2).into()),
        ));
        m.to_vec().unwrap()
    }

    #[test]
    fn a_standard_query_with_one_question_is_taken() {
        let q = check_query(&query("files.example.test.", RecordType::A, 77)).unwrap();
        assert_eq!(q.id, 77);
        assert_eq!(q.to_string(), "A files.example.test.");
        assert_eq!(
            check_query(&answer("files.example.test.", 77, false)),
            Err(DnsError::NotQuery)
        );
        let mut none = Message::new(5, MessageType::Query, OpCode::Query);
        assert_eq!(
            check_query(&none.to_vec().unwrap()),
            Err(DnsError::Questions(0))
        );
        none.add_query(Query::query(Name::from_ascii("a.").unwrap(), RecordType::A));
        none.add_query(Query::query(Name::from_ascii("b.").unwrap(), RecordType::A));
        assert_eq!(
            check_query(&none.to_vec().unwrap()),
            Err(DnsError::Questions(2))
        );
        let mut update = Message::new(5, MessageType::Query, OpCode::Update);
        update.add_query(Query::query(Name::from_ascii("a.").unwrap(), RecordType::A));
        assert!(matches!(
            check_query(&update.to_vec().unwrap()),
            Err(DnsError::OpCode(_))
        ));
        assert!(matches!(
            check_query(b"not dns at all"),
            Err(DnsError::Malformed(_))
        ));
    }

    #[test]
    fn an_answer_must_match_the_id_and_the_question() {
        let q = check_query(&query("files.example.test.", RecordType::A, 9)).unwrap();
        assert_eq!(
            check_answer(&q, &answer("files.example.test.", 9, false)),
            Ok(Checked { truncated: false })
        );
        assert_eq!(
            check_answer(&q, &answer("files.example.test.", 9, true)),
            Ok(Checked { truncated: true })
        );
        // Names compare without regard to case, as DNS does.
        assert!(check_answer(&q, &answer("FILES.example.test.", 9, false)).is_ok());
        assert_eq!(
            check_answer(&q, &answer("files.example.test.", 10, false)),
            Err(DnsError::OtherId { got: 10, want: 9 })
        );
        assert_eq!(
            check_answer(&q, &answer("other.example.test.", 9, false)),
            Err(DnsError::OtherQuestion)
        );
        assert_eq!(
            check_answer(&q, &query("files.example.test.", RecordType::A, 9)),
            Err(DnsError::NotResponse)
        );
        let aaaa = check_query(&query("files.example.test.", RecordType::AAAA, 9)).unwrap();
        assert_eq!(
            check_answer(&aaaa, &answer("files.example.test.", 9, false)),
            Err(DnsError::OtherQuestion)
        );
        assert!(matches!(
            check_answer(&q, &[0u8; 5]),
            Err(DnsError::Malformed(_))
        ));
    }

    #[test]
    fn servfail_answers_the_question() {
        let q = check_query(&query("files.example.test.", RecordType::AAAA, 4242)).unwrap();
        let a = servfail(&q);
        assert_eq!(check_answer(&q, &a), Ok(Checked { truncated: false }));
        let m = Message::from_vec(&a).unwrap();
        assert_eq!(m.metadata.response_code, ResponseCode::ServFail);
        assert!(m.answers.is_empty());
    }

    #[test]
    fn an_answer_too_large_for_udp_is_sent_truncated() {
        let n = Name::from_ascii("files.example.test.").unwrap();
        let q = check_query(&query("files.example.test.", RecordType::A, 31)).unwrap();
        let mut big = Message::response(31, OpCode::Query);
        big.add_query(q.query.clone());
        for i in 0..60u8 {
            big.add_answer(Record::from_rdata(
                n.clone(),
                60,
                RData::A(Ipv4Addr::new(198, 18, 3, i).into()),
            ));
        }
        let big = big.to_vec().unwrap();
        assert!(big.len() > 512, "{}", big.len());
        // Without EDNS the limit is 512; with EDNS, its payload size.
        assert_eq!(
            udp_limit(&query("files.example.test.", RecordType::A, 31)),
            512
        );
        let mut edns = Message::new(31, MessageType::Query, OpCode::Query);
        edns.add_query(q.query.clone());
        let mut e = hickory_proto::op::Edns::new();
        e.set_max_payload(1232);
        edns.edns = Some(e);
        assert_eq!(udp_limit(&edns.to_vec().unwrap()), 1232);
        assert_eq!(udp_limit(b"junk"), 512);
        // Fits: unchanged.
        assert_eq!(fit_udp(big.clone(), 4096), big);
        // Too large: the question with TC set, still an answer to the query.
        let cut = fit_udp(big, 512);
        assert!(cut.len() <= 512);
        assert_eq!(check_answer(&q, &cut), Ok(Checked { truncated: true }));
        assert!(Message::from_vec(&cut).unwrap().answers.is_empty());
    }

    #[test]
    fn the_first_nameserver_of_a_resolv_conf() {
        let conf = "# generated\nsearch lab\n;nameserver 9.9.9.9\noptions ndots:1\n\
                    nameserver 198.18.3.2 # the lab\nnameserver 198.18.3.3\n";
        assert_eq!(first_nameserver(conf), Some("198.18.3.2".parse().unwrap()));
        assert_eq!(
            first_nameserver("nameserver fe80::1%eth0\n"),
            Some("fe80::1".parse().unwrap())
        );
        assert_eq!(
            first_nameserver("nameserver 2001:2::53"),
            Some("2001:2::53".parse().unwrap())
        );
        assert_eq!(first_nameserver("search lab\nnameserver\n"), None);
        assert_eq!(first_nameserver("nameserver not-an-address\n"), None);
        assert_eq!(first_nameserver(""), None);
    }
}
