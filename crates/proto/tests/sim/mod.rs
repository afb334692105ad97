//! A client and a server handshake exchanging bytes through a simulated connection on a
//! virtual clock (after quinn-proto's `tests/util.rs` `Pair`): every write is cut into
//! segments (at chosen stream offsets, or of a chosen size), each segment arrives after a
//! latency and a jitter (in order, as TCP delivers), and the connection can be dropped at
//! any byte of either direction. The clock jumps from one arrival to the next; nothing
//! sleeps. Each side runs the sequence a transport does: the client writes its hello, then
//! its confirmation and its data once the answer is in; the server writes its answer and
//! its data; each then reads the other's data through its session. A side that fails
//! closes its direction.
#![allow(dead_code)]

use nena_proto::*;
use nena_testkit::Prng;
use std::collections::{BTreeMap, BTreeSet};

pub type Micros = u64;

/// How one direction carries bytes.
#[derive(Debug, Clone, Default)]
pub struct Shape {
    /// Segment boundaries at these offsets of the direction's byte stream.
    pub cuts: BTreeSet<usize>,
    /// Largest segment (0: no limit beyond the writes and `cuts`).
    pub mss: usize,
    /// Base latency, and a random extra of up to `jitter` per segment (seeded).
    pub latency: Micros,
    pub jitter: Micros,
    pub seed: u64,
    /// Random segment sizes in `1..=rand_mss` (0: off).
    pub rand_mss: usize,
    /// Serialisation time per byte (a link's rate): a segment arrives no sooner than this
    /// much per byte after the previous one.
    pub per_byte: Micros,
}

/// Where the connection is dropped: when byte `at` of a direction (client to server if
/// `c2s`) would be delivered, i.e. after `at` bytes of it arrived. Both directions end
/// then: what already arrived stays, the rest is lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Drop {
    pub c2s: bool,
    pub at: usize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    Handshake(HandshakeError),
    Session(SessionError),
    /// The connection ended with this many bytes of the peer's data (a prefix of it).
    Truncated(usize),
}

/// How a side ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum End {
    /// Handshake done and the peer's whole data received and equal to what it sent.
    Complete(Mode),
    Failed(Failure),
}

enum Hs {
    // Boxed: a client handshake (its config, a ticket, the hello) is much larger.
    Client(Box<ClientHandshake>),
    Server(ServerHandshake),
}

struct Side {
    hs: Option<Hs>,
    /// Received, not yet consumed.
    inbuf: Vec<u8>,
    /// Bytes received in all.
    bytes_in: usize,
    rx: Option<Unprotector>,
    mode: Option<Mode>,
    got: Vec<u8>,
    /// What the peer sends after its handshake.
    expect: Vec<u8>,
    /// What this side sends after its handshake.
    send: Vec<u8>,
    end: Option<End>,
}

impl Side {
    /// Feed what arrived; returns bytes to write and whether to close.
    fn input(&mut self, bytes: &[u8]) -> (Vec<u8>, bool) {
        if self.end.is_some() {
            return (Vec::new(), false);
        }
        self.bytes_in += bytes.len();
        self.inbuf.extend_from_slice(bytes);
        let mut out = Vec::new();
        if let Some(hs) = self.hs.as_mut() {
            let done = match hs {
                Hs::Client(c) => match c.read(&self.inbuf) {
                    Ok(Progress::NeedMore { consumed }) => {
                        assert_eq!(consumed, self.inbuf.len(), "a handshake left input");
                        self.inbuf.clear();
                        return (out, false);
                    }
                    Ok(Progress::Done { consumed, value }) => Ok((consumed, value)),
                    Err(e) => Err((None, e)),
                },
                Hs::Server(s) => match s.read(&self.inbuf) {
                    Ok(Progress::NeedMore { consumed }) => {
                        assert_eq!(consumed, self.inbuf.len(), "a handshake left input");
                        self.inbuf.clear();
                        return (out, false);
                    }
                    Ok(Progress::Done { consumed, value }) => Ok((consumed, value)),
                    Err(r) => Err((r.reply, r.error)),
                },
            };
            match done {
                Ok((consumed, (msg, session))) => {
                    assert!(consumed <= self.inbuf.len());
                    self.inbuf.drain(..consumed);
                    self.hs = None;
                    self.mode = Some(session.mode());
                    let (mut tx, rx) = session.split();
                    self.rx = Some(rx);
                    out.extend_from_slice(&msg);
                    out.extend(seal(&mut tx, &self.send));
                }
                Err((reply, e)) => {
                    self.end = Some(End::Failed(Failure::Handshake(e)));
                    return (reply.unwrap_or_default(), true);
                }
            }
        }
        self.open();
        (out, false)
    }

    fn open(&mut self) {
        let Some(rx) = self.rx.as_mut() else { return };
        while !self.inbuf.is_empty() && self.end.is_none() {
            match rx.open(&mut self.inbuf) {
                Ok(Opened::NeedMore { total }) => {
                    assert!(total > self.inbuf.len());
                    break;
                }
                Ok(Opened::Data { consumed, plain }) => {
                    self.got.extend_from_slice(&self.inbuf[plain]);
                    self.inbuf.drain(..consumed);
                }
                Ok(Opened::FlowEnd { consumed }) => {
                    self.inbuf.drain(..consumed);
                }
                Ok(Opened::Close { consumed }) => {
                    self.inbuf.drain(..consumed);
                }
                Err(e) => self.end = Some(End::Failed(Failure::Session(e))),
            }
        }
        if self.end.is_none() && self.got.len() >= self.expect.len() {
            assert_eq!(
                self.got, self.expect,
                "the peer's data, opened with our keys"
            );
            self.end = Some(End::Complete(self.mode.unwrap()));
        }
    }

    /// The peer's direction ended.
    fn eof(&mut self) {
        if self.end.is_some() {
            return;
        }
        let failure = match self.hs.as_mut() {
            Some(Hs::Client(c)) => Failure::Handshake(c.eof()),
            Some(Hs::Server(s)) => Failure::Handshake(s.eof()),
            None => Failure::Truncated(self.got.len()),
        };
        if let Failure::Handshake(HandshakeError::ClosedEarly { received }) = &failure {
            assert_eq!(*received, self.bytes_in, "ClosedEarly counts what arrived");
        }
        if let Failure::Truncated(n) = failure {
            assert_eq!(
                self.got[..],
                self.expect[..n],
                "a prefix of the peer's data"
            );
        }
        self.end = Some(End::Failed(failure));
    }
}

/// Seals `data` in payloads of at most 700 bytes (several records in aead).
pub fn seal(tx: &mut Protector, data: &[u8]) -> Vec<u8> {
    let max = tx.max_payload().unwrap_or(usize::MAX).min(700);
    let mut wire = Vec::new();
    for chunk in data.chunks(max) {
        let mut buf = vec![0u8; tx.header_len() + chunk.len() + tx.trailer_len()];
        buf[tx.header_len()..tx.header_len() + chunk.len()].copy_from_slice(chunk);
        let n = tx.seal(&mut buf, chunk.len());
        wire.extend_from_slice(&buf[..n]);
    }
    wire
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Seg {
    Data,
    Fin,
}

/// One direction of the connection.
struct Dir {
    shape: Shape,
    rng: Prng,
    /// (arrival, sequence) -> bytes (empty with `Fin`).
    queue: BTreeMap<(Micros, u64), (Seg, Vec<u8>)>,
    /// Bytes written so far (stream offset of the next write).
    written: usize,
    delivered: usize,
    last_arrival: Micros,
    fin: bool,
}

impl Dir {
    fn new(shape: Shape) -> Self {
        Dir {
            rng: Prng::new(shape.seed),
            shape,
            queue: BTreeMap::new(),
            written: 0,
            delivered: 0,
            last_arrival: 0,
            fin: false,
        }
    }

    fn arrival(&mut self, now: Micros, len: usize) -> Micros {
        let j = if self.shape.jitter > 0 {
            self.rng.below(self.shape.jitter + 1)
        } else {
            0
        };
        // In order: never before the previous segment.
        let t = (now + self.shape.latency + j)
            .max(self.last_arrival + self.shape.per_byte * len as Micros);
        self.last_arrival = t;
        t
    }

    fn write(&mut self, now: Micros, seq: &mut u64, mut bytes: &[u8]) {
        if self.fin {
            return;
        }
        while !bytes.is_empty() {
            let mut n = bytes.len();
            if self.shape.mss > 0 {
                n = n.min(self.shape.mss);
            }
            if self.shape.rand_mss > 0 {
                n = n.min(1 + self.rng.below(self.shape.rand_mss as u64) as usize);
            }
            if let Some(&c) = self.shape.cuts.range(self.written + 1..).next() {
                n = n.min(c - self.written);
            }
            let t = self.arrival(now, n);
            *seq += 1;
            self.queue
                .insert((t, *seq), (Seg::Data, bytes[..n].to_vec()));
            self.written += n;
            bytes = &bytes[n..];
        }
    }

    fn close(&mut self, now: Micros, seq: &mut u64) {
        if !self.fin {
            self.fin = true;
            let t = self.arrival(now, 0);
            *seq += 1;
            self.queue.insert((t, *seq), (Seg::Fin, Vec::new()));
        }
    }
}

/// A run's result.
#[derive(Debug, Clone)]
pub struct Run {
    pub client: End,
    pub server: End,
    /// Bytes each direction carried in all (had it not been dropped).
    pub c2s_written: usize,
    pub s2c_written: usize,
    pub steps: usize,
    pub now: Micros,
}

pub struct Setup {
    pub client: ClientConfig,
    pub server: ServerConfig,
    pub client_entropy: [u8; ENTROPY_LEN],
    pub server_entropy: [u8; SERVER_ENTROPY_LEN],
    pub c2s: Shape,
    pub s2c: Shape,
    pub drop: Option<Drop>,
    pub client_data: Vec<u8>,
    pub server_data: Vec<u8>,
}

impl Setup {
    pub fn new(offer: &[Mode], accept: &[Mode]) -> Self {
        Setup {
            client: ClientConfig::offering(offer),
            server: ServerConfig::accepting(accept).with_key(test_server_key()),
            client_entropy: std::array::from_fn(|i| (i as u8).wrapping_mul(29) ^ 0x5c),
            server_entropy: std::array::from_fn(|i| (i as u8).wrapping_mul(53) ^ 0xa7),
            c2s: Shape {
                latency: 10_000,
                ..Shape::default()
            },
            s2c: Shape {
                latency: 12_000,
                ..Shape::default()
            },
            drop: None,
            client_data: nena_testkit::random_bytes(1, 900),
            server_data: nena_testkit::random_bytes(2, 700),
        }
    }
}

/// Runs the two sides to the end. Panics if a side is left waiting with nothing in flight
/// (a hang), or if the run does not end within a bound of steps.
pub fn run(s: &Setup) -> Run {
    let client = ClientHandshake::new(&s.client, s.client_entropy).expect("client config");
    let hello = client.first_flight().to_vec();
    let mut sides = [
        Side {
            hs: Some(Hs::Client(Box::new(client))),
            inbuf: Vec::new(),
            bytes_in: 0,
            rx: None,
            mode: None,
            got: Vec::new(),
            expect: s.server_data.clone(),
            send: s.client_data.clone(),
            end: None,
        },
        Side {
            hs: Some(Hs::Server(ServerHandshake::new(
                &s.server,
                s.server_entropy,
            ))),
            inbuf: Vec::new(),
            bytes_in: 0,
            rx: None,
            mode: None,
            got: Vec::new(),
            expect: s.client_data.clone(),
            send: s.server_data.clone(),
            end: None,
        },
    ];
    // dirs[0]: client -> server, dirs[1]: server -> client.
    let mut dirs = [Dir::new(s.c2s.clone()), Dir::new(s.s2c.clone())];
    let mut seq = 0u64;
    let mut now: Micros = 0;
    dirs[0].write(now, &mut seq, &hello);
    let mut dropped = false;
    let mut steps = 0;
    loop {
        steps += 1;
        assert!(steps < 1_000_000, "the simulation does not end");
        // The earliest arrival of either direction (client to server first on a tie).
        let next = (0..2)
            .filter_map(|d| dirs[d].queue.keys().next().map(|k| (*k, d)))
            .min();
        let Some(((t, k), d)) = next else { break };
        now = t;
        let (seg, mut bytes) = dirs[d].queue.remove(&(t, k)).unwrap();
        // The receiver of direction d is side 1 - d.
        let to = 1 - d;
        if let Some(drop) = s.drop.filter(|_| !dropped) {
            let dd = if drop.c2s { 0 } else { 1 };
            if dd == d && seg == Seg::Data && dirs[d].delivered + bytes.len() > drop.at {
                bytes.truncate(drop.at - dirs[d].delivered);
                dropped = true;
            }
        }
        match seg {
            Seg::Data => {
                dirs[d].delivered += bytes.len();
                if !bytes.is_empty() {
                    let (out, close) = sides[to].input(&bytes);
                    // What a side writes goes the other way: side 0 writes on dirs[0].
                    if !dropped {
                        dirs[to].write(now, &mut seq, &out);
                        if close {
                            dirs[to].close(now, &mut seq);
                        }
                    } else if close {
                        // Nothing more crosses a dropped connection.
                    }
                }
            }
            Seg::Fin => sides[to].eof(),
        }
        if dropped {
            // Both directions end now: what already arrived stays, the rest is lost; each
            // side sees the end.
            for d in &mut dirs {
                d.queue.clear();
                d.fin = true;
            }
            for side in &mut sides {
                side.eof();
            }
        }
    }
    // Nothing in flight any more: each side must have ended, one way or the other.
    for (i, side) in sides.iter().enumerate() {
        assert!(
            side.end.is_some(),
            "{} left waiting with nothing in flight (a hang)",
            ["client", "server"][i]
        );
    }
    let [c, sv] = sides;
    Run {
        client: c.end.unwrap(),
        server: sv.end.unwrap(),
        c2s_written: dirs[0].written,
        s2c_written: dirs[1].written,
        steps,
        now,
    }
}
