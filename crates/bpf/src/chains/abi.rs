//! The binary layout shared with the BPF programs: Rust mirrors of the C types in
//! `bpf/chains/nena.h` (size and every member's offset checked at compile time against the types
//! the libbpf-cargo skeleton generates from the object's BTF, absence of padding proven by
//! zerocopy's derives), with conversion to and from map bytes.
//!
//! The skeleton's own types are not used as map values: they derive no zerocopy traits
//! (reading one from map bytes would take an `unsafe` transmute), `struct link`'s arguments
//! are a C union there, and `struct event` is not in the BTF at all.

use std::mem::size_of;

pub const MAX_LINKS: usize = 16;
pub const MAX_CHAINS: u32 = 64;
pub const NO_CHAIN: u32 = 0xffff_ffff;
/// Interfaces below this index have their hooks in the `hook_slots` array as well.
pub const FAST_IFINDEX: u32 = 1024;

/// Tenant ids are 1..MAX_TENANTS (0: no tenant).
pub const MAX_TENANTS: u32 = 16;
/// A tenant's chain of a hook: key of `tenant_hooks` = (ifindex, hook | tenant << TENANT_SHIFT).
pub const TENANT_SHIFT: u32 = 8;
pub const TENANT_FREE: u8 = 0;
pub const TENANT_CGROUP: u8 = 1;
pub const TENANT_UID: u8 = 2;

pub const HOOK_XDP: u32 = 0;
pub const HOOK_TC: u32 = 1;

pub const KIND_SELECTOR: u8 = 0;
pub const KIND_ACTOR: u8 = 1;
pub const OP_AND: u8 = 0;
pub const OP_OR: u8 = 1;

pub const SEQ_DATA_SEQ: u8 = 0;
pub const SEQ_DATA_ACK: u8 = 1;
pub const SEQ_SUBFLOW_SEQ: u8 = 2;
pub const SEQ_SUBFLOW_ACK: u8 = 3;

pub const EV_CONNECT: u32 = 1;
pub const EV_SUBFLOW: u32 = 2;
pub const EV_RECORD: u32 = 3;

/// The selectors and actors, in the order of `enum nena_prog` in `bpf/chains/nena.h`: the
/// discriminant is the link's `prog` byte, and an actor's is its slot in the jump tables.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Prog {
    Subflow = 0,
    IpPair,
    Src,
    Dst,
    Sequence,
    PacketType,
    RateLimit,
    SetBackup,
    BlkSubflow,
    AddSubflow,
    GetConnect,
    GetSubflow,
    Record,
    Drop,
}

impl Prog {
    /// Every program, in index order.
    pub const ALL: [Prog; 14] = [
        Prog::Subflow,
        Prog::IpPair,
        Prog::Src,
        Prog::Dst,
        Prog::Sequence,
        Prog::PacketType,
        Prog::RateLimit,
        Prog::SetBackup,
        Prog::BlkSubflow,
        Prog::AddSubflow,
        Prog::GetConnect,
        Prog::GetSubflow,
        Prog::Record,
        Prog::Drop,
    ];

    /// The name in chain files, in `show` and in the bench.
    pub const fn name(self) -> &'static str {
        match self {
            Prog::Subflow => "subflow",
            Prog::IpPair => "ip_pair",
            Prog::Src => "src",
            Prog::Dst => "dst",
            Prog::Sequence => "sequence",
            Prog::PacketType => "packet_type",
            Prog::RateLimit => "rate_limit",
            Prog::SetBackup => "set_backup",
            Prog::BlkSubflow => "blk_subflow",
            Prog::AddSubflow => "add_subflow",
            Prog::GetConnect => "get_connect",
            Prog::GetSubflow => "get_subflow",
            Prog::Record => "record",
            Prog::Drop => "drop",
        }
    }

    /// The link's `prog` byte (and the jump-table slot of an actor).
    pub const fn index(self) -> u8 {
        self as u8
    }

    /// Selectors run inline in the dispatcher; actors are tail-called.
    pub const fn is_actor(self) -> bool {
        self.index() >= Prog::RateLimit.index()
    }

    /// The `link.kind` of this program.
    pub const fn kind(self) -> u8 {
        if self.is_actor() {
            KIND_ACTOR
        } else {
            KIND_SELECTOR
        }
    }

    pub fn from_index(i: u8) -> Option<Prog> {
        Prog::ALL.get(i as usize).copied()
    }

    pub fn from_name(name: &str) -> Option<Prog> {
        Prog::ALL.into_iter().find(|p| p.name() == name)
    }

    /// The names of the selectors (or, with `actors`, of the actors), joined by ", ".
    pub fn names(actors: bool) -> String {
        let v: Vec<&str> = Prog::ALL
            .iter()
            .filter(|p| p.is_actor() == actors)
            .map(|p| p.name())
            .collect();
        v.join(", ")
    }
}

/// Serialised by its chain-file name (`"rate_limit"`), as the bench and `show` report it.
impl serde::Serialize for Prog {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl std::fmt::Display for Prog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Packet-type bits computed by the dispatcher, by name (for `packet_type` and `show`).
pub const PACKET_TYPES: [(&str, u32); 22] = [
    ("syn", 1 << 0),
    ("synack", 1 << 1),
    ("fin", 1 << 2),
    ("rst", 1 << 3),
    ("data", 1 << 4),
    ("pure_ack", 1 << 5),
    ("mptcp", 1 << 7),
    ("mp_capable", 1 << 8),
    ("mp_join", 1 << 9),
    ("dss", 1 << 10),
    ("add_addr", 1 << 11),
    ("rm_addr", 1 << 12),
    ("mp_prio", 1 << 13),
    ("mp_fail", 1 << 14),
    ("mp_fastclose", 1 << 15),
    ("mp_tcprst", 1 << 16),
    ("data_ack", 1 << 20),
    ("data_fin", 1 << 21),
    ("add_addr_echo", 1 << 22),
    ("dss_map", 1 << 23),
    ("ipv6", 1 << 29),
    ("ip_options", 1 << 30),
];

pub fn packet_type_bit(name: &str) -> Option<u32> {
    PACKET_TYPES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, b)| *b)
}

/// `struct flow_key`: a TCP flow as one packet shows it (ports in network order).
#[repr(C)]
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    Hash,
    zerocopy::FromBytes,
    zerocopy::IntoBytes,
    zerocopy::Immutable,
    zerocopy::KnownLayout,
)]
pub struct FlowKey {
    pub saddr: [u8; 16],
    pub daddr: [u8; 16],
    pub sport: u16,
    pub dport: u16,
    pub family: u8,
    pub pad: [u8; 3],
}

/// `struct link`: one selector or actor with its arguments.
#[repr(C)]
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    zerocopy::FromBytes,
    zerocopy::IntoBytes,
    zerocopy::Immutable,
    zerocopy::KnownLayout,
)]
pub struct Link {
    pub prog: u8,
    pub kind: u8,
    pub op: u8,
    pub new_rule: u8,
    pub negate: u8,
    pub pad: [u8; 3],
    pub args: [u8; 40],
}

impl Default for Link {
    fn default() -> Self {
        Link {
            prog: 0,
            kind: 0,
            op: 0,
            new_rule: 0,
            negate: 0,
            pad: [0; 3],
            args: [0; 40],
        }
    }
}

/// `struct chain`: a named sequence of links, the value of one slot of the `chains` map.
#[repr(C)]
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    zerocopy::FromBytes,
    zerocopy::IntoBytes,
    zerocopy::Immutable,
    zerocopy::KnownLayout,
)]
pub struct Chain {
    pub len: u32,
    pub gen: u32,
    pub name: [u8; 24],
    pub links: [Link; MAX_LINKS],
}

impl Default for Chain {
    fn default() -> Self {
        Chain {
            len: 0,
            gen: 0,
            name: [0; 24],
            links: [Link::default(); MAX_LINKS],
        }
    }
}

impl Chain {
    pub fn name(&self) -> String {
        let end = self
            .name
            .iter()
            .position(|b| *b == 0)
            .unwrap_or(self.name.len());
        String::from_utf8_lossy(&self.name[..end]).into_owned()
    }
}

#[repr(C)]
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    zerocopy::FromBytes,
    zerocopy::IntoBytes,
    zerocopy::Immutable,
    zerocopy::KnownLayout,
)]
pub struct HookKey {
    pub ifindex: u32,
    pub hook: u32,
}

/// `struct tenant_info`: a tenant id's name and definition (the `tenants` array, read by user
/// space only).
#[repr(C)]
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    zerocopy::FromBytes,
    zerocopy::IntoBytes,
    zerocopy::Immutable,
    zerocopy::KnownLayout,
)]
pub struct TenantInfo {
    pub name: [u8; 24],
    pub cgroup: u64,
    pub uid: u32,
    pub kind: u8,
    pub pad: [u8; 3],
    pub what: [u8; 64],
}

impl Default for TenantInfo {
    fn default() -> Self {
        TenantInfo {
            name: [0; 24],
            cgroup: 0,
            uid: 0,
            kind: TENANT_FREE,
            pad: [0; 3],
            what: [0; 64],
        }
    }
}

fn c_string(b: &[u8]) -> String {
    let end = b.iter().position(|b| *b == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

impl TenantInfo {
    pub fn name(&self) -> String {
        c_string(&self.name)
    }
    pub fn what(&self) -> String {
        c_string(&self.what)
    }
}

#[repr(C)]
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    zerocopy::FromBytes,
    zerocopy::IntoBytes,
    zerocopy::Immutable,
    zerocopy::KnownLayout,
)]
pub struct LinkStats {
    pub runs: u64,
    pub hits: u64,
}

#[repr(C)]
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    zerocopy::FromBytes,
    zerocopy::IntoBytes,
    zerocopy::Immutable,
    zerocopy::KnownLayout,
)]
pub struct KeptSlot {
    pub len: u8,
    pub id: u8,
    pub reannounced: u8,
    pub blocked: u8,
    pub opt: [u8; 32],
}

#[repr(C)]
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    zerocopy::FromBytes,
    zerocopy::IntoBytes,
    zerocopy::Immutable,
    zerocopy::KnownLayout,
)]
pub struct Kept {
    pub slot: [KeptSlot; 4],
}

#[repr(C)]
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    zerocopy::FromBytes,
    zerocopy::IntoBytes,
    zerocopy::Immutable,
    zerocopy::KnownLayout,
)]
pub struct Metrics {
    pub pkts: u64,
    pub bytes: u64,
    pub payload: u64,
    pub first_ns: u64,
    pub last_ns: u64,
    pub ts_val: u32,
    pub rtt_us: u32,
    pub ts_ns: u64,
    pub srtt_us: u32,
    pub samples: u32,
}

/// `struct event`: what get_connect, get_subflow and record put in the ring buffer.
#[repr(C)]
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    zerocopy::FromBytes,
    zerocopy::IntoBytes,
    zerocopy::Immutable,
    zerocopy::KnownLayout,
)]
pub struct RawEvent {
    pub kind: u32,
    pub ifindex: u32,
    pub ts_ns: u64,
    pub flow: FlowKey,
    pub hook: u8,
    pub stage: u8,
    pub flags: u8,
    pub nkeys: u8,
    pub addr_id: u8,
    pub version: u8,
    pub pad: [u8; 2],
    pub key_a: [u8; 8],
    pub key_b: [u8; 8],
    pub m: Metrics,
}

/// `struct nena_ctx`, for tests that look at XDP metadata.
#[repr(C)]
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    zerocopy::FromBytes,
    zerocopy::IntoBytes,
    zerocopy::Immutable,
    zerocopy::KnownLayout,
)]
pub struct NenaCtx {
    pub types: u32,
    pub l4_off: u16,
    pub pay_len: u16,
    pub chain: u16,
    pub l3_off: u8,
    pub doff: u8,
    pub pos: u8,
    pub m: u8,
    pub hook: u8,
    pub magic: u8,
    pub tcp_flags: u8,
    pub pad: [u8; 3],
}

/// Size of `struct flow4`, the key of the IPv4 per-flow maps (`flows4`, `kept4`,
/// `metrics4`); the IPv6 ones (`*6`) are keyed by `FlowKey`.
pub const FLOW4_LEN: usize = 12;

impl FlowKey {
    /// The key of this flow in the per-flow map of its family: (map name suffix, key bytes).
    pub fn map_key(&self) -> (&'static str, Vec<u8>) {
        if self.family == 4 {
            let mut k = Vec::with_capacity(FLOW4_LEN);
            k.extend_from_slice(&self.saddr[..4]);
            k.extend_from_slice(&self.daddr[..4]);
            k.extend_from_slice(&self.sport.to_ne_bytes());
            k.extend_from_slice(&self.dport.to_ne_bytes());
            ("4", k)
        } else {
            ("6", self.as_bytes().to_vec())
        }
    }

    /// The flow of a per-flow map key (12 bytes: IPv4, 40: `FlowKey`), or None.
    pub fn from_map_key(k: &[u8]) -> Option<FlowKey> {
        match k.len() {
            FLOW4_LEN => {
                let mut f = FlowKey {
                    family: 4,
                    ..Default::default()
                };
                f.saddr[..4].copy_from_slice(&k[0..4]);
                f.daddr[..4].copy_from_slice(&k[4..8]);
                f.sport = u16::from_ne_bytes([k[8], k[9]]);
                f.dport = u16::from_ne_bytes([k[10], k[11]]);
                Some(f)
            }
            40 => FlowKey::from_bytes(k),
            _ => None,
        }
    }
}

/// The mirror `$r` has the size of the C type `$c` (from the skeleton's `types`, which
/// libbpf-cargo generates from the object's BTF) and each of its members the offset of the
/// C member it mirrors: checked when this crate compiles, so a C change that is not mirrored
/// here (a member moved, renamed, resized) is a build error.
#[cfg(feature = "bpf")]
macro_rules! same_layout {
    ($r:ty = $c:ty; $($rf:ident => $cf:ident),* $(,)?) => {
        const _: () = {
            assert!(size_of::<$r>() == size_of::<$c>(), concat!("size of ", stringify!($r)));
            $(assert!(
                std::mem::offset_of!($r, $rf) == std::mem::offset_of!($c, $cf),
                concat!(stringify!($r), ".", stringify!($rf))
            );)*
        };
    };
}
#[cfg(feature = "bpf")]
pub(crate) use same_layout;
/// The checks against the skeleton's C types (only where the BPF objects are built).
#[cfg(feature = "bpf")]
mod c_layout {
    use super::*;
    use crate::skel::nena::types as c;
    same_layout!(FlowKey = c::flow_key; saddr => saddr, daddr => daddr, sport => sport,
    dport => dport, family => family, pad => pad);
    same_layout!(Link = c::link; prog => prog, kind => kind, op => op, new_rule => new_rule,
    negate => negate, pad => pad, args => a);
    same_layout!(Chain = c::chain; len => len, gen => r#gen, name => name, links => links);
    same_layout!(HookKey = c::hook_key; ifindex => ifindex, hook => hook);
    same_layout!(TenantInfo = c::tenant_info; name => name, cgroup => cgroup, uid => uid,
    kind => kind, pad => pad, what => what);
    same_layout!(LinkStats = c::link_stats; runs => runs, hits => hits);
    same_layout!(KeptSlot = c::kept_slot; len => len, id => id, reannounced => reannounced,
    blocked => blocked, opt => opt);
    same_layout!(Kept = c::kept; slot => slot);
    same_layout!(Metrics = c::metrics; pkts => pkts, bytes => bytes, payload => payload,
    first_ns => first_ns, last_ns => last_ns, ts_val => ts_val, rtt_us => rtt_us,
    ts_ns => ts_ns, srtt_us => srtt_us, samples => samples);
    same_layout!(NenaCtx = c::nena_ctx; types => types, l4_off => l4_off, pay_len => pay_len,
    chain => chain, l3_off => l3_off, doff => doff, pos => pos, m => m, hook => hook,
    magic => magic, tcp_flags => tcp_flags, pad => pad);
    const _: () = assert!(FLOW4_LEN == size_of::<c::flow4>());
}
// `struct event` is not in the BTF (see the test below): its mirror rests on its size.
const _: () = assert!(size_of::<RawEvent>() == 144);
const _: () = assert!(size_of::<NenaCtx>() == 20);

/// Plain-old-data types that can be copied to and from map bytes. Implemented for every type
/// that zerocopy's derives prove to be plain bytes: `IntoBytes` fails to compile for a
/// struct with padding the compiler would leave uninitialised, `FromBytes` for one with a
/// field that not every bit pattern is valid for. No `unsafe` here.
pub trait Pod:
    zerocopy::FromBytes + zerocopy::IntoBytes + zerocopy::Immutable + Copy + Default
{
    fn as_bytes(&self) -> &[u8] {
        zerocopy::IntoBytes::as_bytes(self)
    }
    /// Read from bytes (at least `size_of::<Self>()` of them; the rest is ignored), or None.
    fn from_bytes(b: &[u8]) -> Option<Self> {
        <Self as zerocopy::FromBytes>::read_from_prefix(b)
            .ok()
            .map(|(v, _)| v)
    }
}

impl<T> Pod for T where
    T: zerocopy::FromBytes + zerocopy::IntoBytes + zerocopy::Immutable + Copy + Default
{
}

/// Put a value into the 40 argument bytes of a link.
pub fn args_of<T: Pod>(v: &T) -> [u8; 40] {
    let mut a = [0u8; 40];
    let b = Pod::as_bytes(v);
    a[..b.len()].copy_from_slice(b);
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_flow_map_keys_round_trip() {
        let mut v4 = FlowKey {
            family: 4,
            sport: 0x1234,
            dport: 0x5678,
            ..Default::default()
        };
        v4.saddr[..4].copy_from_slice(&[198, 18, 100, 1]);
        v4.daddr[..4].copy_from_slice(&[198, 18, 100, 2]);
        let (suffix, k) = v4.map_key();
        assert_eq!((suffix, k.len()), ("4", FLOW4_LEN));
        assert_eq!(&k[..8], &[198, 18, 100, 1, 198, 18, 100, 2]);
        assert_eq!(FlowKey::from_map_key(&k), Some(v4));
        let v6 = FlowKey {
            family: 6,
            saddr: [0x20; 16],
            daddr: [0x30; 16],
            sport: 1,
            dport: 2,
            pad: [0; 3],
        };
        let (suffix, k) = v6.map_key();
        assert_eq!((suffix, k.len()), ("6", 40));
        assert_eq!(FlowKey::from_map_key(&k), Some(v6));
        assert_eq!(FlowKey::from_map_key(&[0u8; 13]), None);
    }

    #[test]
    fn pod_round_trip() {
        let mut c = Chain {
            len: 2,
            gen: 7,
            ..Default::default()
        };
        c.name[..3].copy_from_slice(b"abc");
        c.links[1].prog = 5;
        c.links[1].args[39] = 9;
        let back = Chain::from_bytes(c.as_bytes()).unwrap();
        assert_eq!(back, c);
        assert_eq!(back.name(), "abc");
        assert!(Chain::from_bytes(&[0u8; 10]).is_none());
        assert_eq!(Prog::from_name("record").map(Prog::index), Some(12));
        assert_eq!(Prog::from_index(5), Some(Prog::PacketType));
        assert!(Prog::RateLimit.is_actor() && !Prog::PacketType.is_actor());
        assert_eq!(Prog::from_index(13), Some(Prog::Drop));
        assert_eq!(Prog::from_index(14), None);
        assert_eq!(packet_type_bit("mp_prio"), Some(1 << 13));
    }

    /// The Rust mirrors agree with the C types as the compiler laid them out: the size and
    /// every member's name and offset, read from the BTF of the embedded object.
    #[cfg(feature = "bpf")]
    #[test]
    fn layout_matches_the_btf_of_the_object() {
        use libbpf_rs::btf::types::{MemberAttr, Struct};
        use libbpf_rs::btf::{Btf, HasSize};
        use std::mem::offset_of;
        let btf = Btf::from_raw("nena", crate::BPF_OBJECT)
            .expect("reading the object's BTF")
            .expect("the object has BTF");
        macro_rules! fields {
            ($t:ty; $($c:literal => $f:ident),* $(,)?) => {
                (size_of::<$t>(), vec![$(($c, offset_of!($t, $f))),*])
            };
        }
        // `struct event` is not in the BTF (only inlined code reaches it, through the ring
        // buffer, whose map has no value type): RawEvent rests on its size assertion.
        assert!(
            btf.type_by_name::<Struct>("event").is_none(),
            "check struct event too"
        );
        /// A C struct: its size and (member, offset) list, as Rust lays out its mirror.
        type Layout = (usize, Vec<(&'static str, usize)>);
        let cases: [(&str, Layout); 10] = [
            (
                "tenant_info",
                fields!(TenantInfo; "name" => name, "cgroup" => cgroup, "uid" => uid,
                "kind" => kind, "pad" => pad, "what" => what),
            ),
            (
                "flow_key",
                fields!(FlowKey; "saddr" => saddr, "daddr" => daddr, "sport" => sport,
                "dport" => dport, "family" => family, "pad" => pad),
            ),
            (
                "link",
                fields!(Link; "prog" => prog, "kind" => kind, "op" => op,
                "new_rule" => new_rule, "negate" => negate, "pad" => pad, "a" => args),
            ),
            (
                "chain",
                fields!(Chain; "len" => len, "gen" => gen, "name" => name, "links" => links),
            ),
            (
                "hook_key",
                fields!(HookKey; "ifindex" => ifindex, "hook" => hook),
            ),
            (
                "link_stats",
                fields!(LinkStats; "runs" => runs, "hits" => hits),
            ),
            (
                "kept_slot",
                fields!(KeptSlot; "len" => len, "id" => id,
                "reannounced" => reannounced, "blocked" => blocked, "opt" => opt),
            ),
            ("kept", fields!(Kept; "slot" => slot)),
            (
                "metrics",
                fields!(Metrics; "pkts" => pkts, "bytes" => bytes, "payload" => payload,
                "first_ns" => first_ns, "last_ns" => last_ns, "ts_val" => ts_val,
                "rtt_us" => rtt_us, "ts_ns" => ts_ns, "srtt_us" => srtt_us, "samples" => samples),
            ),
            (
                "nena_ctx",
                fields!(NenaCtx; "types" => types, "l4_off" => l4_off,
                "pay_len" => pay_len, "chain" => chain, "l3_off" => l3_off, "doff" => doff,
                "pos" => pos, "m" => m, "hook" => hook, "magic" => magic,
                "tcp_flags" => tcp_flags, "pad" => pad),
            ),
        ];
        for (name, (size, members)) in cases {
            let st: Struct = btf
                .type_by_name(name)
                .unwrap_or_else(|| panic!("struct {name} not in the BTF"));
            assert_eq!(st.size(), size, "size of struct {name}");
            let c: Vec<(String, usize)> = st
                .iter()
                .map(|m| {
                    let off = match m.attr {
                        MemberAttr::Normal { offset } => offset as usize / 8,
                        MemberAttr::BitField { .. } => panic!("bit field in struct {name}"),
                    };
                    (
                        m.name.unwrap_or_default().to_string_lossy().into_owned(),
                        off,
                    )
                })
                .collect();
            let rust: Vec<(String, usize)> =
                members.iter().map(|(n, o)| (n.to_string(), *o)).collect();
            assert_eq!(c, rust, "members of struct {name} (C, Rust)");
        }
    }
}
