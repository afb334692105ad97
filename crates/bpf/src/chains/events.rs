//! Reports from `get_connect`, `get_subflow` and `record`, decoded from the ring buffer.
//! MPTCP v1 tokens and initial data sequence numbers are derived here, in user space:
//! token = most significant 32 bits of SHA-256(key), IDSN = least significant 64 bits
//! (RFC 8684 section 3.1); SHA-256 does not belong in a per-packet BPF program.

use crate::chains::abi::{self, FlowKey, RawEvent};
use crate::chains::spec::Hook;
use sha2::{Digest, Sha256};
use std::fmt;
use std::net::{IpAddr, SocketAddr};

/// Token and IDSN of an MPTCP key (both from SHA-256 of the key in network byte order).
pub fn token_idsn(key: u64) -> (u32, u64) {
    let h = Sha256::digest(key.to_be_bytes());
    let token = u32::from_be_bytes(h[..4].try_into().unwrap());
    let idsn = u64::from_be_bytes(h[24..32].try_into().unwrap());
    (token, idsn)
}

fn addrs(fk: &FlowKey) -> (SocketAddr, SocketAddr) {
    let ip = |b: &[u8; 16]| -> IpAddr {
        if fk.family == 6 {
            IpAddr::from(*b)
        } else {
            IpAddr::from([b[0], b[1], b[2], b[3]])
        }
    };
    (
        SocketAddr::new(ip(&fk.saddr), u16::from_be(fk.sport)),
        SocketAddr::new(ip(&fk.daddr), u16::from_be(fk.dport)),
    )
}

/// `src -> dst` of a flow key.
pub fn flow_string(fk: &FlowKey) -> String {
    let (s, d) = addrs(fk);
    format!("{s} -> {d}")
}

/// A key with what follows from it. The events' JSON carries the key (the tool's purpose:
/// what an observer of the path reads in clear); its `Debug` does not.
#[derive(Clone, PartialEq, Eq, serde::Serialize)]
pub struct KeyInfo {
    /// The 64-bit key, hex.
    pub key: String,
    pub token: String,
    pub idsn: u64,
}

impl std::fmt::Debug for KeyInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyInfo")
            .field("key", &Redacted)
            .field("token", &self.token)
            .field("idsn", &self.idsn)
            .finish()
    }
}

/// Stands for a key in `Debug` output.
#[derive(Clone, Copy)]
pub struct Redacted;

impl std::fmt::Debug for Redacted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[redacted]")
    }
}

impl KeyInfo {
    pub fn new(key: u64) -> KeyInfo {
        let (t, i) = token_idsn(key);
        KeyInfo {
            key: format!("{key:016x}"),
            token: format!("{t:08x}"),
            idsn: i,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    /// MP_CAPABLE seen (get_connect).
    Connect {
        src: SocketAddr,
        dst: SocketAddr,
        hook: Hook,
        ifindex: u32,
        stage: Stage,
        version: u8,
        flags: u8,
        /// Key of the packet's sender (SYN/ACK and third ACK).
        sender: Option<KeyInfo>,
        /// Key of the packet's receiver (third ACK).
        receiver: Option<KeyInfo>,
    },
    /// MP_JOIN seen (get_subflow).
    Subflow {
        src: SocketAddr,
        dst: SocketAddr,
        hook: Hook,
        ifindex: u32,
        stage: Stage,
        backup: bool,
        addr_id: u8,
        /// Token of the connection joined (SYN).
        token: Option<String>,
        nonce: Option<String>,
        /// Truncated HMAC (SYN/ACK).
        hmac: Option<String>,
    },
    /// End of a subflow seen by `record` (FIN or RST).
    Record {
        src: SocketAddr,
        dst: SocketAddr,
        hook: Hook,
        ifindex: u32,
        end: End,
        packets: u64,
        bytes: u64,
        flow_size: u64,
        rtt_us: u32,
        srtt_us: u32,
        duration_us: u64,
    },
    /// A report this version does not know.
    Unknown { kind: u32 },
}

/// The handshake packet an event was seen on (`stage` in the JSON, as "syn", "synack",
/// "ack").
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Stage {
    Syn,
    Synack,
    Ack,
}

impl Stage {
    fn from_abi(s: u8) -> Stage {
        match s {
            1 => Stage::Syn,
            2 => Stage::Synack,
            _ => Stage::Ack,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Stage::Syn => "syn",
            Stage::Synack => "synack",
            Stage::Ack => "ack",
        }
    }
}

/// How a recorded subflow ended (`end` in the JSON, as "fin" or "rst").
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum End {
    Fin,
    Rst,
}

impl End {
    pub fn name(self) -> &'static str {
        match self {
            End::Fin => "fin",
            End::Rst => "rst",
        }
    }
}

macro_rules! named {
    ($($t:ty),*) => {$(
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }
        /// Compares with the name, as the JSON has it.
        impl PartialEq<&str> for $t {
            fn eq(&self, other: &&str) -> bool {
                self.name() == *other
            }
        }
    )*};
}
named!(Stage, End);

fn hook(h: u8) -> Hook {
    Hook::from_abi(h as u32)
}

impl Event {
    pub fn from_raw(e: &RawEvent) -> Event {
        let (src, dst) = addrs(&e.flow);
        match e.kind {
            abi::EV_CONNECT => Event::Connect {
                src,
                dst,
                hook: hook(e.hook),
                ifindex: e.ifindex,
                stage: Stage::from_abi(e.stage),
                version: e.version,
                flags: e.flags,
                sender: (e.nkeys >= 1).then(|| KeyInfo::new(u64::from_be_bytes(e.key_a))),
                receiver: (e.nkeys >= 2).then(|| KeyInfo::new(u64::from_be_bytes(e.key_b))),
            },
            abi::EV_SUBFLOW => {
                let hexs = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
                let syn = e.stage == 1 && e.nkeys == 1;
                let synack = e.stage == 2;
                Event::Subflow {
                    src,
                    dst,
                    hook: hook(e.hook),
                    ifindex: e.ifindex,
                    stage: Stage::from_abi(e.stage),
                    backup: e.flags & 1 != 0,
                    addr_id: e.addr_id,
                    token: syn.then(|| hexs(&e.key_a[..4])),
                    nonce: if syn || synack {
                        Some(hexs(&e.key_a[4..]))
                    } else {
                        None
                    },
                    hmac: synack.then(|| hexs(&e.key_b)),
                }
            }
            abi::EV_RECORD => Event::Record {
                src,
                dst,
                hook: hook(e.hook),
                ifindex: e.ifindex,
                end: if e.stage == 2 { End::Rst } else { End::Fin },
                packets: e.m.pkts,
                bytes: e.m.bytes,
                flow_size: e.m.payload,
                rtt_us: e.m.rtt_us,
                srtt_us: e.m.srtt_us,
                duration_us: e.m.last_ns.saturating_sub(e.m.first_ns) / 1000,
            },
            k => Event::Unknown { kind: k },
        }
    }
}

/// One line of text per event.
impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Event::Connect { src, dst, hook, stage, version, sender, receiver, .. } => {
                write!(f, "connect {src} -> {dst} {hook} {stage} v{version}")?;
                if let Some(k) = sender {
                    write!(f, " sender_key={} sender_token={} sender_idsn={}", k.key, k.token, k.idsn)?;
                }
                if let Some(k) = receiver {
                    write!(f, " receiver_key={} receiver_token={} receiver_idsn={}", k.key, k.token, k.idsn)?;
                }
                Ok(())
            }
            Event::Subflow { src, dst, hook, stage, backup, addr_id, token, nonce, hmac, .. } => {
                write!(f, "subflow {src} -> {dst} {hook} {stage} addr_id={addr_id} backup={backup}")?;
                if let Some(t) = token {
                    write!(f, " token={t}")?;
                }
                if let Some(n) = nonce {
                    write!(f, " nonce={n}")?;
                }
                if let Some(h) = hmac {
                    write!(f, " hmac={h}")?;
                }
                Ok(())
            }
            Event::Record { src, dst, hook, end, packets, bytes, flow_size, rtt_us, srtt_us, duration_us, .. } => write!(
                f,
                "record {src} -> {dst} {hook} {end} packets={packets} bytes={bytes} flow_size={flow_size} rtt_us={rtt_us} srtt_us={srtt_us} duration_us={duration_us}"
            ),
            Event::Unknown { kind } => write!(f, "unknown event {kind}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_is_sha256_msb() {
        // SHA-256 of 8 zero bytes = af5570f5a1810b7a f78caf4bc70a660f 0df51e42baf91d4d e5b2328de0e83dfc
        let (t, i) = token_idsn(0);
        assert_eq!(t, 0xaf5570f5);
        assert_eq!(i, 0xe5b2328de0e83dfc);
    }

    #[test]
    fn decodes_connect() {
        let mut r = RawEvent {
            kind: abi::EV_CONNECT,
            stage: 3,
            nkeys: 2,
            version: 1,
            ..Default::default()
        };
        r.flow.family = 4;
        r.flow.saddr[..4].copy_from_slice(&[198, 18, 100, 1]);
        r.flow.daddr[..4].copy_from_slice(&[198, 18, 100, 2]);
        r.flow.sport = 1000u16.to_be();
        r.flow.dport = 80u16.to_be();
        r.key_a = 1u64.to_be_bytes();
        r.key_b = 2u64.to_be_bytes();
        let e = Event::from_raw(&r);
        let s = e.to_string();
        assert!(
            s.starts_with("connect 198.18.100.1:1000 -> 198.18.100.2:80 ingress ack v1"),
            "{s}"
        );
        assert!(s.contains("sender_key=0000000000000001"));
        let j = serde_json::to_value(&e).unwrap();
        assert_eq!(j["event"], "connect");
        assert_eq!(
            (&j["hook"], &j["stage"]),
            (&"ingress".into(), &"ack".into())
        );
        assert_eq!(j["receiver"]["token"], format!("{:08x}", token_idsn(2).0));
        r.kind = abi::EV_RECORD;
        r.stage = 2;
        r.hook = abi::HOOK_TC as u8;
        let j = serde_json::to_value(Event::from_raw(&r)).unwrap();
        assert_eq!((&j["hook"], &j["end"]), (&"egress".into(), &"rst".into()));
    }
}
