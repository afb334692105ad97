//! The gateway's kill switch: a table of its own that keeps a LAN cut off from the first
//! start of `nena gateway` until an operator opens it (`nena gateway open --lan IFACE`, or
//! the package's removal), through every stop, restart, failed start, panic and SIGKILL.
//! WireGuard and Mullvad call the same thing lockdown mode.
//!
//! ```text
//! table inet nena_killswitch
//!   set lans          (type ifname): the LAN interfaces the switch holds
//!   chain forward     (filter hook forward, priority filter - 20)
//!     in or out of a LAN interface: dropped
//!   chain input       (filter hook input, priority filter - 20)
//!     from a LAN interface, UDP or TCP to port 53, not marked by the carrying table: dropped
//! ```
//!
//! The carrying table ([`super::nft`], `inet nena_gateway`) is the gateway's own: it is
//! replaced at each start and removed when the gateway stops. This one is never removed by
//! the gateway, whatever ends it: only [`open`] removes an interface (and the table with
//! its last one). [`lock`] only adds (`add` is a no-op for what exists; it never flushes,
//! never deletes and recreates), in one `nft -f` transaction, so a lock run while another
//! holds the switch changes nothing of what is in force.
//!
//! Interfaces are matched by name, so the switch holds for an interface that does not
//! exist yet (`nena gateway lock` at boot, before the network is up).
//!
//! The input rule is for a resolver on the gateway host itself (dnsmasq on a router):
//! with the carrying table gone, a LAN host's query to the router's address would reach
//! that resolver, which asks its upstream by the host's routes, the WLAN included. A query
//! the carrying table sends to the gateway's DNS answerer (TPROXY) carries the gateway's
//! mark ([`super::nft::MARK`]) through the input hook and passes. Other services of the
//! host (DHCP, SSH, neighbour discovery) are left alone: they do not forward the LAN's
//! traffic.

use super::host::run;
use super::nft::{check_iface, MARK};
use anyhow::{anyhow, Context, Result};
use std::fmt::Write;

/// The table's name (in family `inet`).
pub const TABLE: &str = "nena_killswitch";

/// The rules of the switch, each with the comment that identifies it: a rule is added
/// when no rule with its comment is there, so locking twice does not double it.
fn rules() -> Vec<(&'static str, &'static str, String)> {
    let mark = format!("{MARK:#010x}");
    vec![
        (
            "forward",
            "nena killswitch: from the LAN",
            "iifname @lans counter drop".to_string(),
        ),
        (
            "forward",
            "nena killswitch: to the LAN",
            "oifname @lans counter drop".to_string(),
        ),
        (
            "input",
            "nena killswitch: LAN DNS to this host over UDP",
            format!("iifname @lans meta mark != {mark} udp dport 53 counter drop"),
        ),
        (
            "input",
            "nena killswitch: LAN DNS to this host over TCP",
            format!("iifname @lans meta mark != {mark} tcp dport 53 counter drop"),
        ),
    ]
}

/// The transaction that closes the switch for `lan`, given the table as it is now
/// (`current`: `nft list table` of it, empty when there is none): the table, set and
/// chains added (a no-op for those that exist), the rules `current` lacks, the interfaces.
pub fn lock_text(lan: &[String], current: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "add table inet {TABLE}");
    let _ = writeln!(s, "add set inet {TABLE} lans {{ type ifname; }}");
    for chain in ["forward", "input"] {
        let _ = writeln!(
            s,
            "add chain inet {TABLE} {chain} {{ type filter hook {chain} priority filter - 20; policy accept; }}"
        );
    }
    for (chain, comment, rule) in rules() {
        if !current.contains(&format!("comment \"{comment}\"")) {
            let _ = writeln!(
                s,
                "add rule inet {TABLE} {chain} {rule} comment \"{comment}\""
            );
        }
    }
    let names: Vec<String> = lan.iter().map(|n| format!("\"{n}\"")).collect();
    let _ = writeln!(
        s,
        "add element inet {TABLE} lans {{ {} }}",
        names.join(", ")
    );
    s
}

/// The table as the kernel has it (`nft list table`), or None when there is none.
pub fn listing() -> Option<String> {
    run("nft", &["list", "table", "inet", TABLE], None).ok()
}

/// The interfaces the switch holds (none when the table is not there).
pub fn locked() -> Vec<String> {
    listing().map(|l| parse_elements(&l)).unwrap_or_default()
}

/// The switch's state for `lan`, for `nena status`: closed for every LAN interface (its
/// rules all in place), or which are open and why.
pub fn state(lan: &[String]) -> String {
    state_of(lan, listing().as_deref())
}

/// [`state`] from a listing of the table (`None`: no table).
pub fn state_of(lan: &[String], listing: Option<&str>) -> String {
    let Some(listing) = listing else {
        return "OPEN: no kill switch table (nft list table inet nena_killswitch)".into();
    };
    let held = parse_elements(listing);
    let open: Vec<&String> = lan.iter().filter(|l| !held.contains(l)).collect();
    let missing: Vec<&str> = rules()
        .iter()
        .filter(|(_, comment, _)| !listing.contains(&format!("comment \"{comment}\"")))
        .map(|(_, comment, _)| *comment)
        .collect();
    if !missing.is_empty() {
        return format!("OPEN: rules missing from the table: {}", missing.join("; "));
    }
    if !open.is_empty() {
        let names: Vec<&str> = open.iter().map(|s| s.as_str()).collect();
        return format!("OPEN for {}: not in the switch's set", names.join(", "));
    }
    format!(
        "closed for {}: the LAN reaches nothing but nena, also when nena stops (`nena gateway \
         open` ends it)",
        lan.join(", ")
    )
}

/// The elements of the `lans` set in a listing: `elements = { "lan", "lan2" }`.
fn parse_elements(listing: &str) -> Vec<String> {
    let Some(at) = listing.find("elements = {") else {
        return Vec::new();
    };
    let rest = &listing[at + "elements = {".len()..];
    let body = &rest[..rest.find('}').unwrap_or(rest.len())];
    body.split(',')
        .map(|e| e.trim().trim_matches('"').to_string())
        .filter(|e| !e.is_empty())
        .collect()
}

/// Closes the switch for `lan` (adds them to the set, and the table if it is not there).
pub fn lock(lan: &[String]) -> Result<()> {
    if lan.is_empty() {
        return Err(anyhow!("no LAN interface to lock: give --lan IFACE"));
    }
    for name in lan {
        check_iface(name).map_err(|e| anyhow!("--lan {name}: {e}"))?;
    }
    let current = listing().unwrap_or_default();
    run("nft", &["-f", "-"], Some(&lock_text(lan, &current)))
        .context("closing the gateway's kill switch (nftables)")?;
    Ok(())
}

/// What [`open`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Opened {
    /// The interfaces taken out of the switch.
    pub opened: Vec<String>,
    /// The interfaces it still holds (the table is gone when this is empty).
    pub still_locked: Vec<String>,
}

/// Opens the switch for `lan` (None: for every interface): removes them from the set, and
/// the table once the set is empty. Interfaces the switch does not hold are no error.
pub fn open(lan: Option<&[String]>) -> Result<Opened> {
    let held = locked();
    let opened: Vec<String> = match lan {
        Some(names) => {
            for name in names {
                check_iface(name).map_err(|e| anyhow!("--lan {name}: {e}"))?;
            }
            held.iter().filter(|h| names.contains(h)).cloned().collect()
        }
        None => held.clone(),
    };
    let still_locked: Vec<String> = held
        .iter()
        .filter(|h| !opened.contains(h))
        .cloned()
        .collect();
    let text = if still_locked.is_empty() {
        // `add` first: deleting a table that is not there would fail the transaction.
        format!("add table inet {TABLE}\ndelete table inet {TABLE}\n")
    } else {
        let names: Vec<String> = opened.iter().map(|n| format!("\"{n}\"")).collect();
        if names.is_empty() {
            return Ok(Opened {
                opened,
                still_locked,
            });
        }
        format!(
            "delete element inet {TABLE} lans {{ {} }}\n",
            names.join(", ")
        )
    };
    run("nft", &["-f", "-"], Some(&text)).context("opening the gateway's kill switch")?;
    Ok(Opened {
        opened,
        still_locked,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_switch_is_added_never_flushed_and_its_rules_not_doubled() {
        let lan = vec!["lan".to_string(), "lan2".to_string()];
        let first = lock_text(&lan, "");
        assert!(first.starts_with("add table inet nena_killswitch\n"));
        for word in ["flush", "delete", "destroy", "replace", "reset"] {
            assert!(!first.contains(word), "{word} in {first}");
        }
        assert!(first.contains("priority filter - 20"));
        assert!(first
            .contains("add rule inet nena_killswitch forward iifname @lans counter drop comment"));
        assert!(first.contains("oifname @lans counter drop"));
        assert!(first.contains("meta mark != 0x6e670001 udp dport 53 counter drop"));
        assert!(first.contains("meta mark != 0x6e670001 tcp dport 53 counter drop"));
        assert!(first.ends_with("add element inet nena_killswitch lans { \"lan\", \"lan2\" }\n"));
        // Once the rules are there, a second lock adds the interfaces only.
        let listing: String = rules()
            .iter()
            .map(|(_, c, r)| format!("    {r} comment \"{c}\"\n"))
            .collect();
        let again = lock_text(&lan, &listing);
        assert!(!again.contains("add rule"), "{again}");
        assert!(again.contains("add element"));
    }

    #[test]
    fn the_set_elements_are_read_from_a_listing() {
        let l = "table inet nena_killswitch {\n\tset lans {\n\t\ttype ifname\n\t\telements = { \"lan\", \"lan2\" }\n\t}\n}";
        assert_eq!(parse_elements(l), vec!["lan", "lan2"]);
        assert!(parse_elements(
            "table inet nena_killswitch {\n\tset lans {\n\t\ttype ifname\n\t}\n}"
        )
        .is_empty());
    }

    /// The state names the switch closed only with every rule and every LAN interface in
    /// place, and says what is missing otherwise.
    #[test]
    fn the_state_is_closed_only_with_every_rule_and_interface() {
        let lan = vec!["lan".to_string()];
        let rules_text: String = rules()
            .iter()
            .map(|(_, c, r)| format!("    {r} comment \"{c}\"\n"))
            .collect();
        let set = "elements = { \"lan\" }\n";
        let full = format!("{set}{rules_text}");
        assert!(state_of(&lan, Some(&full)).starts_with("closed for lan"));
        assert!(state_of(&lan, None).starts_with("OPEN: no kill switch"));
        assert!(state_of(&lan, Some(&rules_text)).starts_with("OPEN for lan"));
        let one_rule_less: String = full.lines().take(2).collect::<Vec<_>>().join("\n");
        assert!(state_of(&lan, Some(&one_rule_less)).starts_with("OPEN: rules missing"));
    }
}
