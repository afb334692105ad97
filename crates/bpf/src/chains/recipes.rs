//! Ready-made chains, for tests (and the `testing` feature), driven through
//! [`Policy::set_chain`](crate::Policy::set_chain), built in code rather than parsed.
//!
//! Holding an untrusted path back until the handshake is done:
//! ```no_run
//! # fn main() -> anyhow::Result<()> {
//! use nena_bpf::{chains::recipes, Hook, Policy};
//! let p = Policy::attach(&nena_bpf::chains::loader::default_pin_dir(), "untrusted")?;
//! p.set_chain("untrusted", Hook::Egress, Some(&recipes::hold_subflows("untrusted")))?;
//! // ... the first flight went over the trusted path and was acknowledged ...
//! p.set_chain("untrusted", Hook::Egress, None)?; // then MP_PRIO(B = 0) through the PM
//! # Ok(()) }
//! ```

use crate::chains::spec::{Actor, ChainSpec, Hook, LinkSpec, Prefix, Selector};

fn chain(name: &str, dev: &str, hook: Hook, links: Vec<LinkSpec>) -> ChainSpec {
    ChainSpec {
        name: name.into(),
        dev: dev.into(),
        hook,
        links,
        line: 0,
        tenant: None,
    }
}

/// Egress of an untrusted interface: every subflow that joins through it is born backup (the
/// B flag of its MP_JOIN SYN), and its pure ACKs carry MP_PRIO(B = 1), so the peer sends
/// nothing on it while the chain is there.
pub fn hold_subflows(dev: &str) -> ChainSpec {
    chain(
        "hold",
        dev,
        Hook::Egress,
        vec![LinkSpec::Act(Actor::SetBackup {
            backup: true,
            repeat: 3,
        })],
    )
}

/// Ingress of an interface: the peer's subflows through it are born backup for us (B flag of
/// the MP_JOIN SYN/ACK), so our scheduler sends nothing on them.
pub fn hold_own_sending(dev: &str) -> ChainSpec {
    chain(
        "hold-in",
        dev,
        Hook::Ingress,
        vec![LinkSpec::Act(Actor::SetBackup {
            backup: true,
            repeat: 3,
        })],
    )
}

/// Report the keys of new connections and the joins (both directions of `dev` need one chain
/// each: this is for `hook`).
pub fn report_handshakes(dev: &str, hook: Hook) -> ChainSpec {
    chain(
        "handshakes",
        dev,
        hook,
        vec![
            LinkSpec::Act(Actor::GetConnect),
            LinkSpec::Act(Actor::GetSubflow),
        ],
    )
}

/// Block the peer's address announcements arriving on `dev` (keep them for later).
pub fn block_announcements(dev: &str) -> ChainSpec {
    chain(
        "block-add-addr",
        dev,
        Hook::Ingress,
        vec![LinkSpec::Act(Actor::BlkSubflow)],
    )
}

/// Re-announce what [`block_announcements`] kept.
pub fn reannounce(dev: &str) -> ChainSpec {
    chain(
        "reannounce",
        dev,
        Hook::Ingress,
        vec![LinkSpec::Act(Actor::AddSubflow)],
    )
}

/// Cap the window of the subflows to/from `peer` seen at `hook` of `dev` at `window` bytes.
pub fn cap_window(dev: &str, hook: Hook, peer: Prefix, window: u32) -> ChainSpec {
    let sel = match hook {
        Hook::Ingress => Selector::Src(peer),
        Hook::Egress => Selector::Dst(peer),
    };
    chain(
        "cap-window",
        dev,
        hook,
        vec![
            LinkSpec::Select {
                sel,
                or: false,
                not: false,
            },
            LinkSpec::Act(Actor::RateLimit { window }),
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recipes_are_valid_chains() {
        for c in [
            hold_subflows("u"),
            hold_own_sending("u"),
            report_handshakes("u", Hook::Ingress),
            block_announcements("u"),
            reannounce("u"),
            cap_window("u", Hook::Ingress, "198.18.3.0/24".parse().unwrap(), 20000),
        ] {
            // what the file format would say parses back to the same chain
            let again = crate::chains::spec::parse(&c.to_string()).unwrap();
            assert_eq!(again.chains[0].links, c.links, "{c}");
            assert!(c.name.len() <= 23);
        }
        let c = cap_window("u", Hook::Egress, "198.18.3.2".parse().unwrap(), 1).to_abi(1);
        assert_eq!(c.len, 2);
        assert_eq!(c.links[0].new_rule, 1);
    }
}
