//! What the router does to the untrusted link's traffic as a WLAN's own box would
//! (`nena lab up --untrusted-nat`, `--untrusted-strip-mptcp`), each an nftables table of its
//! own (family `inet`: IPv4 and IPv6 alike) on the router, loaded with `nft -f` in one
//! transaction and deleted when an `up` no longer asks for it (the namespace takes it with it
//! on `down`):
//!
//! * [`NAT_TABLE`]: source NAT (`masquerade`) of what arrives from the untrusted link and
//!   leaves towards the server, so the server sees the router's `198.18.3.1` (or
//!   `2001:2:0:3::1`) as the source of the untrusted subflow.
//! * [`STRIP_TABLE`]: every TCP option of kind 30 (MPTCP) in a segment forwarded from or to
//!   the untrusted link is replaced by NOPs (`reset tcp option mptcp`; the kernel keeps the
//!   TCP checksum right), both ways, as hotel and captive-portal middleboxes do.

use crate::run::run;
use crate::{Host, Lab, LabConfig, Link, NAT_TABLE, STRIP_TABLE};
use anyhow::{Context, Result};

/// The NAT table's ruleset (replaces the whole table in one transaction).
pub(crate) fn nat_ruleset() -> String {
    let (u, s) = (Link::Untrusted.router().iface, Link::Server.router().iface);
    format!(
        "add table inet {NAT_TABLE}\nflush table inet {NAT_TABLE}\ntable inet {NAT_TABLE} {{\n  \
         chain postrouting {{\n    type nat hook postrouting priority srcnat; policy accept;\n    \
         iifname \"{u}\" oifname \"{s}\" masquerade\n  }}\n}}\n"
    )
}

/// The stripping table's ruleset.
pub(crate) fn strip_ruleset() -> String {
    let u = Link::Untrusted.router().iface;
    format!(
        "add table inet {STRIP_TABLE}\nflush table inet {STRIP_TABLE}\ntable inet {STRIP_TABLE} {{\n  \
         chain forward {{\n    type filter hook forward priority mangle; policy accept;\n    \
         iifname \"{u}\" tcp option mptcp exists reset tcp option mptcp\n    \
         oifname \"{u}\" tcp option mptcp exists reset tcp option mptcp\n  }}\n}}\n"
    )
}

impl Lab {
    /// Load (`want`) or delete one of the router's tables.
    fn router_table(&self, table: &str, want: Option<String>, what: &str) -> Result<()> {
        match want {
            Some(rules) => {
                std::fs::create_dir_all(&self.state_dir)?;
                let file = self.state_dir.join(format!("{table}.nft"));
                std::fs::write(&file, rules)
                    .with_context(|| format!("cannot write {}", file.display()))?;
                run(self.command(Host::Router, "nft", ["-f".as_ref(), file.as_os_str()]))
                    .with_context(|| {
                        format!("loading the {what} rules on the router (is `nftables` installed?)")
                    })?;
            }
            None => {
                if self.router_has_table(table) {
                    run(self.command(Host::Router, "nft", ["delete", "table", "inet", table]))
                        .with_context(|| format!("removing the {what} rules from the router"))?;
                }
            }
        }
        Ok(())
    }

    /// Whether the router has the nftables table `inet TABLE` (false when the router or
    /// `nft` is missing).
    pub(crate) fn router_has_table(&self, table: &str) -> bool {
        self.command(Host::Router, "nft", ["list", "table", "inet", table])
            .output()
            .is_ok_and(|o| o.status.success())
    }

    /// The untrusted link's NAT and MPTCP-option stripping as `cfg` asks (each removed when
    /// not asked for).
    pub(crate) fn build_middleboxes(&self, cfg: &LabConfig) -> Result<()> {
        self.router_table(
            NAT_TABLE,
            cfg.untrusted_nat.then(nat_ruleset),
            "untrusted link's NAT",
        )?;
        self.router_table(
            STRIP_TABLE,
            cfg.untrusted_strip_mptcp.then(strip_ruleset),
            "untrusted link's MPTCP-option stripping",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nat_masquerades_what_goes_from_the_untrusted_link_to_the_server() {
        let r = nat_ruleset();
        assert!(r.contains("table inet nena_lab_nat"), "{r}");
        assert!(
            r.contains("iifname \"untrusted\" oifname \"server\" masquerade"),
            "{r}"
        );
        assert!(
            r.starts_with("add table inet nena_lab_nat\nflush table"),
            "{r}"
        );
    }

    #[test]
    fn stripping_resets_option_30_both_ways_on_the_untrusted_link() {
        let r = strip_ruleset();
        assert!(r.contains("table inet nena_lab_strip"), "{r}");
        for dir in ["iifname", "oifname"] {
            assert!(
                r.contains(&format!(
                    "{dir} \"untrusted\" tcp option mptcp exists reset tcp option mptcp"
                )),
                "{r}"
            );
        }
    }
}
