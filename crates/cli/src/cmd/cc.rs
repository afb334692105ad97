//! `nena cc load|unload|show`: nena's coupled congestion controls for MPTCP (LIA, OLIA,
//! BALIA, EWTCP as BPF struct_ops, nena-bpf's room `cc`), loaded so that they outlive the command
//! (the link pinned under /sys/fs/bpf/nena-cc) and used with `--cc NAME`, TCP_CONGESTION or
//! `ip route ... congctl NAME`.
use crate::exit::{CmdResult, Exit};
use anyhow::anyhow;
use clap::Subcommand;
use nena_bpf::cc::{loader, Algo};
use std::path::Path;

#[derive(Subcommand, Debug)]
pub enum CcCmd {
    /// Load a congestion control (lia, olia, balia, ewtcp, or all); it stays registered
    /// until `nena cc unload`.
    Load {
        /// lia | olia | balia | ewtcp (or nena_lia, ...) | all
        name: String,
    },
    /// Unload one (or, without a name or with `all`, every) congestion control nena loaded.
    Unload {
        /// lia | olia | balia | ewtcp (or nena_lia, ...) | all
        name: Option<String>,
    },
    /// What is loaded: nena's four and every congestion control the kernel has.
    Show {
        /// One JSON object.
        #[arg(long)]
        json: bool,
    },
}

fn parse(name: &str) -> Result<Vec<Algo>, Exit> {
    if name.eq_ignore_ascii_case("all") {
        return Ok(Algo::ALL.to_vec());
    }
    Algo::parse(name).map(|a| vec![a]).ok_or_else(|| {
        Exit::usage(anyhow!(
            "unknown congestion control `{name}` (lia, olia, balia, ewtcp or all)"
        ))
    })
}

pub fn run(c: CcCmd) -> CmdResult {
    let root = Path::new(loader::PIN_ROOT);
    match c {
        CcCmd::Load { name } => {
            let algos = parse(&name)?;
            let mut failed = Vec::new();
            for a in &algos {
                match loader::load(*a, root) {
                    Ok(pin) => println!(
                        "loaded {a} (pinned at {}): use it with --cc {a}, TCP_CONGESTION or `ip route ... congctl {a}`",
                        pin.display()
                    ),
                    Err(e) => failed.push(format!("{e:#}")),
                }
            }
            if !failed.is_empty() {
                return Err(anyhow!("{}", failed.join("; ")).into());
            }
            Ok(())
        }
        CcCmd::Unload { name } => {
            let algos = parse(name.as_deref().unwrap_or("all"))?;
            let mut any = false;
            for a in &algos {
                if loader::unload(*a, root)? {
                    println!("unloaded {a}");
                    any = true;
                }
            }
            if !any && algos.len() == 1 {
                return Err(anyhow!(
                    "{} is not loaded by nena (no pin under {})",
                    algos[0],
                    root.display()
                )
                .into());
            }
            if !any {
                println!("nothing to unload");
            }
            Ok(())
        }
        CcCmd::Show { json } => {
            let st = loader::show(root)?;
            let avail = loader::available()?;
            if json {
                let v = serde_json::json!({ "available": avail, "nena": st });
                println!("{v}");
                return Ok(());
            }
            println!("{:<12} {:<11} pin", "name", "registered");
            for s in &st {
                println!(
                    "{:<12} {:<11} {}",
                    s.name,
                    if s.registered { "yes" } else { "no" },
                    s.pin
                        .as_ref()
                        .map(|p| p.display().to_string())
                        .unwrap_or_else(|| "-".into())
                );
            }
            println!("available: {}", avail.join(" "));
            Ok(())
        }
    }
}
