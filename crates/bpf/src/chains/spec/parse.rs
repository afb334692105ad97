//! The chain file parser, on serde: the file is deserialized by the `toml` crate into
//! `Raw*` types whose values carry their spans (`toml::Spanned`), then checked and turned
//! into the model. Every error names the line of the value (or key) that is wrong: serde's
//! own errors (syntax, types, unknown keys) through the span the `toml` crate reports, the
//! checks of this module through the spans of the values they look at.

use super::model::{
    Actor, ChainSpec, Hook, LinkSpec, PolicySpec, Prefix, Selector, SeqField, TenantMatch,
    TenantSpec,
};
use crate::chains::abi::{self, Prog};
use serde::Deserialize;
use std::net::IpAddr;
use toml::Spanned;

/// A policy file error: the line (1-based, 0 if unknown) and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {msg}")]
pub struct SpecError {
    pub line: usize,
    pub msg: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    chain: Vec<Spanned<RawChain>>,
    #[serde(default)]
    tenant: Vec<Spanned<RawTenant>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawChain {
    name: Spanned<String>,
    dev: Spanned<String>,
    hook: Spanned<Hook>,
    tenant: Option<Spanned<String>>,
    links: Spanned<Vec<Spanned<RawLink>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTenant {
    name: Spanned<String>,
    cgroup: Option<Spanned<String>>,
    uid: Option<Spanned<i64>>,
}

/// Tenant ids 1..MAX_TENANTS: this many tenants at most.
pub const MAX_TENANTS: usize = abi::MAX_TENANTS as usize - 1;

/// How a selector combines with the running match value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Op {
    And,
    Or,
}

/// One link as written: `select` or `act`, and the arguments of every kind (each kind takes
/// the ones in [`keys_of`]).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLink {
    select: Option<Spanned<String>>,
    act: Option<Spanned<String>>,
    op: Option<Spanned<Op>>,
    not: Option<Spanned<bool>>,
    src: Option<Spanned<String>>,
    dst: Option<Spanned<String>>,
    sport: Option<Spanned<i64>>,
    dport: Option<Spanned<i64>>,
    prefix: Option<Spanned<String>>,
    what: Option<Spanned<SeqField>>,
    from: Option<Spanned<i64>>,
    to: Option<Spanned<i64>>,
    all: Option<Spanned<Vec<Spanned<String>>>>,
    any: Option<Spanned<Vec<Spanned<String>>>>,
    none: Option<Spanned<Vec<Spanned<String>>>>,
    window: Option<Spanned<i64>>,
    rate_bps: Option<Spanned<i64>>,
    rtt_us: Option<Spanned<i64>>,
    backup: Option<Spanned<bool>>,
    repeat: Option<Spanned<i64>>,
}

/// The argument keys each selector and actor takes (besides `select`/`act`; selectors
/// also take `op` and `not`).
fn keys_of(p: Prog) -> &'static [&'static str] {
    match p {
        Prog::Subflow => &["src", "dst", "sport", "dport"],
        Prog::IpPair => &["src", "dst"],
        Prog::Src | Prog::Dst => &["prefix"],
        Prog::Sequence => &["what", "from", "to"],
        Prog::PacketType => &["all", "any", "none"],
        Prog::RateLimit => &["window", "rate_bps", "rtt_us"],
        Prog::SetBackup => &["backup", "repeat"],
        Prog::BlkSubflow
        | Prog::AddSubflow
        | Prog::GetConnect
        | Prog::GetSubflow
        | Prog::Record
        | Prog::Drop => &[],
    }
}

/// Line numbers of byte offsets in one text.
struct Lines<'a>(&'a str);

impl Lines<'_> {
    fn of(&self, offset: usize) -> usize {
        let t = self.0;
        t[..offset.min(t.len())]
            .bytes()
            .filter(|b| *b == b'\n')
            .count()
            + 1
    }
    fn err<T>(&self, at: &Spanned<T>, msg: impl Into<String>) -> SpecError {
        SpecError {
            line: self.of(at.span().start),
            msg: msg.into(),
        }
    }
    /// The key of the `key = value` whose value starts at `offset`, if the text shows one.
    fn key_before(&self, offset: usize) -> Option<&str> {
        let before = self
            .0
            .get(..offset)?
            .trim_end()
            .strip_suffix('=')?
            .trim_end();
        let start = before
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
            .map_or(0, |i| i + 1);
        let key = &before[start..];
        (!key.is_empty()).then_some(key)
    }
}

/// serde's wording of an error in the file's terms, on one line, naming the key (`key`:
/// the key of the value the error points at, if any): a type error ("invalid type: integer
/// `1`, expected a boolean") as "`backup` must be true or false, not integer `1`", an unknown
/// variant as "`hook` = \"x\": expected ...", an unknown field as an unknown key with the
/// keys known there, a missing field as "`hook` is missing"; others as they are.
fn reword(msg: &str, key: Option<&str>) -> String {
    let msg = msg
        .trim()
        .lines()
        .map(str::trim)
        .collect::<Vec<_>>()
        .join("; ");
    let named = |m: String| match key {
        Some(k) => format!("`{k}` {m}"),
        None => m,
    };
    if let Some((got, want)) = msg
        .strip_prefix("invalid type: ")
        .and_then(|r| r.split_once(", expected "))
    {
        let want = match want {
            "a boolean" => "true or false",
            "i64" => "an integer",
            "a sequence" => "a list",
            w => w,
        };
        return named(format!("must be {want}, not {got}"));
    }
    if let Some((got, want)) = msg
        .strip_prefix("unknown variant `")
        .and_then(|r| r.split_once("`, expected "))
    {
        return match key {
            Some(k) => format!("`{k}` = \"{got}\": expected {want}"),
            None => format!("`{got}`: expected {want}"),
        };
    }
    if let Some((field, known)) = msg.strip_prefix("unknown field ").and_then(|r| {
        r.split_once(", expected one of ")
            .or_else(|| r.split_once(", expected "))
    }) {
        return format!(
            "unknown key {field} (known: {})",
            known.replace("` or `", "`, `")
        );
    }
    if let Some(field) = msg.strip_prefix("missing field ") {
        return format!("{field} is missing");
    }
    msg
}

/// Parse and validate a policy file. Every error names its line.
pub fn parse(text: &str) -> Result<PolicySpec, SpecError> {
    let lines = Lines(text);
    let raw: RawFile = toml::from_str(text).map_err(|e| match e.span() {
        None => SpecError {
            line: 0,
            msg: reword(e.message(), None),
        },
        Some(s) => SpecError {
            line: lines.of(s.start),
            msg: reword(e.message(), lines.key_before(s.start)),
        },
    })?;
    let tenants = tenants(&lines, &raw.tenant)?;
    let mut chains: Vec<ChainSpec> = Vec::new();
    for rc in raw.chain {
        let cl = lines.of(rc.span().start);
        let rc = rc.into_inner();
        let name = rc.name.get_ref().clone();
        if name.is_empty() || name.len() > 23 {
            return Err(lines.err(
                &rc.name,
                format!("chain name `{name}` must be 1 to 23 bytes"),
            ));
        }
        let dev = rc.dev.get_ref().clone();
        if dev.is_empty() || dev.len() > 15 {
            return Err(lines.err(&rc.dev, format!("`{dev}` is not an interface name")));
        }
        let hook = *rc.hook.get_ref();
        let raw_links = rc.links.get_ref();
        if raw_links.is_empty() {
            return Err(lines.err(&rc.links, format!("chain `{name}` has no links")));
        }
        if raw_links.len() > abi::MAX_LINKS {
            return Err(lines.err(
                &rc.links,
                format!(
                    "chain `{name}` has {} links, at most {}",
                    raw_links.len(),
                    abi::MAX_LINKS
                ),
            ));
        }
        let links = raw_links
            .iter()
            .map(|l| link(&lines, l))
            .collect::<Result<Vec<_>, _>>()?;
        let tenant = match &rc.tenant {
            None => None,
            Some(t) => {
                let n = t.get_ref();
                if !tenants.iter().any(|x| &x.name == n) {
                    let known: Vec<&str> = tenants.iter().map(|x| x.name.as_str()).collect();
                    return Err(lines.err(
                        t,
                        if known.is_empty() {
                            format!("unknown tenant `{n}` (the file defines no [[tenant]])")
                        } else {
                            format!("unknown tenant `{n}` (defined: {})", known.join(", "))
                        },
                    ));
                }
                Some(n.clone())
            }
        };
        if chains
            .iter()
            .any(|c| c.dev == dev && c.hook == hook && c.tenant == tenant)
        {
            let whose = match &tenant {
                Some(t) => format!(" of tenant `{t}`"),
                None => String::new(),
            };
            return Err(SpecError {
                line: cl,
                msg: format!(
                    "a second chain{whose} for {dev} {}: one chain per interface, hook and tenant",
                    hook.name()
                ),
            });
        }
        chains.push(ChainSpec {
            name,
            dev,
            hook,
            links,
            line: cl,
            tenant,
        });
    }
    Ok(PolicySpec { chains, tenants })
}

/// The `[[tenant]]` tables: a name (1 to 23 bytes, unique) and either `cgroup` (a path from
/// the root of the cgroup v2 hierarchy) or `uid`, neither given twice.
fn tenants(lines: &Lines, raw: &[Spanned<RawTenant>]) -> Result<Vec<TenantSpec>, SpecError> {
    let mut out: Vec<TenantSpec> = Vec::new();
    for rt in raw {
        let line = lines.of(rt.span().start);
        let t = rt.get_ref();
        let name = t.name.get_ref().clone();
        if name.is_empty() || name.len() > 23 {
            return Err(lines.err(
                &t.name,
                format!("tenant name `{name}` must be 1 to 23 bytes"),
            ));
        }
        if let Some(o) = out.iter().find(|o| o.name == name) {
            return Err(lines.err(
                &t.name,
                format!("a second tenant `{name}` (the first is on line {})", o.line),
            ));
        }
        let who = match (&t.cgroup, &t.uid) {
            (Some(_), Some(_)) => {
                return Err(lines.err(
                    rt,
                    format!("tenant `{name}` has `cgroup` and `uid`: give one of them"),
                ))
            }
            (None, None) => {
                return Err(lines.err(
                    rt,
                    format!("tenant `{name}` needs `cgroup = \"/path\"` or `uid = N`"),
                ))
            }
            (Some(c), None) => {
                let p = c.get_ref();
                let bad = |why: &str| lines.err(c, format!("`cgroup` = \"{p}\": {why}"));
                if !p.starts_with('/') {
                    return Err(bad(
                        "must be a path from the root of the cgroup v2 hierarchy, starting with `/`",
                    ));
                }
                if p.split('/').any(|part| part == "." || part == "..") {
                    return Err(bad("`.` and `..` are not allowed"));
                }
                if p.contains('\0') || p.len() > 4000 {
                    return Err(bad("not a cgroup path"));
                }
                // one spelling per cgroup: no trailing or doubled slashes
                let norm = format!(
                    "/{}",
                    p.split('/')
                        .filter(|x| !x.is_empty())
                        .collect::<Vec<_>>()
                        .join("/")
                );
                TenantMatch::Cgroup(norm)
            }
            (None, Some(u)) => {
                let v = *u.get_ref();
                if !(0..=i64::from(u32::MAX - 1)).contains(&v) {
                    return Err(lines.err(u, format!("`uid` = {v} is not in 0..={}", u32::MAX - 1)));
                }
                TenantMatch::Uid(v as u32)
            }
        };
        if let Some(o) = out.iter().find(|o| o.who == who) {
            return Err(SpecError {
                line,
                msg: format!(
                    "tenant `{name}`: {who} is tenant `{}` already (line {})",
                    o.name, o.line
                ),
            });
        }
        if out.len() == MAX_TENANTS {
            return Err(SpecError {
                line,
                msg: format!("at most {MAX_TENANTS} tenants"),
            });
        }
        out.push(TenantSpec { name, who, line });
    }
    Ok(out)
}

/// One link of the file into the model.
fn link(lines: &Lines, l: &Spanned<RawLink>) -> Result<LinkSpec, SpecError> {
    let r = l.get_ref();
    let (kind, actor) = match (&r.select, &r.act) {
        (Some(_), Some(_)) => {
            return Err(lines.err(l, "a link has either `select` or `act`, not both"))
        }
        (None, None) => {
            return Err(lines.err(l, "a link needs `select = \"...\"` or `act = \"...\"`"))
        }
        (Some(s), None) => (s, false),
        (None, Some(a)) => (a, true),
    };
    let what = if actor { "actor" } else { "selector" };
    let prog = Prog::from_name(kind.get_ref())
        .filter(|p| p.is_actor() == actor)
        .ok_or_else(|| {
            lines.err(
                kind,
                format!(
                    "unknown {what} `{}` (known: {})",
                    kind.get_ref(),
                    Prog::names(actor)
                ),
            )
        })?;
    // keys of other kinds
    let given: [(&str, Option<usize>); 18] = [
        ("op", r.op.as_ref().map(|v| v.span().start)),
        ("not", r.not.as_ref().map(|v| v.span().start)),
        ("src", r.src.as_ref().map(|v| v.span().start)),
        ("dst", r.dst.as_ref().map(|v| v.span().start)),
        ("sport", r.sport.as_ref().map(|v| v.span().start)),
        ("dport", r.dport.as_ref().map(|v| v.span().start)),
        ("prefix", r.prefix.as_ref().map(|v| v.span().start)),
        ("what", r.what.as_ref().map(|v| v.span().start)),
        ("from", r.from.as_ref().map(|v| v.span().start)),
        ("to", r.to.as_ref().map(|v| v.span().start)),
        ("all", r.all.as_ref().map(|v| v.span().start)),
        ("any", r.any.as_ref().map(|v| v.span().start)),
        ("none", r.none.as_ref().map(|v| v.span().start)),
        ("window", r.window.as_ref().map(|v| v.span().start)),
        ("rate_bps", r.rate_bps.as_ref().map(|v| v.span().start)),
        ("rtt_us", r.rtt_us.as_ref().map(|v| v.span().start)),
        ("backup", r.backup.as_ref().map(|v| v.span().start)),
        ("repeat", r.repeat.as_ref().map(|v| v.span().start)),
    ];
    for (k, at) in given {
        let Some(at) = at else { continue };
        let selector_key = !actor && (k == "op" || k == "not");
        if !selector_key && !keys_of(prog).contains(&k) {
            return Err(SpecError {
                line: lines.of(at),
                msg: format!("unknown key `{k}` for {what} `{prog}`"),
            });
        }
    }
    let int = |v: &Option<Spanned<i64>>, k: &str, min: i64, max: i64| match v {
        None => Ok(None),
        Some(s) if (min..=max).contains(s.get_ref()) => Ok(Some(*s.get_ref())),
        Some(s) => Err(lines.err(
            s,
            format!("`{k}` = {} is not in {min}..={max}", s.get_ref()),
        )),
    };
    let missing = |k: &str| lines.err(l, format!("`{k}` is missing"));
    let ip = |v: &Option<Spanned<String>>, k: &str| -> Result<IpAddr, SpecError> {
        let s = v.as_ref().ok_or_else(|| missing(k))?;
        s.get_ref().parse().map_err(|_| {
            lines.err(
                s,
                format!("`{k}` = \"{}\" is not an IP address", s.get_ref()),
            )
        })
    };
    let pair = || -> Result<(IpAddr, IpAddr), SpecError> {
        let (src, dst) = (ip(&r.src, "src")?, ip(&r.dst, "dst")?);
        if src.is_ipv4() != dst.is_ipv4() {
            return Err(lines.err(l, "`src` and `dst` must be of one IP version"));
        }
        Ok((src, dst))
    };
    let types = |v: &Option<Spanned<Vec<Spanned<String>>>>| -> Result<u32, SpecError> {
        let mut bits = 0;
        for n in v.iter().flat_map(|v| v.get_ref()) {
            bits |= abi::packet_type_bit(n.get_ref()).ok_or_else(|| {
                let all: Vec<&str> = abi::PACKET_TYPES.iter().map(|(n, _)| *n).collect();
                lines.err(
                    n,
                    format!(
                        "unknown packet type `{}` (known: {})",
                        n.get_ref(),
                        all.join(", ")
                    ),
                )
            })?;
        }
        Ok(bits)
    };
    if !actor {
        let sel = match prog {
            Prog::Subflow => {
                let (src, dst) = pair()?;
                let sport = int(&r.sport, "sport", 0, 65535)?.unwrap_or(0) as u16;
                let dport = int(&r.dport, "dport", 0, 65535)?.unwrap_or(0) as u16;
                Selector::Subflow {
                    src,
                    dst,
                    sport,
                    dport,
                }
            }
            Prog::IpPair => {
                let (src, dst) = pair()?;
                Selector::IpPair { src, dst }
            }
            Prog::Src | Prog::Dst => {
                let s = r.prefix.as_ref().ok_or_else(|| missing("prefix"))?;
                let p: Prefix = s.get_ref().parse().map_err(|m| lines.err(s, m))?;
                if prog == Prog::Src {
                    Selector::Src(p)
                } else {
                    Selector::Dst(p)
                }
            }
            Prog::Sequence => Selector::Sequence {
                what: *r.what.as_ref().ok_or_else(|| missing("what"))?.get_ref(),
                from: int(&r.from, "from", 0, i64::MAX)?.ok_or_else(|| missing("from"))? as u64,
                to: int(&r.to, "to", 0, i64::MAX)?.ok_or_else(|| missing("to"))? as u64,
            },
            Prog::PacketType => {
                let (all, any, none) = (types(&r.all)?, types(&r.any)?, types(&r.none)?);
                if all | any | none == 0 {
                    return Err(
                        lines.err(l, "packet_type needs at least one of `all`, `any`, `none`")
                    );
                }
                Selector::PacketType { all, any, none }
            }
            _ => unreachable!("{prog} is a selector"),
        };
        return Ok(LinkSpec::Select {
            sel,
            or: r.op.as_ref().is_some_and(|o| *o.get_ref() == Op::Or),
            not: r.not.as_ref().is_some_and(|n| *n.get_ref()),
        });
    }
    let act = match prog {
        Prog::RateLimit => {
            let window = int(&r.window, "window", 1, 0xffff << 14)?;
            let rate = int(&r.rate_bps, "rate_bps", 1, i64::MAX / 1_000_000)?;
            let rtt = int(&r.rtt_us, "rtt_us", 1, 10_000_000)?;
            let window = match (window, rate, rtt) {
                (Some(w), None, None) => w as u32,
                (None, Some(r), Some(t)) => {
                    ((r as u128 * t as u128 / 8_000_000) as u64).clamp(1, 0xffff << 14) as u32
                }
                _ => {
                    return Err(lines.err(
                        l,
                        "rate_limit needs `window` (bytes), or `rate_bps` and `rtt_us`",
                    ))
                }
            };
            Actor::RateLimit { window }
        }
        Prog::SetBackup => Actor::SetBackup {
            backup: r.backup.as_ref().is_none_or(|b| *b.get_ref()),
            repeat: int(&r.repeat, "repeat", 1, 255)?.unwrap_or(3) as u8,
        },
        Prog::BlkSubflow => Actor::BlkSubflow,
        Prog::AddSubflow => Actor::AddSubflow,
        Prog::GetConnect => Actor::GetConnect,
        Prog::GetSubflow => Actor::GetSubflow,
        Prog::Record => Actor::Record,
        Prog::Drop => Actor::Drop,
        _ => unreachable!("{prog} is an actor"),
    };
    Ok(LinkSpec::Act(act))
}
