//! One measurement on the test bed: a chain from links, pairs of batches and single pairs
//! (with the chain, without it), the counters checked after each, the bench subflow's
//! handshake, medians.

use super::frames::{
    add_addr_ack, frame, new_subflow, Flows, BENCH_PORT, CHAIN8_PORT, DST, KEPT_PORT, SRC,
};
use super::links::{BenchLink, Frame, Link, Method};
use anyhow::{bail, Result};
use nena_bpf::chains::packet::Tcp;
use nena_bpf::chains::spec::{self, ChainSpec, Hook};
use nena_bpf::TestBed;

pub(super) fn chain_of(hook: Hook, links: &[Link]) -> Result<ChainSpec> {
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

pub(super) fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// What the counters must show after a run of a chain.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Expect {
    /// Every link hit on every run.
    AllAct,
    /// The (only) link ran and never hit.
    Skip,
}

pub(super) fn verify(
    bed: &TestBed,
    hook: Hook,
    what: &str,
    expect: Expect,
    runs: u64,
) -> Result<()> {
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
pub(super) fn batch_pair(
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
/// each on the original frame. With `check`, every link must have acted on both runs with the
/// chain (and a link that rewrites frames must have changed it). Returns with - without.
pub(super) fn single_pair(
    bed: &mut TestBed,
    hook: Hook,
    what: &str,
    links: &[Link],
    f: Frame,
    flows: &mut Flows,
    check: bool,
) -> Result<f64> {
    bed.clear_chain(hook)?;
    bed.run(hook, &frame(f, flows), 1)?;
    let without = bed.run(hook, &frame(f, flows), 1)?.ns;
    // the frames of the runs with the chain; a new subflow's SYN first goes through the
    // hook, which has no chain yet (a subflow's SYN passes before its ACKs)
    let mut with_frame = || -> Result<Vec<u8>> {
        if f != Frame::NewSubflowAck {
            return Ok(frame(f, flows));
        }
        let (syn, ack) = new_subflow(flows);
        bed.run(hook, &syn, 1)?;
        Ok(ack)
    };
    let (warm, timed) = (with_frame()?, with_frame()?);
    if f == Frame::KeptAck {
        // something to announce again: blk_subflow keeps an ADD_ADDR of the subflow
        bed.set_chain(hook, &chain_of(hook, &[Link::BlkSubflow])?)?;
        bed.run(hook, &add_addr_ack(KEPT_PORT, 5201).build(), 1)?;
    }
    bed.set_chain(hook, &chain_of(hook, links)?)?;
    bed.run(hook, &warm, 1)?;
    let o = bed.run(hook, &timed, 1)?;
    if !check {
        return Ok(o.ns - without);
    }
    verify(bed, hook, what, Expect::AllAct, 2)?;
    if links.iter().any(|l| l.act_frame().1 == Method::Single) && o.data == timed {
        bail!("{what} at {hook:?}: the frame came out unchanged");
    }
    Ok(o.ns - without)
}

/// The handshakes of the bench subflow (window scale 7 both ways) and of chain-8's (0 both
/// ways) through the dispatcher of both hooks, which settles their window scales (as on a
/// real connection seen from its start).
pub(super) fn handshake(bed: &mut TestBed) -> Result<()> {
    use nena_bpf::chains::packet::{TCP_ACK, TCP_SYN};
    for h in [Hook::Ingress, Hook::Egress] {
        bed.clear_chain(h)?;
        for (port, ws) in [(BENCH_PORT, 7), (CHAIN8_PORT, 0)] {
            let syn = Tcp::new(SRC, DST, port, 5201)
                .flags(TCP_SYN)
                .opt(&[1, 3, 3, ws]);
            bed.run(h, &syn.build(), 1)?;
            let synack = syn.reply().flags(TCP_SYN | TCP_ACK).opt(&[1, 3, 3, ws]);
            bed.run(h, &synack.build(), 1)?;
        }
    }
    Ok(())
}
