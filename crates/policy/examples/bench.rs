//! The policy benchmark without the CLI: `cargo run --release -p nena-policy --example bench`.
fn main() -> anyhow::Result<()> {
    let r = nena_policy::bench::run(2000, 31, |_| {})?;
    for e in &r.results {
        println!(
            "{:<12} {:>8.1} {:>8.1} {:?} {:?}",
            e.name, e.ns, e.ns_egress, e.acting_ns, e.acting_ns_egress
        );
    }
    println!("targets met: {}", r.targets_met);
    Ok(())
}
