//! `nena`: the command-line front end. A thin layer: every subcommand parses its
//! arguments here (one module per concern under `cmd/`) and calls into a library crate.

mod cmd;
mod config;
mod exit;
mod runtime;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use std::process::ExitCode;

/// nena keeps Multipath TCP traffic private on paths you do not trust.
#[derive(Parser, Debug)]
#[command(name = "nena", version = env!("NENA_VERSION"), about, long_about = None, propagate_version = true)]
struct Cli {
    /// More log output (-v info, -vv debug, -vvv trace). RUST_LOG overrides.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,

    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Scramble or descramble standard input with the papers' byte scrambling.
    #[command(subcommand)]
    Codec(cmd::codec::CodecCmd),
    /// Benchmarks with verdicts: the codec overhead table, transfer goodput, policy cost, the
    /// emulator's fidelity, rate_limit's rate, the coupled congestion control's share.
    #[command(subcommand)]
    Bench(cmd::bench::BenchCmd),
    /// Serve files and perf tests over nena on MPTCP.
    Serve(cmd::serve::ServeArgs),
    /// Send a file to a nena server.
    Send(cmd::send::SendArgs),
    /// Fetch a file from a nena server.
    Get(cmd::get::GetArgs),
    /// Throughput test against a nena server (iperf-like).
    Perf(cmd::perf::PerfArgs),
    /// TCP <-> nena/MPTCP proxy so unmodified applications benefit.
    #[command(subcommand)]
    Proxy(cmd::proxy::ProxyCmd),
    /// Make this host a router that carries every TCP connection, DNS query and UDP flow of
    /// its LAN hosts through nena (nftables TPROXY) and forwards nothing of the LAN around it,
    /// nor after it stops, until `nena gateway open` (the kill switch).
    Gateway(cmd::gateway::GatewayCmd),
    /// Run a command whose TCP connections nena carries without it knowing (a cgroup and
    /// BPF send them to a local proxy); --mptcp-only makes them MPTCP instead.
    #[cfg(feature = "policy")]
    Run(cmd::run::RunArgs),
    /// (Started by `nena run`.) Kills and removes CMD's cgroup if `nena run` dies.
    #[cfg(feature = "policy")]
    #[command(name = "run-watchdog", hide = true)]
    RunWatchdog(cmd::run_watchdog::WatchdogArgs),
    /// What the running serve, proxy and gateway commands are doing now: sessions, refusals,
    /// bytes and throughput per path (asked over their owner-only control sockets).
    Status(cmd::status::StatusArgs),
    /// The network-namespace lab: a client with a trusted and an untrusted path, and a server.
    #[command(subcommand)]
    Lab(cmd::lab::LabCmd),
    /// Show what an eavesdropper sees in a capture.
    Eavesdrop(cmd::eavesdrop::EavesdropArgs),
    /// Subflows, throughput, RTT, reinjections and outages over captures (tcptrace/mptcptrace).
    Analyze(cmd::analyze::AnalyzeArgs),
    /// Known-plaintext attack on the papers' scrambling (kato) in a capture of one path.
    Attack(cmd::attack::AttackArgs),
    /// eBPF policy chains (selectors and actors at XDP/TC).
    #[cfg(feature = "policy")]
    #[command(subcommand)]
    Policy(cmd::policy::PolicyCmd),
    /// Coupled congestion controls for MPTCP (LIA, OLIA, BALIA, EWTCP) as BPF struct_ops.
    #[cfg(feature = "cc")]
    #[command(subcommand)]
    Cc(cmd::cc::CcCmd),
    /// A server's long-term key: `key show` prints the public key clients pin.
    #[command(subcommand)]
    Key(cmd::keys::KeyCmd),
    /// The server keys this client pinned on first contact (list, forget).
    #[command(subcommand)]
    KnownServers(cmd::keys::KnownServersCmd),
    /// Print shell completions (bash, zsh, fish, elvish, powershell) to standard output.
    Completions(cmd::host::CompletionsArgs),
    /// Write the man pages: nena.1 and one per subcommand (what `make man` runs).
    Man(cmd::host::ManArgs),
}

fn main() -> ExitCode {
    // `--config FILE` (serve, proxy server, proxy client): the file's keys become flags
    // before clap parses; flags on the command line win.
    let expanded = match config::expand(&Cli::command(), std::env::args_os().collect()) {
        Ok(e) => e,
        Err(msg) => {
            eprintln!("nena: {msg}");
            return ExitCode::from(2);
        }
    };
    let parsed = Cli::command()
        .try_get_matches_from(&expanded.argv)
        .and_then(|m| Cli::from_arg_matches(&m));
    let cli = match parsed {
        Ok(cli) => cli,
        // A usage error: one line on stderr, status 2.
        Err(e) if e.use_stderr() => {
            let what = config::one_line(&e.render().to_string());
            match &expanded.file {
                Some(f) => eprintln!("nena: with --config {}: {what} (see --help)", f.display()),
                None => eprintln!("nena: {what} (see --help)"),
            }
            return ExitCode::from(2);
        }
        // --help and --version print to stdout and succeed.
        Err(e) => {
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
    };
    init_logging(cli.verbose);
    // libbpf's raw lines only with -v (nena says what failed in one line of its own)
    #[cfg(feature = "policy")]
    nena_bpf::libbpf_log::route_to_log();
    // The first-flight hold of the in-kernel path manager, loaded at the first connection
    // that needs it (nena-mptcp's gate).
    #[cfg(feature = "policy")]
    nena_mptcp::hold::provide(nena_bpf::hold::BpfHold::factory);
    #[cfg(not(feature = "policy"))]
    nena_mptcp::hold::provide(|| {
        Err("this nena was built without BPF (cargo feature `policy`)".to_string())
    });
    let result = match cli.command {
        Command::Codec(c) => cmd::codec::run(c),
        Command::Bench(c) => cmd::bench::run(c),
        Command::Serve(a) => cmd::serve::serve(a),
        Command::Send(a) => cmd::send::send(a),
        Command::Get(a) => cmd::get::get(a),
        Command::Perf(a) => cmd::perf::perf(a),
        Command::Proxy(c) => cmd::proxy::proxy(c),
        Command::Gateway(a) => cmd::gateway::gateway(a),
        #[cfg(feature = "policy")]
        Command::Run(a) => match cmd::run::run(a) {
            Ok(code) => return ExitCode::from(code),
            Err(e) => Err(e),
        },
        #[cfg(feature = "policy")]
        Command::RunWatchdog(a) => cmd::run_watchdog::watchdog(a),
        Command::Status(a) => cmd::status::status(a),
        Command::Lab(c) => cmd::lab::run(c),
        Command::Eavesdrop(a) => cmd::eavesdrop::eavesdrop(a),
        Command::Analyze(a) => cmd::analyze::analyze(a),
        Command::Attack(a) => cmd::attack::attack(a),
        #[cfg(feature = "policy")]
        Command::Policy(c) => cmd::policy::run(c),
        #[cfg(feature = "cc")]
        Command::Cc(c) => cmd::cc::run(c),
        Command::Key(c) => cmd::keys::key(c),
        Command::KnownServers(c) => cmd::keys::known_servers(c),
        Command::Completions(a) => cmd::host::completions(a, Cli::command()),
        Command::Man(a) => cmd::host::man(a, Cli::command()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(exit) => exit.report(),
    }
}

fn init_logging(verbose: u8) {
    let default = match verbose {
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or(default))
        .format_timestamp_millis()
        .init();
}
