//! What a responder sends an application, sans-IO: SERVFAIL when a query could not be
//! answered (the application tries its next step at once instead of waiting for a
//! timeout), and an answer cut to what the application takes over UDP (TC set: it asks
//! again over TCP).

use super::message::Question;
use hickory_proto::op::{Message, OpCode, ResponseCode};

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
