//! Two builds of the BPF programs side by side, for changes too small to see through the
//! host's noise in two separate bench runs:
//! `cargo run --release -p nena-policy --example ab -- OLD.bpf.o [ingress|egress] LINK...`
//! (OLD.bpf.o: a copy of `target/release/build/nena-policy-*/out/nena.bpf.o` from before the
//! change; the other side is this build). Prints both medians and the median ratio new/old.
use nena_policy::{bench, Hook, TestBed};

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (old, rest) = args
        .split_first()
        .ok_or_else(|| anyhow::anyhow!("usage: ab OLD.bpf.o [ingress|egress] LINK..."))?;
    let (hook, links) = match rest.first().map(String::as_str) {
        Some("egress") => (Hook::Egress, &rest[1..]),
        Some("ingress") => (Hook::Ingress, &rest[1..]),
        _ => (Hook::Ingress, rest),
    };
    let links: Vec<&str> = if links.is_empty() {
        vec![
            "src",
            "dst",
            "subflow",
            "packet_type",
            "rate_limit",
            "get_connect",
            "get_subflow",
            "record",
        ]
    } else {
        links.iter().map(String::as_str).collect()
    };
    let mut a = TestBed::with_object(&std::fs::read(old)?)?;
    let mut b = TestBed::new()?;
    let (ma, mb, ratio) = bench::compare(&mut a, &mut b, hook, &links, 301, 2000)?;
    println!(
        "{hook:?} {}: old {ma:.1} ns, new {mb:.1} ns, new/old {ratio:.3} (median of 301 pairs)",
        links.join(" ")
    );
    Ok(())
}
