//! The links the bench times (nena-bpf's policy chains) and what it knows of each: its role,
//! its chain-file name, the frames it acts on and skips and how it is timed; and the chains
//! of 2, 4 and 8 links.

use serde::Serialize;

/// A selector or actor, as the bench uses it: the programs themselves ([`Prog`]), reported
/// by their chain-file names.
pub use nena_bpf::chains::abi::Prog as Link;

/// What a link is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Dispatcher,
    Selector,
    Actor,
    Chain,
}

/// How a figure was timed (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Method {
    Batch,
    Single,
}

/// The frames of the bench (IPv4, 198.18.100.1 -> 198.18.100.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Frame {
    /// A pure ACK with timestamps and a DSS data ACK (most MPTCP packets in a download's
    /// ACK direction), of the subflow whose handshake the dispatcher saw (window scale 7).
    DssAck,
    /// The same with a window below `rate_limit`'s cap.
    DssAckSmallWindow,
    /// The same with data ACK 200000 (outside the `sequence` selector's range).
    DssAckOtherSeq,
    /// A pure ACK with timestamps only (no MPTCP option).
    PlainAck,
    /// A DSS ACK of another address pair and port.
    DssAckOtherFlow,
    /// The DSS ACK of a subflow that already carried its MP_PRIO (`set_backup` done).
    DssAckPrioSent,
    /// An MP_CAPABLE SYN.
    CapableSyn,
    /// An MP_JOIN SYN (B = 0).
    JoinSyn,
    /// The DSS ACK with window 65535 (above `rate_limit`'s cap).
    DssAckWideWindow,
    /// A DSS ACK of a new subflow (one per run) whose SYN went through the hook just before
    /// (untimed, no chain), as a subflow's does: the dispatcher made the subflow's entry.
    NewSubflowAck,
    /// A DSS ACK carrying an ADD_ADDR announcement.
    AddAddrAck,
    /// A DSS ACK of a subflow on which an ADD_ADDR was blocked (kept) just before.
    KeptAck,
    /// A DSS ACK without timestamps, window 65535, carrying an ADD_ADDR, of a subflow whose
    /// handshake the dispatcher saw (window scale 0 both ways): every link of chain-8 acts
    /// on it.
    Chain8,
}

/// What the bench knows of each link: its role, its chain-file text, the frames it acts on
/// and skips (a trait because [`Link`] is nena-bpf's type).
pub trait BenchLink: Copy {
    /// Selector or actor.
    fn role(self) -> Kind;
    /// The link in chain-file syntax. The selectors match the bench's own frames (addresses
    /// 198.18.100.1 -> .2, any port but `subflow`'s, data ACKs up to 100000).
    fn spec(self) -> &'static str;
    /// A frame the link acts on (a selector: matches), and how that is timed.
    fn act_frame(self) -> (Frame, Method);
    /// A frame the link skips (a selector: does not match), always timed in batches;
    /// `None` for `record` and `drop`, which act on every packet.
    fn skip_frame(self) -> Option<Frame>;
    /// Reports an event per acting run (the ring buffer must be drained between batches).
    fn emits_events(self) -> bool;
}

impl BenchLink for Link {
    fn role(self) -> Kind {
        match self {
            Link::Subflow
            | Link::IpPair
            | Link::Src
            | Link::Dst
            | Link::Sequence
            | Link::PacketType => Kind::Selector,
            _ => Kind::Actor,
        }
    }

    fn spec(self) -> &'static str {
        match self {
            Link::Subflow => {
                r#"{ select = "subflow", src = "198.18.100.1", dst = "198.18.100.2", sport = 40000, dport = 5201 }"#
            }
            Link::IpPair => r#"{ select = "ip_pair", src = "198.18.100.1", dst = "198.18.100.2" }"#,
            Link::Src => r#"{ select = "src", prefix = "198.18.100.0/24" }"#,
            Link::Dst => r#"{ select = "dst", prefix = "198.18.100.2" }"#,
            Link::Sequence => {
                r#"{ select = "sequence", what = "data_ack", from = 0, to = 100000 }"#
            }
            Link::PacketType => r#"{ select = "packet_type", all = ["dss", "data_ack"] }"#,
            Link::RateLimit => r#"{ act = "rate_limit", window = 30000 }"#,
            Link::SetBackup => r#"{ act = "set_backup", backup = true, repeat = 1 }"#,
            Link::BlkSubflow => r#"{ act = "blk_subflow" }"#,
            Link::AddSubflow => r#"{ act = "add_subflow" }"#,
            Link::GetConnect => r#"{ act = "get_connect" }"#,
            Link::GetSubflow => r#"{ act = "get_subflow" }"#,
            Link::Record => r#"{ act = "record" }"#,
            Link::Drop => r#"{ act = "drop" }"#,
        }
    }

    fn act_frame(self) -> (Frame, Method) {
        match self {
            Link::RateLimit => (Frame::DssAckWideWindow, Method::Single),
            Link::SetBackup => (Frame::NewSubflowAck, Method::Single),
            Link::BlkSubflow => (Frame::AddAddrAck, Method::Single),
            Link::AddSubflow => (Frame::KeptAck, Method::Single),
            Link::GetConnect => (Frame::CapableSyn, Method::Batch),
            Link::GetSubflow => (Frame::JoinSyn, Method::Batch),
            _ => (Frame::DssAck, Method::Batch),
        }
    }

    fn skip_frame(self) -> Option<Frame> {
        Some(match self {
            Link::Subflow | Link::IpPair | Link::Src | Link::Dst => Frame::DssAckOtherFlow,
            Link::Sequence => Frame::DssAckOtherSeq,
            Link::PacketType => Frame::PlainAck,
            // tail-called (a pure ACK), the window already below the cap
            Link::RateLimit => Frame::DssAckSmallWindow,
            // tail-called (a pure ACK), its MP_PRIO already sent
            Link::SetBackup => Frame::DssAckPrioSent,
            // tail-called (a pure ACK), nothing kept for the subflow
            Link::AddSubflow => Frame::DssAck,
            // not tail-called: no ADD_ADDR / MP_CAPABLE / MP_JOIN (chain.h, actor_wants)
            Link::BlkSubflow | Link::GetConnect | Link::GetSubflow => Frame::DssAck,
            Link::Record | Link::Drop => return None,
        })
    }

    fn emits_events(self) -> bool {
        matches!(self, Link::GetConnect | Link::GetSubflow)
    }
}

/// The chains of 2, 4 and 8 links, composed as in seed 003 (section V.A): 1 selector and 1
/// actor, 1 selector and 3 actors, 4 selectors and 4 actors; each with a frame on which
/// every one of its links acts (the selectors all match), and how it is timed.
pub fn chains() -> Vec<(&'static str, Vec<Link>, Frame, Method)> {
    vec![
        (
            "chain-2",
            vec![Link::IpPair, Link::Record],
            Frame::DssAck,
            Method::Batch,
        ),
        (
            // set_backup sets the B flag of the MP_JOIN SYN in place
            "chain-4",
            vec![
                Link::IpPair,
                Link::SetBackup,
                Link::GetSubflow,
                Link::Record,
            ],
            Frame::JoinSyn,
            Method::Single,
        ),
        (
            // rate_limit caps the window, blk_subflow blocks the ADD_ADDR (keeps it),
            // add_subflow announces it again, record counts
            "chain-8",
            vec![
                Link::Src,
                Link::Dst,
                Link::IpPair,
                Link::PacketType,
                Link::RateLimit,
                Link::BlkSubflow,
                Link::AddSubflow,
                Link::Record,
            ],
            Frame::Chain8,
            Method::Single,
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::measure::chain_of;
    use nena_bpf::chains::spec::Hook;

    #[test]
    fn every_link_has_an_acting_frame_and_all_but_record_a_skipping_one() {
        for l in Link::ALL {
            assert_eq!(Link::from_name(l.name()), Some(l));
            assert_eq!(
                l.skip_frame().is_none(),
                l == Link::Record || l == Link::Drop,
                "{l:?}"
            );
            // the actors that change the frame are timed in single runs, the others in batches
            let rewrites = matches!(
                l,
                Link::RateLimit | Link::SetBackup | Link::BlkSubflow | Link::AddSubflow
            );
            assert_eq!(l.act_frame().1 == Method::Single, rewrites, "{l:?}");
            chain_of(Hook::Ingress, &[l]).unwrap();
        }
        assert_eq!(Link::from_name("nope"), None);
        let c = chains();
        assert_eq!(
            c.iter().map(|(_, l, _, _)| l.len()).collect::<Vec<_>>(),
            [2, 4, 8]
        );
        for (_, links, _, _) in &c {
            let sel = links.iter().filter(|l| l.role() == Kind::Selector).count();
            assert!(sel >= 1 && links.len() - sel >= 1);
        }
    }
}
