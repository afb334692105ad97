//! Where an acting figure's time goes: the bench's acting figures (each link on the frame it
//! acts on, the chains on theirs, timed as `run` times them) on several builds of the
//! programs at once, pair by pair in rounds so that the host's slow spells hit every build
//! alike. A build is this one or an object file compiled with a step left out (see
//! docs/BENCHMARKS.md, "Where an actor's time goes"); such a build need not act as the bench
//! requires, so nothing is checked here: this finds costs, `run` is the benchmark.

use super::frames::{frame, Flows};
use super::links::{chains, BenchLink, Frame, Link, Method};
use super::measure::{chain_of, handshake, median, single_pair};
use anyhow::{anyhow, Result};
use nena_bpf::chains::spec::Hook;
use nena_bpf::TestBed;

/// One build's medians: the dispatcher (batches on the DSS ACK, no chain) and each figure
/// (with - without), ns.
#[derive(Clone, Debug)]
pub struct StepRow {
    pub build: String,
    pub dispatcher: f64,
    pub figures: Vec<(String, f64)>,
}

/// The links and frame of a figure: a link's name (its acting frame) or a chain's.
fn figure(name: &str) -> Result<(Vec<Link>, Frame, Method)> {
    if let Some(l) = Link::from_name(name) {
        let (f, m) = l.act_frame();
        return Ok((vec![l], f, m));
    }
    chains()
        .into_iter()
        .find(|(n, _, _, _)| *n == name)
        .map(|(_, l, f, m)| (l, f, m))
        .ok_or_else(|| anyhow!("no link or chain named {name}"))
}

/// `builds`: (name, object bytes; `None` = this build). `rounds` rounds, each one batch pair
/// of the dispatcher and `per_round` pairs of every figure on every build in turn.
pub fn steps(
    builds: &[(String, Option<Vec<u8>>)],
    names: &[&str],
    hook: Hook,
    rounds: usize,
    per_round: usize,
    repeat: u32,
) -> Result<Vec<StepRow>> {
    let figs = names
        .iter()
        .map(|n| figure(n))
        .collect::<Result<Vec<_>>>()?;
    let mut beds = vec![];
    for (_, obj) in builds {
        let mut bed = match obj {
            Some(o) => TestBed::with_object(o)?,
            None => TestBed::new()?,
        };
        handshake(&mut bed)?;
        beds.push(bed);
    }
    let mut flows = Flows(0);
    let ack = frame(Frame::DssAck, &mut flows);
    let mut disp: Vec<Vec<f64>> = vec![vec![]; beds.len()];
    let mut diffs: Vec<Vec<Vec<f64>>> = vec![vec![vec![]; figs.len()]; beds.len()];
    for _ in 0..rounds.max(1) {
        for (b, bed) in beds.iter_mut().enumerate() {
            bed.clear_chain(hook)?;
            disp[b].push(bed.run(hook, &ack, repeat)?.ns);
            for (i, (links, f, method)) in figs.iter().enumerate() {
                for _ in 0..per_round.max(1) {
                    let d = match method {
                        Method::Single => single_pair(bed, hook, "", links, *f, &mut flows, false)?,
                        Method::Batch => {
                            bed.drain_events()?;
                            let fr = frame(*f, &mut flows);
                            bed.set_chain(hook, &chain_of(hook, links)?)?;
                            let with = bed.run(hook, &fr, repeat.min(1000))?.ns;
                            bed.clear_chain(hook)?;
                            with - bed.run(hook, &fr, repeat.min(1000))?.ns
                        }
                    };
                    diffs[b][i].push(d);
                }
            }
        }
    }
    Ok(builds
        .iter()
        .zip(disp)
        .zip(diffs)
        .map(|(((name, _), d), f)| StepRow {
            build: name.clone(),
            dispatcher: median(d),
            figures: names
                .iter()
                .zip(f)
                .map(|(n, v)| (n.to_string(), median(v)))
                .collect(),
        })
        .collect())
}
