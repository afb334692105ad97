//! Where an actor's time goes: the bench's acting figures on several builds of the BPF
//! programs at once, pair by pair in rounds (`nena_bench::policy::steps`):
//! `cargo run --release -p nena-bench --example policy_steps -- [ingress|egress]
//! [--rounds N] [--repeat N] NAME=OBJ.bpf.o... -- FIGURE...`
//! (`NAME=this` is the current build; OBJ: `nena.bpf.o` compiled with a step left out;
//! FIGURE: a link or chain name as in `nena bench policy`). Prints per build the dispatcher
//! and each figure in ns and as a ratio to that build's dispatcher.
use nena_bench::policy as bench;
use nena_bpf::Hook;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage =
        "usage: policy_steps [ingress|egress] [--rounds N] [--repeat N] NAME=OBJ... -- FIGURE...";
    let split = args
        .iter()
        .position(|a| a == "--")
        .ok_or_else(|| anyhow::anyhow!(usage))?;
    let (opts, figures) = (&args[..split], &args[split + 1..]);
    let mut hook = Hook::Ingress;
    let mut rounds = 15;
    let mut repeat = 2000;
    let mut builds = vec![];
    let mut it = opts.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "ingress" => hook = Hook::Ingress,
            "egress" => hook = Hook::Egress,
            "--rounds" => rounds = it.next().ok_or_else(|| anyhow::anyhow!(usage))?.parse()?,
            "--repeat" => repeat = it.next().ok_or_else(|| anyhow::anyhow!(usage))?.parse()?,
            b => {
                let (name, path) = b.split_once('=').ok_or_else(|| anyhow::anyhow!(usage))?;
                let obj = (path != "this").then(|| std::fs::read(path)).transpose()?;
                builds.push((name.to_string(), obj));
            }
        }
    }
    let names: Vec<&str> = figures.iter().map(String::as_str).collect();
    let rows = bench::steps(&builds, &names, hook, rounds, 5, repeat)?;
    print!("{:<16} {:>12}", format!("{hook:?}"), "dispatcher");
    for n in &names {
        print!(" {n:>18}");
    }
    println!();
    for r in &rows {
        print!("{:<16} {:>9.1} ns", r.build, r.dispatcher);
        for (_, ns) in &r.figures {
            print!(" {:>8.1} {:>6.2}x", ns, ns / r.dispatcher);
        }
        println!();
    }
    Ok(())
}
