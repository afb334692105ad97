//! `nena policy ...`: eBPF policy chains (selectors and actors at XDP ingress / TC egress).
//! A thin layer over `nena_bpf::Policy`; the file format is in docs/POLICY.md.
use crate::exit::{CmdResult, Exit};
use anyhow::Context;
use clap::{Args, Subcommand};
use nena_bpf::chains::loader::LoadError;
use nena_bpf::{chains::spec, Policy};
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Args, Debug)]
pub struct Common {
    /// Directory of the pinned maps in the BPF filesystem [default:
    /// /sys/fs/bpf/nena/net-<namespace inode>, one per network namespace].
    #[arg(long)]
    pin_dir: Option<PathBuf>,
    /// Run in this network namespace (from `ip netns`); use this rather than
    /// `ip netns exec`, whose private /sys hides the pins from one command to the next.
    #[arg(long)]
    netns: Option<String>,
}

impl Common {
    /// Enter the namespace (if any) and return the pin directory to use there.
    fn enter(&self) -> Result<PathBuf, Exit> {
        if let Some(n) = &self.netns {
            nena_bpf::chains::loader::enter_netns(n).map_err(Exit::usage)?;
        }
        Ok(self
            .pin_dir
            .clone()
            .unwrap_or_else(nena_bpf::chains::loader::default_pin_dir))
    }
}

#[derive(Subcommand, Debug)]
pub enum PolicyCmd {
    /// Load the programs and attach the dispatchers to a device (XDP ingress, TC egress).
    Attach {
        #[arg(long)]
        dev: String,
        #[command(flatten)]
        common: Common,
    },
    /// Replace the chains with those of a policy file (TOML). Nothing is applied if any
    /// chain is wrong.
    Load {
        file: PathBuf,
        /// Replace only this tenant's chains (and its cgroup or uid), from the file: the
        /// default chains and the other tenants' are left as they are.
        #[arg(long, value_name = "NAME")]
        tenant: Option<String>,
        #[command(flatten)]
        common: Common,
    },
    /// Check a policy file without applying it.
    Check { file: PathBuf },
    /// Show attached devices, chains, and what each link ran on and matched.
    Show {
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        common: Common,
    },
    /// Stream the reports of get_connect, get_subflow and record.
    Events {
        /// One JSON object per line.
        #[arg(long)]
        json: bool,
        /// Stop after this many events.
        #[arg(long)]
        count: Option<usize>,
        /// Stop after this many seconds.
        #[arg(long)]
        timeout: Option<f64>,
        #[command(flatten)]
        common: Common,
    },
    /// Detach from a device; the pins go when the last device is detached.
    Detach {
        #[arg(long)]
        dev: String,
        #[command(flatten)]
        common: Common,
    },
}

fn read_spec(file: &PathBuf) -> Result<spec::PolicySpec, Exit> {
    let text = std::fs::read_to_string(file)
        .with_context(|| format!("reading {}", file.display()))
        .map_err(Exit::usage)?;
    spec::parse(&text).map_err(|e| Exit::usage(anyhow::anyhow!("{}: {e}", file.display())))
}

/// ", 3 tenant(s)" when the file defines tenants.
fn tenants_note(s: &spec::PolicySpec) -> String {
    if s.tenants.is_empty() {
        String::new()
    } else {
        format!(", {} tenant(s)", s.tenants.len())
    }
}

pub fn run(c: PolicyCmd) -> CmdResult {
    match c {
        PolicyCmd::Attach { dev, common } => {
            let pin_dir = common.enter()?;
            nena_bpf::chains::loader::ifindex(&dev).map_err(Exit::usage)?;
            Policy::attach(&pin_dir, &dev)?;
            println!(
                "attached to {dev} (maps pinned under {})",
                pin_dir.display()
            );
            Ok(())
        }
        PolicyCmd::Load {
            file,
            tenant,
            common,
        } => {
            let s = read_spec(&file)?;
            if let Some(t) = &tenant {
                if s.tenant(t).is_none() {
                    return Err(Exit::usage(anyhow::anyhow!(
                        "{}: no tenant `{t}` in the file",
                        file.display()
                    )));
                }
            }
            let pin_dir = common.enter()?;
            let p = Policy::open(&pin_dir)?;
            let r = match &tenant {
                None => p.apply(&s),
                Some(t) => p.apply_tenant(&s, t),
            };
            r.map_err(|e| match e {
                // a device that is missing or not attached, or a cgroup that does not
                // exist, is the file's fault
                LoadError::Spec { .. } => Exit::usage(anyhow::anyhow!("{}: {e}", file.display())),
                e => anyhow::Error::from(e).into(),
            })?;
            match &tenant {
                None => println!(
                    "loaded {} chain(s){} from {}",
                    s.chains.len(),
                    tenants_note(&s),
                    file.display()
                ),
                Some(t) => println!(
                    "loaded {} chain(s) of tenant {t} from {} (other tenants untouched)",
                    s.chains
                        .iter()
                        .filter(|c| c.tenant.as_deref() == Some(t.as_str()))
                        .count(),
                    file.display()
                ),
            }
            Ok(())
        }
        PolicyCmd::Check { file } => {
            let s = read_spec(&file)?;
            println!(
                "{}: {} chain(s){}, ok",
                file.display(),
                s.chains.len(),
                tenants_note(&s)
            );
            Ok(())
        }
        PolicyCmd::Show { json, common } => {
            let pin_dir = common.enter()?;
            let p = Policy::open(&pin_dir)?;
            let st = p.status()?;
            if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&st).map_err(anyhow::Error::from)?
                );
                return Ok(());
            }
            println!("pinned under {}", st.pin_dir);
            println!(
                "TCP packets seen: ingress {} egress {}; malformed (passed untouched): ingress {} egress {}",
                st.seen_ingress, st.seen_egress, st.malformed_ingress, st.malformed_egress
            );
            for t in &st.tenants {
                println!("tenant {} (id {}): {}", t.name, t.id, t.who);
            }
            for h in &st.hooks {
                let whose = match &h.tenant {
                    Some(t) => format!(" tenant {t}"),
                    None => String::new(),
                };
                match &h.chain {
                    None => println!("{} {}{whose}: no chain", h.dev, h.hook.name()),
                    Some(name) => {
                        println!(
                            "{} {}{whose}: chain \"{}\" (slot {})",
                            h.dev,
                            h.hook.name(),
                            name,
                            h.slot.unwrap_or(0)
                        );
                        for (i, l) in h.links.iter().enumerate() {
                            println!(
                                "  {i:2} {:<70} runs {:>10} hits {:>10}",
                                l.link, l.runs, l.hits
                            );
                        }
                    }
                }
            }
            for k in &st.kept_add_addr {
                println!(
                    "kept ADD_ADDR: {} addr_id {} blocked {} reannounced {}",
                    k.flow, k.addr_id, k.blocked, k.reannounced
                );
            }
            if st.subflows_recorded > 0 {
                println!("subflows recorded: {}", st.subflows_recorded);
            }
            Ok(())
        }
        PolicyCmd::Events {
            json,
            count,
            timeout,
            common,
        } => {
            let pin_dir = common.enter()?;
            let p = Policy::open(&pin_dir)?;
            let timeout = match timeout {
                Some(t) if !(t.is_finite() && t >= 0.0) => {
                    return Err(Exit::usage(anyhow::anyhow!(
                        "--timeout must be a number of seconds"
                    )))
                }
                t => t.map(Duration::from_secs_f64),
            };
            let mut n = 0usize;
            let mut out = std::io::stdout().lock();
            let mut failed = None;
            p.watch_events(timeout, |e| {
                let line = if json {
                    serde_json::to_string(&e).unwrap_or_default()
                } else {
                    e.to_string()
                };
                if let Err(err) = writeln!(out, "{line}").and_then(|_| out.flush()) {
                    failed = Some(err);
                    return false;
                }
                n += 1;
                count.is_none_or(|c| n < c)
            })?;
            match failed {
                Some(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
                    Err(anyhow::Error::from(e).into())
                }
                _ => Ok(()),
            }
        }
        PolicyCmd::Detach { dev, common } => {
            let pin_dir = common.enter()?;
            nena_bpf::chains::loader::ifindex(&dev).map_err(Exit::usage)?;
            match Policy::open(&pin_dir) {
                Ok(p) => {
                    let last = p.detach(&dev)?;
                    println!(
                        "detached from {dev}{}",
                        if last { "; pins removed" } else { "" }
                    );
                }
                Err(_) => {
                    // no pinned state: still take our hooks off the device
                    nena_bpf::chains::loader::detach_hooks(nena_bpf::chains::loader::ifindex(
                        &dev,
                    )?)?;
                    println!("detached from {dev} (no pinned state)");
                }
            }
            Ok(())
        }
    }
}
