//! `nena lab tamper LINK`: an active attacker on one link who flips one payload byte of
//! one TCP segment, keeping the checksum valid (nena-bpf's `attack::tamper` TC program).
use super::args::{parse_link, Common};
use crate::exit::{CmdResult, Exit};
use anyhow::anyhow;
use clap::Args;
use nena_lab::{Host, Lab, Link};

#[derive(Args, Debug)]
#[command(after_long_help = "\
A TC program on the router's end of LINK watches the first TCP flow to (or, with --toward \
client, from) PORT whose SYN it sees, lets --skip-bytes of its payload pass, then XORs \
--mask into byte --offset of the next data segment, fixes the TCP checksum, and does it \
once (a retransmission of that byte is altered the same way). Attach it before the \
transfer starts. --show prints what it did, --remove takes it off; `nena lab down` removes \
it too. It assumes MPTCP's DSS checksum is off (net.mptcp.checksum_enabled=0, the default).")]
pub struct TamperArgs {
    #[command(flatten)]
    pub common: Common,
    /// trusted, untrusted or server.
    #[arg(value_parser = parse_link)]
    pub link: Link,
    /// Which way the altered segment travels (attaching: default server; with --show or
    /// --remove: default both ways).
    #[arg(long, value_parser = ["server", "client"])]
    pub toward: Option<String>,
    /// The server's TCP port (the nena server's, e.g. 4433). Required to attach.
    #[arg(long)]
    pub port: Option<u16>,
    /// Payload bytes of the flow that pass untouched before the byte is altered.
    #[arg(long, default_value = "65536", value_parser = crate::cmd::parse::parse_bytes)]
    pub skip_bytes: u64,
    /// Which byte of the chosen segment to alter.
    #[arg(long, default_value = "100")]
    pub offset: u32,
    /// XOR mask (not 0), decimal or 0x-hex.
    #[arg(long, default_value = "0x20", value_parser = parse_mask)]
    pub mask: u8,
    /// Print what the attached program did instead of attaching.
    #[arg(long, conflicts_with = "remove")]
    pub show: bool,
    /// Remove the attached program (and print what it did).
    #[arg(long)]
    pub remove: bool,
    /// JSON output.
    #[arg(long)]
    pub json: bool,
}

fn parse_mask(s: &str) -> Result<u8, String> {
    let v = match s.strip_prefix("0x") {
        Some(h) => u8::from_str_radix(h, 16),
        None => s.parse(),
    }
    .map_err(|_| format!("`{s}` is not a byte (0..255 or 0x00..0xff)"))?;
    if v == 0 {
        return Err("the mask must not be 0 (it would change nothing)".into());
    }
    Ok(v)
}

pub(super) fn tamper(a: TamperArgs) -> CmdResult {
    use nena_bpf::attack::tamper::{self, TamperConfig, TamperRecord};
    if a.link == Link::Lan {
        return Err(crate::exit::Exit::usage(anyhow::anyhow!(
            "the tamper attacker sits at the router: links trusted, untrusted or server, not lan"
        )));
    }
    let lab = Lab::open(&a.common.prefix)?;
    let end = a.link.router();
    // Toward the server: packets arriving at the router from the client (ingress); toward
    // the client: packets leaving the router (egress). For the server link the reverse.
    let hook_of = |toward_server: bool| toward_server != (a.link == Link::Server);
    let dev = end.iface;
    let print = |r: Option<TamperRecord>, what: &str| -> CmdResult {
        if a.json {
            println!(
                "{}",
                serde_json::to_string_pretty(&r).map_err(anyhow::Error::from)?
            );
            return Ok(());
        }
        match r {
            None => println!("no tamper program on the {} link", a.link),
            Some(r) => {
                let flow = r.flow.as_deref().unwrap_or("(no SYN seen yet)");
                if r.fired {
                    println!(
                        "{what}: flow {flow}: byte at payload offset {} (TCP seq {}) altered \
                         {:#04x} -> {:#04x}, in {} segment(s) of {} seen",
                        r.offset_in_flow, r.seq, r.old_byte, r.new_byte, r.altered, r.seen
                    );
                } else {
                    println!(
                        "{what}: flow {flow}: nothing altered yet ({} data segments seen)",
                        r.seen
                    );
                }
            }
        }
        Ok(())
    };
    if a.show || a.remove {
        // The direction named, or both: the first program found is reported (one per hook).
        let hooks: Vec<bool> = match a.toward.as_deref() {
            Some(t) => vec![hook_of(t == "server")],
            None => vec![hook_of(true), hook_of(false)],
        };
        let mut found = None;
        for ingress in hooks {
            let r = if a.show {
                lab.run_in(end.host, || tamper::show(dev, ingress))??
            } else {
                lab.run_in(end.host, || tamper::remove(dev, ingress))??
            };
            found = found.or(r);
        }
        return print(found, if a.show { "tamper" } else { "removed" });
    }
    let toward_server = a.toward.as_deref() != Some("client");
    let ingress = hook_of(toward_server);
    let port = a.port.ok_or_else(|| {
        Exit::usage(anyhow!(
            "give --port PORT (the server's TCP port) to attach"
        ))
    })?;
    let skip = u32::try_from(a.skip_bytes)
        .map_err(|_| Exit::usage(anyhow!("--skip-bytes must be below 4 GiB")))?;
    let cfg = TamperConfig {
        port,
        match_dst: toward_server,
        skip,
        offset: a.offset,
        mask: a.mask,
    };
    for host in [Host::Client, Host::Server] {
        if lab.run_in(host, tamper::mptcp_checksum_enabled)? {
            eprintln!(
                "nena: warning: net.mptcp.checksum_enabled is 1 in the {host}: MPTCP itself will \
                 notice the altered byte"
            );
        }
    }
    lab.run_in(end.host, || tamper::attach(dev, ingress, &cfg))??;
    if !a.json {
        println!(
            "tamper attached on the router's {} interface ({}): the first flow {} port {port} \
             gets byte {} of its first segment after {skip} payload bytes XORed with {:#04x}",
            dev,
            if ingress { "ingress" } else { "egress" },
            if toward_server { "to" } else { "from" },
            a.offset,
            a.mask
        );
    }
    Ok(())
}
