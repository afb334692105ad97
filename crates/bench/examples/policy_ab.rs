//! Two builds of the BPF programs side by side, for changes too small to see through the
//! host's noise in two separate bench runs:
//! `cargo run --release -p nena-bench --example policy_ab -- OLD.bpf.o [ingress|egress] LINK...`
//! (OLD.bpf.o: a copy of `target/release/build/nena-bpf-*/out/nena.bpf.o` from before the
//! change; the other side is this build). Prints the median ratio new/old twice, with the
//! builds loaded in either order (where a build's maps and code land in memory shifts a
//! comparison by a few percent), their geometric mean, and a control: the old build against a
//! second copy of itself, which shows how large that placement effect was in this run.
use nena_bench::policy as bench;
use nena_bpf::{Hook, TestBed};

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (old, rest) = args
        .split_first()
        .ok_or_else(|| anyhow::anyhow!("usage: policy_ab OLD.bpf.o [ingress|egress] LINK..."))?;
    let (hook, links) = match rest.first().map(String::as_str) {
        Some("egress") => (Hook::Egress, &rest[1..]),
        Some("ingress") => (Hook::Ingress, &rest[1..]),
        _ => (Hook::Ingress, rest),
    };
    // default: the links of the bench's chain of 8 (here in batches on its DSS ACK, where
    // the actors that rewrite a frame do so once and then skip)
    let links: Vec<&str> = if links.is_empty() {
        bench::chains()
            .into_iter()
            .find(|(name, _, _, _)| *name == "chain-8")
            .map(|(_, l, _, _)| l.iter().map(|l| l.name()).collect())
            .unwrap_or_default()
    } else {
        links.iter().map(String::as_str).collect()
    };
    let old = std::fs::read(old)?;
    let run = |a: &mut TestBed, b: &mut TestBed| bench::compare(a, b, hook, &links, 301, 2000);
    // loaded old first, then new first
    let (mut a1, mut b1) = (TestBed::with_object(&old)?, TestBed::new()?);
    let (o1, n1, r1) = run(&mut a1, &mut b1)?;
    let mut b2 = TestBed::new()?;
    let mut a2 = TestBed::with_object(&old)?;
    let (o2, n2, r2) = run(&mut a2, &mut b2)?;
    // control: the old build against itself
    let (_, _, c) = run(&mut a1, &mut a2)?;
    println!(
        "{hook:?} {}: new/old {:.3} (loaded old first {r1:.3}, new first {r2:.3}); control old/old {c:.3}; medians of 301 pairs; whole runs, dispatcher included: old {:.0} / {:.0} ns, new {:.0} / {:.0} ns",
        links.join(" "),
        (r1 * r2).sqrt(),
        o1,
        o2,
        n1,
        n2
    );
    Ok(())
}
