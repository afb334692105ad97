//! The policy model, sans-IO: hooks, selectors, actors, links and chains as types, their
//! translation to and from the map layout (`abi`), and their printed form (the file syntax).

use crate::chains::abi::{self, Chain, FlowKey, Link, Pod, Prog};
use std::fmt;
use std::net::IpAddr;

/// Which hook a chain runs at; ordered as the ABI numbers them (ingress, XDP, first).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Hook {
    /// XDP, packets arriving on the interface.
    #[serde(alias = "xdp")]
    Ingress,
    /// TC clsact egress, packets leaving the interface.
    #[serde(alias = "tc")]
    Egress,
}

impl Hook {
    pub fn abi(self) -> u32 {
        match self {
            Hook::Ingress => abi::HOOK_XDP,
            Hook::Egress => abi::HOOK_TC,
        }
    }
    pub fn from_abi(h: u32) -> Hook {
        if h == abi::HOOK_TC {
            Hook::Egress
        } else {
            Hook::Ingress
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Hook::Ingress => "ingress",
            Hook::Egress => "egress",
        }
    }
}

impl fmt::Display for Hook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Compares with the name, as the JSON has it.
impl PartialEq<&str> for Hook {
    fn eq(&self, other: &&str) -> bool {
        self.name() == *other
    }
}

/// An address prefix (`198.18.2.0/24`, `2001:db8::1`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Prefix {
    pub addr: IpAddr,
    pub len: u8,
}

impl std::str::FromStr for Prefix {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (a, l) = match s.split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (s, None),
        };
        let addr: IpAddr = a
            .parse()
            .map_err(|_| format!("`{a}` is not an IP address"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let len = match l {
            None => max,
            Some(l) => l
                .parse::<u8>()
                .ok()
                .filter(|l| *l <= max)
                .ok_or_else(|| format!("prefix length `{l}` is not 0..={max}"))?,
        };
        Ok(Prefix { addr, len })
    }
}

impl fmt::Display for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let max = if self.addr.is_ipv4() { 32 } else { 128 };
        if self.len == max {
            write!(f, "{}", self.addr)
        } else {
            write!(f, "{}/{}", self.addr, self.len)
        }
    }
}

/// The sequence or acknowledgement number a `sequence` selector looks at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SeqField {
    DataSeq,
    DataAck,
    SubflowSeq,
    SubflowAck,
}

impl SeqField {
    const ALL: [SeqField; 4] = [
        SeqField::DataSeq,
        SeqField::DataAck,
        SeqField::SubflowSeq,
        SeqField::SubflowAck,
    ];

    pub fn name(self) -> &'static str {
        match self {
            SeqField::DataSeq => "data_seq",
            SeqField::DataAck => "data_ack",
            SeqField::SubflowSeq => "subflow_seq",
            SeqField::SubflowAck => "subflow_ack",
        }
    }

    /// The `a_sequence.what` byte.
    pub fn abi(self) -> u8 {
        match self {
            SeqField::DataSeq => abi::SEQ_DATA_SEQ,
            SeqField::DataAck => abi::SEQ_DATA_ACK,
            SeqField::SubflowSeq => abi::SEQ_SUBFLOW_SEQ,
            SeqField::SubflowAck => abi::SEQ_SUBFLOW_ACK,
        }
    }

    pub fn from_abi(b: u8) -> Option<SeqField> {
        SeqField::ALL.into_iter().find(|f| f.abi() == b)
    }
}

/// Selectors (seed 003 Table I).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Selector {
    /// TCP 4-tuple, either direction; port 0 = any.
    Subflow {
        src: IpAddr,
        dst: IpAddr,
        sport: u16,
        dport: u16,
    },
    /// Source and destination address, this direction.
    IpPair {
        src: IpAddr,
        dst: IpAddr,
    },
    Src(Prefix),
    Dst(Prefix),
    /// A range (inclusive, modulo 2^n) of a sequence or acknowledgement number.
    Sequence {
        what: SeqField,
        from: u64,
        to: u64,
    },
    /// Packet-type bits: all of `all`, one of `any` (if not empty), none of `none`.
    PacketType {
        all: u32,
        any: u32,
        none: u32,
    },
}

/// Actors (seed 003 Table II).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Actor {
    /// Cap the advertised receive window at `window` bytes.
    RateLimit {
        window: u32,
    },
    /// Add MP_PRIO with this B flag, `repeat` times per subflow.
    SetBackup {
        backup: bool,
        repeat: u8,
    },
    BlkSubflow,
    AddSubflow,
    GetConnect,
    GetSubflow,
    Record,
    /// Drop the packet (and end the chain).
    Drop,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LinkSpec {
    Select { sel: Selector, or: bool, not: bool },
    Act(Actor),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChainSpec {
    pub name: String,
    pub dev: String,
    pub hook: Hook,
    pub links: Vec<LinkSpec>,
    /// Line of the `[[chain]]` in the file it came from (0 if built in code).
    pub line: usize,
    /// The tenant whose chain this is (its packets run it instead of the hook's default
    /// chain); None: the default chain of the hook.
    pub tenant: Option<String>,
}

/// Who belongs to a tenant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TenantMatch {
    /// The sockets of the processes in this cgroup (v2) or below it: a path in the cgroup
    /// hierarchy, from its root (`/nena/a`, as `/proc/PID/cgroup` shows it).
    Cgroup(String),
    /// The sockets a process of this uid created.
    Uid(u32),
}

impl fmt::Display for TenantMatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TenantMatch::Cgroup(p) => write!(f, "cgroup {p}"),
            TenantMatch::Uid(u) => write!(f, "uid {u}"),
        }
    }
}

/// A tenant: a name chains refer to, and who belongs to it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TenantSpec {
    pub name: String,
    pub who: TenantMatch,
    /// Line of the `[[tenant]]` in the file (0 if built in code).
    pub line: usize,
}

/// The tenant in the file's own syntax.
impl fmt::Display for TenantSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "[[tenant]]\nname = \"{}\"", self.name)?;
        match &self.who {
            TenantMatch::Cgroup(p) => writeln!(f, "cgroup = \"{p}\""),
            TenantMatch::Uid(u) => writeln!(f, "uid = {u}"),
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PolicySpec {
    pub chains: Vec<ChainSpec>,
    /// Tenants, in file order (their ids in the maps are given by the loader).
    pub tenants: Vec<TenantSpec>,
}

impl PolicySpec {
    pub fn tenant(&self, name: &str) -> Option<&TenantSpec> {
        self.tenants.iter().find(|t| t.name == name)
    }
}

fn addr16(a: &IpAddr) -> [u8; 16] {
    let mut o = [0u8; 16];
    match a {
        IpAddr::V4(v) => o[..4].copy_from_slice(&v.octets()),
        IpAddr::V6(v) => o.copy_from_slice(&v.octets()),
    }
    o
}

fn addr_from(b: &[u8; 16], family: u8) -> IpAddr {
    if family == 6 {
        IpAddr::from(*b)
    } else {
        IpAddr::from([b[0], b[1], b[2], b[3]])
    }
}

fn family(a: &IpAddr) -> u8 {
    if a.is_ipv4() {
        4
    } else {
        6
    }
}

fn prefix_args(p: &Prefix) -> [u8; 40] {
    let mut a = [0u8; 40];
    a[..16].copy_from_slice(&addr16(&p.addr));
    a[16] = p.len;
    a[17] = family(&p.addr);
    a
}

impl LinkSpec {
    /// The map form of this link.
    pub fn to_abi(&self) -> Link {
        let mut l = Link::default();
        match self {
            LinkSpec::Select { sel, or, not } => {
                l.kind = abi::KIND_SELECTOR;
                l.op = if *or { abi::OP_OR } else { abi::OP_AND };
                l.negate = *not as u8;
                let (prog, args) = match sel {
                    Selector::Subflow {
                        src,
                        dst,
                        sport,
                        dport,
                    } => (
                        Prog::Subflow,
                        abi::args_of(&FlowKey {
                            saddr: addr16(src),
                            daddr: addr16(dst),
                            sport: sport.to_be(),
                            dport: dport.to_be(),
                            family: family(src),
                            pad: [0; 3],
                        }),
                    ),
                    Selector::IpPair { src, dst } => (
                        Prog::IpPair,
                        abi::args_of(&FlowKey {
                            saddr: addr16(src),
                            daddr: addr16(dst),
                            family: family(src),
                            ..Default::default()
                        }),
                    ),
                    Selector::Src(p) => (Prog::Src, prefix_args(p)),
                    Selector::Dst(p) => (Prog::Dst, prefix_args(p)),
                    Selector::Sequence { what, from, to } => {
                        let mut a = [0u8; 40];
                        a[..8].copy_from_slice(&from.to_ne_bytes());
                        a[8..16].copy_from_slice(&to.to_ne_bytes());
                        a[16] = what.abi();
                        (Prog::Sequence, a)
                    }
                    Selector::PacketType { all, any, none } => {
                        let mut a = [0u8; 40];
                        a[..4].copy_from_slice(&all.to_ne_bytes());
                        a[4..8].copy_from_slice(&any.to_ne_bytes());
                        a[8..12].copy_from_slice(&none.to_ne_bytes());
                        (Prog::PacketType, a)
                    }
                };
                l.prog = prog.index();
                l.args = args;
            }
            LinkSpec::Act(act) => {
                l.kind = abi::KIND_ACTOR;
                let prog = match act {
                    Actor::RateLimit { window } => {
                        l.args[..4].copy_from_slice(&window.to_ne_bytes());
                        Prog::RateLimit
                    }
                    Actor::SetBackup { backup, repeat } => {
                        l.args[0] = *backup as u8;
                        l.args[1] = *repeat;
                        Prog::SetBackup
                    }
                    Actor::BlkSubflow => Prog::BlkSubflow,
                    Actor::AddSubflow => Prog::AddSubflow,
                    Actor::GetConnect => Prog::GetConnect,
                    Actor::GetSubflow => Prog::GetSubflow,
                    Actor::Record => Prog::Record,
                    Actor::Drop => Prog::Drop,
                };
                l.prog = prog.index();
            }
        }
        l
    }

    /// Read a link back from the map (for `show`); None if it is not one this version wrote.
    pub fn from_abi(l: &Link) -> Option<LinkSpec> {
        let prog = Prog::from_index(l.prog)?;
        let a = &l.args;
        let u32_at = |i: usize| u32::from_ne_bytes(a[i..i + 4].try_into().unwrap());
        let u64_at = |i: usize| u64::from_ne_bytes(a[i..i + 8].try_into().unwrap());
        if l.kind == abi::KIND_SELECTOR {
            let sel = match prog {
                Prog::Subflow | Prog::IpPair => {
                    let f = FlowKey::from_bytes(a)?;
                    let (src, dst) = (addr_from(&f.saddr, f.family), addr_from(&f.daddr, f.family));
                    if prog == Prog::Subflow {
                        Selector::Subflow {
                            src,
                            dst,
                            sport: u16::from_be(f.sport),
                            dport: u16::from_be(f.dport),
                        }
                    } else {
                        Selector::IpPair { src, dst }
                    }
                }
                Prog::Src | Prog::Dst => {
                    let mut b = [0u8; 16];
                    b.copy_from_slice(&a[..16]);
                    let p = Prefix {
                        addr: addr_from(&b, a[17]),
                        len: a[16],
                    };
                    if prog == Prog::Src {
                        Selector::Src(p)
                    } else {
                        Selector::Dst(p)
                    }
                }
                Prog::Sequence => Selector::Sequence {
                    what: SeqField::from_abi(a[16])?,
                    from: u64_at(0),
                    to: u64_at(8),
                },
                Prog::PacketType => Selector::PacketType {
                    all: u32_at(0),
                    any: u32_at(4),
                    none: u32_at(8),
                },
                _ => return None,
            };
            Some(LinkSpec::Select {
                sel,
                or: l.op == abi::OP_OR,
                not: l.negate != 0,
            })
        } else {
            Some(LinkSpec::Act(match prog {
                Prog::RateLimit => Actor::RateLimit { window: u32_at(0) },
                Prog::SetBackup => Actor::SetBackup {
                    backup: a[0] != 0,
                    repeat: a[1],
                },
                Prog::BlkSubflow => Actor::BlkSubflow,
                Prog::AddSubflow => Actor::AddSubflow,
                Prog::GetConnect => Actor::GetConnect,
                Prog::GetSubflow => Actor::GetSubflow,
                Prog::Record => Actor::Record,
                Prog::Drop => Actor::Drop,
                _ => return None,
            }))
        }
    }

    /// The selector's or actor's program.
    pub fn prog(&self) -> Prog {
        match self {
            LinkSpec::Select { sel, .. } => match sel {
                Selector::Subflow { .. } => Prog::Subflow,
                Selector::IpPair { .. } => Prog::IpPair,
                Selector::Src(_) => Prog::Src,
                Selector::Dst(_) => Prog::Dst,
                Selector::Sequence { .. } => Prog::Sequence,
                Selector::PacketType { .. } => Prog::PacketType,
            },
            LinkSpec::Act(a) => match a {
                Actor::RateLimit { .. } => Prog::RateLimit,
                Actor::SetBackup { .. } => Prog::SetBackup,
                Actor::BlkSubflow => Prog::BlkSubflow,
                Actor::AddSubflow => Prog::AddSubflow,
                Actor::GetConnect => Prog::GetConnect,
                Actor::GetSubflow => Prog::GetSubflow,
                Actor::Record => Prog::Record,
                Actor::Drop => Prog::Drop,
            },
        }
    }

    /// The selector or actor name (as in the file and in the bench).
    pub fn name(&self) -> &'static str {
        self.prog().name()
    }
}

fn types_list(bits: u32) -> String {
    let names: Vec<String> = abi::PACKET_TYPES
        .iter()
        .filter(|(_, b)| bits & b != 0)
        .map(|(n, _)| format!("\"{n}\""))
        .collect();
    format!("[{}]", names.join(", "))
}

/// The link in the file's own syntax (an inline table).
impl fmt::Display for LinkSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LinkSpec::Select { sel, or, not } => {
                write!(f, "{{ select = \"{}\"", self.name())?;
                match sel {
                    Selector::Subflow {
                        src,
                        dst,
                        sport,
                        dport,
                    } => {
                        write!(f, ", src = \"{src}\", dst = \"{dst}\"")?;
                        if *sport != 0 {
                            write!(f, ", sport = {sport}")?;
                        }
                        if *dport != 0 {
                            write!(f, ", dport = {dport}")?;
                        }
                    }
                    Selector::IpPair { src, dst } => {
                        write!(f, ", src = \"{src}\", dst = \"{dst}\"")?
                    }
                    Selector::Src(p) | Selector::Dst(p) => write!(f, ", prefix = \"{p}\"")?,
                    Selector::Sequence { what, from, to } => {
                        let w = what.name();
                        write!(f, ", what = \"{w}\", from = {from}, to = {to}")?
                    }
                    Selector::PacketType { all, any, none } => {
                        if *all != 0 {
                            write!(f, ", all = {}", types_list(*all))?;
                        }
                        if *any != 0 {
                            write!(f, ", any = {}", types_list(*any))?;
                        }
                        if *none != 0 {
                            write!(f, ", none = {}", types_list(*none))?;
                        }
                    }
                }
                if *or {
                    write!(f, ", op = \"or\"")?;
                }
                if *not {
                    write!(f, ", not = true")?;
                }
                write!(f, " }}")
            }
            LinkSpec::Act(a) => {
                write!(f, "{{ act = \"{}\"", self.name())?;
                match a {
                    Actor::RateLimit { window } => write!(f, ", window = {window}")?,
                    Actor::SetBackup { backup, repeat } => {
                        write!(f, ", backup = {backup}, repeat = {repeat}")?
                    }
                    _ => {}
                }
                write!(f, " }}")
            }
        }
    }
}

impl ChainSpec {
    /// The map form of this chain; `new_rule` is set on the first selector of each rule.
    pub fn to_abi(&self, gen: u32) -> Chain {
        let mut c = Chain {
            len: self.links.len().min(abi::MAX_LINKS) as u32,
            gen,
            ..Default::default()
        };
        let n = self.name.len().min(23);
        c.name[..n].copy_from_slice(&self.name.as_bytes()[..n]);
        let mut after_actor = true;
        for (i, l) in self.links.iter().take(abi::MAX_LINKS).enumerate() {
            let mut al = l.to_abi();
            if al.kind == abi::KIND_SELECTOR {
                al.new_rule = after_actor as u8;
                after_actor = false;
            } else {
                after_actor = true;
            }
            c.links[i] = al;
        }
        c
    }

    /// Read a chain back from the map.
    pub fn from_abi(c: &Chain, dev: &str, hook: Hook) -> ChainSpec {
        let links = c.links[..(c.len as usize).min(abi::MAX_LINKS)]
            .iter()
            .filter_map(LinkSpec::from_abi)
            .collect();
        ChainSpec {
            name: c.name(),
            dev: dev.to_string(),
            hook,
            links,
            line: 0,
            tenant: None,
        }
    }
}

/// The chain in the file's own syntax.
impl fmt::Display for ChainSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "[[chain]]\nname = \"{}\"\ndev = \"{}\"\nhook = \"{}\"",
            self.name,
            self.dev,
            self.hook.name()
        )?;
        if let Some(t) = &self.tenant {
            writeln!(f, "tenant = \"{t}\"")?;
        }
        writeln!(f, "links = [")?;
        for l in &self.links {
            writeln!(f, "  {l},")?;
        }
        writeln!(f, "]")
    }
}
