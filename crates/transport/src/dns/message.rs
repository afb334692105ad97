//! DNS messages as nena judges them, sans-IO (hickory-proto encodes and parses them; this
//! module holds what nena decides): a query nena carries is one question with the standard
//! opcode ([`check_query`]); an answer is believed only when it is a response with the
//! query's ID and exactly its question ([`check_answer`], the one answer check of every
//! exchange); the names resolver then also wants no error code and takes the addresses of
//! the name it asked, following the answer's CNAME chain ([`addresses`]).

use hickory_proto::op::{Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::{Name, RData, RecordType};
use std::net::IpAddr;
use thiserror::Error;

/// The two record types a server name is asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// `A`: IPv4 addresses.
    V4,
    /// `AAAA`: IPv6 addresses.
    V6,
}

impl Family {
    pub fn record_type(self) -> RecordType {
        match self {
            Family::V4 => RecordType::A,
            Family::V6 => RecordType::AAAA,
        }
    }
}

/// Why a query or an answer is not taken, or what an answer says instead of addresses.
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
    #[error("truncated (the answer needs TCP)")]
    Truncated,
    #[error("no such name")]
    NoSuchName,
    #[error("the resolver answered {0}")]
    Rcode(String),
}

impl DnsError {
    /// An answer that is no answer to the query at all (another ID or question, a query,
    /// junk): a stray datagram, to be ignored while the real answer may still come.
    pub fn is_stray(&self) -> bool {
        matches!(
            self,
            DnsError::Malformed(_)
                | DnsError::OtherId { .. }
                | DnsError::NotResponse
                | DnsError::OtherQuestion
        )
    }
}

/// A server name as DNS reads it: absolute (a trailing dot), so that no search domain of
/// resolv.conf is appended (a WLAN's DHCP sets those too).
pub fn name(host: &str) -> Result<Name, String> {
    let mut n = Name::from_ascii(host).map_err(|e| format!("`{host}` is not a host name ({e})"))?;
    n.set_fqdn(true);
    Ok(n)
}

/// A query's ID and its one question: what its answer must echo.
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

impl Question {
    /// `name`'s records of `family`, asked with message ID `id`.
    pub fn of(name: &Name, family: Family, id: u16) -> Question {
        Question {
            id,
            query: Query::query(name.clone(), family.record_type()),
        }
    }

    /// The query message: this question, recursion desired.
    pub fn encode(&self) -> Vec<u8> {
        let mut m = Message::new(self.id, MessageType::Query, OpCode::Query);
        m.metadata.recursion_desired = true;
        m.add_query(self.query.clone());
        // A Message built from a name and a type always encodes.
        m.to_vec().unwrap_or_default()
    }
}

/// The query for `name`'s records of `family`, with message ID `id`, recursion desired.
pub fn query(name: &Name, family: Family, id: u16) -> Vec<u8> {
    Question::of(name, family, id).encode()
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

/// What an answer to a query says about itself once it passed [`check_answer`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Checked {
    /// TC: the answer did not fit a UDP datagram (ask again over TCP).
    pub truncated: bool,
    /// The answer's response code (a carried answer reaches the application with it).
    pub rcode: ResponseCode,
}

/// The answer check: `answer` is a response to `q`, with its ID and exactly its question
/// (name, type and class; names compare without regard to case, as DNS does).
pub fn check_answer(q: &Question, answer: &[u8]) -> Result<Checked, DnsError> {
    checked(q, answer).map(|(_, c)| c)
}

fn checked(q: &Question, answer: &[u8]) -> Result<(Message, Checked), DnsError> {
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
    let c = Checked {
        truncated: m.metadata.truncation,
        rcode: m.metadata.response_code,
    };
    Ok((m, c))
}

/// The addresses an answer to `q` (a question of [`Question::of`]) gives: it passed
/// [`check_answer`], is whole (not truncated) and says no error (NXDOMAIN is
/// [`DnsError::NoSuchName`]); then the records of `q`'s type owned by its name or by a name
/// its CNAME chain leads to. An empty list is a name without such records (NOERROR, no
/// data).
pub fn addresses(answer: &[u8], q: &Question) -> Result<Vec<IpAddr>, DnsError> {
    let (m, c) = checked(q, answer)?;
    if c.truncated {
        return Err(DnsError::Truncated);
    }
    match c.rcode {
        ResponseCode::NoError => {}
        ResponseCode::NXDomain => return Err(DnsError::NoSuchName),
        other => return Err(DnsError::Rcode(other.to_string())),
    }
    // The names that stand for the name asked: itself and every CNAME target reached from
    // it (bounded: a chain longer than the answer's records is a loop).
    let mut owners = vec![q.query.name().clone()];
    for _ in 0..m.answers.len() {
        let next = m.answers.iter().find_map(|r| match &r.data {
            RData::CNAME(c) if owners.contains(&r.name) && !owners.contains(&c.0) => {
                Some(c.0.clone())
            }
            _ => None,
        });
        match next {
            Some(n) => owners.push(n),
            None => break,
        }
    }
    let ty = q.query.query_type();
    Ok(m.answers
        .iter()
        .filter(|r| owners.contains(&r.name))
        .filter_map(|r| match &r.data {
            RData::A(a) if ty == RecordType::A => Some(IpAddr::V4(a.0)),
            RData::AAAA(a) if ty == RecordType::AAAA => Some(IpAddr::V6(a.0)),
            _ => None,
        })
        .collect())
}
