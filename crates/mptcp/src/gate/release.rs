//! The release's decisions, sans-IO: what the peer said of joins ([`Peer`]), which paths the
//! recovery service takes care of ([`watched_paths`]), which subflows the userspace path
//! manager opens, to where, and which wait for an announcement or cannot join
//! ([`ReleasePlan`]), and what the in-kernel path manager's endpoints will do
//! ([`kernel_pm_release`], [`endpoint_notes`]). The driver ([`Gate::release_untrusted`])
//! reads the kernel and carries the plan out.
//!
//! [`Gate::release_untrusted`]: super::Gate::release_untrusted

use super::{GateMachine, Snapshot};
use crate::path::{join_target, LocalIface, ResolvedPolicy, Trust};
use crate::pm::{Endpoint, PmEvent};
use crate::recovery::{RecoveryConfig, RecoveryEvent, RecoveryMachine};
use crate::PmKind;
use serde::Serialize;
use std::net::{IpAddr, SocketAddr};

/// Result of [`Gate::release_untrusted`](super::Gate::release_untrusted).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ReleaseReport {
    /// Userspace PM: local addresses a subflow was requested from.
    pub created: Vec<IpAddr>,
    /// Userspace PM: local addresses whose SUBFLOW_CREATE failed, with the reason.
    pub failed: Vec<(IpAddr, String)>,
    /// Userspace PM: local addresses whose subflow the recovery service opens once the peer
    /// announces an address to join: it denies joins to the one it was reached at (the C
    /// flag) and had announced none at the release.
    pub awaiting: Vec<IpAddr>,
    /// In-kernel PM: the `subflow` endpoints (of the remote's family) the kernel opens
    /// subflows from, as listed when connecting; empty means the connection stays single-path.
    pub kernel_endpoints: Vec<IpAddr>,
}

/// What the peer said of joins to this connection, from the path-manager events the gate's
/// subscription read: the addresses it announced (`MPTCP_EVENT_ANNOUNCED`; a server's
/// ADD_ADDR arrives right after the handshake, before the first flight), whether it denies
/// joins to the initial address (the C flag, from the created or established event), and
/// the subflow events for the recovery service (joins may fail before it is registered).
#[derive(Debug, Clone, Default)]
pub struct Peer {
    pub announced: Vec<SocketAddr>,
    pub deny_initial: bool,
    early: Vec<RecoveryEvent>,
}

impl Peer {
    /// Keep what `events` say of the connection with local `token`.
    pub fn note(&mut self, token: u32, events: &[PmEvent]) {
        use crate::pm::{
            MPTCP_EVENT_ANNOUNCED, MPTCP_EVENT_CREATED, MPTCP_EVENT_ESTABLISHED,
            MPTCP_EVENT_SUB_CLOSED, MPTCP_EVENT_SUB_ESTABLISHED, MPTCP_PM_EV_FLAG_DENY_JOIN_ID0,
        };
        for e in events.iter().filter(|e| e.token == Some(token)) {
            match (e.kind, e.local, e.remote) {
                (MPTCP_EVENT_SUB_ESTABLISHED, Some(local), Some(remote)) => self
                    .early
                    .push(RecoveryEvent::SubflowEstablished { local, remote }),
                (MPTCP_EVENT_SUB_CLOSED, Some(local), _) => {
                    self.early.push(RecoveryEvent::SubflowClosed { local })
                }
                _ => {}
            }
            let denies = e
                .flags
                .is_some_and(|f| f & MPTCP_PM_EV_FLAG_DENY_JOIN_ID0 != 0);
            match e.kind {
                MPTCP_EVENT_ANNOUNCED => {
                    if let Some(a) = e.remote.filter(|a| !self.announced.contains(a)) {
                        self.announced.push(a);
                    }
                }
                MPTCP_EVENT_CREATED | MPTCP_EVENT_ESTABLISHED if denies => {
                    self.deny_initial = true;
                }
                _ => {}
            }
        }
    }

    /// Where the subflows nena opens to `remote`'s connection go: [`join_target`].
    pub fn join_target(&self, remote: SocketAddr) -> Option<SocketAddr> {
        join_target(remote, &self.announced, self.deny_initial)
    }

    /// The subflow events kept so far, for the recovery service, without the closes of
    /// the subflows nena `withdrawn` during the first flight (no failed joins).
    pub fn take_early(&mut self, withdrawn: &[SocketAddr]) -> Vec<RecoveryEvent> {
        self.early
            .drain(..)
            .filter(|e| {
                !matches!(e, RecoveryEvent::SubflowClosed { local } if withdrawn.contains(local))
            })
            .collect()
    }
}

/// The paths the recovery service takes care of at the release, and whether it recovers
/// them (`true`) or only watches their joins: the userspace PM's released paths (recovered
/// unless `recover` is off), the in-kernel PM's `subflow` endpoints (watched). Metered
/// without them (`metered`): the released paths, watched (the service meters).
pub fn watched_paths(
    machine: &GateMachine,
    recover: bool,
    kernel_endpoints: Option<&[Endpoint]>,
    metered: bool,
) -> Option<(Vec<IpAddr>, bool)> {
    let watched = match machine.pm() {
        // Without recovery nothing waits for an announcement or watches: as before.
        PmKind::Userspace => Some((machine.recovery_paths()?, true)).filter(|_| recover),
        PmKind::Kernel => kernel_endpoints.and_then(|eps| {
            let eps: Vec<IpAddr> = subflow_endpoints(eps).collect();
            (!eps.is_empty()).then_some((eps, false))
        }),
    };
    match watched {
        Some(w) => Some(w),
        None if metered => machine.recovery_paths().map(|p| (p, false)),
        None => None,
    }
}

/// Whether the recovery service meters this connection: with the userspace PM (per
/// connection, MP_PRIO by `SET_FLAGS`) and a metered path (`metered_addrs`) among the
/// policy's (the in-kernel PM's metered paths are the host's endpoint flags,
/// [`crate::metered::KernelMetered`]).
pub fn meters(machine: &GateMachine, metered_addrs: &[IpAddr]) -> bool {
    !metered_addrs.is_empty() && machine.pm() == PmKind::Userspace && !machine.is_fallback()
}

/// The `subflow` endpoints' addresses, link-local ones excepted.
fn subflow_endpoints(eps: &[Endpoint]) -> impl Iterator<Item = IpAddr> + '_ {
    eps.iter()
        .filter(|e| e.is_subflow())
        .filter_map(|e| e.addr)
        .filter(|a| !crate::path::is_link_local(*a))
}

/// What becomes of a group of local addresses at the release.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Joins {
    /// Ask the kernel for a subflow from each to the target; with an interface, only if a
    /// route to the target leaves by it (else: [`crate::path::no_route_to_announced`]).
    Open(Vec<(IpAddr, SocketAddr, Option<LocalIface>)>),
    /// The recovery service opens them once the peer announces an address.
    Awaiting(Vec<IpAddr>),
    /// They cannot join, and why.
    Failed(Vec<(IpAddr, String)>),
}

/// The userspace path manager's subflows at the release (the in-kernel PM opens its own).
#[derive(Debug, Clone)]
pub struct ReleasePlan {
    remote: SocketAddr,
    /// The addresses of the remote's family to open from (none in use already).
    pub open: Vec<IpAddr>,
    /// The policy's paths of the other family (an IPv6-only trusted link beside an
    /// IPv4-only untrusted one): they join the address the server announced in their
    /// family, if it announced one.
    pub cross: Vec<IpAddr>,
    cross_v4: bool,
    /// Where `cross` go.
    pub cross_target: Option<SocketAddr>,
    /// Where `open` go ([`Peer::join_target`]) as the release began.
    pub target: Option<SocketAddr>,
}

impl ReleasePlan {
    /// `open`: what the machine released; `snap`: the subflows in use.
    pub fn new(machine: &GateMachine, snap: &Snapshot, open: Vec<IpAddr>, peer: &Peer) -> Self {
        let remote = machine.remote();
        // An IPv4 connection on a dual-stack socket lists its subflows' addresses
        // IPv4-mapped: an address in use is one whichever way it is spelt.
        let used: Vec<IpAddr> = snap
            .subflows
            .iter()
            .filter_map(|s| s.local.map(|a| crate::path::canonical(a.ip())))
            .collect();
        let open = open
            .into_iter()
            .filter(|a| !used.contains(&crate::path::canonical(*a)))
            .collect();
        let cross = if machine.pm() == PmKind::Userspace {
            machine
                .policy()
                .other_family_sources(remote.ip())
                .into_iter()
                .filter(|a| !used.contains(a))
                .collect()
        } else {
            Vec::new()
        };
        let cross_v4 = !crate::path::is_ipv4(remote.ip());
        ReleasePlan {
            remote,
            open,
            cross,
            cross_v4,
            cross_target: crate::path::other_family_target(
                &peer.announced,
                cross_v4,
                remote.port(),
            ),
            target: peer.join_target(remote),
        }
    }

    /// The recovery service's machine of the `watched` paths (and the cross-family ones),
    /// the subflows open `now`.
    pub fn recovery_machine(
        &self,
        (mut paths, active): (Vec<IpAddr>, bool),
        now: &[(SocketAddr, SocketAddr)],
    ) -> RecoveryMachine {
        paths.extend(self.cross.iter().copied());
        let m = RecoveryMachine::new(self.remote, &paths, now, RecoveryConfig::default());
        let m = if active { m } else { m.watch_only() };
        let m = if self.target.is_some() {
            m
        } else {
            m.awaiting_announcement()
        };
        match self.cross_target {
            Some(t) => m.with_target(t),
            None => m,
        }
    }

    /// The subflows of the remote's family; `recovering`: the recovery service recovers
    /// this connection's paths (it opens them once an address is announced).
    pub fn joins(&self, recovering: bool) -> Joins {
        match (self.target, recovering) {
            (Some(target), _) => {
                if target != self.remote {
                    log::info!("joining {target}, the address the server announced");
                }
                Joins::Open(self.open.iter().map(|a| (*a, target, None)).collect())
            }
            (None, true) => {
                log::info!(
                    "the server denies joins to {} and has announced no other address yet: \
                     the untrusted subflows open when it does",
                    self.remote
                );
                Joins::Awaiting(self.open.clone())
            }
            (None, false) => {
                let why = format!(
                    "the server denies joins to {} and has announced no other address; \
                     without subflow recovery nena does not wait for one",
                    self.remote
                );
                log::warn!("no untrusted subflow: {why}");
                Joins::Failed(self.open.iter().map(|a| (*a, why.clone())).collect())
            }
        }
    }

    /// The subflows of the other family, once those of [`joins`](Self::joins) are in
    /// `report`. Said out loud only when it costs the connection its untrusted path: a
    /// dual-stack host whose untrusted link has the server's family too loses nothing.
    pub fn cross_joins(
        &self,
        policy: &ResolvedPolicy,
        report: &ReleaseReport,
        recovering: bool,
    ) -> Joins {
        let untrusted = |a: &IpAddr| !policy.classify(*a).is_trusted();
        let matters = self.cross.iter().any(untrusted)
            && !report.created.iter().chain(&report.awaiting).any(untrusted);
        let level = if matters {
            log::Level::Info
        } else {
            log::Level::Debug
        };
        let fam = crate::path::family_name(self.cross_v4);
        let list = self
            .cross
            .iter()
            .map(|a| a.to_string())
            .collect::<Vec<_>>()
            .join(", ");
        match (self.cross_target, recovering) {
            (Some(t), _) => {
                log::info!("joining {t}, the {fam} address the server announced, from {list}");
                Joins::Open(
                    self.cross
                        .iter()
                        .map(|a| (*a, t, policy.iface(*a).cloned()))
                        .collect(),
                )
            }
            (None, true) => {
                log::log!(
                    level,
                    "the server has announced no {fam} address yet, so the {fam} path(s) \
                     {list} cannot join this connection to {} now: they join when it \
                     announces one",
                    self.remote
                );
                Joins::Awaiting(self.cross.clone())
            }
            (None, false) => {
                let why = format!(
                    "the server announced no {fam} address, so the {fam} path(s) {list} \
                     cannot join this connection to {} (a subflow of another family than \
                     the connection's can only go to an address the server announces: a \
                     `signal` endpoint of that family on the server)",
                    self.remote
                );
                let level = if matters { log::Level::Warn } else { level };
                log::log!(level, "{why}");
                Joins::Failed(self.cross.iter().map(|a| (*a, why.clone())).collect())
            }
        }
    }
}

/// In-kernel PM at the release: the `subflow` endpoints (of the remote's family) the kernel
/// opens subflows from, and the warnings of what they (and the other family's) will do,
/// given the connection's subflows' local addresses `locals` and what `peer` announced.
pub fn kernel_pm_release(
    machine: &GateMachine,
    eps: &[Endpoint],
    peer: &Peer,
    locals: &[SocketAddr],
) -> (Vec<IpAddr>, Vec<String>) {
    let remote = machine.remote();
    let policy = machine.policy();
    let v4 = crate::path::is_ipv4(remote.ip());
    let same: Vec<IpAddr> = subflow_endpoints(eps)
        .filter(|a| crate::path::is_ipv4(*a) == v4)
        .collect();
    let other_eps: Vec<IpAddr> = subflow_endpoints(eps)
        .filter(|a| crate::path::is_ipv4(*a) != v4)
        .collect();
    let mut lines = endpoint_notes(eps, policy, v4);
    let other_subflow = locals.iter().any(|a| crate::path::is_ipv4(a.ip()) != v4);
    let other_sources: Vec<IpAddr> = policy
        .other_family_sources(remote.ip())
        .into_iter()
        .filter(|a| !policy.classify(*a).is_trusted())
        .collect();
    lines.extend(crate::path::kernel_pm_family_note(
        remote,
        &same,
        &other_eps,
        &other_sources,
        &peer.announced,
        other_subflow,
    ));
    (same, lines)
}

/// What the in-kernel path manager's `subflow` endpoints (of the remote's family) will do
/// that the user did not ask for, one line each: an endpoint whose address `--untrusted`
/// (or `--trusted`) does not name carries data all the same, and one without `dev` (or
/// with another interface than the one that holds its address) leaves by whatever
/// interface routing picks. Pure: for the release report and its tests.
pub fn endpoint_notes(eps: &[Endpoint], policy: &ResolvedPolicy, v4: bool) -> Vec<String> {
    let mut out = Vec::new();
    for e in eps.iter().filter(|e| e.is_subflow()) {
        let Some(addr) = e.addr.filter(|a| a.is_ipv4() == v4) else {
            continue;
        };
        let trust = policy.classify(addr);
        if trust == Trust::Unlisted {
            out.push(format!(
                "the in-kernel path manager's endpoint {addr} (id {}) is named by neither \
                 --trusted nor --untrusted, yet it will carry this connection's data (protected, \
                 after the first flight): name it with --untrusted {addr}, or remove it with \
                 `ip mptcp endpoint delete id {}`",
                e.id, e.id
            ));
            continue;
        }
        let want = policy.iface(addr);
        if e.ifindex <= 0 {
            out.push(format!(
                "the in-kernel path manager's endpoint {addr} (id {}) has no `dev`: routing, not \
                 nena, picks the interface its subflow leaves by; re-add it with `dev {}`",
                e.id,
                want.map_or("IFACE", |i| i.name.as_str())
            ));
        } else if let Some(w) = want.filter(|w| w.index as i32 != e.ifindex) {
            out.push(format!(
                "the in-kernel path manager's endpoint {addr} (id {}) is bound to interface index \
                 {}, not to {w} which holds the address: its subflow leaves by that other \
                 interface",
                e.id, e.ifindex
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ep(id: u8, addr: &str, ifindex: i32) -> Endpoint {
        Endpoint {
            id,
            addr: Some(addr.parse().unwrap()),
            port: 0,
            flags: crate::pm::MPTCP_PM_ADDR_FLAG_SUBFLOW,
            ifindex,
        }
    }

    /// Endpoints the user did not name, without `dev`, or on another interface than the
    /// one holding their address each get their line; a named, bound one gets none.
    #[test]
    fn endpoint_notes_name_what_the_user_did_not_ask_for() {
        let t: IpAddr = "198.18.1.2".parse().unwrap();
        let u: IpAddr = "198.18.2.2".parse().unwrap();
        let mut p = ResolvedPolicy::new([t].into(), [u].into()).unwrap();
        p.ifaces.insert(
            t,
            LocalIface {
                name: "trusted".into(),
                index: 2,
            },
        );
        p.ifaces.insert(
            u,
            LocalIface {
                name: "untrusted".into(),
                index: 3,
            },
        );
        assert!(endpoint_notes(&[ep(1, "198.18.2.2", 3)], &p, true).is_empty());
        let n = endpoint_notes(&[ep(1, "198.18.2.2", 0)], &p, true);
        assert_eq!(n.len(), 1);
        assert!(
            n[0].contains("has no `dev`") && n[0].contains("dev untrusted"),
            "{n:?}"
        );
        let n = endpoint_notes(&[ep(1, "198.18.2.2", 2)], &p, true);
        assert!(n[0].contains("not to `untrusted`"), "{n:?}");
        let n = endpoint_notes(&[ep(4, "198.18.9.2", 5)], &p, true);
        assert!(
            n[0].contains("neither --trusted nor --untrusted") && n[0].contains("id 4"),
            "{n:?}"
        );
        // another family, or a signal-only endpoint: nothing to say for this connection
        assert!(endpoint_notes(&[ep(4, "198.18.9.2", 5)], &p, false).is_empty());
        let mut sig = ep(4, "198.18.9.2", 5);
        sig.flags = 1;
        assert!(endpoint_notes(&[sig], &p, true).is_empty());
    }
}
