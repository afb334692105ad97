//! `nena bench policy`: per-packet cost of each selector and actor and of chains of 2, 4 and
//! 8 links, with BPF_PROG_TEST_RUN.
//!
//! Method. A batch is one BPF_PROG_TEST_RUN of the hook's dispatcher with `repeat` runs on
//! one frame (an IPv4 MPTCP pure ACK: timestamps + DSS data ACK); the kernel reports the
//! mean time per run; the figure is the median over batches. The cost of a selector or
//! actor is the time of a chain holding only that link minus the time of the dispatcher
//! with no chain (so it includes the chain lookup and the counters, and for an actor its tail call), measured
//! in pairs of batches (with, without) and the median taken over the differences. The pairs
//! are taken in rounds (one pair of every figure per round), so each figure's batches are
//! spread over the whole run rather than bunched into a second or two of it. Chains
//! are reported whole, dispatcher included. With `repeat`, the kernel runs the same frame
//! again and again, so an actor that changed it (set_backup, blk_subflow, add_subflow,
//! rate_limit) is measured in its steady state (nothing left to do); their cost when they
//! do act is measured separately (`acting_ns`): single runs on fresh frames (new flows),
//! median, minus the dispatcher measured the same way.

use crate::packet::{mp, Tcp};
use crate::spec::{self, ChainSpec, Hook};
use crate::TestBed;
use anyhow::Result;

/// One line of the benchmark.
#[derive(Clone, Debug, serde::Serialize)]
pub struct BenchEntry {
    /// Selector or actor name, `chain-2`/`chain-4`/`chain-8`, or `dispatcher`.
    pub name: String,
    /// XDP ingress, ns per packet (median): marginal for a link, whole for a chain.
    pub ns: f64,
    /// TC egress, the same.
    pub ns_egress: f64,
    /// Actors that change packets: cost when acting (fresh frames), XDP ingress.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub acting_ns: Option<f64>,
    /// The same at TC egress.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub acting_ns_egress: Option<f64>,
    /// The links of a chain.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub links: Option<String>,
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct BenchReport {
    pub method: String,
    pub repeat: u32,
    pub batches: usize,
    pub results: Vec<BenchEntry>,
    /// At most 50 ns per selector or actor and 200 ns for a chain of 8 (the issue's targets),
    /// both hooks, steady state.
    pub targets_met: bool,
}

/// Each selector and actor as a one-link chain that matches / acts on the bench frame.
pub const LINKS: [(&str, &str); 13] = [
    (
        "subflow",
        r#"{ select = "subflow", src = "198.18.100.1", dst = "198.18.100.2", sport = 40000, dport = 5201 }"#,
    ),
    (
        "ip_pair",
        r#"{ select = "ip_pair", src = "198.18.100.1", dst = "198.18.100.2" }"#,
    ),
    ("src", r#"{ select = "src", prefix = "198.18.100.0/24" }"#),
    ("dst", r#"{ select = "dst", prefix = "198.18.100.2" }"#),
    (
        "sequence",
        r#"{ select = "sequence", what = "data_ack", from = 0, to = 100000 }"#,
    ),
    (
        "packet_type",
        r#"{ select = "packet_type", all = ["dss", "data_ack"] }"#,
    ),
    ("rate_limit", r#"{ act = "rate_limit", window = 30000 }"#),
    (
        "set_backup",
        r#"{ act = "set_backup", backup = true, repeat = 1 }"#,
    ),
    ("blk_subflow", r#"{ act = "blk_subflow" }"#),
    ("add_subflow", r#"{ act = "add_subflow" }"#),
    ("get_connect", r#"{ act = "get_connect" }"#),
    ("get_subflow", r#"{ act = "get_subflow" }"#),
    ("record", r#"{ act = "record" }"#),
];

fn link(name: &str) -> &'static str {
    LINKS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, l)| *l)
        .expect("known link")
}

/// The chains of 2, 4 and 8 links, composed as in seed 003 (section V.A): 1 selector and 1
/// actor, 1 selector and 3 actors, 4 selectors and 4 actors. The selectors all match the
/// bench frame, so every link runs.
pub fn chains() -> Vec<(&'static str, Vec<&'static str>)> {
    vec![
        ("chain-2", vec!["subflow", "record"]),
        (
            "chain-4",
            vec!["subflow", "rate_limit", "get_subflow", "record"],
        ),
        (
            "chain-8",
            vec![
                "src",
                "dst",
                "subflow",
                "packet_type",
                "rate_limit",
                "get_connect",
                "get_subflow",
                "record",
            ],
        ),
    ]
}

fn chain_of(hook: Hook, names: &[&str]) -> Result<ChainSpec> {
    let links: Vec<&str> = names.iter().map(|n| link(n)).collect();
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

fn frame(sport: u16) -> Tcp {
    Tcp::new("198.18.100.1", "198.18.100.2", sport, 5201)
        .opt(&mp::ts(7, 9))
        .opt(&mp::dss(Some(77), None))
        .window(40000)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// One pair of batches: `chain`, then no chain, one right after the other (drift and other
/// tenants' load hit both halves alike). Every link of the chain must have run (the
/// selectors all match the bench frame). Returns (with - without, without).
fn pair(
    bed: &mut TestBed,
    hook: Hook,
    what: &str,
    chain: &ChainSpec,
    f: &[u8],
    repeat: u32,
) -> Result<(f64, f64)> {
    bed.set_chain(hook, chain)?;
    let with = bed.run(hook, f, repeat)?.ns;
    anyhow::ensure!(
        bed.stats(hook)?.iter().all(|s| s.runs > 0),
        "{what}: a link did not run"
    );
    bed.clear_chain(hook)?;
    let without = bed.run(hook, f, repeat)?.ns;
    Ok((with - without, without))
}

/// The frame an acting actor needs, for flow `i` (fresh state each time).
fn acting_frame(name: &str, i: u16) -> Vec<u8> {
    let sport = i;
    match name {
        "blk_subflow" => frame(sport)
            .opt(&mp::add_addr_v4(
                2,
                [198, 18, 101, 2],
                None,
                Some(0x1122334455667788),
            ))
            .build(),
        "rate_limit" => frame(sport).window(65535).build(),
        _ => frame(sport).build(),
    }
}

fn acting(bed: &mut TestBed, hook: Hook, name: &str, n: u16) -> Result<f64> {
    // fresh flows for each hook: the actors keep per-flow state
    let first = if hook == Hook::Ingress { 10000 } else { 20000 };
    let mut base = vec![];
    let mut act = vec![];
    bed.clear_chain(hook)?;
    for i in first..first + n {
        base.push(bed.run(hook, &acting_frame(name, i), 1)?.ns);
    }
    if name == "add_subflow" {
        // something to re-announce: block an ADD_ADDR on each flow first
        bed.set_chain(hook, &chain_of(hook, &["blk_subflow"])?)?;
        for i in first..first + n {
            bed.run(hook, &acting_frame("blk_subflow", i), 1)?;
        }
    }
    bed.set_chain(hook, &chain_of(hook, &[name])?)?;
    for i in first..first + n {
        let f = acting_frame(name, i);
        if name == "rate_limit" {
            let t = frame(i);
            bed.set_wscale(&t.flow(), 0)?;
            bed.set_wscale(&t.reply().flow(), 0)?;
        }
        let o = bed.run(hook, &f, 1)?;
        if o.data.len() == f.len() && o.data == f {
            anyhow::bail!("{name} did not act on its bench frame");
        }
        act.push(o.ns);
    }
    Ok((median(act) - median(base)).max(0.0))
}

/// The issue's targets, both hooks, steady state: at most 50 ns per selector or actor, at
/// most 200 ns for a chain of 8 (the dispatcher and the shorter chains have none).
pub fn within_target(r: &BenchEntry) -> bool {
    match r.name.as_str() {
        "dispatcher" | "chain-2" | "chain-4" => true,
        "chain-8" => r.ns <= 200.0 && r.ns_egress <= 200.0,
        _ => r.ns <= 50.0 && r.ns_egress <= 50.0,
    }
}

/// The handshake of the bench flow through the dispatcher of both hooks, which settles its
/// window scale (as on a real connection seen from its start).
fn handshake(bed: &mut TestBed) -> Result<()> {
    for h in [Hook::Ingress, Hook::Egress] {
        bed.clear_chain(h)?;
        let syn = Tcp::new("198.18.100.1", "198.18.100.2", 40000, 5201)
            .flags(crate::packet::TCP_SYN)
            .opt(&[1, 3, 3, 7]);
        bed.run(h, &syn.build(), 1)?;
        bed.run(
            h,
            &syn.reply()
                .flags(crate::packet::TCP_SYN | crate::packet::TCP_ACK)
                .opt(&[1, 3, 3, 7])
                .build(),
            1,
        )?;
    }
    Ok(())
}

/// Run the benchmark: `repeat` runs per batch, `batches` batches per figure.
pub fn run(repeat: u32, batches: usize, mut progress: impl FnMut(&str)) -> Result<BenchReport> {
    let batches = batches.max(1);
    let mut bed = TestBed::new()?;
    let f = frame(40000).build();
    handshake(&mut bed)?;
    let hooks = [Hook::Ingress, Hook::Egress];
    // The figures: each selector and actor alone, then the chains.
    let figures: Vec<(&str, Vec<&str>)> = LINKS
        .iter()
        .map(|(n, _)| (*n, vec![*n]))
        .chain(chains())
        .collect();
    let specs = figures
        .iter()
        .map(|(_, links)| Ok([chain_of(hooks[0], links)?, chain_of(hooks[1], links)?]))
        .collect::<Result<Vec<_>>>()?;
    for h in hooks {
        bed.clear_chain(h)?;
        bed.run(h, &f, repeat)?; // warm up
    }
    // Rounds: one pair of batches of every figure at both hooks per round, so that the
    // batches of each figure are spread over the whole run. The host's slow spells last
    // seconds; taken back to back, all batches of a figure could fall into one of them.
    // diffs[figure][hook], and every batch of the dispatcher alone (the "without" halves)
    let mut diffs = vec![[vec![], vec![]]; figures.len()];
    let mut without = vec![[vec![], vec![]]; figures.len()];
    for round in 0..batches {
        progress(&format!("round {}/{batches}", round + 1));
        for (k, (name, _)) in figures.iter().enumerate() {
            for (i, h) in hooks.iter().enumerate() {
                let (d, wo) = pair(&mut bed, *h, name, &specs[k][i], &f, repeat)?;
                diffs[k][i].push(d);
                without[k][i].push(wo);
            }
        }
    }
    let mut results = vec![];
    let mut all_without: [Vec<f64>; 2] = [vec![], vec![]];
    for (k, (name, links)) in figures.iter().enumerate() {
        let is_chain = name.starts_with("chain-");
        let mut ns = [0.0; 2];
        for i in 0..2 {
            let d = median(diffs[k][i].clone()).max(0.0);
            // a link: its marginal cost; a chain: whole (its pairs' dispatcher halves plus
            // the differences)
            ns[i] = if is_chain {
                median(without[k][i].clone()) + d
            } else {
                d
            };
            all_without[i].extend(&without[k][i]);
        }
        let changes = matches!(
            *name,
            "rate_limit" | "set_backup" | "blk_subflow" | "add_subflow"
        );
        let (a_in, a_eg) = if changes {
            progress(&format!("{name} acting"));
            (
                Some(acting(&mut bed, Hook::Ingress, name, 101)?),
                Some(acting(&mut bed, Hook::Egress, name, 101)?),
            )
        } else {
            (None, None)
        };
        results.push(BenchEntry {
            name: name.to_string(),
            ns: ns[0],
            ns_egress: ns[1],
            acting_ns: a_in,
            acting_ns_egress: a_eg,
            links: is_chain.then(|| links.join(" ")),
        });
    }
    let [wo_in, wo_eg] = all_without;
    results.insert(
        0,
        BenchEntry {
            name: "dispatcher".into(),
            ns: median(wo_in),
            ns_egress: median(wo_eg),
            acting_ns: None,
            acting_ns_egress: None,
            links: None,
        },
    );
    let targets_met = results.iter().all(within_target);
    Ok(BenchReport {
        method: "BPF_PROG_TEST_RUN, median over batches of the kernel's mean time per run; links: chain minus dispatcher; chains: whole".into(),
        repeat,
        batches,
        results,
        targets_met,
    })
}

/// Two builds of the programs side by side: `pairs` pairs of batches of the chain `links` on
/// `hook`, one batch on each bed, alternating, on the bench frame. Returns the medians of `a`
/// and `b` and the median of the per-pair ratios b / a, which the host's slow spells
/// (they last seconds; a pair takes milliseconds) leave alone far better than either median.
pub fn compare(
    a: &mut TestBed,
    b: &mut TestBed,
    hook: Hook,
    links: &[&str],
    pairs: usize,
    repeat: u32,
) -> Result<(f64, f64, f64)> {
    let f = frame(40000).build();
    let spec = chain_of(hook, links)?;
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
