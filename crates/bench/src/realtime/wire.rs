//! Bytes on the wire of each subject of `nena bench realtime`, per link and direction,
//! counted at the client's end of the trusted and untrusted links: nftables counters in the
//! client host (table `inet nena_bench_rt`, output and input hooks, IP packet lengths, so
//! headers from IP up), one per subject, link and direction, each matching that subject's
//! packets only (the straight flows by their source address and the echo's port, the nena
//! subjects by their proxy server's port, TCP and UDP: the session and the datagram plane);
//! and, to show what none of them claims, the links' own totals from the client's
//! /proc/net/dev (Ethernet header taken off each frame).

use anyhow::{bail, Context, Result};
use nena_lab::{Host, Lab};
use serde::Serialize;
use std::collections::HashMap;
use std::io::Write;
use std::process::Stdio;

/// The counters' table in the client host.
pub const TABLE: &str = "nena_bench_rt";
/// The client links, by interface name, as the report names them.
pub const LINKS: [(&str, &str); 2] = [("trusted", "trusted"), ("untrusted", "wlan")];
/// Bytes of an Ethernet header, which /proc/net/dev counts and an IP packet's length not.
const ETHERNET: u64 = 14;

/// What picks a subject's packets out, beside the interface: `up` for the client's
/// outgoing packets, `down` for its incoming ones (nftables expressions).
#[derive(Debug, Clone)]
pub struct Matcher {
    /// The subject's name (the counters are `NAME_LINK_up` and `NAME_LINK_down`, with `-`
    /// as `_`).
    pub subject: String,
    pub up: String,
    pub down: String,
}

fn counter_name(subject: &str, link: &str, dir: &str) -> String {
    format!("{}_{link}_{dir}", subject.replace('-', "_"))
}

/// The ruleset: a named counter per subject, link and direction, and the rules that count
/// into them (nothing is dropped or changed).
pub fn ruleset(matchers: &[Matcher]) -> String {
    let mut counters = String::new();
    let (mut out, mut inp) = (String::new(), String::new());
    for m in matchers {
        for (iface, link) in LINKS {
            for (dir, expr, chain, key) in [
                ("up", &m.up, &mut out, "oifname"),
                ("down", &m.down, &mut inp, "iifname"),
            ] {
                let name = counter_name(&m.subject, link, dir);
                counters += &format!("  counter {name} {{ }}\n");
                *chain += &format!("    {key} \"{iface}\" {expr} counter name \"{name}\"\n");
            }
        }
    }
    format!(
        "table inet {TABLE} {{\n{counters}  chain out {{\n    type filter hook output priority 0; policy accept;\n{out}  }}\n  chain in {{\n    type filter hook input priority 0; policy accept;\n{inp}  }}\n}}\n"
    )
}

/// Install the counters in the client host.
pub fn install(lab: &Lab, matchers: &[Matcher]) -> Result<()> {
    let mut child = lab
        .command(Host::Client, "nft", ["-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("starting nft in the client host")?;
    child
        .stdin
        .take()
        .context("nft's input")?
        .write_all(ruleset(matchers).as_bytes())?;
    let out = child.wait_with_output()?;
    if !out.status.success() {
        bail!(
            "nft -f (the bench's counters): {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// Bytes per counter name, read now.
pub fn read_counters(lab: &Lab) -> Result<HashMap<String, u64>> {
    let out = lab
        .command(
            Host::Client,
            "nft",
            ["-j", "list", "counters", "table", "inet", TABLE],
        )
        .output()
        .context("nft list counters")?;
    if !out.status.success() {
        bail!(
            "nft list counters: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    parse_counters(&String::from_utf8_lossy(&out.stdout))
}

/// The counters of `nft -j list counters` output.
pub fn parse_counters(json: &str) -> Result<HashMap<String, u64>> {
    let v: serde_json::Value = serde_json::from_str(json).context("nft's JSON")?;
    let mut m = HashMap::new();
    for item in v["nftables"].as_array().context("no nftables array")? {
        let c = &item["counter"];
        if let (Some(name), Some(bytes)) = (c["name"].as_str(), c["bytes"].as_u64()) {
            m.insert(name.to_string(), bytes);
        }
    }
    Ok(m)
}

/// IP-level bytes of the client's links, up (sent) and down (received), read now from the
/// client's /proc/net/dev: (link name, up, down).
pub fn read_links(lab: &Lab) -> Result<Vec<(String, u64, u64)>> {
    let text = lab.run_in(Host::Client, || {
        std::fs::read_to_string("/proc/thread-self/net/dev")
    })??;
    link_totals(&text)
}

/// [`read_links`] on the text of /proc/net/dev.
pub fn link_totals(text: &str) -> Result<Vec<(String, u64, u64)>> {
    LINKS
        .iter()
        .map(|&(iface, link)| {
            let line = text
                .lines()
                .find(|l| l.trim_start().starts_with(&format!("{iface}:")))
                .with_context(|| format!("no {iface} in /proc/net/dev"))?;
            let f: Vec<u64> = line
                .split_once(':')
                .map(|(_, r)| r)
                .unwrap_or("")
                .split_whitespace()
                .map(|x| x.parse().unwrap_or(0))
                .collect();
            if f.len() < 10 {
                bail!("a short line for {iface} in /proc/net/dev: {line}");
            }
            // rx bytes, packets at 0, 1; tx bytes, packets at 8, 9.
            let down = f[0].saturating_sub(ETHERNET * f[1]);
            let up = f[8].saturating_sub(ETHERNET * f[9]);
            Ok((link.to_string(), up, down))
        })
        .collect()
}

/// One subject's bytes on the wire during a flow.
#[derive(Debug, Clone, Serialize, PartialEq, Default)]
pub struct Wire {
    pub trusted_up: u64,
    pub trusted_down: u64,
    pub wlan_up: u64,
    pub wlan_down: u64,
}

impl Wire {
    pub fn total(&self) -> u64 {
        self.trusted_up + self.trusted_down + self.wlan_up + self.wlan_down
    }

    /// The subject's bytes between two readings of the counters.
    pub fn between(
        subject: &str,
        before: &HashMap<String, u64>,
        after: &HashMap<String, u64>,
    ) -> Wire {
        let d = |link: &str, dir: &str| {
            let n = counter_name(subject, link, dir);
            after
                .get(&n)
                .copied()
                .unwrap_or(0)
                .saturating_sub(before.get(&n).copied().unwrap_or(0))
        };
        Wire {
            trusted_up: d("trusted", "up"),
            trusted_down: d("trusted", "down"),
            wlan_up: d("wlan", "up"),
            wlan_down: d("wlan", "down"),
        }
    }
}

/// A link's bytes in all during a flow, and what no subject's counter claims of them.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LinkTotal {
    pub link: String,
    pub up: u64,
    pub down: u64,
    /// up + down minus every subject's bytes on this link (ARP, a closing session, ...).
    pub unattributed: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matchers() -> Vec<Matcher> {
        vec![
            Matcher {
                subject: "straight-trusted".into(),
                up: "ip saddr 198.18.1.2 udp dport 7300".into(),
                down: "ip daddr 198.18.1.2 udp sport 7300".into(),
            },
            Matcher {
                subject: "gateway".into(),
                up: "meta l4proto { tcp, udp } th dport 7100".into(),
                down: "meta l4proto { tcp, udp } th sport 7100".into(),
            },
        ]
    }

    #[test]
    fn the_ruleset_counts_each_subject_link_and_direction() {
        let r = ruleset(&matchers());
        assert_eq!(r.matches("counter ").count(), 2 * 2 * 2 * 2, "{r}");
        assert!(r.contains(
            "oifname \"untrusted\" meta l4proto { tcp, udp } th dport 7100 counter name \"gateway_wlan_up\""
        ));
        assert!(r.contains(
            "iifname \"trusted\" ip daddr 198.18.1.2 udp sport 7300 counter name \"straight_trusted_trusted_down\""
        ));
        assert!(r.contains("counter straight_trusted_wlan_up { }"));
        assert!(!r.contains("drop"));
    }

    #[test]
    fn counters_and_link_totals_are_read_and_differenced() {
        let json = r#"{"nftables": [{"metainfo": {"version": "1.0.6"}},
            {"counter": {"family": "inet", "name": "gateway_trusted_up", "table": "nena_bench_rt", "handle": 1, "packets": 3, "bytes": 300}},
            {"counter": {"family": "inet", "name": "gateway_wlan_down", "table": "nena_bench_rt", "handle": 2, "packets": 1, "bytes": 80}}]}"#;
        let after = parse_counters(json).unwrap();
        let before: HashMap<String, u64> = [("gateway_trusted_up".to_string(), 100)].into();
        let w = Wire::between("gateway", &before, &after);
        assert_eq!(
            w,
            Wire {
                trusted_up: 200,
                trusted_down: 0,
                wlan_up: 0,
                wlan_down: 80
            }
        );
        assert_eq!(w.total(), 280);
        let dev = "Inter-|   Receive                                                |  Transmit\n face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n    lo:       0       0    0    0    0     0          0         0        0       0    0    0    0     0       0          0\n trusted:   1140      10    0    0    0     0          0         0     2280      20    0    0    0     0       0          0\nuntrusted:    0       0    0    0    0     0          0         0       74       1    0    0    0     0       0          0\n";
        let t = link_totals(dev).unwrap();
        assert_eq!(
            t,
            vec![
                ("trusted".to_string(), 2280 - 280, 1140 - 140),
                ("wlan".to_string(), 60, 0)
            ]
        );
        assert!(link_totals("lo: 1 2 3").is_err());
    }
}
