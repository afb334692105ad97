//! `nena bench ...`: dispatches to the benchmark of each concern.
use crate::exit::CmdResult;
use clap::Subcommand;

mod aggregation;
#[cfg(feature = "openssl")]
mod codec;
mod emulation;
mod fairness;
mod handshake;
mod hostile;
mod metered;
mod outage;
mod output;
mod page;
mod peers;
#[cfg(feature = "policy")]
mod policy;
#[cfg(feature = "policy")]
mod rate_limit;
mod realtime;
mod sessions;
mod transfer;

#[derive(Subcommand, Debug)]
pub enum BenchCmd {
    /// The papers' Table II on this machine, with modern baselines.
    #[cfg(feature = "openssl")]
    Codec(codec::Args),
    /// Goodput, CPU per GB and path split of raw MPTCP and nena in each mode (plain, kato,
    /// stream, aead) over the lab's two paths.
    Transfer(transfer::Args),
    /// nena's transfers over two link-bound paths against the bare kernel's MPTCP and
    /// against what the links allow (16 MiB each way, six rate and delay settings).
    Aggregation(aggregation::Args),
    /// The link emulator's fidelity: RTT against the configured delay up to 200 Mbit/s, the
    /// relay's CPU per Mbit/s, loss against the binomial 99% interval.
    Emulation(emulation::Args),
    /// Issue 13's shared bottleneck: LIA within 1.2x a TCP flow's goodput, uncoupled reno
    /// above 1.3x LIA's (the shipped scenario, three repetitions per run).
    Fairness(fairness::Args),
    /// Issue 41's aead handshake (X25519 + ML-KEM-768, the server's signature) against
    /// version 1's (X25519 alone) in one run: time of one whole handshake and the first
    /// flight's size, before and after.
    Handshake(handshake::Args),
    /// Issue 56's metered trusted link: at most 2% of a 100 MiB transfer on it with the WLAN
    /// up, at 0.95x the WLAN's goodput alone or better; with the WLAN taken down mid-transfer,
    /// completed on it with no gap over 1 s; both ways, either path manager.
    Metered(metered::Args),
    /// Issue 40's LTE dropout: the trusted link down for 3 s of a 12 s upload; nena with
    /// either path manager within 10% of raw MPTCP, the trusted link back every time.
    Outage(outage::Args),
    /// nena's SOCKS5 proxy pair against shadowsocks-rust and a TLS 1.3 tunnel (stunnel)
    /// over the same lab paths: goodput and CPU per GB of both ends (`make peers` first).
    Peers(peers::Args),
    /// A page of 30 objects on two host names, loaded as a browser loads it, from a LAN
    /// host through `nena gateway` against plain MPTCP, in one lab with 20 ms links.
    Page(page::Args),
    /// Another LAN host's 20 MB fetch and lookup through `nena gateway` while one LAN host
    /// sprays source ports and DNS names, against a calm gateway (at most 2x).
    HostileLan(hostile::Args),
    /// Issue 56's call-like flow (50 datagrams a second of 160 bytes, echoed behind the
    /// proxy server) through `nena gateway` and `nena run` against the same flow straight
    /// over each single link, with WLAN loss and an outage of either link: round trips,
    /// lost and late datagrams, bytes on the wire.
    Realtime(realtime::Args),
    /// (Started by `nena bench realtime` under `nena run`.) One flow of the bench.
    #[command(name = "realtime-flow", hide = true)]
    RealtimeFlow(realtime::FlowArgs),
    /// Many concurrent sessions held open against one server (`nena serve`, or a SOCKS5
    /// proxy pair): memory per idle session on each side and the time to open one more
    /// under that load.
    Sessions(sessions::Args),
    /// (Started by `nena bench sessions`.) One client process of the load.
    #[command(name = "sessions-worker", hide = true)]
    SessionsWorker(sessions::WorkerArgs),
    /// Per-packet cost of each eBPF selector, actor and chain.
    #[cfg(feature = "policy")]
    Policy(policy::Args),
    /// Whether the eBPF rate_limit actor holds its rate on a delayed path (within 10%).
    #[cfg(feature = "policy")]
    RateLimit(rate_limit::Args),
}

pub fn run(cmd: BenchCmd) -> CmdResult {
    match cmd {
        #[cfg(feature = "openssl")]
        BenchCmd::Codec(a) => codec::run(a),
        BenchCmd::Transfer(a) => transfer::run(a),
        BenchCmd::Aggregation(a) => aggregation::run(a),
        BenchCmd::Emulation(a) => emulation::run(a),
        BenchCmd::Fairness(a) => fairness::run(a),
        BenchCmd::Handshake(a) => handshake::run(a),
        BenchCmd::Metered(a) => metered::run(a),
        BenchCmd::Outage(a) => outage::run(a),
        BenchCmd::Peers(a) => peers::run(a),
        BenchCmd::Page(a) => page::run(a),
        BenchCmd::HostileLan(a) => hostile::run(a),
        BenchCmd::Realtime(a) => realtime::run(a),
        BenchCmd::RealtimeFlow(a) => realtime::run_flow(a),
        BenchCmd::Sessions(a) => sessions::run(a),
        BenchCmd::SessionsWorker(a) => sessions::run_worker(a),
        #[cfg(feature = "policy")]
        BenchCmd::Policy(a) => policy::run(a),
        #[cfg(feature = "policy")]
        BenchCmd::RateLimit(a) => rate_limit::run(a),
    }
}
