//! Policy descriptions, sans-IO: the chain file format (TOML), its validation with errors
//! that name the line, and the translation of chains to and from the map layout.
//!
//! ```toml
//! [[chain]]
//! name = "untrusted-backup"      # at most 23 bytes
//! dev = "veth0"                  # an interface `nena policy attach` was run on
//! hook = "egress"                # "ingress" (XDP) or "egress" (TC)
//! links = [
//!   { select = "dst", prefix = "198.18.2.0/24" },
//!   { select = "packet_type", any = ["mp_join", "data_ack"], op = "or" },
//!   { act = "set_backup", backup = true },
//! ]
//! ```
//! Links run left to right. A selector combines its result into the running match value
//! (`op = "and"`, the default, or `"or"`; `not = true` inverts it); there is no precedence:
//! `a, b or, c` is `(a AND b) OR c`. An actor acts if the value is true. A selector that
//! follows an actor starts a new rule (the value starts again from that selector).

use crate::abi::{self, Chain, FlowKey, Link, Pod};
use std::fmt;
use std::net::IpAddr;

/// Which hook a chain runs at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Hook {
    /// XDP, packets arriving on the interface.
    Ingress,
    /// TC clsact egress, packets leaving the interface.
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

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SeqField {
    DataSeq,
    DataAck,
    SubflowSeq,
    SubflowAck,
}

const SEQ_FIELDS: [(&str, SeqField, u8); 4] = [
    ("data_seq", SeqField::DataSeq, abi::SEQ_DATA_SEQ),
    ("data_ack", SeqField::DataAck, abi::SEQ_DATA_ACK),
    ("subflow_seq", SeqField::SubflowSeq, abi::SEQ_SUBFLOW_SEQ),
    ("subflow_ack", SeqField::SubflowAck, abi::SEQ_SUBFLOW_ACK),
];

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
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PolicySpec {
    pub chains: Vec<ChainSpec>,
}

/// A policy file error: the line (1-based, 0 if unknown) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {msg}")]
pub struct SpecError {
    pub line: usize,
    pub msg: String,
}

fn err(line: usize, msg: impl Into<String>) -> SpecError {
    SpecError {
        line,
        msg: msg.into(),
    }
}

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())]
        .bytes()
        .filter(|b| *b == b'\n')
        .count()
        + 1
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    chain: Vec<toml::Spanned<RawChain>>,
}

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct RawChain {
    name: toml::Spanned<String>,
    dev: toml::Spanned<String>,
    hook: toml::Spanned<String>,
    links: toml::Spanned<Vec<toml::Spanned<toml::Table>>>,
}

/// Parse and validate a policy file. Every error names its line.
pub fn parse(text: &str) -> Result<PolicySpec, SpecError> {
    let raw: RawFile = toml::from_str(text).map_err(|e| {
        let line = e.span().map(|s| line_of(text, s.start)).unwrap_or(0);
        err(line, e.message().trim().to_string())
    })?;
    let mut chains = Vec::new();
    for rc in raw.chain {
        let cl = line_of(text, rc.span().start);
        let rc = rc.into_inner();
        let name = rc.name.get_ref().clone();
        let nl = line_of(text, rc.name.span().start);
        if name.is_empty() || name.len() > 23 {
            return Err(err(
                nl,
                format!("chain name `{name}` must be 1 to 23 bytes"),
            ));
        }
        let dev = rc.dev.get_ref().clone();
        if dev.is_empty() || dev.len() > 15 {
            return Err(err(
                line_of(text, rc.dev.span().start),
                format!("`{dev}` is not an interface name"),
            ));
        }
        let hl = line_of(text, rc.hook.span().start);
        let hook = match rc.hook.get_ref().as_str() {
            "ingress" | "xdp" => Hook::Ingress,
            "egress" | "tc" => Hook::Egress,
            h => {
                return Err(err(
                    hl,
                    format!("hook `{h}`: expected \"ingress\" or \"egress\""),
                ))
            }
        };
        let ll = line_of(text, rc.links.span().start);
        let raw_links = rc.links.into_inner();
        if raw_links.is_empty() {
            return Err(err(ll, format!("chain `{name}` has no links")));
        }
        if raw_links.len() > abi::MAX_LINKS {
            return Err(err(
                ll,
                format!(
                    "chain `{name}` has {} links, at most {}",
                    raw_links.len(),
                    abi::MAX_LINKS
                ),
            ));
        }
        let mut links = Vec::new();
        for l in raw_links {
            let line = line_of(text, l.span().start);
            links.push(parse_link(l.get_ref()).map_err(|m| err(line, m))?);
        }
        if chains
            .iter()
            .any(|c: &ChainSpec| c.dev == dev && c.hook == hook)
        {
            return Err(err(
                cl,
                format!(
                    "a second chain for {dev} {}: one chain per interface and hook",
                    hook.name()
                ),
            ));
        }
        chains.push(ChainSpec {
            name,
            dev,
            hook,
            links,
            line: cl,
        });
    }
    Ok(PolicySpec { chains })
}

struct Args<'a> {
    t: &'a toml::Table,
    used: Vec<&'static str>,
}

impl<'a> Args<'a> {
    fn get(&mut self, k: &'static str) -> Option<&'a toml::Value> {
        self.used.push(k);
        self.t.get(k)
    }
    fn str(&mut self, k: &'static str) -> Result<Option<&'a str>, String> {
        match self.get(k) {
            None => Ok(None),
            Some(toml::Value::String(s)) => Ok(Some(s)),
            Some(v) => Err(format!("`{k}` must be a string, not {}", v.type_str())),
        }
    }
    fn req_str(&mut self, k: &'static str) -> Result<&'a str, String> {
        self.str(k)?.ok_or_else(|| format!("`{k}` is missing"))
    }
    fn int(&mut self, k: &'static str, min: i64, max: i64) -> Result<Option<i64>, String> {
        match self.get(k) {
            None => Ok(None),
            Some(toml::Value::Integer(i)) if (min..=max).contains(i) => Ok(Some(*i)),
            Some(toml::Value::Integer(i)) => Err(format!("`{k}` = {i} is not in {min}..={max}")),
            Some(v) => Err(format!("`{k}` must be an integer, not {}", v.type_str())),
        }
    }
    fn boolean(&mut self, k: &'static str) -> Result<Option<bool>, String> {
        match self.get(k) {
            None => Ok(None),
            Some(toml::Value::Boolean(b)) => Ok(Some(*b)),
            Some(v) => Err(format!("`{k}` must be true or false, not {}", v.type_str())),
        }
    }
    fn ip(&mut self, k: &'static str) -> Result<IpAddr, String> {
        let s = self.req_str(k)?;
        s.parse()
            .map_err(|_| format!("`{k}` = \"{s}\" is not an IP address"))
    }
    fn types(&mut self, k: &'static str) -> Result<u32, String> {
        let mut bits = 0;
        match self.get(k) {
            None => {}
            Some(toml::Value::Array(a)) => {
                for v in a {
                    let n = v
                        .as_str()
                        .ok_or_else(|| format!("`{k}` must list packet types as strings"))?;
                    bits |= abi::packet_type_bit(n).ok_or_else(|| {
                        let all: Vec<&str> = abi::PACKET_TYPES.iter().map(|(n, _)| *n).collect();
                        format!("unknown packet type `{n}` (known: {})", all.join(", "))
                    })?;
                }
            }
            Some(v) => return Err(format!("`{k}` must be a list, not {}", v.type_str())),
        }
        Ok(bits)
    }
    fn finish(&self, what: &str) -> Result<(), String> {
        for k in self.t.keys() {
            if !self.used.contains(&k.as_str()) {
                return Err(format!("unknown key `{k}` for {what}"));
            }
        }
        Ok(())
    }
}

fn parse_link(t: &toml::Table) -> Result<LinkSpec, String> {
    let mut a = Args { t, used: vec![] };
    let sel = a.str("select")?;
    let act = a.str("act")?;
    match (sel, act) {
        (Some(_), Some(_)) => Err("a link has either `select` or `act`, not both".into()),
        (None, None) => Err("a link needs `select = \"...\"` or `act = \"...\"`".into()),
        (Some(s), None) => {
            let or = match a.str("op")? {
                None | Some("and") => false,
                Some("or") => true,
                Some(o) => return Err(format!("op `{o}`: expected \"and\" or \"or\"")),
            };
            let not = a.boolean("not")?.unwrap_or(false);
            let sel = match s {
                "subflow" => {
                    let (src, dst) = (a.ip("src")?, a.ip("dst")?);
                    if src.is_ipv4() != dst.is_ipv4() {
                        return Err("`src` and `dst` must be of one IP version".into());
                    }
                    let sport = a.int("sport", 0, 65535)?.unwrap_or(0) as u16;
                    let dport = a.int("dport", 0, 65535)?.unwrap_or(0) as u16;
                    Selector::Subflow { src, dst, sport, dport }
                }
                "ip_pair" => {
                    let (src, dst) = (a.ip("src")?, a.ip("dst")?);
                    if src.is_ipv4() != dst.is_ipv4() {
                        return Err("`src` and `dst` must be of one IP version".into());
                    }
                    Selector::IpPair { src, dst }
                }
                "src" | "dst" => {
                    let p: Prefix = a.req_str("prefix")?.parse()?;
                    if s == "src" {
                        Selector::Src(p)
                    } else {
                        Selector::Dst(p)
                    }
                }
                "sequence" => {
                    let w = a.req_str("what")?;
                    let what = SEQ_FIELDS
                        .iter()
                        .find(|(n, _, _)| *n == w)
                        .map(|(_, f, _)| *f)
                        .ok_or_else(|| format!("`what` = \"{w}\": expected data_seq, data_ack, subflow_seq or subflow_ack"))?;
                    let from = a.int("from", 0, i64::MAX)?.ok_or("`from` is missing")? as u64;
                    let to = a.int("to", 0, i64::MAX)?.ok_or("`to` is missing")? as u64;
                    Selector::Sequence { what, from, to }
                }
                "packet_type" => {
                    let (all, any, none) = (a.types("all")?, a.types("any")?, a.types("none")?);
                    if all | any | none == 0 {
                        return Err("packet_type needs at least one of `all`, `any`, `none`".into());
                    }
                    Selector::PacketType { all, any, none }
                }
                other => return Err(format!("unknown selector `{other}` (known: subflow, ip_pair, src, dst, sequence, packet_type)")),
            };
            a.finish(&format!("selector `{s}`"))?;
            Ok(LinkSpec::Select { sel, or, not })
        }
        (None, Some(x)) => {
            let act = match x {
                "rate_limit" => {
                    let window = a.int("window", 1, 0xffff << 14)?;
                    let rate = a.int("rate_bps", 1, i64::MAX / 1_000_000)?;
                    let rtt = a.int("rtt_us", 1, 10_000_000)?;
                    let window = match (window, rate, rtt) {
                        (Some(w), None, None) => w as u32,
                        (None, Some(r), Some(t)) => ((r as u128 * t as u128 / 8_000_000) as u64).clamp(1, 0xffff << 14) as u32,
                        _ => return Err("rate_limit needs `window` (bytes), or `rate_bps` and `rtt_us`".into()),
                    };
                    Actor::RateLimit { window }
                }
                "set_backup" => Actor::SetBackup {
                    backup: a.boolean("backup")?.unwrap_or(true),
                    repeat: a.int("repeat", 1, 255)?.unwrap_or(3) as u8,
                },
                "blk_subflow" => Actor::BlkSubflow,
                "add_subflow" => Actor::AddSubflow,
                "get_connect" => Actor::GetConnect,
                "get_subflow" => Actor::GetSubflow,
                "record" => Actor::Record,
                other => return Err(format!("unknown actor `{other}` (known: rate_limit, set_backup, blk_subflow, add_subflow, get_connect, get_subflow, record)")),
            };
            a.finish(&format!("actor `{x}`"))?;
            Ok(LinkSpec::Act(act))
        }
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
                let (name, args) = match sel {
                    Selector::Subflow {
                        src,
                        dst,
                        sport,
                        dport,
                    } => (
                        "subflow",
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
                        "ip_pair",
                        abi::args_of(&FlowKey {
                            saddr: addr16(src),
                            daddr: addr16(dst),
                            family: family(src),
                            ..Default::default()
                        }),
                    ),
                    Selector::Src(p) => ("src", prefix_args(p)),
                    Selector::Dst(p) => ("dst", prefix_args(p)),
                    Selector::Sequence { what, from, to } => {
                        let mut a = [0u8; 40];
                        a[..8].copy_from_slice(&from.to_ne_bytes());
                        a[8..16].copy_from_slice(&to.to_ne_bytes());
                        a[16] = SEQ_FIELDS
                            .iter()
                            .find(|(_, f, _)| f == what)
                            .map(|x| x.2)
                            .unwrap_or(0);
                        ("sequence", a)
                    }
                    Selector::PacketType { all, any, none } => {
                        let mut a = [0u8; 40];
                        a[..4].copy_from_slice(&all.to_ne_bytes());
                        a[4..8].copy_from_slice(&any.to_ne_bytes());
                        a[8..12].copy_from_slice(&none.to_ne_bytes());
                        ("packet_type", a)
                    }
                };
                l.prog = abi::prog_index(name).expect("known program");
                l.args = args;
            }
            LinkSpec::Act(act) => {
                l.kind = abi::KIND_ACTOR;
                let name = match act {
                    Actor::RateLimit { window } => {
                        l.args[..4].copy_from_slice(&window.to_ne_bytes());
                        "rate_limit"
                    }
                    Actor::SetBackup { backup, repeat } => {
                        l.args[0] = *backup as u8;
                        l.args[1] = *repeat;
                        "set_backup"
                    }
                    Actor::BlkSubflow => "blk_subflow",
                    Actor::AddSubflow => "add_subflow",
                    Actor::GetConnect => "get_connect",
                    Actor::GetSubflow => "get_subflow",
                    Actor::Record => "record",
                };
                l.prog = abi::prog_index(name).expect("known program");
            }
        }
        l
    }

    /// Read a link back from the map (for `show`); None if it is not one this version wrote.
    pub fn from_abi(l: &Link) -> Option<LinkSpec> {
        let name = *abi::PROGS.get(l.prog as usize)?;
        let a = &l.args;
        let u32_at = |i: usize| u32::from_ne_bytes(a[i..i + 4].try_into().unwrap());
        let u64_at = |i: usize| u64::from_ne_bytes(a[i..i + 8].try_into().unwrap());
        if l.kind == abi::KIND_SELECTOR {
            let sel = match name {
                "subflow" | "ip_pair" => {
                    let f = FlowKey::from_bytes(a)?;
                    let (src, dst) = (addr_from(&f.saddr, f.family), addr_from(&f.daddr, f.family));
                    if name == "subflow" {
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
                "src" | "dst" => {
                    let mut b = [0u8; 16];
                    b.copy_from_slice(&a[..16]);
                    let p = Prefix {
                        addr: addr_from(&b, a[17]),
                        len: a[16],
                    };
                    if name == "src" {
                        Selector::Src(p)
                    } else {
                        Selector::Dst(p)
                    }
                }
                "sequence" => Selector::Sequence {
                    what: SEQ_FIELDS.iter().find(|x| x.2 == a[16])?.1,
                    from: u64_at(0),
                    to: u64_at(8),
                },
                "packet_type" => Selector::PacketType {
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
            Some(LinkSpec::Act(match name {
                "rate_limit" => Actor::RateLimit { window: u32_at(0) },
                "set_backup" => Actor::SetBackup {
                    backup: a[0] != 0,
                    repeat: a[1],
                },
                "blk_subflow" => Actor::BlkSubflow,
                "add_subflow" => Actor::AddSubflow,
                "get_connect" => Actor::GetConnect,
                "get_subflow" => Actor::GetSubflow,
                "record" => Actor::Record,
                _ => return None,
            }))
        }
    }

    /// The selector or actor name (as in the file and in the bench).
    pub fn name(&self) -> &'static str {
        let l = self.to_abi();
        abi::PROGS[l.prog as usize]
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
                        let w = SEQ_FIELDS
                            .iter()
                            .find(|x| x.1 == *what)
                            .map(|x| x.0)
                            .unwrap_or("?");
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
        }
    }
}

/// The chain in the file's own syntax.
impl fmt::Display for ChainSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "[[chain]]\nname = \"{}\"\ndev = \"{}\"\nhook = \"{}\"\nlinks = [",
            self.name,
            self.dev,
            self.hook.name()
        )?;
        for l in &self.links {
            writeln!(f, "  {l},")?;
        }
        writeln!(f, "]")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
# comment
[[chain]]
name = "untrusted"
dev = "veth0"
hook = "egress"
links = [
  { select = "dst", prefix = "198.18.2.0/24" },
  { select = "packet_type", any = ["mp_join", "data_ack"], op = "or" },
  { act = "set_backup", backup = true },
  { select = "subflow", src = "2001:db8::1", dst = "2001:db8::2", dport = 80, not = true },
  { act = "rate_limit", rate_bps = 8000000, rtt_us = 10000 },
  { select = "sequence", what = "data_ack", from = 1, to = 4000 },
  { act = "record" },
]

[[chain]]
name = "in"
dev = "veth0"
hook = "ingress"
links = [ { act = "get_connect" }, { act = "blk_subflow" } ]
"#;

    #[test]
    fn parses_and_round_trips() {
        let p = parse(GOOD).unwrap();
        assert_eq!(p.chains.len(), 2);
        let c = &p.chains[0];
        assert_eq!(c.hook, Hook::Egress);
        assert_eq!(c.line, 3);
        assert_eq!(c.links.len(), 7);
        assert_eq!(
            c.links[4],
            LinkSpec::Act(Actor::RateLimit { window: 10_000 })
        );
        let abi = c.to_abi(1);
        assert_eq!(abi.len, 7);
        assert_eq!(abi.links[0].new_rule, 1);
        assert_eq!(abi.links[1].new_rule, 0);
        assert_eq!(abi.links[1].op, abi::OP_OR);
        assert_eq!(
            abi.links[3].new_rule, 1,
            "a selector after an actor starts a rule"
        );
        assert_eq!(abi.links[3].negate, 1);
        let back = ChainSpec::from_abi(&abi, "veth0", Hook::Egress);
        assert_eq!(back.links, c.links);
        // the printed form parses back to the same chain
        let again = parse(&back.to_string()).unwrap();
        assert_eq!(again.chains[0].links, c.links);
    }

    fn line_err(text: &str) -> SpecError {
        parse(text).unwrap_err()
    }

    #[test]
    fn errors_name_the_line() {
        let base = "[[chain]]\nname = \"a\"\ndev = \"v0\"\nhook = \"egress\"\nlinks = [\n";
        let e = line_err(&format!(
            "{base}  {{ act = \"record\" }},\n  {{ select = \"nope\" }},\n]\n"
        ));
        assert_eq!(e.line, 7);
        assert!(e.msg.contains("unknown selector `nope`"), "{e}");
        let e = line_err(&format!(
            "{base}  {{ select = \"dst\", prefix = \"1.2.3.4/40\" }},\n]\n"
        ));
        assert_eq!(e.line, 6);
        assert!(e.msg.contains("prefix length"), "{e}");
        let e = line_err(&format!(
            "{base}  {{ act = \"set_backup\", backup = 1 }},\n]\n"
        ));
        assert!(e.msg.contains("`backup` must be true or false"), "{e}");
        let e = line_err(&format!(
            "{base}  {{ act = \"record\", colour = \"red\" }},\n]\n"
        ));
        assert!(e.msg.contains("unknown key `colour`"), "{e}");
        let e = line_err("[[chain]]\nname = \"a\"\ndev = \"v0\"\nhook = \"sideways\"\nlinks = [ { act = \"record\" } ]\n");
        assert_eq!(e.line, 4);
        let e = line_err("[[chain]]\nname = \"a\"\n dev = \n");
        assert_eq!(e.line, 3, "{e}");
        let e = line_err("[[chain]]\nname = \"a\"\ndev = \"v0\"\nhook = \"egress\"\nlinks = []\n");
        assert!(e.msg.contains("no links"));
        let e = line_err(&format!(
            "{base}{{ select = \"subflow\", src = \"1.2.3.4\", dst = \"::1\" }}]\n"
        ));
        assert!(e.msg.contains("one IP version"), "{e}");
        let dup = "[[chain]]\nname = \"a\"\ndev = \"v0\"\nhook = \"egress\"\nlinks = [ { act = \"record\" } ]\n";
        let e = line_err(&format!("{dup}{dup}"));
        assert_eq!(e.line, 6);
        assert!(e.msg.contains("second chain"));
        let many: String = (0..17).map(|_| "{ act = \"record\" },").collect();
        let e = line_err(&format!("{base}{many}]\n"));
        assert!(e.msg.contains("at most 16"), "{e}");
    }

    #[test]
    fn prefixes() {
        let p: Prefix = "198.18.2.0/24".parse().unwrap();
        assert_eq!(p.len, 24);
        assert_eq!(p.to_string(), "198.18.2.0/24");
        assert_eq!("2001:db8::1".parse::<Prefix>().unwrap().len, 128);
        assert!("198.18.2.0/33".parse::<Prefix>().is_err());
        assert!("x/3".parse::<Prefix>().is_err());
    }
}
