//! The typed causes of the session path's errors: what a session was doing when an error
//! arose ([`Doing`], the step of an [`Error::During`](super::Error::During)), and the
//! failures of its own that are no I/O error: a file transfer's or perf run's
//! ([`Transfer`]), a request this configuration cannot serve ([`Unsupported`]), a named
//! phase that did not end in time ([`Timeout`]) and a proxy session's ([`ProxyFault`]).
//! Each prints the line it always printed; a caller `match`es on the value.

use crate::wire::target::Rep;
use crate::wire::Status;
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

/// What a session was doing when its error arose (printed in front of the cause, as a
/// context would be).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Doing {
    // Listening and accepting.
    /// Opening a listener on `addr`.
    Listening { addr: SocketAddr },
    /// Installing the SIGINT/SIGTERM handlers of an accept loop.
    InstallingSignalHandlers,
    // Opening a session.
    /// Writing the hello (or a raw connection's first message).
    WritingFirstFlight,
    /// Reading the handshake message awaited (the hello or the answer).
    ReadingHandshake { awaited: &'static str },
    /// Writing a handshake message (the server's answer, the client's confirmation).
    WritingHandshake,
    // The file server's sessions and the file client.
    /// Reading a client's request.
    ReadingRequest,
    /// Sending a request to the server.
    SendingRequest,
    /// Waiting for the server's first answer to a request.
    AwaitingServerAnswer,
    /// Waiting for the server while an upload is under way.
    AwaitingServerDuringUpload,
    /// Reading the server's answer that ended an upload early.
    ReadingServerAnswer,
    /// Waiting for the server's verdict on an upload.
    AwaitingServerVerification,
    /// Waiting for the client's verdict on a download.
    AwaitingClientVerification,
    /// Reading a verdict.
    ReadingVerdict,
    /// Reading a verdict's tag.
    ReadingVerdictTag,
    /// Opening the file `path` to send.
    OpeningFile { path: PathBuf },
    /// Creating a temporary file in `dir`.
    CreatingFile { dir: PathBuf },
    /// Receiving a file's bytes.
    ReceivingFileData,
    /// Receiving a file's trailer (its tag).
    ReceivingTrailer,
    /// Syncing a received file to disk.
    SyncingFile,
    /// Sending a file's bytes.
    SendingFileData,
    /// Sending a file's trailer.
    SendingTrailer,
    /// Moving a received file to `path`.
    MovingFileTo { path: PathBuf },
    /// Moving an uploaded file into place on the server.
    MovingFileIntoPlace,
    /// Reading the free space of the server's directory.
    ReadingFreeSpace,
    /// The task that reads the free space (it failed).
    CountingFreeSpace,
    // Perf runs.
    /// Sending perf data.
    SendingPerfData,
    /// Sending the end of perf data.
    SendingPerfEnd,
    /// Receiving perf data.
    ReceivingPerfData,
    /// Sending the perf verdict.
    SendingPerfVerdict,
    /// Waiting for the peer's perf verdict.
    AwaitingPerfVerdict,
    // Proxy sessions.
    /// Opening the nena session for `what` (a target, or a service).
    OpeningSession { what: String },
    /// Reading the application's first bytes (they go with the open request).
    ReadingFirstBytes,
    /// Waiting for the answer to the datagram plane's offer (a server older than the
    /// plane closes the session unanswered).
    AwaitingPlaneAnswer,
    /// Waiting for the answer to an open request that asked for the session's reuse flow
    /// after flow (a server older than that closes the session unanswered).
    AskingReuse,
    /// Asking the proxy server for `what`.
    AskingProxyServer { what: String },
    /// The session for `what` (what the proxy server refused).
    SessionFor { what: String },
    /// The application's SOCKS exchange.
    SocksExchange,
    /// Answering the DNS over TCP an application sent to `dst`.
    ServingDns { dst: SocketAddr },
    /// Resetting the application's connection (told `code`).
    ResettingApplication { code: Rep },
    /// Waiting for a proxy listener's task (it panicked).
    AwaitingListener,
    /// Relaying a proxy client's session (to `target`, when known) in `mode` over `split`.
    RelayingClient {
        target: Option<String>,
        mode: String,
        split: String,
    },
    /// Relaying a proxy server's session in `mode` over the subflows `split`.
    RelayingServer { mode: String, split: String },
    /// Reading an open request.
    ReadingOpenRequest,
    /// Reading an open request from a peer that sent none (a proxy client older than it,
    /// or no proxy client).
    ReadingNoOpenRequest,
    /// Telling the client of an altered request (it may retry).
    ToldClient,
    /// UDP ASSOCIATE: binding its socket on `local`.
    BindingAssociation { local: IpAddr },
    /// A UDP association's session in `mode`.
    AssociationSession { mode: String },
    /// A UDP association on `bound`, with what it carried.
    Associating {
        bound: SocketAddr,
        sent: u64,
        received: u64,
        dropped: u64,
    },
    /// The DNS responder's socket.
    DnsResponder,
    /// DNS over TCP from an application.
    DnsOverTcp,
    /// Checking the proxy server's DNS answer.
    CheckingDnsAnswer,
    /// The datagram relay's socket.
    DatagramRelay,
    /// Binding a UDP socket.
    BindingUdp,
    /// Binding a UDP socket to `to` (an interface or an address).
    BindingUdpTo { to: String },
    /// Reading a datagram frame.
    ReadingDatagram,
    /// Reading a DNS session's query.
    ReadingDnsQuery,
    /// Checking a DNS session's query.
    CheckingDnsQuery,
    /// Reading the file `path`.
    ReadingFile { path: PathBuf },
    /// Reaching the nameserver `ns` (the socket, its interface, its address).
    ReachingNameserver { ns: SocketAddr },
    /// Sending a query to `ns`.
    SendingTo { ns: SocketAddr },
    /// Receiving from `ns`.
    ReceivingFrom { ns: SocketAddr },
    /// Connecting to `ns` over TCP.
    ConnectingOverTcp { ns: SocketAddr },
    /// Asking `ns` over TCP.
    AskingOverTcp { ns: SocketAddr },
}

impl fmt::Display for Doing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use Doing::*;
        match self {
            Listening { addr } => write!(f, "cannot listen on {addr}"),
            InstallingSignalHandlers => f.write_str("installing signal handlers"),
            WritingFirstFlight => f.write_str("writing the first flight"),
            ReadingHandshake { awaited } => write!(f, "reading {awaited}"),
            WritingHandshake => f.write_str("writing the nena handshake"),
            ReadingRequest => f.write_str("reading the request"),
            SendingRequest => f.write_str("sending the request"),
            AwaitingServerAnswer => f.write_str(
                "waiting for the server's answer (a server older than nena's application \
                 protocol 3 closes here without one: upgrade it)",
            ),
            AwaitingServerDuringUpload => f.write_str("waiting for the server during the upload"),
            ReadingServerAnswer => f.write_str("reading the server's answer"),
            AwaitingServerVerification => f.write_str("waiting for the server's verification"),
            AwaitingClientVerification => f.write_str("waiting for the client's verification"),
            ReadingVerdict => f.write_str("reading the verdict"),
            ReadingVerdictTag => f.write_str("reading the verdict's tag"),
            OpeningFile { path } => write!(f, "cannot open {}", path.display()),
            CreatingFile { dir } => write!(f, "cannot create a file in {}", dir.display()),
            ReceivingFileData => f.write_str("receiving file data"),
            ReceivingTrailer => f.write_str("receiving the trailer"),
            SyncingFile => f.write_str("syncing the file"),
            SendingFileData => f.write_str("sending file data"),
            SendingTrailer => f.write_str("sending the trailer"),
            MovingFileTo { path } => write!(f, "cannot move the file to {}", path.display()),
            MovingFileIntoPlace => f.write_str("moving the file into place"),
            ReadingFreeSpace => f.write_str("reading the free space of the directory"),
            CountingFreeSpace => f.write_str("free-space task failed"),
            SendingPerfData => f.write_str("sending perf data"),
            SendingPerfEnd => f.write_str("sending the end of perf data"),
            ReceivingPerfData => f.write_str("receiving perf data"),
            SendingPerfVerdict => f.write_str("sending the perf verdict"),
            AwaitingPerfVerdict => f.write_str("waiting for the peer's perf verdict"),
            OpeningSession { what } => write!(f, "opening the nena session for {what}"),
            ReadingFirstBytes => f.write_str("reading the application's first bytes"),
            AwaitingPlaneAnswer => f.write_str("no answer to the datagram plane's offer"),
            AskingReuse => f.write_str("no answer to an open request that asked for reuse"),
            AskingProxyServer { what } => write!(f, "asking the proxy server for {what}"),
            SessionFor { what } => f.write_str(what),
            SocksExchange => f.write_str("SOCKS exchange"),
            ServingDns { dst } => write!(f, "{dst}"),
            ResettingApplication { code } => {
                write!(f, "{code}; the application's connection is reset")
            }
            AwaitingListener => f.write_str("a proxy listener's task panicked"),
            RelayingClient {
                target,
                mode,
                split,
            } => {
                if let Some(t) = target {
                    write!(f, "{t}; ")?;
                }
                write!(f, "mode {mode}; {split}")
            }
            RelayingServer { mode, split } => write!(f, "mode {mode}; subflows: {split}"),
            ReadingOpenRequest => f.write_str("reading the open request"),
            ReadingNoOpenRequest => f.write_str(
                "reading the open request (a nena proxy client older than it, or not a proxy \
                 client?)",
            ),
            ToldClient => f.write_str("the client was told and may retry"),
            BindingAssociation { local } => write!(f, "UDP ASSOCIATE: a socket on {local}"),
            AssociationSession { mode } => write!(f, "mode {mode}"),
            Associating {
                bound,
                sent,
                received,
                dropped,
            } => write!(
                f,
                "UDP ASSOCIATE on {bound} ({sent} datagrams sent, {received} received, \
                 {dropped} dropped)"
            ),
            DnsResponder => f.write_str("DNS responder"),
            DnsOverTcp => f.write_str("DNS over TCP"),
            CheckingDnsAnswer => f.write_str("the proxy server's answer"),
            DatagramRelay => f.write_str("datagram relay"),
            BindingUdp => f.write_str("a UDP socket"),
            BindingUdpTo { to } => write!(f, "binding a UDP socket to {to}"),
            ReadingDatagram => f.write_str("reading a datagram"),
            ReadingDnsQuery => f.write_str("reading a DNS query"),
            CheckingDnsQuery => f.write_str("the DNS session's query"),
            ReadingFile { path } => write!(f, "cannot read {}", path.display()),
            ReachingNameserver { ns } => write!(f, "cannot reach {ns}"),
            SendingTo { ns } => write!(f, "to {ns}"),
            ReceivingFrom { ns } => write!(f, "from {ns}"),
            ConnectingOverTcp { ns } => write!(f, "cannot connect to {ns} over TCP"),
            AskingOverTcp { ns } => write!(f, "{ns} over TCP"),
        }
    }
}

/// A file transfer or perf run that failed for a cause of its own (no I/O error under it).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Transfer {
    /// A file name that is no valid name (checked before any connection).
    BadName {
        name: String,
        why: crate::wire::NameError,
    },
    /// `path` has no file name of its own and none was given.
    NoFileName { path: PathBuf },
    /// `path` is no regular file.
    NotRegular { path: PathBuf },
    /// `path` cannot be looked at (its metadata).
    Unreadable { path: PathBuf, why: String },
    /// The destination exists and `--overwrite` was not given.
    Exists { path: PathBuf },
    /// No free temporary name in `dir` after several tries.
    NoTempName { dir: PathBuf },
    /// The server refused the request for `name`.
    ServerRefused {
        name: String,
        status: Status,
        msg: String,
    },
    /// The server ended the upload of `name` before it was complete.
    ServerStopped {
        name: String,
        status: Status,
        msg: String,
    },
    /// The server did not store `name` (its verdict).
    NotStored {
        name: String,
        status: Status,
        msg: String,
    },
    /// The client's verdict on a download of `name` is no success.
    ClientReports {
        name: String,
        status: Status,
        msg: String,
    },
    /// The server closed the connection during the upload of `name`.
    ClosedDuringUpload { name: String },
    /// The connection closed after `got` of `size` bytes of a file.
    Truncated { got: u64, size: u64 },
    /// The file being sent shrank.
    Shrank { sent: u64, size: u64 },
    /// A received file's trailer did not verify (its MAC when `keyed`, else its
    /// SHA-256): the file is discarded.
    Mismatch { name: String, keyed: bool },
    /// Someone else created the destination of `name` meanwhile: the upload is discarded.
    CreatedMeanwhile { name: String },
    /// A verdict's MAC (`keyed`) or SHA-256 does not match.
    VerdictAltered { name: String, keyed: bool },
    /// The server refused a perf test.
    PerfRefused { status: Status, msg: String },
    /// The connection closed in the middle of the perf data.
    PerfCut { received: u64 },
    /// The writer took nothing of the perf data.
    PerfWriterStuck,
    /// Our own perf verdict is a failure (its message).
    PerfFailed { msg: String },
    /// The peer's perf verdict is a failure.
    PerfPeerReports { status: Status, msg: String },
    /// The peer received `got` of the `sent` bytes.
    PerfShort { got: u64, sent: u64 },
    /// The run ended before its warm-up.
    PerfOmitTooLong,
    /// The server cut a perf test at its `--perf-max-time`.
    PerfCapped {
        after: Duration,
        cap: Duration,
        received: u64,
    },
}

impl fmt::Display for Transfer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use Transfer::*;
        match self {
            BadName { name, why } => write!(f, "name {name:?}: {why}"),
            NoFileName { path } => write!(f, "{} has no file name; give --name", path.display()),
            NotRegular { path } => write!(f, "{} is not a regular file", path.display()),
            Unreadable { path, why } => write!(f, "{}: {why}", path.display()),
            Exists { path } => write!(
                f,
                "{} exists (use --overwrite to replace it)",
                path.display()
            ),
            NoTempName { dir } => {
                write!(f, "cannot find a free temporary name in {}", dir.display())
            }
            ServerRefused { name, status, msg } => {
                write!(f, "server refused {name:?}: {status}: {msg}")
            }
            ServerStopped { name, status, msg } => {
                write!(f, "server stopped the upload of {name:?}: {status}: {msg}")
            }
            NotStored { name, status, msg } => {
                write!(f, "server did not store {name:?}: {status}: {msg}")
            }
            ClientReports { name, status, msg } => {
                write!(f, "client reports {name:?}: {status}: {msg}")
            }
            ClosedDuringUpload { name } => write!(
                f,
                "the server closed the connection during the upload of {name:?}"
            ),
            Truncated { got, size } => write!(f, "connection closed after {got} of {size} bytes"),
            Shrank { sent, size } => write!(
                f,
                "the file shrank while it was being sent ({sent} of {size} bytes)"
            ),
            Mismatch { name, keyed } => write!(f, "{name:?}: {}; file discarded", mismatch(*keyed)),
            CreatedMeanwhile { name } => {
                write!(f, "{name:?}: created by someone else meanwhile; discarded")
            }
            VerdictAltered { name, keyed: true } => write!(
                f,
                "the verdict on {name:?} does not match its MAC: it was altered on the way, the \
                 transfer is not confirmed"
            ),
            VerdictAltered { name, keyed: false } => write!(
                f,
                "the verdict on {name:?} does not match its SHA-256 (plain mode: no key, an \
                 integrity check only)"
            ),
            PerfRefused { status, msg } => {
                write!(f, "server refused the perf test: {status}: {msg}")
            }
            PerfCut { received } => write!(
                f,
                "connection closed in the middle of the perf data ({received} bytes received)"
            ),
            PerfWriterStuck => f.write_str("sending perf data: the writer took nothing"),
            PerfFailed { msg } => f.write_str(msg),
            PerfPeerReports { status, msg } => write!(f, "peer reports: {status}: {msg}"),
            PerfShort { got, sent } => write!(f, "peer received {got} of the {sent} bytes sent"),
            PerfOmitTooLong => f.write_str(
                "the run ended before the omitted warm-up was over: make --omit shorter than \
                 the run",
            ),
            PerfCapped {
                after,
                cap,
                received,
            } => write!(
                f,
                "perf test cut after {} s (--perf-max-time {}), {received} B received",
                after.as_secs(),
                cap.as_secs()
            ),
        }
    }
}

/// What was asked cannot be done in this configuration (refused before or instead of a
/// session).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Unsupported {
    /// A file transfer over a raw connection.
    RawFileTransfer,
    /// An access token over a raw connection.
    RawToken,
    /// kato-mpc offered with other modes.
    KatoMpcCombined,
    /// kato-mpc over a dialer other than the kernel's MPTCP.
    KatoMpcNotKernel,
    /// kato-mpc accepted over a pipe.
    KatoMpcOverPipe,
    /// A plain TCP connection (MPTCP fell back) without `--allow-fallback`.
    Fallback,
}

impl fmt::Display for Unsupported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Unsupported::RawFileTransfer => {
                "file transfer needs a nena session (raw is for perf baselines only)"
            }
            Unsupported::RawToken => {
                "an access token needs a nena session (raw sends the request in the clear)"
            }
            Unsupported::KatoMpcCombined => {
                "kato-mpc is negotiated on the SYN, without a hello: it cannot be combined with \
                 other modes"
            }
            Unsupported::KatoMpcNotKernel => {
                "kato-mpc is negotiated by the kernel's MPTCP: it cannot be dialed otherwise"
            }
            Unsupported::KatoMpcOverPipe => {
                "kato-mpc is negotiated by the kernel's MPTCP: not over a pipe"
            }
            Unsupported::Fallback => {
                "connection is plain TCP, not MPTCP (refused; start the server with \
                 --allow-fallback to accept)"
            }
        })
    }
}

/// Why a received file's trailer did not match, for both ends' messages: keyed (its MAC)
/// or not (its SHA-256).
pub fn mismatch(keyed: bool) -> &'static str {
    if keyed {
        "trailer MAC mismatch (the data or its trailer was altered on the way)"
    } else {
        "SHA-256 mismatch (plain mode: no key, an integrity check only)"
    }
}

/// A named phase that did not end within `after`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Timeout {
    /// The file server waited for a client's request.
    Request { after: Duration },
    /// The client waited for the server's nena answer.
    NenaAnswer { after: Duration },
    /// The server waited for a client's hello.
    NenaHello { after: Duration },
    /// The proxy server waited for an open request.
    OpenRequest { after: Duration },
    /// The proxy client waited for the proxy server's answer to the request for `what`.
    ProxyAnswer { what: String, after: Duration },
    /// The proxy client waited for an application's SOCKS request.
    SocksRequest { after: Duration },
    /// The proxy client's DNS responder waited for an answer through nena.
    DnsAnswer { after: Duration },
    /// The nameserver `ns` did not answer `query`.
    Nameserver {
        ns: SocketAddr,
        query: String,
        after: Duration,
    },
}

impl fmt::Display for Timeout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use Timeout::*;
        match self {
            Request { after } => write!(f, "no request within {}s", after.as_secs()),
            NenaAnswer { after } => write!(
                f,
                "the server accepted the connection but sent no nena answer within {:.1} s: it \
                 is not a nena server (or one too busy to answer)",
                after.as_secs_f64()
            ),
            NenaHello { after } => write!(
                f,
                "no complete nena hello within {:.1}s",
                after.as_secs_f64()
            ),
            OpenRequest { after } => write!(f, "no open request within {after:?}"),
            ProxyAnswer { what, after } => write!(
                f,
                "the proxy server did not answer the request for {what} within {after:?}"
            ),
            SocksRequest { after } => write!(f, "SOCKS exchange: no request within {after:?}"),
            DnsAnswer { after } => write!(f, "no answer within {after:?}"),
            Nameserver { ns, query, after } => {
                write!(f, "{ns} gave no answer to {query} within {after:?}")
            }
        }
    }
}

/// A kato-mpc connection closed by its side's decision.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum KatoMpc {
    /// Both sides agreed but this side cannot scramble as the other will.
    Undecidable(nena_proto::mpc::MpcError),
    /// The connection would be plain (`reason`) and this side (`role`) does not allow it.
    Plain {
        reason: nena_proto::mpc::PlainReason,
        role: nena_proto::Role,
    },
}

impl fmt::Display for KatoMpc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KatoMpc::Undecidable(e) => write!(f, "{e}; closing the connection"),
            KatoMpc::Plain { reason, role } => {
                let line = nena_proto::mpc::MpcDecision::Plain(*reason).refusal(*role, false);
                f.write_str(line.as_deref().unwrap_or("kato-mpc refused"))
            }
        }
    }
}

/// A proxy session's own failure (no I/O error under it).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProxyFault {
    /// A redirected connection from `peer` with no original destination recorded.
    NoOriginalDst { peer: SocketAddr },
    /// `peer`'s LAN host has `cap` connections carried already.
    HostCap { peer: SocketAddr, cap: usize },
    /// `peer` connected to the gateway's listener `dst` itself.
    SelfConnect { peer: SocketAddr, dst: SocketAddr },
    /// The proxy server accepted the datagram plane in a mode without its keys.
    PlaneWithoutKeys,
    /// The proxy stopped the session.
    Stopped,
    /// The proxy is stopping: no new session is opened.
    Stopping,
    /// The gateway is closing: no new DNS session is opened.
    GatewayClosing,
    /// An application sent DNS over TCP that is no query.
    DnsNotQuery,
    /// The proxy server ended a DNS session without an answer.
    DnsUnanswered,
    /// The resolver file `path` names no nameserver.
    NoNameserver { path: PathBuf },
    /// The nameserver `ns` closed its TCP connection without an answer.
    NameserverClosed { ns: SocketAddr },
    /// The client ended its session before any open request: a session opened ahead that
    /// its proxy client replaced before it expired, or closed at its end.
    Unused,
}

impl fmt::Display for ProxyFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use ProxyFault::*;
        match self {
            NoOriginalDst { peer } => write!(
                f,
                "no original destination recorded for {peer} (a connection from outside the \
                 cgroup?); reset"
            ),
            HostCap { peer, cap } => write!(
                f,
                "{peer}: its LAN host has {cap} connections carried already \
                 (--max-sessions-per-host); reset"
            ),
            SelfConnect { peer, dst } => write!(
                f,
                "{peer} connected to the gateway's listener itself ({dst}), not through its \
                 TPROXY rule; reset"
            ),
            PlaneWithoutKeys => f.write_str(
                "the proxy server accepted the datagram plane in a mode without its keys",
            ),
            Stopped => f.write_str("stopped"),
            Stopping => f.write_str("the proxy is stopping"),
            GatewayClosing => f.write_str("the gateway is closing"),
            DnsNotQuery => {
                f.write_str("DNS over TCP: a message that is no query; connection closed")
            }
            DnsUnanswered => f.write_str("the proxy server ended the DNS session unanswered"),
            NoNameserver { path } => write!(
                f,
                "{} names no nameserver: this server resolves nothing",
                path.display()
            ),
            NameserverClosed { ns } => {
                write!(f, "{ns} closed the TCP connection without an answer")
            }
            Unused => f.write_str(
                "unused: the client ended the session before any open request (a session \
                 opened ahead, given back)",
            ),
        }
    }
}
