//! `nena bench policy`: per-packet cost of each selector and actor (`drop` aside: it ends the packet), on frames it acts on and
//! on frames it skips, and of chains of 2, 4 and 8 links that all act, with
//! BPF_PROG_TEST_RUN; every figure also as a ratio to the dispatcher measured in the same run.
//!
//! Method. Two ways of timing a figure, both as (with the chain) minus (without it), so a
//! figure is what adding the link(s) costs: the link's work, the counters, for an actor the
//! chain lookup, the context and its tail call.
//! - `batch`: one BPF_PROG_TEST_RUN of the hook's dispatcher with `repeat` runs on one
//!   frame; the kernel reports the mean time per run. Pairs of batches (with, without), the
//!   median of the differences. Only for frames the links treat alike on every run: the
//!   counters are read after each batch and must show that every link acted (a selector:
//!   matched) on every run, or that the link skipped on every run, as the figure says.
//! - `single`: for links that rewrite the frame they act on (`rate_limit`, `set_backup`,
//!   `blk_subflow`, `add_subflow`, and the chains holding them), the kernel's repeat would
//!   run them again on the frame they changed, where they have nothing left to do. So:
//!   single runs, each on the original frame, an untimed one then a timed one (so programs,
//!   chain and maps are warm as in a stream of packets); pairs (with, without), the median of
//!   the differences; both runs with the chain checked to have acted (every link counted a
//!   hit, the frame came out changed). The per-flow state an actor keeps is set up so that
//!   it acts again: `add_subflow`'s kept announcement is blocked anew before each pair, and
//!   `set_backup` (which adds its MP_PRIO once per subflow) gets a new subflow per run.
//!
//! Pairs are taken in rounds (one pair, or a few single pairs, of every figure at both hooks
//! per round), so each figure's samples spread over the whole run: the host's slow spells
//! last seconds. The dispatcher figure is the median of every batch without a chain on the
//! DSS ACK; each figure's ratio is its ns over that, at the same hook. Nothing is clamped: a
//! negative difference (the link costs less than the run-to-run noise) is reported as it is
//! and flagged `noise`.

use anyhow::{bail, Result};
use nena_policy::packet::{mp, Tcp};
use nena_policy::spec::{self, ChainSpec, Hook};
use nena_policy::TestBed;
use serde::Serialize;

/// A selector or actor, as the bench uses it: the programs themselves ([`Prog`]), reported
/// by their chain-file names.
pub use nena_policy::abi::Prog as Link;

/// What a link is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Dispatcher,
    Selector,
    Actor,
    Chain,
}

/// How a figure was timed (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    Batch,
    Single,
}

/// The frames of the bench (IPv4, 198.18.100.1 -> 198.18.100.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Frame {
    /// A pure ACK with timestamps and a DSS data ACK (most MPTCP packets in a download's
    /// ACK direction), of the subflow whose handshake the dispatcher saw (window scale 7).
    DssAck,
    /// The same with a window below `rate_limit`'s cap.
    DssAckSmallWindow,
    /// The same with data ACK 200000 (outside the `sequence` selector's range).
    DssAckOtherSeq,
    /// A pure ACK with timestamps only (no MPTCP option).
    PlainAck,
    /// A DSS ACK of another address pair and port.
    DssAckOtherFlow,
    /// The DSS ACK of a subflow that already carried its MP_PRIO (`set_backup` done).
    DssAckPrioSent,
    /// An MP_CAPABLE SYN.
    CapableSyn,
    /// An MP_JOIN SYN (B = 0).
    JoinSyn,
    /// The DSS ACK with window 65535 (above `rate_limit`'s cap).
    DssAckWideWindow,
    /// A DSS ACK of a new subflow (one per run).
    NewSubflowAck,
    /// A DSS ACK carrying an ADD_ADDR announcement.
    AddAddrAck,
    /// A DSS ACK of a subflow on which an ADD_ADDR was blocked (kept) just before.
    KeptAck,
    /// A DSS ACK without timestamps, window 65535, carrying an ADD_ADDR, of a subflow whose
    /// window scale is known (0): every link of chain-8 acts on it.
    Chain8,
}

/// What the bench knows of each link: its role, its chain-file text, the frames it acts on
/// and skips (a trait because [`Link`] is nena-policy's type).
pub trait BenchLink: Copy {
    /// Selector or actor.
    fn role(self) -> Kind;
    /// The link in chain-file syntax. The selectors match the bench's own frames (addresses
    /// 198.18.100.1 -> .2, any port but `subflow`'s, data ACKs up to 100000).
    fn spec(self) -> &'static str;
    /// A frame the link acts on (a selector: matches), and how that is timed.
    fn act_frame(self) -> (Frame, Method);
    /// A frame the link skips (a selector: does not match), always timed in batches;
    /// `None` for `record` and `drop`, which act on every packet.
    fn skip_frame(self) -> Option<Frame>;
    /// Reports an event per acting run (the ring buffer must be drained between batches).
    fn emits_events(self) -> bool;
}

impl BenchLink for Link {
    fn role(self) -> Kind {
        match self {
            Link::Subflow
            | Link::IpPair
            | Link::Src
            | Link::Dst
            | Link::Sequence
            | Link::PacketType => Kind::Selector,
            _ => Kind::Actor,
        }
    }

    fn spec(self) -> &'static str {
        match self {
            Link::Subflow => {
                r#"{ select = "subflow", src = "198.18.100.1", dst = "198.18.100.2", sport = 40000, dport = 5201 }"#
            }
            Link::IpPair => r#"{ select = "ip_pair", src = "198.18.100.1", dst = "198.18.100.2" }"#,
            Link::Src => r#"{ select = "src", prefix = "198.18.100.0/24" }"#,
            Link::Dst => r#"{ select = "dst", prefix = "198.18.100.2" }"#,
            Link::Sequence => {
                r#"{ select = "sequence", what = "data_ack", from = 0, to = 100000 }"#
            }
            Link::PacketType => r#"{ select = "packet_type", all = ["dss", "data_ack"] }"#,
            Link::RateLimit => r#"{ act = "rate_limit", window = 30000 }"#,
            Link::SetBackup => r#"{ act = "set_backup", backup = true, repeat = 1 }"#,
            Link::BlkSubflow => r#"{ act = "blk_subflow" }"#,
            Link::AddSubflow => r#"{ act = "add_subflow" }"#,
            Link::GetConnect => r#"{ act = "get_connect" }"#,
            Link::GetSubflow => r#"{ act = "get_subflow" }"#,
            Link::Record => r#"{ act = "record" }"#,
            Link::Drop => r#"{ act = "drop" }"#,
        }
    }

    fn act_frame(self) -> (Frame, Method) {
        match self {
            Link::RateLimit => (Frame::DssAckWideWindow, Method::Single),
            Link::SetBackup => (Frame::NewSubflowAck, Method::Single),
            Link::BlkSubflow => (Frame::AddAddrAck, Method::Single),
            Link::AddSubflow => (Frame::KeptAck, Method::Single),
            Link::GetConnect => (Frame::CapableSyn, Method::Batch),
            Link::GetSubflow => (Frame::JoinSyn, Method::Batch),
            _ => (Frame::DssAck, Method::Batch),
        }
    }

    fn skip_frame(self) -> Option<Frame> {
        Some(match self {
            Link::Subflow | Link::IpPair | Link::Src | Link::Dst => Frame::DssAckOtherFlow,
            Link::Sequence => Frame::DssAckOtherSeq,
            Link::PacketType => Frame::PlainAck,
            // tail-called (a pure ACK), the window already below the cap
            Link::RateLimit => Frame::DssAckSmallWindow,
            // tail-called (a pure ACK), its MP_PRIO already sent
            Link::SetBackup => Frame::DssAckPrioSent,
            // tail-called (a pure ACK), nothing kept for the subflow
            Link::AddSubflow => Frame::DssAck,
            // not tail-called: no ADD_ADDR / MP_CAPABLE / MP_JOIN (chain.h, actor_wants)
            Link::BlkSubflow | Link::GetConnect | Link::GetSubflow => Frame::DssAck,
            Link::Record | Link::Drop => return None,
        })
    }

    fn emits_events(self) -> bool {
        matches!(self, Link::GetConnect | Link::GetSubflow)
    }
}

/// The chains of 2, 4 and 8 links, composed as in seed 003 (section V.A): 1 selector and 1
/// actor, 1 selector and 3 actors, 4 selectors and 4 actors; each with a frame on which
/// every one of its links acts (the selectors all match), and how it is timed.
pub fn chains() -> Vec<(&'static str, Vec<Link>, Frame, Method)> {
    vec![
        (
            "chain-2",
            vec![Link::IpPair, Link::Record],
            Frame::DssAck,
            Method::Batch,
        ),
        (
            // set_backup sets the B flag of the MP_JOIN SYN in place
            "chain-4",
            vec![
                Link::IpPair,
                Link::SetBackup,
                Link::GetSubflow,
                Link::Record,
            ],
            Frame::JoinSyn,
            Method::Single,
        ),
        (
            // rate_limit caps the window, blk_subflow blocks the ADD_ADDR (keeps it),
            // add_subflow announces it again, record counts
            "chain-8",
            vec![
                Link::Src,
                Link::Dst,
                Link::IpPair,
                Link::PacketType,
                Link::RateLimit,
                Link::BlkSubflow,
                Link::AddSubflow,
                Link::Record,
            ],
            Frame::Chain8,
            Method::Single,
        ),
    ]
}

/// Targets, as ratios to the dispatcher at the same hook in the same run. Where each comes
/// from (docs/BENCHMARKS.md): `LINK` is the old absolute target (50 ns per link) over the
/// dispatcher's calm figure (about 33 ns); the others are about 1.5x what this code measured
/// on 2026-11-22 (loaded host), and each sits below what a known regression would give.
pub mod limits {
    /// Per-packet work: a selector (matching or not), `record`, an actor tail-called on a
    /// frame it then skips (`rate_limit`, `set_backup`, `add_subflow`).
    pub const LINK: f64 = 1.5;
    /// `get_connect`, `get_subflow`, `blk_subflow` on frames they skip: not even tail-called
    /// (chain.h, actor_wants). Measured 0.07-0.12; tail-calling them would give about 0.5.
    pub const GATED_SKIP: f64 = 0.4;
    /// `get_connect`, `get_subflow` acting: an event to the ring buffer (once per SYN).
    pub const REPORT: f64 = 4.0;
    /// An actor rewriting the frame it acts on (`single` runs).
    pub const REWRITE: f64 = 20.0;
    /// The chains, whole cost of their links (all acting).
    pub const CHAIN_2: f64 = 2.0;
    pub const CHAIN_4: f64 = 16.0;
    pub const CHAIN_8: f64 = 36.0;
}

/// One figure at one hook.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Figure {
    /// ns per packet: median of (with) - (without).
    pub ns: f64,
    /// `ns` over the dispatcher's ns at the same hook.
    pub ratio: f64,
    /// The difference came out negative: the cost is below the run-to-run noise.
    pub noise: bool,
    pub samples: usize,
}

/// One measurement of an entry: a frame, a method, both hooks.
#[derive(Clone, Debug, Serialize)]
pub struct Measure {
    pub frame: Frame,
    pub method: Method,
    pub ingress: Figure,
    pub egress: Figure,
}

/// One line of the benchmark.
#[derive(Clone, Debug, Serialize)]
pub struct BenchEntry {
    /// Selector or actor name, `chain-2`/`chain-4`/`chain-8`, or `dispatcher`.
    pub name: String,
    pub kind: Kind,
    /// On a frame it acts on (a selector: matches; a chain: every link acts). For the
    /// dispatcher: its whole cost, no chain, in batches (ratio 1).
    pub act: Measure,
    /// On a frame it skips (`None`: `record`, chains, the dispatcher).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub skip: Option<Measure>,
    /// The links of a chain.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub links: Option<Vec<Link>>,
}

/// One checked target.
#[derive(Clone, Debug, Serialize)]
pub struct TargetCheck {
    /// e.g. `rate_limit acting`.
    pub name: String,
    /// The larger of the two hooks' ratios.
    pub ratio: f64,
    pub limit: f64,
    pub pass: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct BenchReport {
    pub method: String,
    pub repeat: u32,
    pub batches: usize,
    /// Single-run pairs per `single` figure and hook.
    pub single_samples: usize,
    pub results: Vec<BenchEntry>,
    pub targets: Vec<TargetCheck>,
    /// Every target met at both hooks.
    pub targets_met: bool,
    /// Figures flagged as noise (negative differences), `name act|skip hook`.
    pub noise: Vec<String>,
    /// /proc/loadavg at the start and at the end.
    pub loadavg_start: String,
    pub loadavg_end: String,
}

impl BenchReport {
    pub fn entry(&self, name: &str) -> Option<&BenchEntry> {
        self.results.iter().find(|e| e.name == name)
    }
}

/// The limit that applies to an entry's measurement (`skip` = the skip measurement).
pub fn limit_for(e: &BenchEntry, skip: bool) -> Option<f64> {
    let link = Link::from_name(&e.name);
    match e.kind {
        Kind::Dispatcher => None,
        Kind::Chain => match e.name.as_str() {
            "chain-2" => Some(limits::CHAIN_2),
            "chain-4" => Some(limits::CHAIN_4),
            "chain-8" => Some(limits::CHAIN_8),
            _ => None,
        },
        _ if skip => Some(match link {
            Some(Link::GetConnect | Link::GetSubflow | Link::BlkSubflow) => limits::GATED_SKIP,
            _ => limits::LINK,
        }),
        _ if e.act.method == Method::Single => Some(limits::REWRITE),
        _ => Some(match link {
            Some(Link::GetConnect | Link::GetSubflow) => limits::REPORT,
            _ => limits::LINK,
        }),
    }
}

/// Check every entry against its limit (both hooks): the verdict of the bench, a pure
/// function of the figures.
pub fn check(results: &[BenchEntry]) -> Vec<TargetCheck> {
    let mut out = vec![];
    for e in results {
        for (what, m, skip) in [
            ("acting", Some(&e.act), false),
            ("skipping", e.skip.as_ref(), true),
        ] {
            let (Some(m), Some(limit)) = (m, limit_for(e, skip)) else {
                continue;
            };
            // NaN (a missing dispatcher figure) stays NaN, and fails
            let ratio = if m.ingress.ratio.is_nan() || m.egress.ratio.is_nan() {
                f64::NAN
            } else {
                m.ingress.ratio.max(m.egress.ratio)
            };
            out.push(TargetCheck {
                name: if e.kind == Kind::Chain {
                    e.name.clone()
                } else {
                    format!("{} {what}", e.name)
                },
                ratio,
                limit,
                pass: ratio <= limit,
            });
        }
    }
    out
}

const SRC: &str = "198.18.100.1";
const DST: &str = "198.18.100.2";
/// The subflow whose handshake the dispatcher sees (window scale 7 both ways).
const BENCH_PORT: u16 = 40000;

fn ack(src: &str, dst: &str, sport: u16, dport: u16) -> Tcp {
    Tcp::new(src, dst, sport, dport)
        .opt(&mp::ts(7, 9))
        .opt(&mp::dss(Some(77), None))
        .window(40000)
}

fn add_addr_ack(sport: u16, dport: u16) -> Tcp {
    ack(SRC, DST, sport, dport).opt(&mp::add_addr_v4(
        2,
        [198, 18, 101, 2],
        None,
        Some(0x1122334455667788),
    ))
}

fn join_syn(sport: u16, dport: u16) -> Tcp {
    Tcp::new(SRC, DST, sport, dport)
        .flags(nena_policy::packet::TCP_SYN)
        .opt(&mp::join_syn(false, 2, 0xa1b2c3d4, 0x01020304))
}

/// The subflow of `add_subflow`'s acting frame (its kept announcement is renewed each pair).
const KEPT_PORT: u16 = 40004;
/// The subflow of chain-8's frame (window scale 0, set at the start).
const CHAIN8_PORT: u16 = 40005;
/// The subflow of `blk_subflow`'s acting frame (apart: what it keeps, add_subflow would
/// announce on the bench subflow).
const BLK_PORT: u16 = 40006;

/// A frame of the bench; `NewSubflowAck` takes a new subflow from `flows`.
fn frame(f: Frame, flows: &mut Flows) -> Vec<u8> {
    match f {
        Frame::DssAck | Frame::DssAckPrioSent => ack(SRC, DST, BENCH_PORT, 5201).build(),
        Frame::DssAckSmallWindow => ack(SRC, DST, BENCH_PORT, 5201).window(100).build(),
        Frame::DssAckWideWindow => ack(SRC, DST, BENCH_PORT, 5201).window(65535).build(),
        Frame::DssAckOtherSeq => Tcp::new(SRC, DST, BENCH_PORT, 5201)
            .opt(&mp::ts(7, 9))
            .opt(&mp::dss(Some(200_000), None))
            .window(40000)
            .build(),
        Frame::PlainAck => Tcp::new(SRC, DST, BENCH_PORT, 5201)
            .opt(&mp::ts(7, 9))
            .window(40000)
            .build(),
        Frame::DssAckOtherFlow => ack("198.18.200.1", "198.18.200.2", 40001, 5301).build(),
        Frame::CapableSyn => Tcp::new(SRC, DST, 40002, 5201)
            .flags(nena_policy::packet::TCP_SYN)
            .opt(&mp::capable(&[]))
            .build(),
        Frame::JoinSyn => join_syn(40003, 5201).build(),
        Frame::NewSubflowAck => {
            let (sport, dport) = flows.next();
            ack(SRC, DST, sport, dport).build()
        }
        Frame::AddAddrAck => add_addr_ack(BLK_PORT, 5201).build(),
        Frame::KeptAck => ack(SRC, DST, KEPT_PORT, 5201).build(),
        Frame::Chain8 => chain8_frame().build(),
    }
}

fn chain8_frame() -> Tcp {
    Tcp::new(SRC, DST, CHAIN8_PORT, 5201)
        .opt(&mp::dss(Some(77), None))
        .opt(&mp::add_addr_v4(
            2,
            [198, 18, 101, 2],
            None,
            Some(0x1122334455667788),
        ))
        .window(65535)
}

/// New subflows for `set_backup`'s single runs: ports never used before in this run.
struct Flows(u32);

impl Flows {
    fn next(&mut self) -> (u16, u16) {
        let i = self.0;
        self.0 += 1;
        (1024 + (i % 60000) as u16, 6000 + (i / 60000) as u16)
    }
}

pub(crate) fn chain_of(hook: Hook, links: &[Link]) -> Result<ChainSpec> {
    let links: Vec<&str> = links.iter().map(|l| l.spec()).collect();
    let text = format!(
        "[[chain]]\nname = \"bench\"\ndev = \"lo\"\nhook = \"{}\"\nlinks = [ {} ]\n",
        hook.name(),
        links.join(", ")
    );
    Ok(spec::parse(&text)
        .map_err(|e| anyhow::anyhow!("{e}"))?
        .chains
        .remove(0))
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// What the counters must show after a run of a chain.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Expect {
    /// Every link hit on every run.
    AllAct,
    /// The (only) link ran and never hit.
    Skip,
}

fn verify(bed: &TestBed, hook: Hook, what: &str, expect: Expect, runs: u64) -> Result<()> {
    let stats = bed.stats(hook)?;
    let ok = !stats.is_empty()
        && stats.iter().all(|s| {
            s.runs == runs
                && match expect {
                    Expect::AllAct => s.hits == runs,
                    Expect::Skip => s.hits == 0,
                }
        });
    if !ok {
        bail!(
            "{what} at {hook:?}: expected every link to {} on each of {runs} runs, counters {:?}",
            if expect == Expect::AllAct {
                "act"
            } else {
                "skip"
            },
            stats.iter().map(|s| (s.runs, s.hits)).collect::<Vec<_>>()
        );
    }
    Ok(())
}

/// One pair of batches: the chain, then no chain, one right after the other (drift and other
/// tenants' load hit both halves alike). Returns (with - without, without).
fn batch_pair(
    bed: &mut TestBed,
    hook: Hook,
    what: &str,
    chain: &ChainSpec,
    f: &[u8],
    repeat: u32,
    expect: Expect,
) -> Result<(f64, f64)> {
    bed.set_chain(hook, chain)?;
    let with = bed.run(hook, f, repeat)?.ns;
    verify(bed, hook, what, expect, repeat as u64)?;
    bed.clear_chain(hook)?;
    let without = bed.run(hook, f, repeat)?.ns;
    Ok((with - without, without))
}

/// One single pair: an untimed and a timed run of the dispatcher alone, then of the chain,
/// each on the original frame. Every link must have acted on both runs with the chain (and a
/// link that rewrites frames must have changed it). Returns with - without.
fn single_pair(
    bed: &mut TestBed,
    hook: Hook,
    what: &str,
    links: &[Link],
    f: Frame,
    flows: &mut Flows,
) -> Result<f64> {
    bed.clear_chain(hook)?;
    bed.run(hook, &frame(f, flows), 1)?;
    let without = bed.run(hook, &frame(f, flows), 1)?.ns;
    if f == Frame::KeptAck {
        // something to announce again: blk_subflow keeps an ADD_ADDR of the subflow
        bed.set_chain(hook, &chain_of(hook, &[Link::BlkSubflow])?)?;
        bed.run(hook, &add_addr_ack(KEPT_PORT, 5201).build(), 1)?;
    }
    bed.set_chain(hook, &chain_of(hook, links)?)?;
    bed.run(hook, &frame(f, flows), 1)?;
    let timed = frame(f, flows);
    let o = bed.run(hook, &timed, 1)?;
    verify(bed, hook, what, Expect::AllAct, 2)?;
    if links.iter().any(|l| l.act_frame().1 == Method::Single) && o.data == timed {
        bail!("{what} at {hook:?}: the frame came out unchanged");
    }
    Ok(o.ns - without)
}

/// The handshake of the bench subflow through the dispatcher of both hooks, which settles
/// its window scale (as on a real connection seen from its start).
fn handshake(bed: &mut TestBed) -> Result<()> {
    for h in [Hook::Ingress, Hook::Egress] {
        bed.clear_chain(h)?;
        let syn = Tcp::new(SRC, DST, BENCH_PORT, 5201)
            .flags(nena_policy::packet::TCP_SYN)
            .opt(&[1, 3, 3, 7]);
        bed.run(h, &syn.build(), 1)?;
        bed.run(
            h,
            &syn.reply()
                .flags(nena_policy::packet::TCP_SYN | nena_policy::packet::TCP_ACK)
                .opt(&[1, 3, 3, 7])
                .build(),
            1,
        )?;
    }
    Ok(())
}

/// One figure being measured.
struct Job {
    name: String,
    kind: Kind,
    links: Vec<Link>,
    frame: Frame,
    method: Method,
    expect: Expect,
    /// Is this the skip measurement of its entry?
    skip: bool,
    specs: [ChainSpec; 2],
    /// Differences per hook.
    diffs: [Vec<f64>; 2],
}

const HOOKS: [Hook; 2] = [Hook::Ingress, Hook::Egress];

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// Run the benchmark: `repeat` runs per batch, `batches` rounds; each round takes one pair
/// of batches of every batch figure and `singles_per_round` single pairs of every single
/// figure, at both hooks.
pub fn run(
    repeat: u32,
    batches: usize,
    singles_per_round: usize,
    mut progress: impl FnMut(&str),
) -> Result<BenchReport> {
    let loadavg_start = loadavg();
    let batches = batches.max(1);
    let singles_per_round = singles_per_round.max(1);
    let mut bed = TestBed::new()?;
    handshake(&mut bed)?;
    let mut flows = Flows(0);
    let mut jobs: Vec<Job> = vec![];
    let mk = |name: String, kind, links: Vec<Link>, frame, method, expect, skip| -> Result<Job> {
        Ok(Job {
            specs: [chain_of(HOOKS[0], &links)?, chain_of(HOOKS[1], &links)?],
            name,
            kind,
            links,
            frame,
            method,
            expect,
            skip,
            diffs: [vec![], vec![]],
        })
    };
    // `drop` is not timed: it ends every packet at once (no work to measure beside the
    // dispatcher's), and a dropped frame is not the pass the other rows are timed against
    for l in Link::ALL.into_iter().filter(|l| *l != Link::Drop) {
        let (frame, method) = l.act_frame();
        jobs.push(mk(
            l.name().into(),
            l.role(),
            vec![l],
            frame,
            method,
            Expect::AllAct,
            false,
        )?);
        if let Some(frame) = l.skip_frame() {
            jobs.push(mk(
                l.name().into(),
                l.role(),
                vec![l],
                frame,
                Method::Batch,
                Expect::Skip,
                true,
            )?);
        }
    }
    for (name, links, frame, method) in chains() {
        jobs.push(mk(
            name.into(),
            Kind::Chain,
            links,
            frame,
            method,
            Expect::AllAct,
            false,
        )?);
    }
    // chain-8's subflow: its window scale is known (0: the cap is 30000 bytes)
    let c8 = chain8_frame();
    bed.set_wscale(&c8.flow(), 0)?;
    bed.set_wscale(&c8.reply().flow(), 0)?;
    for h in HOOKS {
        // set_backup's skip frame: a subflow that already carried its MP_PRIO
        bed.set_chain(h, &chain_of(h, &[Link::SetBackup])?)?;
        bed.run(h, &frame(Frame::DssAckPrioSent, &mut flows), 1)?;
        bed.clear_chain(h)?;
        bed.run(h, &frame(Frame::DssAck, &mut flows), repeat)?; // warm up
    }
    let mut without: [Vec<f64>; 2] = [vec![], vec![]];
    for round in 0..batches {
        progress(&format!("round {}/{batches}", round + 1));
        for job in jobs.iter_mut() {
            for (i, h) in HOOKS.iter().enumerate() {
                let what = format!(
                    "{} {}",
                    job.name,
                    if job.skip { "skipping" } else { "acting" }
                );
                match job.method {
                    Method::Batch => {
                        let events = !job.skip && job.links.iter().any(|l| l.emits_events());
                        // the ring buffer (256 KiB) holds about 1700 events: drain it, and
                        // keep such batches below that
                        let rep = if events {
                            bed.drain_events()?;
                            repeat.min(1000)
                        } else {
                            repeat
                        };
                        let f = frame(job.frame, &mut flows);
                        let (d, wo) =
                            batch_pair(&mut bed, *h, &what, &job.specs[i], &f, rep, job.expect)?;
                        job.diffs[i].push(d);
                        if job.frame == Frame::DssAck {
                            without[i].push(wo);
                        }
                    }
                    Method::Single => {
                        for _ in 0..singles_per_round {
                            let d = single_pair(
                                &mut bed, *h, &what, &job.links, job.frame, &mut flows,
                            )?;
                            job.diffs[i].push(d);
                        }
                    }
                }
            }
        }
        bed.drain_events()?;
    }
    let disp = [median(without[0].clone()), median(without[1].clone())];
    let figure = |diffs: &[f64], i: usize| {
        let ns = median(diffs.to_vec());
        Figure {
            ns,
            ratio: ns / disp[i],
            noise: ns < 0.0,
            samples: diffs.len(),
        }
    };
    let mut results = vec![BenchEntry {
        name: "dispatcher".into(),
        kind: Kind::Dispatcher,
        act: Measure {
            frame: Frame::DssAck,
            method: Method::Batch,
            ingress: Figure {
                ns: disp[0],
                ratio: 1.0,
                noise: false,
                samples: without[0].len(),
            },
            egress: Figure {
                ns: disp[1],
                ratio: 1.0,
                noise: false,
                samples: without[1].len(),
            },
        },
        skip: None,
        links: None,
    }];
    for job in &jobs {
        let m = Measure {
            frame: job.frame,
            method: job.method,
            ingress: figure(&job.diffs[0], 0),
            egress: figure(&job.diffs[1], 1),
        };
        if job.skip {
            let e = results
                .iter_mut()
                .find(|e| e.name == job.name)
                .expect("the acting figure comes first");
            e.skip = Some(m);
        } else {
            results.push(BenchEntry {
                name: job.name.clone(),
                kind: job.kind,
                act: m,
                skip: None,
                links: (job.kind == Kind::Chain).then(|| job.links.clone()),
            });
        }
    }
    let targets = check(&results);
    let mut noise = vec![];
    for e in &results {
        for (what, m) in [("act", Some(&e.act)), ("skip", e.skip.as_ref())] {
            if let Some(m) = m {
                for (h, f) in [("ingress", m.ingress), ("egress", m.egress)] {
                    if f.noise {
                        noise.push(format!("{} {what} {h}", e.name));
                    }
                }
            }
        }
    }
    Ok(BenchReport {
        method: "BPF_PROG_TEST_RUN; batch: median over pairs of batches of the kernel's mean time per run, (with) - (without); single: median over pairs of single runs on the original frame after an untimed one, (with) - (without); ratio: over the dispatcher at the same hook".into(),
        repeat,
        batches,
        single_samples: batches * singles_per_round,
        targets_met: targets.iter().all(|t| t.pass),
        targets,
        results,
        noise,
        loadavg_start,
        loadavg_end: loadavg(),
    })
}

/// Two builds of the programs side by side: `pairs` pairs of batches of the chain `links`
/// (names as in a chain file) on `hook`, one batch on each bed, alternating, on the bench's
/// DSS ACK. Returns the medians of `a` and `b` and the median of the per-pair ratios b / a,
/// which the host's slow spells (they last seconds; a pair takes milliseconds) leave alone
/// far better than either median.
pub fn compare(
    a: &mut TestBed,
    b: &mut TestBed,
    hook: Hook,
    links: &[&str],
    pairs: usize,
    repeat: u32,
) -> Result<(f64, f64, f64)> {
    let f = frame(Frame::DssAck, &mut Flows(0));
    let links = links
        .iter()
        .map(|n| Link::from_name(n).ok_or_else(|| anyhow::anyhow!("unknown link {n}")))
        .collect::<Result<Vec<_>>>()?;
    let spec = chain_of(hook, &links)?;
    for bed in [&mut *a, &mut *b] {
        handshake(bed)?;
        bed.set_chain(hook, &spec)?;
        bed.run(hook, &f, repeat)?; // warm up
    }
    let (mut ta, mut tb, mut r) = (vec![], vec![], vec![]);
    for i in 0..pairs.max(1) {
        // each side goes first in every other pair
        let (x, y) = if i % 2 == 0 {
            let x = a.run(hook, &f, repeat)?.ns;
            (x, b.run(hook, &f, repeat)?.ns)
        } else {
            let y = b.run(hook, &f, repeat)?.ns;
            (a.run(hook, &f, repeat)?.ns, y)
        };
        ta.push(x);
        tb.push(y);
        r.push(y / x);
    }
    Ok((median(ta), median(tb), median(r)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fig(ns: f64, disp: f64) -> Figure {
        Figure {
            ns,
            ratio: ns / disp,
            noise: ns < 0.0,
            samples: 3,
        }
    }

    fn entry(name: &str, kind: Kind, method: Method, act: f64, skip: Option<f64>) -> BenchEntry {
        let m = |ns: f64, method| Measure {
            frame: Frame::DssAck,
            method,
            ingress: fig(ns, 30.0),
            egress: fig(ns * 0.5, 30.0),
        };
        BenchEntry {
            name: name.into(),
            kind,
            act: m(act, method),
            skip: skip.map(|s| m(s, Method::Batch)),
            links: None,
        }
    }

    #[test]
    fn targets_are_ratios_and_fail_above_their_limits() {
        let d = 30.0;
        let ok = vec![
            entry("dispatcher", Kind::Dispatcher, Method::Batch, d, None),
            entry("src", Kind::Selector, Method::Batch, 1.5 * d, Some(d)),
            entry(
                "rate_limit",
                Kind::Actor,
                Method::Single,
                20.0 * d,
                Some(-3.0),
            ),
            entry(
                "get_subflow",
                Kind::Actor,
                Method::Batch,
                4.0 * d,
                Some(0.4 * d),
            ),
            entry("record", Kind::Actor, Method::Batch, 1.2 * d, None),
            entry("chain-2", Kind::Chain, Method::Batch, 2.0 * d, None),
            entry("chain-8", Kind::Chain, Method::Single, 36.0 * d, None),
        ];
        let t = check(&ok);
        // no target for the dispatcher; acting and skipping for the links
        let names: Vec<&str> = t.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "src acting",
                "src skipping",
                "rate_limit acting",
                "rate_limit skipping",
                "get_subflow acting",
                "get_subflow skipping",
                "record acting",
                "chain-2",
                "chain-8"
            ]
        );
        assert!(t.iter().all(|t| t.pass), "{t:?}");
        assert_eq!(
            t.iter().map(|t| t.limit).collect::<Vec<_>>(),
            [1.5, 1.5, 20.0, 1.5, 4.0, 0.4, 1.5, 2.0, 36.0]
        );
        // the larger hook counts: ingress here
        assert_eq!(t[0].ratio, 1.5);
        // each limit missed by a little fails
        for (i, e) in [
            (1, 1.51 * d),
            (2, 20.1 * d),
            (3, 4.1 * d),
            (5, 2.1 * d),
            (6, 36.1 * d),
        ] {
            let mut bad = ok.clone();
            bad[i].act.ingress = fig(e, d);
            assert!(check(&bad).iter().any(|t| !t.pass), "{i}");
        }
        let mut bad = ok.clone();
        bad[1].skip.as_mut().unwrap().ingress = fig(1.51 * d, d);
        assert!(check(&bad)
            .iter()
            .any(|t| !t.pass && t.name == "src skipping"));
        // a gated actor tail-called after all (about 0.5x) fails
        let mut bad = ok.clone();
        bad[3].skip.as_mut().unwrap().egress = fig(0.5 * d, d);
        assert!(check(&bad)
            .iter()
            .any(|t| !t.pass && t.name == "get_subflow skipping"));
        // a missing dispatcher figure (NaN ratio) fails
        let mut bad = ok.clone();
        bad[4].act.egress.ratio = f64::NAN;
        assert!(!check(&bad)[6].pass);
    }

    #[test]
    fn every_link_has_an_acting_frame_and_all_but_record_a_skipping_one() {
        for l in Link::ALL {
            assert_eq!(Link::from_name(l.name()), Some(l));
            assert_eq!(
                l.skip_frame().is_none(),
                l == Link::Record || l == Link::Drop,
                "{l:?}"
            );
            // the actors that change the frame are timed in single runs, the others in batches
            let rewrites = matches!(
                l,
                Link::RateLimit | Link::SetBackup | Link::BlkSubflow | Link::AddSubflow
            );
            assert_eq!(l.act_frame().1 == Method::Single, rewrites, "{l:?}");
            chain_of(Hook::Ingress, &[l]).unwrap();
        }
        assert_eq!(Link::from_name("nope"), None);
        let c = chains();
        assert_eq!(
            c.iter().map(|(_, l, _, _)| l.len()).collect::<Vec<_>>(),
            [2, 4, 8]
        );
        for (_, links, _, _) in &c {
            let sel = links.iter().filter(|l| l.role() == Kind::Selector).count();
            assert!(sel >= 1 && links.len() - sel >= 1);
        }
    }
}
