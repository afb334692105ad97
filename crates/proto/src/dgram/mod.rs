//! The datagram plane, sans-IO: after a session's handshake on the trusted path, the
//! session's UDP datagrams travel as sealed UDP datagrams on each path instead of inside
//! the MPTCP byte stream, where a loss on one path holds them behind TCP's retransmission.
//! nena's own design, after WireGuard's transport data messages: an explicit 64-bit counter
//! as the nonce, an RFC 6479 anti-replay window, keys from the session's key schedule (never
//! sent). Bytes in, bytes out; time is an argument; no clock, no random numbers, no sockets.
//! Layout, labels, windows and rules: docs/PROTOCOL.md, "Datagram plane".
//!
//! - [`keys`]: [`DatagramKeys`] from the session's first traffic secrets
//!   ([`crate::Session::datagram_keys`]); one AEAD key per 2^20 datagrams.
//! - [`wire`]: the clear header (type, receiver id, path id, counter) and the inner message
//!   (data with its sequence number, keepalive, probe, probe reply); 35 bytes per data
//!   datagram.
//! - [`window`]: the anti-replay window over counters and the duplicate window over data
//!   sequence numbers (a datagram sent on several paths is delivered once).
//! - [`seal`]: [`Sealer`] and [`Opener`], with the typed reasons for a drop ([`Dropped`])
//!   and their counts ([`Stats`]).
//! - [`compact`]: version 2's compact real-time datagrams (15 bytes per copy: a 3-byte
//!   receiver id, 16 bits of sequence number, a flow id, an 8-byte AES-GCM tag).
//! - [`path`]: the [`PathTable`]: addresses learned from authenticated datagrams only,
//!   liveness and UDP confirmation from probes, round trips (RFC 6298), keepalives.
//! - [`rtt`]: the RFC 6298 estimator.
//! - [`sched`]: the [`Scheduler`]: real-time on every usable path, bulk on the fastest,
//!   the session when no path has confirmed UDP.
//! - [`classify`]: which flows are real-time ([`FlowClassifier`], [`Redundancy`]).
//! - [`plane`]: all of it for one end of one session ([`Plane`]).
//!
//! ```
//! use nena_proto::dgram::{Class, Delivered, LivenessConfig, Plane};
//! use nena_proto::{exchange_in, Mode};
//! use std::time::Instant;
//!
//! let x = exchange_in(Mode::Aead);
//! let (ck, sk) = (x.client.datagram_keys().unwrap(), x.server.datagram_keys().unwrap());
//! // Receiver ids: each end's own choice, told to the other inside the session.
//! let (c_id, s_id) = (0x0000_c11e, 0x5e55_0001);
//! let mut client = Plane::client(&ck, c_id, s_id, LivenessConfig::default());
//! let mut server = Plane::server(&sk, s_id, c_id, LivenessConfig::default());
//! let server_addr = "198.18.4.2:4444".parse().unwrap();
//! let client_addr = "198.18.3.1:50000".parse().unwrap();
//! client.add_path(0, server_addr).unwrap();
//! let now = Instant::now();
//! // No probe answered yet: the datagram goes inside the session.
//! let sent = client.send(b"hello", Class::RealTime, now).unwrap();
//! assert!(sent.stream && sent.udp.is_empty());
//! // The client probes; the server answers; the path is confirmed.
//! for mut t in client.poll(now).unwrap() {
//!     server.receive(&mut t.bytes, client_addr, now).unwrap();
//! }
//! for mut t in server.poll(now).unwrap() {
//!     assert_eq!(t.to, client_addr);
//!     client.receive(&mut t.bytes, server_addr, now).unwrap();
//! }
//! assert!(client.paths().get(0).unwrap().udp_confirmed());
//! let mut sent = client.send(b"hello", Class::RealTime, now).unwrap();
//! assert!(!sent.stream);
//! let got = server.receive(&mut sent.udp[0].bytes, client_addr, now).unwrap();
//! assert!(matches!(got, Delivered::Data { path: 0, payload: b"hello", .. }));
//! ```

pub mod classify;
pub mod compact;
pub mod keys;
pub mod path;
pub mod plane;
pub mod rtt;
pub mod sched;
pub mod seal;
pub mod window;
pub mod wire;

pub use classify::{ClassifierConfig, DatagramInfo, FlowClassifier, Redundancy};
pub use keys::DatagramKeys;
pub use path::{AddressMode, AddressUpdate, LivenessConfig, Path, PathStatus, PathTable};
pub use plane::{Delivered, Plane, Sent, Transmit};
pub use sched::{Class, Route, Scheduler};
pub use seal::{receiver_of, Dropped, FlowKey, Opened, Opener, Received, SealError, Sealer, Stats};
pub use wire::{PathId, ReceiverId, DATA_OVERHEAD};
