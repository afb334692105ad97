//! Opening nena sessions over kernel MPTCP: the client side (connect from a trusted
//! address, hello as the first flight on the trusted subflow, untrusted paths released only
//! after its data-level ACK, then the server's answer) and the server side (accept, refuse
//! fallback unless allowed, handshake with a deadline).
//!
//! A *kato-mpc* connection has no in-band handshake either: the papers' negotiation rides on
//! the SYN and SYN-ACK (nena's BPF programs, attached by the command line, which hands the
//! transport an [`MpcLookup`] to read what they recorded); [`mpc_session`] turns that into a
//! kato session keyed by the MPTCP keys; without all three marks (request, consent,
//! confirmation) each side refuses the connection before a byte of data is written or read,
//! unless its user allowed plain (`allow_plain`: then plain on both sides, said so). A
//! connection of which the programs hold no record is refused either way. The wait for a
//! record's keys is async (the runtime's timer, never a sleeping thread: the other sessions
//! of a one-thread runtime go on meanwhile), and the record is forgotten once decided,
//! whatever it held.
//!
//! A *raw* connection skips the nena handshake: the same MPTCP socket and gate, with the
//! caller's first message as the first flight and no protection. It exists only as the
//! plain-MPTCP baseline of `nena bench transfer` (`nena serve --raw`, `nena perf --raw`).
//!
//! The parts: [`dial`] and [`accept`](mod@accept) (the two sides of opening a session: the client
//! dials, the server listens and accepts), [`settings`] (the options every client command
//! shares, resolved into [`ClientOptions`]), [`mpc`] (kato-mpc), [`halves`] (what carries a
//! session: a kernel socket or an in-memory pipe, as protected halves), [`subflows`] (bytes per subflow), [`paths`] (what a client
//! session's connection is and what its paths carried), [`accept_loop`] (the accept loop of
//! the server and both proxy ends), [`stop`] (the signals and the switch that stop it
//! cleanly), [`tickets`] (resumed sessions: the server's store, the client's jar).

pub mod accept;
pub mod accept_loop;
pub mod dial;
pub mod halves;
pub mod mpc;
pub mod paths;
pub mod settings;
pub mod stop;
pub mod subflows;
pub mod tickets;

pub use accept::{accept, listen, AcceptOptions, ServerConn};
pub use accept_loop::{accept_until_interrupted, AcceptLoop, Acceptor, ABORT_NOTICE};
pub use dial::{
    connect, Ahead, ClientConn, ClientOptions, DatagramOptions, DialFailure, DialFuture, Dialed,
    Dialer, HeldConnection, KernelMptcp, Reuse, END_WITHIN, REUSE_WITHIN,
};
pub use halves::{
    raise_nofile_limit, Connection, ReadHalf, Reader, SessionSocket, WriteHalf, Writer,
};
pub use mpc::{mpc_session, MpcLookup, MpcOutcome, MpcRecords, MpcSeen, MPC_KEYS_WITHIN};
pub use paths::Paths;
pub use settings::{
    ClientSettings, Failed as SettingsFailed, Invalid as InvalidSettings, SettingsError,
};
pub(crate) use subflows::established_rtt;
pub use subflows::{describe_split, subflow_bytes, SubflowBytes};
pub use tickets::{ServerTickets, TicketJar};
