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
//!
//! - [`model`]: the types (hooks, selectors, actors, links, chains), their map form and
//!   their printed form.
//! - [`parse`]: the file parser, serde with spans (`toml::Spanned`), and its errors.

pub mod model;
pub mod parse;

pub use model::{
    Actor, ChainSpec, Hook, LinkSpec, PolicySpec, Prefix, Selector, SeqField, TenantMatch,
    TenantSpec,
};
pub use parse::{parse, SpecError};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chains::abi;
    use crate::chains::spec::{TenantMatch, TenantSpec};

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

    /// The errors serde and the toml crate find (types, unknown keys and variants, missing
    /// keys) name the key and the line, like the checks of the parser do.
    #[test]
    fn serde_errors_name_the_key() {
        let base = "[[chain]]\nname = \"a\"\ndev = \"v0\"\nhook = \"egress\"\nlinks = [\n";
        let link = |l: &str| line_err(&format!("{base}  {{ act = \"record\" }},\n  {l},\n]\n"));
        let cases = [
            (
                "{ act = \"record\", window = 3 }",
                "unknown key `window` for actor `record`",
            ),
            (
                "{ act = \"record\", colour = 1 }",
                "unknown key `colour` (known: `select`, `act`,",
            ),
            (
                "{ select = \"sequence\", what = \"nope\", from = 1, to = 2 }",
                "`what` = \"nope\": expected one of `data_seq`, `data_ack`",
            ),
            (
                "{ select = \"packet_type\", any = \"syn\" }",
                "`any` must be a list, not string",
            ),
            (
                "{ select = \"packet_type\", any = [\"bogus\"] }",
                "unknown packet type `bogus`",
            ),
            (
                "{ select = \"dst\", prefix = \"::1\", op = \"xor\" }",
                "`op` = \"xor\": expected `and` or `or`",
            ),
            (
                "{ select = \"subflow\", src = \"::1\", dst = \"::2\", sport = 1.5 }",
                "`sport` must be an integer, not floating point `1.5`",
            ),
            (
                "{ select = \"subflow\", src = \"::1\", dst = \"::2\", dport = 70000 }",
                "`dport` = 70000 is not in 0..=65535",
            ),
            (
                "{ select = \"subflow\", src = \"::1\", dst = \"x\" }",
                "`dst` = \"x\" is not an IP address",
            ),
            ("{ select = \"dst\" }", "`prefix` is missing"),
            ("{ act = \"dst\" }", "unknown actor `dst`"),
            (
                "{ select = 3 }",
                "`select` must be a string, not integer `3`",
            ),
            ("{ }", "a link needs `select"),
        ];
        for (l, want) in cases {
            let e = link(l);
            assert_eq!(e.line, 7, "{l}: {e}");
            assert!(e.msg.starts_with(want), "{l}: {e}");
            assert!(!e.msg.contains('\n'), "one line: {e}");
        }
        let e = line_err("[[chain]]\nname = \"a\"\ndev = \"v0\"\nhook = \"sideways\"\nlinks = [ { act = \"record\" } ]\n");
        assert_eq!(
            e.msg,
            "`hook` = \"sideways\": expected one of `ingress`, `xdp`, `egress`, `tc`"
        );
        let e =
            line_err("\n[[chain]]\nname = \"a\"\ndev = \"v0\"\nlinks = [ { act = \"record\" } ]\n");
        assert_eq!((e.line, e.msg.as_str()), (2, "`hook` is missing"));
        let e = line_err("[[chain]]\nname = 3\n");
        assert_eq!(
            (e.line, e.msg.as_str()),
            (2, "`name` must be a string, not integer `3`")
        );
        let e = line_err("x = 1\n");
        assert_eq!(
            (e.line, e.msg.as_str()),
            (1, "unknown key `x` (known: `chain`, `tenant`)")
        );
        let e = line_err(&format!("{base}  {{ act = \"record\"\n]\n"));
        assert!(!e.msg.contains('\n'), "one line: {e}");
    }

    const TENANTS: &str = r#"
[[tenant]]
name = "a"
cgroup = "/nena//a/"

[[tenant]]
name = "b"
uid = 1001

[[chain]]
name = "default"
dev = "u0"
hook = "egress"
links = [ { act = "record" } ]

[[chain]]
name = "b-out"
dev = "u0"
hook = "egress"
tenant = "b"
links = [ { act = "drop" } ]

[[chain]]
name = "a-out"
dev = "u0"
hook = "egress"
tenant = "a"
links = [ { act = "rate_limit", window = 5000 } ]
"#;

    #[test]
    fn tenants_parse_and_print_back() {
        let p = parse(TENANTS).unwrap();
        assert_eq!(
            p.tenants,
            vec![
                TenantSpec {
                    name: "a".into(),
                    who: TenantMatch::Cgroup("/nena/a".into()),
                    line: 2,
                },
                TenantSpec {
                    name: "b".into(),
                    who: TenantMatch::Uid(1001),
                    line: 6,
                },
            ]
        );
        let t: Vec<Option<&str>> = p.chains.iter().map(|c| c.tenant.as_deref()).collect();
        assert_eq!(t, [None, Some("b"), Some("a")]);
        assert_eq!(p.chains[1].links, [LinkSpec::Act(Actor::Drop)]);
        // printed back, the file parses to the same policy
        let text: String = p
            .tenants
            .iter()
            .map(|t| t.to_string())
            .chain(p.chains.iter().map(|c| c.to_string()))
            .collect::<Vec<_>>()
            .join("\n");
        let again = parse(&text).unwrap();
        assert_eq!(again.tenants.len(), 2);
        assert_eq!(
            again.tenants.iter().map(|t| &t.who).collect::<Vec<_>>(),
            p.tenants.iter().map(|t| &t.who).collect::<Vec<_>>()
        );
        for (a, b) in again.chains.iter().zip(&p.chains) {
            assert_eq!((&a.tenant, &a.links), (&b.tenant, &b.links));
        }
        // a file without tenants has none, and its chains belong to no tenant
        assert!(parse(GOOD).unwrap().tenants.is_empty());
        assert!(parse(GOOD)
            .unwrap()
            .chains
            .iter()
            .all(|c| c.tenant.is_none()));
    }

    #[test]
    fn tenant_errors_name_the_line() {
        let chain = |tenant: &str| {
            format!(
                "[[chain]]\nname = \"c\"\ndev = \"v0\"\nhook = \"egress\"\ntenant = {tenant}\nlinks = [ {{ act = \"record\" }} ]\n"
            )
        };
        let a = "[[tenant]]\nname = \"a\"\ncgroup = \"/x\"\n";
        let cases: Vec<(String, usize, &str)> = vec![
            (chain("\"z\""), 5, "unknown tenant `z` (the file defines no [[tenant]])"),
            (format!("{a}{}", chain("\"z\"")), 8, "unknown tenant `z` (defined: a)"),
            (format!("{a}{}", chain("3")), 8, "`tenant` must be a string, not integer `3`"),
            (
                "[[tenant]]\nname = \"a\"\n".into(),
                1,
                "tenant `a` needs `cgroup = \"/path\"` or `uid = N`",
            ),
            (
                "[[tenant]]\nname = \"a\"\ncgroup = \"/x\"\nuid = 3\n".into(),
                1,
                "tenant `a` has `cgroup` and `uid`: give one of them",
            ),
            (
                "[[tenant]]\nname = \"a\"\ncgroup = \"x/y\"\n".into(),
                3,
                "`cgroup` = \"x/y\": must be a path from the root of the cgroup v2 hierarchy",
            ),
            (
                "[[tenant]]\nname = \"a\"\ncgroup = \"/x/../y\"\n".into(),
                3,
                "`cgroup` = \"/x/../y\": `.` and `..` are not allowed",
            ),
            (
                "[[tenant]]\nname = \"a\"\nuid = -1\n".into(),
                3,
                "`uid` = -1 is not in 0..=4294967294",
            ),
            (
                "[[tenant]]\nname = \"a\"\nuid = 4294967295\n".into(),
                3,
                "`uid` = 4294967295 is not in",
            ),
            (
                "[[tenant]]\nname = \"\"\nuid = 1\n".into(),
                2,
                "tenant name `` must be 1 to 23 bytes",
            ),
            (
                format!("{a}[[tenant]]\nname = \"a\"\nuid = 1\n"),
                5,
                "a second tenant `a` (the first is on line 1)",
            ),
            (
                format!("{a}[[tenant]]\nname = \"b\"\ncgroup = \"/x/\"\n"),
                4,
                "tenant `b`: cgroup /x is tenant `a` already (line 1)",
            ),
            (
                "[[tenant]]\nname = \"a\"\nuid = 1\ngid = 2\n".into(),
                4,
                "unknown key `gid` (known: `name`, `cgroup`, `uid`)",
            ),
            (
                format!("{a}{}{}", chain("\"a\""), chain("\"a\"")),
                10,
                "a second chain of tenant `a` for v0 egress: one chain per interface, hook and tenant",
            ),
        ];
        for (text, line, want) in cases {
            let e = line_err(&text);
            assert_eq!(e.line, line, "{text}: {e}");
            assert!(e.msg.starts_with(want), "{text}: {e}");
            assert!(!e.msg.contains('\n'), "one line: {e}");
        }
        // the default chain and a tenant's chain on one hook are fine
        parse(&format!(
            "{a}{}{}",
            chain("\"a\""),
            chain("\"a\"").replace("tenant = \"a\"\n", "")
        ))
        .unwrap();
        // at most 15 tenants
        let many: String = (0..16)
            .map(|i| format!("[[tenant]]\nname = \"t{i}\"\nuid = {i}\n"))
            .collect();
        let e = line_err(&many);
        assert_eq!((e.line, e.msg.as_str()), (46, "at most 15 tenants"));
    }

    /// The example with three tenants (crates/bpf/examples/tenants.toml) stays valid.
    #[test]
    fn the_tenant_example_parses() {
        let p = parse(include_str!("../../../examples/tenants.toml")).unwrap();
        assert_eq!(p.tenants.len(), 3);
        assert_eq!(p.chains.len(), 5);
        assert_eq!(p.chains.iter().filter(|c| c.tenant.is_none()).count(), 1);
        // the default chain on untrusted egress reports joins: an MPTCP connection whose
        // first subflow is trusted never sends a handshake (get_connect) out of that interface
        let default = p.chains.iter().find(|c| c.tenant.is_none()).unwrap();
        assert_eq!(
            (default.dev.as_str(), default.hook),
            ("untrusted", Hook::Egress)
        );
        assert_eq!(default.links, [LinkSpec::Act(Actor::GetSubflow)]);
    }
}
