//! Running the benchmark: every figure's jobs in rounds over both hooks, the report built
//! from their medians; and `compare`, two builds of the programs side by side.

use super::frames::{frame, Flows};
use super::links::{chains, BenchLink, Frame, Kind, Link, Method};
use super::measure::{batch_pair, chain_of, handshake, median, single_pair, Expect};
use super::report::{check, BenchEntry, BenchReport, Figure, Measure};
use crate::host::loadavg;
use anyhow::Result;
use nena_bpf::chains::spec::{ChainSpec, Hook};
use nena_bpf::TestBed;

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
                                &mut bed, *h, &what, &job.links, job.frame, &mut flows, true,
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
