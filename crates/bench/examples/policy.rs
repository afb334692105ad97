//! The policy benchmark without the CLI: `cargo run --release -p nena-bench --example policy`.
fn main() -> anyhow::Result<()> {
    let r = nena_bench::policy::run(2000, 31, 4, |_| {})?;
    for e in &r.results {
        println!(
            "{:<12} act {:>8.1} {:>8.1} skip {:?}",
            e.name,
            e.act.ingress.ns,
            e.act.egress.ns,
            e.skip.as_ref().map(|s| (s.ingress.ns, s.egress.ns))
        );
    }
    println!("targets met: {}", r.targets_met);
    Ok(())
}
