//! Metered paths as a sans-IO state machine: [`MeteredMachine`] decides, for one released
//! connection of the userspace path manager, whether the subflows of its metered paths
//! (`--metered IFACE`) are backup (MP_PRIO) or carry data like the others. It is fed the
//! subflows' comings and goings, the links' state and the other paths' progress, and
//! answers with [`MeteredCommand`]s; it does no I/O and reads no clock.
//!
//! The rule: a metered subflow is backup exactly while another path *carries*: a subflow
//! of a non-metered path is established, its link is usable, and it has not stalled. So
//! * at the release the metered (trusted) subflow stays as it is until the first
//!   non-metered subflow is established, then it becomes backup: the handshake and the
//!   first flight crossed it before (the gate's order is untouched), and a non-metered path
//!   that never joins (a WLAN that strips MPTCP's options) leaves it carrying everything;
//! * when the last carrying path goes (its link down, its subflow closed, or no progress
//!   while data waits: [`MeteredEvent::Stalled`]) the metered subflows are made regular at
//!   once, on both ends (MP_PRIO reaches the peer's scheduler too), and the switch is noted
//!   ([`MeteredMachine::take_switches`]); when it went with its link, its subflows are also
//!   withdrawn ([`MeteredCommand::Withdraw`]): what they had in flight is sent again on the
//!   metered path at once, by both ends, instead of after MPTCP's retransmission timer,
//!   which waits for a subflow with nothing in flight (measured in `nena bench metered`:
//!   an upload's bytes stopped for up to 1.4 s without it);
//! * a subflow that went through its link's outage does not carry again until it shows
//!   progress ([`MeteredEvent::Progress`]) or a new subflow of its path is established:
//!   after the link's return TCP's retransmission backoff keeps it silent for up to
//!   seconds, and making the metered path backup again before then would stall the
//!   connection;
//! * a new subflow of a metered path is born backup while another path carries
//!   ([`MeteredMachine::backup_for_new`], the B flag of its MP_JOIN), and one established
//!   otherwise is set to what the rule says.

use crate::path::{canonical as canon, same_addr as same};
use std::net::{IpAddr, SocketAddr};

/// What the machine is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MeteredEvent {
    /// `MPTCP_EVENT_SUB_ESTABLISHED` of this connection, with its backup flag as the event
    /// says (the B flag of its MP_JOIN, or the local request).
    SubflowEstablished {
        local: SocketAddr,
        remote: SocketAddr,
        backup: bool,
    },
    /// `MPTCP_EVENT_SUB_CLOSED` of this connection.
    SubflowClosed { local: SocketAddr },
    /// The local address is gone or its interface is down / has no carrier.
    LinkDown { addr: IpAddr },
    /// The local address is usable again (its old subflows still count as not carrying).
    LinkUp { addr: IpAddr },
    /// The subflow from `local` has had data waiting without any acknowledged for longer
    /// than the stall bound (the driver's reading of its TCP state).
    Stalled { local: SocketAddr },
    /// The subflow from `local` had data acknowledged, or received data, since the last
    /// look.
    Progress { local: SocketAddr },
    /// The connection closed: the machine answers nothing any more.
    ConnectionClosed,
}

/// What the driver must do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MeteredCommand {
    /// `MPTCP_PM_CMD_SET_FLAGS` of the subflow `local` -> `remote`: backup or not (MP_PRIO
    /// to the peer).
    SetBackup {
        local: SocketAddr,
        remote: SocketAddr,
        backup: bool,
    },
    /// The subflow `local` -> `remote` lost its link: tell the peer its address is gone
    /// (`MPTCP_PM_CMD_REMOVE`, RM_ADDR on a usable subflow: the peer closes its end and
    /// sends again what it had in flight on it) and close it here (`SUBFLOW_DESTROY`: this
    /// end sends again what it had in flight on it), so that both directions move to the
    /// metered path at once instead of after the retransmission timers.
    Withdraw {
        local: SocketAddr,
        remote: SocketAddr,
    },
}

/// A switch of the metered paths, for the log: they became backup (`backup`) or carry data
/// again, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Switch {
    pub backup: bool,
    pub why: String,
}

#[derive(Debug, Clone)]
struct Sub {
    local: SocketAddr,
    remote: SocketAddr,
    metered: bool,
    /// What nena last set, or what the kernel reported.
    backup: bool,
    /// A non-metered subflow that can carry: not through an outage since, not stalled.
    fresh: bool,
}

/// The metered-path decisions of one connection (see the module documentation).
#[derive(Debug, Clone)]
pub struct MeteredMachine {
    metered: Vec<IpAddr>,
    subs: Vec<Sub>,
    down: Vec<IpAddr>,
    /// The metered subflows are (to be) backup.
    saving: bool,
    switches: Vec<Switch>,
    closed: bool,
}

impl MeteredMachine {
    /// A machine for a connection whose metered local addresses are `metered`, with the
    /// subflows (local, remote, backup) open now. Every link counts as up until told
    /// otherwise; the subflows open now count as carrying.
    pub fn new(metered: &[IpAddr], open: &[(SocketAddr, SocketAddr, bool)]) -> Self {
        let mut m = MeteredMachine {
            metered: metered.iter().map(|a| canon(*a)).collect(),
            subs: Vec::new(),
            down: Vec::new(),
            saving: false,
            switches: Vec::new(),
            closed: false,
        };
        for &(local, remote, backup) in open {
            let metered = m.is_metered(local.ip());
            m.subs.push(Sub {
                local,
                remote,
                metered,
                backup,
                fresh: true,
            });
        }
        m.saving = m.carrier().is_some();
        m
    }

    /// The commands that bring the subflows open at the start in line with the rule (a
    /// metered subflow open beside a carrying one); for the driver, once, at the start.
    pub fn start(&mut self) -> Vec<MeteredCommand> {
        self.settle(None)
    }

    /// The local address is on a metered path.
    pub fn is_metered(&self, addr: IpAddr) -> bool {
        self.metered.contains(&canon(addr))
    }

    /// The metered subflows are backup now (another path carries).
    pub fn saving(&self) -> bool {
        self.saving
    }

    /// Whether a new subflow from `local` is to be opened as backup (its MP_JOIN's B
    /// flag): a metered path's while another path carries.
    pub fn backup_for_new(&self, local: IpAddr) -> bool {
        self.is_metered(local) && self.saving
    }

    /// The connection closed.
    pub fn is_done(&self) -> bool {
        self.closed
    }

    /// The subflows the driver watches for progress: the non-metered ones, (local, remote).
    pub fn watched(&self) -> Vec<(SocketAddr, SocketAddr)> {
        self.subs
            .iter()
            .filter(|s| !s.metered)
            .map(|s| (s.local, s.remote))
            .collect()
    }

    /// The switches not taken yet, oldest first.
    pub fn take_switches(&mut self) -> Vec<Switch> {
        std::mem::take(&mut self.switches)
    }

    /// The first non-metered subflow that carries, if any.
    fn carrier(&self) -> Option<&Sub> {
        self.subs
            .iter()
            .find(|s| !s.metered && s.fresh && !self.down.contains(&canon(s.local.ip())))
    }

    fn sub_mut(&mut self, local: SocketAddr) -> Option<&mut Sub> {
        self.subs.iter_mut().find(|s| same(s.local, local))
    }

    /// Feed one event.
    pub fn on_event(&mut self, ev: MeteredEvent) -> Vec<MeteredCommand> {
        if self.closed {
            return Vec::new();
        }
        let mut why_off = None;
        match ev {
            MeteredEvent::ConnectionClosed => {
                self.closed = true;
                return Vec::new();
            }
            MeteredEvent::SubflowEstablished {
                local,
                remote,
                backup,
            } => match self.sub_mut(local) {
                // Seen before (its event read twice): only the flag is news.
                Some(s) => s.backup = backup,
                None => {
                    let metered = self.is_metered(local.ip());
                    self.subs.push(Sub {
                        local,
                        remote,
                        metered,
                        backup,
                        fresh: true,
                    });
                }
            },
            MeteredEvent::SubflowClosed { local } => {
                if let Some(s) = self.subs.iter().find(|s| same(s.local, local)) {
                    if !s.metered {
                        why_off = Some(format!("its subflow from {} closed", s.local.ip()));
                    }
                }
                self.subs.retain(|s| !same(s.local, local));
            }
            MeteredEvent::LinkDown { addr } => {
                let addr = canon(addr);
                if !self.down.contains(&addr) {
                    self.down.push(addr);
                }
                for s in self.subs.iter_mut().filter(|s| canon(s.local.ip()) == addr) {
                    s.fresh = false;
                }
                if !self.is_metered(addr) {
                    let gone: Vec<MeteredCommand> = self
                        .subs
                        .iter()
                        .filter(|s| canon(s.local.ip()) == addr)
                        .map(|s| MeteredCommand::Withdraw {
                            local: s.local,
                            remote: s.remote,
                        })
                        .collect();
                    // Switched first, then the lost subflows withdrawn; while another path
                    // still carries, the kernel moves their data by itself.
                    let mut out = self.settle(Some(format!("the link of {addr} is down")));
                    if !self.saving {
                        out.extend(gone);
                    }
                    return out;
                }
            }
            MeteredEvent::LinkUp { addr } => {
                let addr = canon(addr);
                self.down.retain(|&a| a != addr);
            }
            MeteredEvent::Stalled { local } => {
                if let Some(s) = self.sub_mut(local) {
                    if !s.metered && s.fresh {
                        s.fresh = false;
                        why_off = Some(format!(
                            "its subflow from {} stopped making progress",
                            local.ip()
                        ));
                    }
                }
            }
            MeteredEvent::Progress { local } => {
                let down = self.down.contains(&canon(local.ip()));
                if let Some(s) = self.sub_mut(local) {
                    if !down {
                        s.fresh = true;
                    }
                }
            }
        }
        self.settle(why_off)
    }

    /// Apply the rule: switch if the carrying changed, and set every metered subflow whose
    /// flag differs from it.
    fn settle(&mut self, why_off: Option<String>) -> Vec<MeteredCommand> {
        let carrier = self.carrier().map(|s| s.local.ip());
        let saving = carrier.is_some();
        if saving != self.saving {
            self.saving = saving;
            let why = match carrier {
                Some(a) => format!("the path of {a} carries the data"),
                None => format!(
                    "no other path carries ({})",
                    why_off.unwrap_or_else(|| "none is established".into())
                ),
            };
            // A switch is worth a line only when a metered subflow is there to change.
            if self.subs.iter().any(|s| s.metered) {
                self.switches.push(Switch {
                    backup: saving,
                    why,
                });
            }
        }
        let mut out = Vec::new();
        for s in self.subs.iter_mut().filter(|s| s.metered) {
            if s.backup != saving {
                s.backup = saving;
                out.push(MeteredCommand::SetBackup {
                    local: s.local,
                    remote: s.remote,
                    backup: saving,
                });
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: &str = "198.18.1.2:40000";
    const U: &str = "198.18.2.2:40001";
    const U2: &str = "198.18.2.2:40002";
    const R: &str = "198.18.3.2:7000";

    fn sa(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }
    fn ip(s: &str) -> IpAddr {
        sa(s).ip()
    }
    fn set(local: &str, backup: bool) -> MeteredCommand {
        MeteredCommand::SetBackup {
            local: sa(local),
            remote: sa(R),
            backup,
        }
    }
    fn est(local: &str, backup: bool) -> MeteredEvent {
        MeteredEvent::SubflowEstablished {
            local: sa(local),
            remote: sa(R),
            backup,
        }
    }
    /// A released connection whose trusted (metered) subflow is the only one.
    fn trusted_metered() -> MeteredMachine {
        MeteredMachine::new(&[ip(T)], &[(sa(T), sa(R), false)])
    }

    #[test]
    fn metered_becomes_backup_once_another_path_is_established_not_before() {
        let mut m = trusted_metered();
        assert!(!m.saving());
        assert!(!m.backup_for_new(ip(T)));
        // the untrusted join is on its way: nothing changes until it is established
        assert_eq!(m.on_event(MeteredEvent::LinkUp { addr: ip(U) }), vec![]);
        assert_eq!(m.on_event(est(U, false)), vec![set(T, true)]);
        assert!(m.saving());
        let sw = m.take_switches();
        assert_eq!(sw.len(), 1);
        assert!(sw[0].backup && sw[0].why.contains("198.18.2.2"), "{sw:?}");
        assert!(m.take_switches().is_empty());
        // said once: a second established event changes nothing
        assert_eq!(m.on_event(est(U, false)), vec![]);
    }

    #[test]
    fn the_other_link_down_makes_the_metered_path_carry_at_once_and_its_new_subflow_ends_that() {
        let mut m = trusted_metered();
        m.on_event(est(U, false));
        m.take_switches();
        assert_eq!(
            m.on_event(MeteredEvent::LinkDown { addr: ip(U) }),
            vec![
                set(T, false),
                MeteredCommand::Withdraw {
                    local: sa(U),
                    remote: sa(R)
                }
            ]
        );
        let sw = m.take_switches();
        assert!(!sw[0].backup && sw[0].why.contains("down"), "{sw:?}");
        // the link's return alone is not enough: its old subflow sits in TCP's backoff
        assert_eq!(m.on_event(MeteredEvent::LinkUp { addr: ip(U) }), vec![]);
        assert!(!m.saving());
        // a new subflow of the path (the recovery's) is
        assert_eq!(m.on_event(est(U2, false)), vec![set(T, true)]);
        // the stale one's close later changes nothing: the new one carries
        assert_eq!(
            m.on_event(MeteredEvent::SubflowClosed { local: sa(U) }),
            vec![]
        );
        assert!(m.saving());
    }

    #[test]
    fn progress_of_the_old_subflow_after_the_return_counts_too_but_not_while_down() {
        let mut m = trusted_metered();
        m.on_event(est(U, false));
        m.on_event(MeteredEvent::LinkDown { addr: ip(U) });
        assert_eq!(m.on_event(MeteredEvent::Progress { local: sa(U) }), vec![]);
        m.on_event(MeteredEvent::LinkUp { addr: ip(U) });
        assert_eq!(
            m.on_event(MeteredEvent::Progress { local: sa(U) }),
            vec![set(T, true)]
        );
    }

    #[test]
    fn a_stall_or_the_last_close_of_the_other_path_makes_it_carry() {
        let mut m = trusted_metered();
        m.on_event(est(U, false));
        assert_eq!(
            m.on_event(MeteredEvent::Stalled { local: sa(U) }),
            vec![set(T, false)]
        );
        assert!(m.take_switches().last().unwrap().why.contains("progress"));
        assert_eq!(
            m.on_event(MeteredEvent::Progress { local: sa(U) }),
            vec![set(T, true)]
        );
        assert_eq!(
            m.on_event(MeteredEvent::SubflowClosed { local: sa(U) }),
            vec![set(T, false)]
        );
        assert!(m.take_switches().last().unwrap().why.contains("closed"));
        // a stall of a metered subflow, or of an unknown one, changes nothing
        let mut m = trusted_metered();
        m.on_event(est(U, false));
        assert_eq!(m.on_event(MeteredEvent::Stalled { local: sa(T) }), vec![]);
        assert_eq!(m.on_event(MeteredEvent::Stalled { local: sa(U2) }), vec![]);
    }

    #[test]
    fn a_metered_untrusted_path_is_born_backup_while_the_trusted_one_carries() {
        // the rare case: the WLAN is the metered one
        let mut m = MeteredMachine::new(&[ip(U)], &[(sa(T), sa(R), false)]);
        assert!(m.saving(), "the trusted subflow carries from the start");
        assert!(m.backup_for_new(ip(U)));
        assert!(!m.backup_for_new(ip(T)));
        // born backup: nothing to set
        assert_eq!(m.on_event(est(U, true)), vec![]);
        // one the kernel reports without the flag is set
        let mut m = MeteredMachine::new(&[ip(U)], &[(sa(T), sa(R), false)]);
        assert_eq!(m.on_event(est(U, false)), vec![set(U, true)]);
        // the trusted link down: the metered WLAN carries, the trusted subflow withdrawn
        assert_eq!(
            m.on_event(MeteredEvent::LinkDown { addr: ip(T) }),
            vec![
                set(U, false),
                MeteredCommand::Withdraw {
                    local: sa(T),
                    remote: sa(R)
                }
            ]
        );
        assert!(!m.backup_for_new(ip(U)));
    }

    #[test]
    fn a_closed_connection_answers_nothing() {
        let mut m = trusted_metered();
        m.on_event(MeteredEvent::ConnectionClosed);
        assert!(m.is_done());
        assert_eq!(m.on_event(est(U, false)), vec![]);
    }

    #[test]
    fn addresses_compare_ipv4_mapped_or_not() {
        let mapped: SocketAddr = "[::ffff:198.18.1.2]:40000".parse().unwrap();
        let mut m = MeteredMachine::new(&[ip(T)], &[(mapped, sa(R), false)]);
        assert_eq!(
            m.on_event(est(U, false)),
            vec![MeteredCommand::SetBackup {
                local: mapped,
                remote: sa(R),
                backup: true
            }]
        );
        assert_eq!(m.on_event(MeteredEvent::LinkDown { addr: ip(U) }).len(), 2);
    }

    #[test]
    fn a_link_down_while_another_path_still_carries_withdraws_nothing() {
        // trusted metered, two WLANs: one goes, the other carries on
        let u2: SocketAddr = "198.18.4.2:40003".parse().unwrap();
        let mut m = trusted_metered();
        m.on_event(est(U, false));
        m.on_event(MeteredEvent::SubflowEstablished {
            local: u2,
            remote: sa(R),
            backup: false,
        });
        assert_eq!(m.on_event(MeteredEvent::LinkDown { addr: ip(U) }), vec![]);
        assert!(m.saving());
        // and a metered link's loss withdraws nothing either
        let mut m = trusted_metered();
        m.on_event(est(U, false));
        assert_eq!(m.on_event(MeteredEvent::LinkDown { addr: ip(T) }), vec![]);
    }
}
