//! `nena lab status`: hosts, links, addresses and families, rates, link state, the untrusted
//! link's NAT and MPTCP-option stripping, MPTCP settings and captures, as a table or JSON.
use super::args::Common;
use crate::exit::CmdResult;
use clap::Args;
use nena_lab::{Direction, Lab, LabStatus, Rate};

#[derive(Args, Debug)]
pub struct StatusArgs {
    #[command(flatten)]
    pub common: Common,
    /// Machine-readable output.
    #[arg(long)]
    pub json: bool,
}

/// Show the lab's status, as a table or JSON.
pub(super) fn status(a: StatusArgs) -> CmdResult {
    let st = Lab::status(&a.common.prefix)?;
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&st).map_err(anyhow::Error::from)?
        );
    } else {
        print!("{}", render_status(&st));
    }
    Ok(())
}

/// The human-readable status.
pub fn render_status(st: &LabStatus) -> String {
    use std::fmt::Write;
    let mut o = String::new();
    let state = if st.up {
        "up"
    } else if st.partial {
        "partially built (run `nena lab down` to clean up)"
    } else {
        "down"
    };
    let _ = writeln!(o, "lab `{}`: {state}", st.prefix);
    for h in &st.hosts {
        let _ = writeln!(
            o,
            "  {:<7} netns {}{}",
            h.host.name(),
            h.netns,
            if h.exists { "" } else { " (missing)" }
        );
    }
    if st.up {
        let _ = writeln!(o, "links:");
        for l in &st.links {
            let show = |r: Option<Rate>| {
                r.map(|r| r.to_string())
                    .unwrap_or_else(|| "unlimited".into())
            };
            let rate = match (l.rate, l.router_rate) {
                (None, None) => "no rate limit".to_string(),
                (Some(a), Some(b)) if a == b => format!("rate {a}"),
                (a, b) => format!("rate {} out, {} in", show(a), show(b)),
            };
            let addrs = |v4: &Option<String>, v6: &Option<String>| {
                let v: Vec<&str> = [v4, v6].into_iter().flatten().map(String::as_str).collect();
                if v.is_empty() {
                    "no address".to_string()
                } else {
                    v.join(" ")
                }
            };
            let _ = writeln!(
                o,
                "  {:<9} {} {} {} <-> {} {} {}  {}  {}  {rate}{}",
                l.link.name(),
                l.edge_host.name(),
                l.edge_iface,
                addrs(&l.edge_addr, &l.edge_addr6),
                l.router_host.name(),
                l.router_iface,
                addrs(&l.router_addr, &l.router_addr6),
                l.family.map(|f| f.name()).unwrap_or("no family"),
                if !l.exists {
                    "MISSING"
                } else if l.up {
                    "up"
                } else {
                    "DOWN"
                },
                if l.gso == Some(false) && l.kind.as_deref() != Some("tap") {
                    "  offloads off"
                } else {
                    ""
                },
            );
            if let Some(e) = &l.emulation {
                for d in Direction::BOTH {
                    let _ = writeln!(o, "            {d:<11} {}", e.get(d));
                }
            }
        }
    }
    if st.up {
        let _ = writeln!(
            o,
            "untrusted link: NAT {} (nftables inet {}), MPTCP options {} (nftables inet {}); router IPv6 forwarding {}",
            if st.untrusted_nat { "on" } else { "off" },
            nena_lab::NAT_TABLE,
            if st.untrusted_strip_mptcp {
                "STRIPPED"
            } else {
                "kept"
            },
            nena_lab::STRIP_TABLE,
            match st.router_ipv6_forwarding {
                Some(true) => "on",
                Some(false) => "off",
                None => "?",
            }
        );
    }
    if !st.fleet.is_empty() {
        let _ = writeln!(
            o,
            "fleet: {} servers share {} (nftables on the router: a 4-tuple hash picks the \
             server of a new connection; each server announces its own join port)",
            st.fleet.len(),
            nena_lab::FLEET_ADDR,
        );
        for s in &st.fleet {
            let _ = writeln!(
                o,
                "  s{:<2} netns {}  {} <-> router {} {}  joins at {}:{}{}",
                s.server.index,
                s.server.netns,
                s.server.addr,
                s.server.router_iface,
                s.server.router_addr,
                nena_lab::FLEET_ADDR,
                s.server.join_port,
                if !s.exists {
                    "  MISSING"
                } else if !s.member {
                    "  out of the balancer"
                } else {
                    ""
                }
            );
        }
    }
    if let Some(l) = &st.lan {
        let on_off = |v: Option<bool>| match v {
            Some(true) => "on",
            Some(false) => "off",
            None => "?",
        };
        let _ = writeln!(
            o,
            "lan: netns {}{}  eth0 {}  default via {} and {}  (client forwarding: ipv4 {}, ipv6 {})",
            l.netns,
            if l.exists { "" } else { " (missing)" },
            if l.addrs.is_empty() {
                "no address".to_string()
            } else {
                l.addrs.join(" ")
            },
            l.gateway.as_deref().unwrap_or("none"),
            l.gateway6.as_deref().unwrap_or("none"),
            on_off(l.client_ip_forward),
            on_off(l.client_ipv6_forwarding),
        );
    }
    if let Some(m) = &st.mptcp {
        let _ = writeln!(
            o,
            "mptcp: client {}, server {}, path manager {}",
            if m.client_enabled {
                "enabled"
            } else {
                "DISABLED"
            },
            if m.server_enabled {
                "enabled"
            } else {
                "DISABLED"
            },
            m.pm.map(|p| p.to_string()).unwrap_or_else(|| "?".into())
        );
        if m.client_endpoints.is_empty() {
            let _ = writeln!(o, "  client endpoints: none");
        }
        for e in &m.client_endpoints {
            let _ = writeln!(o, "  client endpoint: {e}");
        }
        let _ = writeln!(
            o,
            "  limits: client {}; server {}",
            m.client_limits, m.server_limits
        );
    }
    if let Some(p) = st.relay_pid {
        let _ = writeln!(o, "relay: pid {p} (TAP pairs of the emulated links)");
    }
    for c in &st.captures {
        let _ = writeln!(
            o,
            "capture: tcpdump {} on the {} link -> {}",
            c.pid,
            c.link,
            c.file.display()
        );
    }
    o
}
