//! Building a lab with iproute2 and tc: namespaces, links (veth pairs, or TAP pairs and the
//! relay process for emulated links) and addresses, policy routing (each client address
//! leaves by its own link), MPTCP settings and endpoints, rate limits; the LAN host behind
//! the client with `--lan` (module `lan`); IPv6 and the families of each link (module
//! `family`); NAT and MPTCP-option stripping on the untrusted link (module `middlebox`).

use crate::hostns::{host_netns, mptcp_limits, sysctl_in};
use crate::run::{ip, probe, run, run_tolerant, tc};
use crate::{Host, Lab, LabConfig, Link, PmMode, Rate};
use anyhow::{bail, Context, Result};
use std::time::{Duration, Instant};

impl Lab {
    pub(crate) fn sysctl(&self, host: Host, key: &str, value: &str) -> Result<()> {
        sysctl_in(&self.netns(host), key, value)
    }

    /// What kind of device `iface` is in `ns`: `veth`, `tap`, another kind, or `None` if
    /// there is none.
    pub(crate) fn link_kind(&self, ns: &str, iface: &str) -> Result<Option<&'static str>> {
        if !probe(ip(Some(ns), &["link", "show", "dev", iface]))? {
            return Ok(None);
        }
        let out = run(ip(Some(ns), &["-d", "-o", "link", "show", "dev", iface]))?;
        Ok(Some(if out.contains(" veth ") {
            "veth"
        } else if out.contains("tun type tap") {
            "tap"
        } else {
            "other"
        }))
    }

    /// Build (or reconcile) the lab; returns the relay's pid if a link is emulated.
    pub(crate) fn build(&self, cfg: &LabConfig, generation: u64) -> Result<Option<u32>> {
        // 0. a relay of an earlier build goes (it holds the TAP devices of the old links)
        let recorded = self.load().ok().and_then(|s| s.relay_pid);
        crate::process::terminate(
            &crate::process::relay_pids(&self.prefix, recorded),
            Duration::from_secs(2),
        );
        // 1. namespaces with loopback up, IPv4 only
        for h in Host::ALL {
            host_netns(&self.netns(h))?;
        }
        // 2. veth pairs, addresses, links up
        for link in Link::ALL {
            let [a, b] = link.ends();
            let (ans, bns) = (self.netns(a.host), self.netns(b.host));
            let want = if cfg.emulation(link).is_some() {
                "tap"
            } else {
                "veth"
            };
            let a_kind = self.link_kind(&ans, a.iface)?;
            let b_kind = self.link_kind(&bns, b.iface)?;
            if a_kind != Some(want) || b_kind != Some(want) {
                // missing, half a pair, or the other kind: start this link afresh
                for (ns, e, kind) in [(&ans, a, a_kind), (&bns, b, b_kind)] {
                    if kind.is_some() {
                        run_tolerant(
                            ip(Some(ns), &["link", "del", "dev", e.iface]),
                            &["Cannot find device"],
                        )?;
                    }
                }
                if want == "veth" {
                    run(ip(
                        Some(&ans),
                        &[
                            "link", "add", "name", a.iface, "type", "veth", "peer", "name",
                            b.iface, "netns", &bns,
                        ],
                    ))?;
                } else {
                    // persistent TAP devices: they outlive the relay; the namespace takes them
                    for (ns, e) in [(&ans, a), (&bns, b)] {
                        run(ip(
                            Some(ns),
                            &["tuntap", "add", "dev", e.iface, "mode", "tap"],
                        ))?;
                    }
                }
            }
            self.apply_link_families(cfg, link)?;
            for (ns, e) in [(&ans, a), (&bns, b)] {
                run(ip(Some(ns), &["link", "set", "dev", e.iface, "up"]))?;
            }
        }
        self.apply_ipv6_hosts(cfg)?;
        // 2b. the LAN host behind the client (`--lan`), or none
        self.build_lan(cfg.lan)?;
        // 3. sysctls: forwarding, no reverse-path filtering (policy routing is asymmetric), MPTCP
        self.sysctl(Host::Router, "net.ipv4.ip_forward", "1")?;
        for h in [Host::Client, Host::Router] {
            for k in ["all", "default"] {
                self.sysctl(h, &format!("net.ipv4.conf.{k}.rp_filter"), "0")?;
            }
        }
        for l in [Link::Trusted, Link::Untrusted] {
            for e in l.ends() {
                self.sysctl(e.host, &format!("net.ipv4.conf.{}.rp_filter", e.iface), "0")?;
            }
        }
        for h in [Host::Client, Host::Server] {
            self.sysctl(h, "net.mptcp.enabled", "1")?;
        }
        let pm_type = match cfg.pm {
            PmMode::Kernel => "0",
            PmMode::Userspace => "1",
        };
        self.sysctl(Host::Client, "net.mptcp.pm_type", pm_type)?;
        // 4. routes and policy rules, each family
        self.apply_routes(cfg)?;
        // 5. MPTCP limits and endpoints
        for h in [Host::Client, Host::Server] {
            mptcp_limits(&self.netns(h))?;
        }
        let client = self.netns(Host::Client);
        run(ip(Some(&client), &["mptcp", "endpoint", "flush"]))?;
        if cfg.pm == PmMode::Kernel {
            // the untrusted address of each family the link carries
            let u = Link::Untrusted.edge();
            let fam = cfg.family(Link::Untrusted);
            for v6 in [false, true] {
                if !(if v6 { fam.has_v6() } else { fam.has_v4() }) {
                    continue;
                }
                run(ip(
                    Some(&client),
                    &[
                        "mptcp",
                        "endpoint",
                        "add",
                        &u.addr_of(v6).to_string(),
                        "dev",
                        u.iface,
                        "subflow",
                    ],
                ))?;
            }
        }
        // 6. rates
        for link in Link::ALL {
            self.apply_rate(link, cfg.rate(link))?;
        }
        // 7. offloads
        // (TAP devices have no offloads: the relay never asks for them)
        let state = if cfg.offload { "on" } else { "off" };
        for link in cfg.links() {
            if cfg.emulation(link).is_some() {
                continue;
            }
            for e in link.ends() {
                run(self.command(
                    e.host,
                    "ethtool",
                    ["-K", e.iface, "tso", state, "gso", state],
                ))?;
            }
        }
        // 8. the fleet behind the router's balancer (`--servers N`), or none
        self.build_fleet(cfg.servers, &[])?;
        // 8b. NAT and MPTCP-option stripping on the untrusted link, or none
        self.build_middleboxes(cfg)?;
        self.wait_ipv6_usable(cfg, Duration::from_secs(3))?;
        // 9. the relay of the emulated links
        self.start_relay(cfg, generation)
    }

    /// Start the relay process for the emulated links (none: no relay) and wait until it has
    /// opened every TAP device.
    fn start_relay(&self, cfg: &LabConfig, generation: u64) -> Result<Option<u32>> {
        use crate::emulate::relay::{read_ack, write_control, Control, ACK};
        use std::os::unix::process::CommandExt;
        let links = cfg.emulated_links();
        if links.is_empty() {
            return Ok(None);
        }
        std::fs::create_dir_all(&self.state_dir)?;
        let _ = std::fs::remove_file(self.state_dir.join(ACK));
        write_control(&self.state_dir, &Control { generation, links })?;
        let exe = match &cfg.relay_exe {
            Some(p) => p.clone(),
            None => std::env::current_exe().context("the relay's executable")?,
        };
        let log_path = self.state_dir.join("relay.log");
        let log = std::fs::File::create(&log_path)
            .with_context(|| format!("cannot create {}", log_path.display()))?;
        let mut cmd = std::process::Command::new(&exe);
        cmd.args(["lab", "relay", "--prefix", &self.prefix])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(log);
        // SAFETY: setsid is async-signal-safe: the relay outlives this command's session.
        unsafe {
            cmd.pre_exec(|| {
                libc::setsid();
                Ok(())
            });
        }
        let mut child = cmd
            .spawn()
            .with_context(|| format!("cannot start the relay `{}`", exe.display()))?;
        let pid = child.id();
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            if read_ack(&self.state_dir) == Some(generation) {
                break;
            }
            if let Some(status) = child.try_wait()? {
                let log = std::fs::read_to_string(&log_path).unwrap_or_default();
                bail!(
                    "the relay `{} lab relay --prefix {}` exited ({status}): {}",
                    exe.display(),
                    self.prefix,
                    log.trim().replace('\n', " ")
                );
            }
            if Instant::now() > deadline {
                crate::process::terminate(&[pid], Duration::from_secs(1));
                bail!("the relay did not open the TAP devices within 5 s");
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        // reap it when it ends (in a long-lived process such as a test)
        std::thread::spawn(move || child.wait());
        Ok(Some(pid))
    }

    /// Routes that disappear when a link goes down: (re)install them idempotently, for the
    /// families each link carries in `cfg` (module `family`).
    pub(crate) fn apply_routes(&self, cfg: &LabConfig) -> Result<()> {
        let up = |link: Link| -> Result<bool> {
            let out = run(ip(
                Some(&self.netns(link.edge().host)),
                &["-o", "link", "show", "dev", link.edge().iface],
            ))?;
            Ok(out.contains(",UP") || out.contains("<UP"))
        };
        for v6 in [false, true] {
            if v6 && !cfg.ipv6() {
                // no IPv6 in this lab: no IPv6 source rules left from an earlier `up`
                self.apply_client_routes(cfg, true, &|_| Ok(false))?;
                continue;
            }
            self.apply_client_routes(cfg, v6, &up)?;
        }
        let server_up = up(Link::Server)?;
        if server_up {
            let gw = Link::Server.router().addr.to_string();
            run(ip(
                Some(&self.netns(Host::Server)),
                &["route", "replace", "default", "via", &gw, "dev", "eth0"],
            ))?;
        }
        self.apply_server_route6(cfg, server_up)?;
        self.apply_lan_routes()
    }

    pub(crate) fn apply_rate(&self, link: Link, rate: Option<Rate>) -> Result<()> {
        for e in link.ends() {
            let ns = self.netns(e.host);
            match rate {
                Some(r) => {
                    // burst: 10 ms worth of data, at least 2 full-size frames' worth plus headroom
                    let burst = (r.bytes_per_sec() / 100).max(4 * 1514).to_string();
                    run(tc(
                        &ns,
                        &[
                            "qdisc",
                            "replace",
                            "dev",
                            e.iface,
                            "root",
                            "tbf",
                            "rate",
                            &format!("{}bit", r.bps()),
                            "burst",
                            &burst,
                            "latency",
                            "50ms",
                        ],
                    ))?;
                }
                None => run_tolerant(
                    tc(&ns, &["qdisc", "del", "dev", e.iface, "root"]),
                    &[
                        "Cannot delete qdisc with handle of zero",
                        "No such file",
                        "Invalid handle",
                    ],
                )?,
            }
        }
        Ok(())
    }
}
