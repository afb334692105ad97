//! `nena lab status`: what the lab looks like right now, read back from the system
//! (namespaces, link state, addresses of each family, qdiscs, MPTCP settings, the router's
//! NAT and MPTCP-option stripping) rather than from what we meant to do.

use crate::capture::{self, CaptureRecord};
use crate::netns::netns_exists;
use crate::run::{ip, netns_exec, run, tc};
use crate::{state_dir, Host, Lab, Link, LinkEmulation, PmMode, Rate};
use anyhow::Result;
use serde::Serialize;

/// The whole lab.
#[derive(Debug, Clone, Serialize)]
pub struct LabStatus {
    pub prefix: String,
    /// All three namespaces exist (and the LAN host's, in a lab built with `--lan`).
    pub up: bool,
    /// Some but not all parts exist (a crash during `up`): `down` cleans it.
    pub partial: bool,
    pub hosts: Vec<HostStatus>,
    pub links: Vec<LinkStatus>,
    pub mptcp: Option<MptcpStatus>,
    pub captures: Vec<CaptureRecord>,
    /// The relay process of the emulated links, when running.
    pub relay_pid: Option<u32>,
    /// The server fleet behind the router's balancer (`--servers N`; empty without one).
    pub fleet: Vec<FleetStatus>,
    /// The LAN host behind the client (`--lan`), when configured or present.
    pub lan: Option<crate::LanStatus>,
    /// The router source-NATs the untrusted link's traffic to the server (its nftables
    /// table `inet nena_lab_nat` is there).
    pub untrusted_nat: bool,
    /// The router strips MPTCP options from the untrusted link's segments (its nftables
    /// table `inet nena_lab_strip` is there).
    pub untrusted_strip_mptcp: bool,
    /// The router forwards IPv6 (a lab with IPv6).
    pub router_ipv6_forwarding: Option<bool>,
}

/// One server of the fleet.
#[derive(Debug, Clone, Serialize)]
pub struct FleetStatus {
    #[serde(flatten)]
    pub server: crate::FleetServer,
    pub exists: bool,
    /// Whether the balancer gives it new connections.
    pub member: bool,
}

/// One host (namespace).
#[derive(Debug, Clone, Serialize)]
pub struct HostStatus {
    pub host: Host,
    pub netns: String,
    pub exists: bool,
}

/// One link (veth pair).
#[derive(Debug, Clone, Serialize)]
pub struct LinkStatus {
    pub link: Link,
    pub edge_host: Host,
    pub edge_iface: String,
    /// The edge end's IPv4 address (`198.18.1.2/24`), read back; none on a link that carries
    /// IPv6 only.
    pub edge_addr: Option<String>,
    /// The edge end's IPv6 address (`2001:2:0:1::2/64`), read back; none without IPv6.
    pub edge_addr6: Option<String>,
    /// The families the link carries, from the edge end's addresses.
    pub family: Option<crate::Family>,
    /// The host at the other end: the router, or the LAN host for the LAN link.
    pub router_host: Host,
    pub router_iface: String,
    pub router_addr: Option<String>,
    pub router_addr6: Option<String>,
    /// Both ends exist.
    pub exists: bool,
    /// Both ends administratively up and with carrier.
    pub up: bool,
    /// The root qdisc kind on the edge end (`tbf` when rate limited).
    pub qdisc: Option<String>,
    /// Rate limit found on the edge end (bits/s).
    pub rate: Option<Rate>,
    /// Rate limit found on the router end (bits/s).
    pub router_rate: Option<Rate>,
    /// Generic segmentation offload on the edge end (`nena lab up --no-offload` turns it off).
    pub gso: Option<bool>,
    /// `veth`, or `tap` for an emulated link (TAP pair joined by the relay).
    pub kind: Option<String>,
    /// The link's emulation as configured (per direction), for an emulated link.
    pub emulation: Option<LinkEmulation>,
}

/// MPTCP settings of the client and server.
#[derive(Debug, Clone, Serialize)]
pub struct MptcpStatus {
    pub client_enabled: bool,
    pub server_enabled: bool,
    pub pm: Option<PmMode>,
    pub client_endpoints: Vec<String>,
    pub client_limits: String,
    pub server_limits: String,
}

fn root_qdisc(ns: &str, iface: &str) -> (Option<String>, Option<Rate>) {
    let Ok(out) = run(tc(ns, &["-j", "qdisc", "show", "dev", iface, "root"])) else {
        return (None, None);
    };
    let Ok(v) = serde_json::from_str::<serde_json::Value>(&out) else {
        return (None, None);
    };
    let Some(q) = v.as_array().and_then(|a| a.first()) else {
        return (Some("noqueue".into()), None);
    };
    let kind = q.get("kind").and_then(|k| k.as_str()).map(str::to_string);
    // tc -j reports tbf's rate in bytes per second
    let rate = q
        .pointer("/options/rate")
        .and_then(|r| r.as_u64())
        .map(|b| Rate(b * 8));
    (kind, rate)
}

fn link_up(ns: &str, iface: &str) -> Option<bool> {
    let out = run(ip(Some(ns), &["-j", "link", "show", "dev", iface])).ok()?;
    let v: serde_json::Value = serde_json::from_str(&out).ok()?;
    let flags = v.pointer("/0/flags")?.as_array()?;
    let has = |f: &str| flags.iter().any(|x| x.as_str() == Some(f));
    Some(has("UP") && has("LOWER_UP"))
}

fn gso(ns: &str, iface: &str) -> Option<bool> {
    let mut c = netns_exec(ns, "ethtool");
    c.args(["-k", iface]);
    let out = run(c).ok()?;
    let line = out
        .lines()
        .find(|l| l.trim_start().starts_with("generic-segmentation-offload:"))?;
    Some(line.split(':').nth(1)?.trim().starts_with("on"))
}

fn kind(ns: &str, iface: &str) -> Option<String> {
    let out = run(ip(Some(ns), &["-d", "-o", "link", "show", "dev", iface])).ok()?;
    Some(
        if out.contains(" veth ") {
            "veth"
        } else if out.contains("tun type tap") {
            "tap"
        } else {
            "other"
        }
        .into(),
    )
}

/// The global IPv4 and IPv6 addresses (`ADDR/LEN`) of an interface, read back.
fn addrs(ns: &str, iface: &str) -> (Option<String>, Option<String>) {
    let Ok(j) = run(ip(Some(ns), &["-j", "addr", "show", "dev", iface])) else {
        return (None, None);
    };
    let all = crate::lan::global_addrs(&j);
    let v4 = all.iter().find(|a| !a.contains(':')).cloned();
    let v6 = all.into_iter().find(|a| a.contains(':'));
    (v4, v6)
}

fn family_of(v4: bool, v6: bool) -> Option<crate::Family> {
    match (v4, v6) {
        (true, true) => Some(crate::Family::Dual),
        (true, false) => Some(crate::Family::Ipv4),
        (false, true) => Some(crate::Family::Ipv6),
        (false, false) => None,
    }
}

fn sysctl(ns: &str, key: &str) -> Option<String> {
    let mut c = netns_exec(ns, "sysctl");
    c.args(["-n", key]);
    run(c).ok().map(|s| s.trim().to_string())
}

pub(crate) fn collect(prefix: &str) -> Result<LabStatus> {
    let lab = Lab {
        prefix: prefix.to_string(),
        state_dir: state_dir(prefix),
    };
    let config = lab.load().ok().map(|s| s.config);
    // The LAN host shows when the lab was built with it, or when its namespace is there
    // (a half-built or half-removed lab).
    let with_lan = config.as_ref().is_some_and(|c| c.lan) || netns_exists(&lab.netns(Host::Lan));
    let extra: &[Host] = if with_lan { &[Host::Lan] } else { &[] };
    let hosts: Vec<HostStatus> = Host::ALL
        .iter()
        .chain(extra)
        .map(|&h| HostStatus {
            host: h,
            netns: lab.netns(h),
            exists: netns_exists(&lab.netns(h)),
        })
        .collect();
    let up = hosts.iter().all(|h| h.exists);
    let any = hosts.iter().any(|h| h.exists) || lab.state_dir().exists();
    let mut links = Vec::new();
    let extra: &[Link] = if with_lan { &[Link::Lan] } else { &[] };
    for &link in Link::ALL.iter().chain(extra) {
        let [e, r] = link.ends();
        let (ens, rns) = (lab.netns(e.host), lab.netns(r.host));
        let eup = if netns_exists(&ens) {
            link_up(&ens, e.iface)
        } else {
            None
        };
        let rup = if netns_exists(&rns) {
            link_up(&rns, r.iface)
        } else {
            None
        };
        let (qdisc, rate) = if eup.is_some() {
            root_qdisc(&ens, e.iface)
        } else {
            (None, None)
        };
        let router_rate = if rup.is_some() {
            root_qdisc(&rns, r.iface).1
        } else {
            None
        };
        let (edge_addr, edge_addr6) = if eup.is_some() {
            addrs(&ens, e.iface)
        } else {
            (None, None)
        };
        let (router_addr, router_addr6) = if rup.is_some() {
            addrs(&rns, r.iface)
        } else {
            (None, None)
        };
        links.push(LinkStatus {
            link,
            edge_host: e.host,
            edge_iface: e.iface.into(),
            family: family_of(edge_addr.is_some(), edge_addr6.is_some()),
            edge_addr,
            edge_addr6,
            router_host: r.host,
            router_iface: r.iface.into(),
            router_addr,
            router_addr6,
            exists: eup.is_some() && rup.is_some(),
            up: eup == Some(true) && rup == Some(true),
            qdisc,
            rate,
            router_rate,
            gso: if eup.is_some() {
                gso(&ens, e.iface)
            } else {
                None
            },
            kind: if eup.is_some() {
                kind(&ens, e.iface)
            } else {
                None
            },
            emulation: config.as_ref().and_then(|c| c.emulation(link).cloned()),
        });
    }
    let mptcp = if up {
        let client = lab.netns(Host::Client);
        let server = lab.netns(Host::Server);
        let pm = sysctl(&client, "net.mptcp.pm_type").and_then(|v| match v.as_str() {
            "0" => Some(PmMode::Kernel),
            "1" => Some(PmMode::Userspace),
            _ => None,
        });
        Some(MptcpStatus {
            client_enabled: sysctl(&client, "net.mptcp.enabled").as_deref() == Some("1"),
            server_enabled: sysctl(&server, "net.mptcp.enabled").as_deref() == Some("1"),
            pm,
            client_endpoints: run(ip(Some(&client), &["mptcp", "endpoint", "show"]))
                .unwrap_or_default()
                .lines()
                .map(|l| l.trim().to_string())
                .filter(|l| !l.is_empty())
                .collect(),
            client_limits: run(ip(Some(&client), &["mptcp", "limits", "show"]))
                .unwrap_or_default()
                .trim()
                .into(),
            server_limits: run(ip(Some(&server), &["mptcp", "limits", "show"]))
                .unwrap_or_default()
                .trim()
                .into(),
        })
    } else {
        None
    };
    let captures = capture::records(lab.state_dir())
        .into_iter()
        .filter(|(_, r)| capture::is_live_tcpdump(r.pid))
        .map(|(_, r)| r)
        .collect();
    Ok(LabStatus {
        prefix: prefix.into(),
        up,
        partial: any && !up,
        hosts,
        links,
        mptcp,
        captures,
        relay_pid: lab.relay_pid(),
        fleet: {
            let out = lab.fleet_out();
            lab.fleet()
                .into_iter()
                .map(|s| FleetStatus {
                    exists: crate::netns::netns_exists(&s.netns),
                    member: !out.contains(&s.index),
                    server: s,
                })
                .collect()
        },
        lan: with_lan.then(|| lab.lan_status()),
        untrusted_nat: up && lab.router_has_table(crate::NAT_TABLE),
        untrusted_strip_mptcp: up && lab.router_has_table(crate::STRIP_TABLE),
        router_ipv6_forwarding: if up {
            sysctl(&lab.netns(Host::Router), "net.ipv6.conf.all.forwarding").map(|v| v == "1")
        } else {
            None
        },
    })
}
