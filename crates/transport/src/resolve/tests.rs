//! The pure parts of the trusted resolver: names and ports, the choice of resolvers from a
//! routing table, /etc/hosts (resolv.conf and the messages: [`crate::dns`]'s tests).

use super::*;
use std::net::Ipv4Addr;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn iface(name: &str, index: u32) -> LocalIface {
    LocalIface {
        name: name.to_string(),
        index,
    }
}

#[test]
fn server_addresses_take_names_and_literals() {
    let a: ServerAddr = "198.18.3.2:7000".parse().unwrap();
    assert_eq!(a.host, Host::Ip(ip("198.18.3.2")));
    assert_eq!(a.port, 7000);
    let b: ServerAddr = "[2001:2::1]:7000".parse().unwrap();
    assert_eq!(b.host, Host::Ip(ip("2001:2::1")));
    let c: ServerAddr = "srv.lab:7000".parse().unwrap();
    assert_eq!(c.host, Host::Name("srv.lab".into()));
    assert_eq!(c.to_string(), "srv.lab:7000");
    let d: ServerAddr = "srv.lab.:1".parse().unwrap();
    assert_eq!(d.host, Host::Name("srv.lab".into()));
    for bad in [
        "srv.lab",
        "srv.lab:port",
        "srv.lab:70000",
        "2001:2::1:7000",
        "[2001:2::1:7000",
        ":7000",
        "a b:7000",
        "srv..lab:7000",
        "sr/v:7000",
    ] {
        assert!(bad.parse::<ServerAddr>().is_err(), "{bad} accepted");
    }
}

#[test]
fn resolvers_default_to_port_53() {
    assert_eq!(
        parse_resolver("198.18.1.1").unwrap(),
        "198.18.1.1:53".parse().unwrap()
    );
    assert_eq!(
        parse_resolver("198.18.1.1:5353").unwrap(),
        "198.18.1.1:5353".parse().unwrap()
    );
    assert_eq!(
        parse_resolver("2001:2::53").unwrap(),
        "[2001:2::53]:53".parse().unwrap()
    );
    assert!(parse_resolver("dns.example").is_err());
}

/// A routing table: 198.18.1.0/24 by `trusted` (1), everything else by `untrusted` (2)
/// (the laptop's default route), and `trusted` reaches everything too when asked for it
/// (its own default route of a worse metric).
fn laptop(dst: IpAddr, oif: Option<u32>) -> std::io::Result<Option<LocalIface>> {
    let on_trusted = matches!(dst, IpAddr::V4(v4) if v4.octets()[..3] == [198, 18, 1]);
    Ok(match oif {
        Some(1) => Some(iface("trusted", 1)),
        Some(2) => Some(iface("untrusted", 2)),
        Some(_) => None,
        None if on_trusted => Some(iface("trusted", 1)),
        None if dst == ip("198.18.9.9") => None,
        None => Some(iface("untrusted", 2)),
    })
}

fn trusted() -> BTreeSet<LocalIface> {
    [iface("trusted", 1)].into_iter().collect()
}

#[test]
fn a_system_resolver_behind_the_wlan_is_refused_with_the_fix() {
    let e = choose("srv.lab", None, &[ip("198.18.2.1")], &trusted(), &laptop).unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("198.18.2.1 (/etc/resolv.conf)"), "{msg}");
    assert!(msg.contains("`untrusted`"), "{msg}");
    assert!(msg.contains("--resolver ADDR"), "{msg}");
    assert!(!msg.contains('\n'), "{msg}");
}

#[test]
fn only_the_system_resolvers_reached_by_a_trusted_interface_are_asked() {
    let got = choose(
        "srv.lab",
        None,
        &[ip("198.18.2.1"), ip("198.18.1.1"), ip("198.18.9.9")],
        &trusted(),
        &laptop,
    )
    .unwrap();
    assert_eq!(
        got,
        vec![("198.18.1.1:53".parse().unwrap(), iface("trusted", 1))]
    );
}

#[test]
fn a_given_resolver_goes_by_a_trusted_interface_that_routes_to_it() {
    let r: SocketAddr = "198.18.2.1:53".parse().unwrap();
    // The host would send it by the WLAN, but the trusted interface has a route too.
    let got = choose("srv.lab", Some(r), &[], &trusted(), &laptop).unwrap();
    assert_eq!(got, vec![(r, iface("trusted", 1))]);
    // No trusted interface routes there.
    let none = |_: IpAddr, oif: Option<u32>| -> std::io::Result<Option<LocalIface>> {
        Ok(oif.filter(|i| *i == 2).map(|_| iface("untrusted", 2)))
    };
    let msg = choose("srv.lab", Some(r), &[], &trusted(), &none)
        .unwrap_err()
        .to_string();
    assert!(msg.contains("--resolver 198.18.2.1"), "{msg}");
    assert!(msg.contains("(`trusted`)"), "{msg}");
}

#[test]
fn local_resolvers_and_empty_configurations_are_refused() {
    let msg = choose("srv.lab", None, &[ip("127.0.0.53")], &trusted(), &laptop)
        .unwrap_err()
        .to_string();
    assert!(msg.contains("is on this host"), "{msg}");
    let msg = choose("srv.lab", None, &[], &trusted(), &laptop)
        .unwrap_err()
        .to_string();
    assert!(msg.contains("names no resolver"), "{msg}");
    let given: SocketAddr = "127.0.0.1:53".parse().unwrap();
    assert!(choose("srv.lab", Some(given), &[], &trusted(), &laptop).is_err());
}

#[test]
fn hosts_file_lines() {
    let text = "127.0.0.1 localhost\n# 198.18.3.3 srv.lab\n198.18.3.2\tSrv.Lab other # x\nfe80::1%eth0 ll.lab\n";
    assert_eq!(hosts_lookup(text, "srv.lab"), vec![ip("198.18.3.2")]);
    assert_eq!(hosts_lookup(text, "srv.lab."), vec![ip("198.18.3.2")]);
    assert_eq!(hosts_lookup(text, "ll.lab"), vec![ip("fe80::1")]);
    assert!(hosts_lookup(text, "x").is_empty());
    assert_eq!(
        pick(&[ip("2001:2::2"), ip("198.18.3.2")], true),
        Some(IpAddr::V4(Ipv4Addr::new(198, 18, 3, 2)))
    );
    assert_eq!(
        pick(&[ip("198.18.3.2"), ip("2001:2::2")], false),
        Some(ip("2001:2::2"))
    );
}

#[test]
fn literals_need_no_resolver() {
    let cfg = ResolverConfig {
        resolv_conf: "/nonexistent/resolv.conf".into(),
        hosts: "/nonexistent/hosts".into(),
        ..ResolverConfig::new(None, Duration::from_secs(1))
    };
    let r = resolve(
        &"198.18.3.2:7000".parse().unwrap(),
        &ResolvedPolicy::default(),
        &cfg,
    )
    .unwrap();
    assert_eq!(r.addr, "198.18.3.2:7000".parse().unwrap());
    assert_eq!(r.source, Source::Literal);
    // A name with no resolv.conf: refused before anything is sent.
    let e = resolve(
        &"srv.lab:7000".parse().unwrap(),
        &ResolvedPolicy::default(),
        &cfg,
    )
    .unwrap_err();
    assert!(matches!(e, ResolveError::Config { .. }), "{e}");
}

proptest::proptest! {
    /// Bytes from the network (a resolver's answer) and from the command line (`HOST:PORT`):
    /// the fuzz target's checks, never a panic.
    #[test]
    fn any_bytes_are_an_answer_or_refused(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..600)) {
        fuzzing::answer(&bytes);
    }

    /// Any text as `HOST:PORT`: an address that prints as text that parses back to it, with
    /// the port the text ends with; or refused in one line.
    #[test]
    fn any_text_is_host_port_or_refused(text in "[a-z0-9.:\\[\\]-]{0,40}") {
        match text.parse::<ServerAddr>() {
            Ok(a) => {
                proptest::prop_assert_eq!(a.to_string().parse::<ServerAddr>(), Ok(a.clone()));
                let port = text.rsplit_once(':').map(|(_, p)| p.parse::<u16>());
                proptest::prop_assert_eq!(port, Some(Ok(a.port)));
            }
            Err(e) => proptest::prop_assert!(!e.is_empty() && !e.contains('\n'), "{}", e),
        }
        fuzzing::host_port(&text);
    }
}
