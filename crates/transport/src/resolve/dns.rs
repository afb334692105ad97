//! DNS messages of the trusted resolver, sans-IO: the query for one name and record type,
//! and the checks an answer must pass before nena believes it (same ID, a response, the
//! same question, no error), then the addresses it gives for the name (following the
//! answer's CNAME chain). Messages are encoded and decoded by hickory-proto; this module
//! holds only what nena decides about them.

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
    fn record_type(self) -> RecordType {
        match self {
            Family::V4 => RecordType::A,
            Family::V6 => RecordType::AAAA,
        }
    }
}

/// Why an answer was not believed, or said there is nothing.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum AnswerError {
    #[error("not a DNS message ({0})")]
    Malformed(String),
    #[error("an answer to another query (ID {got}, expected {want})")]
    OtherId { got: u16, want: u16 },
    #[error("a query, not a response")]
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

/// A server name as DNS reads it: absolute (a trailing dot), so that no search domain of
/// resolv.conf is appended (a WLAN's DHCP sets those too).
pub fn name(host: &str) -> Result<Name, String> {
    let mut n = Name::from_ascii(host).map_err(|e| format!("`{host}` is not a host name ({e})"))?;
    n.set_fqdn(true);
    Ok(n)
}

/// The query for `name`'s records of `family`, with message ID `id`, recursion desired.
pub fn query(name: &Name, family: Family, id: u16) -> Vec<u8> {
    let mut m = Message::new(id, MessageType::Query, OpCode::Query);
    m.metadata.recursion_desired = true;
    m.add_query(Query::query(name.clone(), family.record_type()));
    // A Message built from a name and a type always encodes.
    m.to_vec().unwrap_or_default()
}

/// The addresses an answer gives for the question of `query(name, family, id)`: the records
/// of `family`'s type owned by `name` or by a name its CNAME chain leads to. An empty list
/// is a name without such records (NOERROR, no data).
pub fn addresses(
    answer: &[u8],
    name: &Name,
    family: Family,
    id: u16,
) -> Result<Vec<IpAddr>, AnswerError> {
    let m = Message::from_vec(answer).map_err(|e| AnswerError::Malformed(e.to_string()))?;
    if m.metadata.id != id {
        return Err(AnswerError::OtherId {
            got: m.metadata.id,
            want: id,
        });
    }
    if m.metadata.message_type != MessageType::Response {
        return Err(AnswerError::NotResponse);
    }
    let asked = m.queries.first();
    let same = m.queries.len() == 1
        && asked.is_some_and(|q| q.name == *name && q.query_type == family.record_type());
    if !same {
        return Err(AnswerError::OtherQuestion);
    }
    if m.metadata.truncation {
        return Err(AnswerError::Truncated);
    }
    match m.metadata.response_code {
        ResponseCode::NoError => {}
        ResponseCode::NXDomain => return Err(AnswerError::NoSuchName),
        other => return Err(AnswerError::Rcode(other.to_string())),
    }
    // The names that stand for `name`: itself and every CNAME target reached from it
    // (bounded: a chain longer than the answer's records is a loop).
    let mut owners = vec![name.clone()];
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
    Ok(m.answers
        .iter()
        .filter(|r| owners.contains(&r.name))
        .filter_map(|r| match (&r.data, family) {
            (RData::A(a), Family::V4) => Some(IpAddr::V4(a.0)),
            (RData::AAAA(a), Family::V6) => Some(IpAddr::V6(a.0)),
            _ => None,
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use hickory_proto::rr::rdata::{A, AAAA, CNAME};
    use hickory_proto::rr::Record;
    use std::net::{Ipv4Addr, Ipv6Addr};

    /// A resolver's answer to `query(name, family, id)` with `records`.
    fn answer(name: &Name, family: Family, id: u16, records: Vec<Record>) -> Message {
        let mut m = Message::new(id, MessageType::Response, OpCode::Query);
        m.add_query(Query::query(name.clone(), family.record_type()));
        m.add_answers(records);
        m
    }

    fn rec(owner: &str, data: RData) -> Record {
        Record::from_rdata(self::name(owner).unwrap(), 60, data)
    }

    #[test]
    fn a_query_asks_one_absolute_question() {
        let n = name("srv.lab").unwrap();
        let q = Message::from_vec(&query(&n, Family::V6, 7)).unwrap();
        assert_eq!(q.metadata.id, 7);
        assert!(q.metadata.recursion_desired);
        assert_eq!(q.queries.len(), 1);
        assert_eq!(q.queries[0].query_type, RecordType::AAAA);
        assert_eq!(q.queries[0].name.to_ascii(), "srv.lab.");
    }

    #[test]
    fn addresses_follow_the_cname_chain_and_skip_strangers() {
        let n = name("www.lab").unwrap();
        let m = answer(
            &n,
            Family::V4,
            9,
            vec![
                rec("www.lab", RData::CNAME(CNAME(name("srv.lab").unwrap()))),
                rec("srv.lab", RData::A(A(Ipv4Addr::new(198, 18, 3, 2)))),
                // Not on the chain: an answer must not bring in another name's address.
                rec("evil.lab", RData::A(A(Ipv4Addr::new(198, 18, 3, 3)))),
                rec("srv.lab", RData::AAAA(AAAA(Ipv6Addr::LOCALHOST))),
            ],
        );
        let got = addresses(&m.to_vec().unwrap(), &n, Family::V4, 9).unwrap();
        assert_eq!(got, vec![IpAddr::V4(Ipv4Addr::new(198, 18, 3, 2))]);
    }

    #[test]
    fn answers_to_something_else_are_refused() {
        let n = name("srv.lab").unwrap();
        let ok = answer(&n, Family::V4, 5, vec![]);
        assert_eq!(
            addresses(&ok.to_vec().unwrap(), &n, Family::V4, 6),
            Err(AnswerError::OtherId { got: 5, want: 6 })
        );
        assert_eq!(
            addresses(&ok.to_vec().unwrap(), &n, Family::V6, 5),
            Err(AnswerError::OtherQuestion)
        );
        let other = name("other.lab").unwrap();
        assert_eq!(
            addresses(&ok.to_vec().unwrap(), &other, Family::V4, 5),
            Err(AnswerError::OtherQuestion)
        );
        let q = query(&n, Family::V4, 5);
        assert_eq!(
            addresses(&q, &n, Family::V4, 5),
            Err(AnswerError::NotResponse)
        );
        let mut nx = answer(&n, Family::V4, 5, vec![]);
        nx.metadata.response_code = ResponseCode::NXDomain;
        assert_eq!(
            addresses(&nx.to_vec().unwrap(), &n, Family::V4, 5),
            Err(AnswerError::NoSuchName)
        );
        let mut tc = answer(&n, Family::V4, 5, vec![]);
        tc.metadata.truncation = true;
        assert_eq!(
            addresses(&tc.to_vec().unwrap(), &n, Family::V4, 5),
            Err(AnswerError::Truncated)
        );
        assert!(matches!(
            addresses(b"\x00\x05", &n, Family::V4, 5),
            Err(AnswerError::Malformed(_))
        ));
    }

    #[test]
    fn a_cname_loop_ends() {
        let n = name("a.lab").unwrap();
        let m = answer(
            &n,
            Family::V4,
            1,
            vec![
                rec("a.lab", RData::CNAME(CNAME(name("b.lab").unwrap()))),
                rec("b.lab", RData::CNAME(CNAME(name("a.lab").unwrap()))),
            ],
        );
        assert_eq!(
            addresses(&m.to_vec().unwrap(), &n, Family::V4, 1),
            Ok(vec![])
        );
    }

    proptest::proptest! {
        /// Well-formed answers with arbitrary records: the addresses believed are those of
        /// the family asked, and only when the question is the one asked.
        #[test]
        fn generated_answers(id in proptest::prelude::any::<u16>(), v4 in proptest::collection::vec(proptest::prelude::any::<[u8; 4]>(), 0..5), other_id in proptest::prelude::any::<bool>()) {
            let n = name("srv.lab").unwrap();
            let recs = v4.iter().map(|o| Record::from_rdata(n.clone(), 5, RData::A(A((*o).into())))).collect();
            let bytes = answer(&n, Family::V4, id, recs).to_vec().unwrap();
            let asked = if other_id { id.wrapping_add(1) } else { id };
            let got = addresses(&bytes, &n, Family::V4, asked);
            if other_id {
                proptest::prop_assert!(got.is_err());
            } else {
                proptest::prop_assert_eq!(got.unwrap().len(), v4.len());
            }
        }
    }
}
