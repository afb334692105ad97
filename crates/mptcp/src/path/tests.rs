//! Tests of `path`.
use super::*;

#[test]
fn the_owners_of_an_address_or_of_any() {
    let ip = |s: &str| s.parse::<IpAddr>().unwrap();
    let locals = vec![
        ("lo".to_string(), ip("127.0.0.1")),
        ("lo".to_string(), ip("::1")),
        ("eth0".to_string(), ip("198.18.1.2")),
        ("eth1".to_string(), ip("2001:db8::2")),
    ];
    assert_eq!(owners(ip("198.18.1.2"), &locals), ["eth0"]);
    assert!(owners(ip("198.18.255.254"), &locals).is_empty());
    assert_eq!(owners(ip("0.0.0.0"), &locals), ["lo", "eth0"]);
    assert_eq!(owners(ip("::"), &locals), ["lo", "eth0", "eth1"]);
}

#[test]
fn loopback_owns_127_0_0_1() {
    let v = interfaces_owning("127.0.0.1".parse().unwrap()).unwrap();
    assert_eq!(v, vec!["lo".to_string()]);
    assert!(interfaces_owning("0.0.0.0".parse().unwrap())
        .unwrap()
        .contains(&"lo".to_string()));
    let t = [PathSpec::Iface("x0".into()), "127.0.0.1".parse().unwrap()];
    assert_eq!(trusted_interfaces(&t).unwrap(), ["x0", "lo"]);
    let none = ["198.18.255.254".parse().unwrap()];
    assert!(trusted_interfaces(&none)
        .unwrap_err()
        .to_string()
        .starts_with("no local interface has the trusted address"));
}

#[test]
fn parses_addresses_and_ifaces() {
    assert_eq!(
        "198.18.1.2".parse::<PathSpec>().unwrap(),
        PathSpec::Addr("198.18.1.2".parse().unwrap())
    );
    assert_eq!(
        "2001:db8::1".parse::<PathSpec>().unwrap(),
        PathSpec::Addr("2001:db8::1".parse().unwrap())
    );
    assert_eq!(
        "[2001:db8::1]".parse::<PathSpec>().unwrap(),
        PathSpec::Addr("2001:db8::1".parse().unwrap())
    );
    assert_eq!(
        "untrusted".parse::<PathSpec>().unwrap(),
        PathSpec::Iface("untrusted".into())
    );
    assert_eq!(
        "eth0.100".parse::<PathSpec>().unwrap(),
        PathSpec::Iface("eth0.100".into())
    );
}

#[test]
fn rejects_bad_specs() {
    for bad in [
        "",
        "  ",
        "a/b",
        "averyveryverylongname",
        "198.18.1.300",
        "1.2.3",
        "wl an",
        "..",
    ] {
        let e = bad.parse::<PathSpec>().unwrap_err();
        assert!(e.to_string().contains("invalid path"), "{bad}: {e}");
    }
}

#[test]
fn display_round_trips() {
    for s in ["198.18.2.2", "trusted", "fe80::1"] {
        assert_eq!(s.parse::<PathSpec>().unwrap().to_string(), s);
    }
}

#[test]
fn classification_and_source_choice() {
    let t: BTreeSet<IpAddr> = [
        "198.18.1.2".parse().unwrap(),
        "2001:db8::2".parse().unwrap(),
    ]
    .into();
    let u: BTreeSet<IpAddr> = ["198.18.2.2".parse().unwrap()].into();
    let p = ResolvedPolicy::new(t, u).unwrap();
    assert_eq!(p.classify("198.18.1.2".parse().unwrap()), Trust::Trusted);
    assert_eq!(
        p.classify("::ffff:198.18.1.2".parse().unwrap()),
        Trust::Trusted
    );
    assert_eq!(p.classify("198.18.2.2".parse().unwrap()), Trust::Untrusted);
    assert_eq!(p.classify("198.18.9.9".parse().unwrap()), Trust::Unlisted);
    assert!(!Trust::Unlisted.is_trusted());
    assert_eq!(
        p.trusted_source_for("198.18.3.2".parse().unwrap()),
        Some("198.18.1.2".parse().unwrap())
    );
    assert_eq!(
        p.trusted_source_for("2001:db8::9".parse().unwrap()),
        Some("2001:db8::2".parse().unwrap())
    );
}

#[test]
fn link_local_addresses_are_never_paths() {
    let ll: IpAddr = "fe80::f06b:f2ff:fe06:19c6".parse().unwrap();
    assert!(is_link_local(ll));
    assert!(is_link_local("febf::1".parse().unwrap()));
    assert!(!is_link_local("fec0::1".parse().unwrap()));
    assert!(!is_link_local("2001:2:0:1::2".parse().unwrap()));
    assert!(!is_link_local("198.18.1.2".parse().unwrap()));
    let g: IpAddr = "2001:2:0:1::2".parse().unwrap();
    assert_eq!(path_sources(&[ll, g]), vec![g]);
    assert!(path_sources(&[ll]).is_empty());
    // named literally: refused with one line
    let p = PathPolicy {
        trusted: vec![PathSpec::Addr(ll)],
        untrusted: vec![],
    };
    let e = p.resolve().unwrap_err();
    assert!(matches!(e, PolicyError::LinkLocal(a) if a == ll), "{e}");
    assert!(e.to_string().contains("link-local") && !e.to_string().contains('\n'));
    // a policy built by hand with one: never the initial subflow's source
    let r = ResolvedPolicy::new([ll].into(), BTreeSet::new()).unwrap();
    assert_eq!(r.trusted_source_for("2001:2:0:3::2".parse().unwrap()), None);
    let r = ResolvedPolicy::new(
        [ll, g].into(),
        [ll.to_string().replace("c6", "c7").parse().unwrap()].into(),
    )
    .unwrap();
    assert_eq!(
        r.trusted_source_for("2001:2:0:3::2".parse().unwrap()),
        Some(g)
    );
    assert!(r.other_family_sources("198.18.3.2".parse().unwrap()) == vec![g]);
}

#[test]
fn the_other_family_and_its_announced_target() {
    let t6: IpAddr = "2001:2:0:1::2".parse().unwrap();
    let u4: IpAddr = "198.18.2.2".parse().unwrap();
    let p = ResolvedPolicy::new([t6].into(), [u4].into()).unwrap();
    let r6: IpAddr = "2001:2:0:3::2".parse().unwrap();
    let r4: IpAddr = "198.18.3.2".parse().unwrap();
    assert_eq!(p.other_family_sources(r6), vec![u4]);
    assert_eq!(p.other_family_sources(r4), vec![t6]);
    assert!(p.needs_ipv6_socket(r6) && p.needs_ipv6_socket(r4));
    // one family only: an IPv4 connection keeps its IPv4 socket
    let p4 = ResolvedPolicy::new(["198.18.1.2".parse().unwrap()].into(), [u4].into()).unwrap();
    assert!(p4.other_family_sources(r4).is_empty());
    assert!(!p4.needs_ipv6_socket(r4));
    assert!(p4.needs_ipv6_socket(r6));
    // an IPv4-mapped policy address counts as IPv4
    let pm =
        ResolvedPolicy::new([t6].into(), ["::ffff:198.18.2.2".parse().unwrap()].into()).unwrap();
    assert_eq!(pm.other_family_sources(r6), vec![u4]);
    // the announced address of the family asked for, the connection's port when none
    let ann: Vec<SocketAddr> = vec![
        "[2001:2:0:3::3]:0".parse().unwrap(),
        "198.18.3.2:0".parse().unwrap(),
        "198.18.3.3:9000".parse().unwrap(),
    ];
    assert_eq!(
        other_family_target(&ann, true, 4433),
        Some("198.18.3.2:4433".parse().unwrap())
    );
    assert_eq!(
        other_family_target(&ann[2..], true, 4433),
        Some("198.18.3.3:9000".parse().unwrap())
    );
    assert_eq!(
        other_family_target(&ann, false, 4433),
        Some("[2001:2:0:3::3]:4433".parse().unwrap())
    );
    assert_eq!(other_family_target(&ann[1..], false, 4433), None);
    assert_eq!(other_family_target(&[], true, 4433), None);
    // a mapped announcement is an IPv4 target
    let mapped: Vec<SocketAddr> = vec!["[::ffff:198.18.3.2]:0".parse().unwrap()];
    assert_eq!(
        other_family_target(&mapped, true, 80),
        Some("198.18.3.2:80".parse().unwrap())
    );
    assert_eq!(
        to_ipv6_socket_addr("198.18.3.2:80".parse().unwrap()),
        "[::ffff:198.18.3.2]:80".parse().unwrap()
    );
    assert_eq!(
        to_ipv6_socket_addr("[2001:2:0:3::2]:80".parse().unwrap()),
        "[2001:2:0:3::2]:80".parse().unwrap()
    );
    assert_eq!((family_name(true), family_name(false)), ("IPv4", "IPv6"));
}

#[test]
fn the_kernel_pm_note_names_the_real_cause() {
    let r6: SocketAddr = "[2001:2:0:3::2]:4433".parse().unwrap();
    let u4: IpAddr = "198.18.2.2".parse().unwrap();
    let u6: IpAddr = "2001:2:0:2::2".parse().unwrap();
    // an endpoint of the connection's family: nothing to say
    assert_eq!(
        kernel_pm_family_note(r6, &[u6], &[u4], &[u4], &[], false),
        None
    );
    // nothing of either family: the endpoint is missing
    let n = kernel_pm_family_note(r6, &[], &[], &[], &[], false).unwrap();
    assert!(n.contains("has no `subflow` endpoint"), "{n}");
    // an IPv4 endpoint on an IPv6 connection, the server announced no IPv4 address
    let n = kernel_pm_family_note(r6, &[], &[u4], &[u4], &[], false).unwrap();
    assert!(
            n.starts_with("the server had announced no IPv4 address when the first flight was acknowledged, so the IPv4 path(s) 198.18.2.2 cannot join this IPv6 connection"),
            "{n}"
        );
    assert!(
        !n.contains("no `subflow` endpoint") && !n.contains('\n'),
        "{n}"
    );
    // an announced IPv6 address does not help an IPv4 path
    let ann6: Vec<SocketAddr> = vec!["[2001:2:0:3::3]:0".parse().unwrap()];
    let n = kernel_pm_family_note(r6, &[], &[u4], &[], &ann6, false).unwrap();
    assert!(
        n.starts_with("the server had announced no IPv4 address"),
        "{n}"
    );
    // announced, and no IPv4 subflow at the release: closed before the first flight
    let ann4: Vec<SocketAddr> = vec!["198.18.3.2:0".parse().unwrap()];
    let n = kernel_pm_family_note(r6, &[], &[u4], &[u4], &ann4, false).unwrap();
    assert!(
        n.starts_with("the server announced 198.18.3.2:4433, but")
            && n.contains("198.18.2.2 carry nothing"),
        "{n}"
    );
    // the subflow of the other family is there: nothing to say
    assert_eq!(
        kernel_pm_family_note(r6, &[], &[u4], &[u4], &ann4, true),
        None
    );
    // the reverse: an IPv6 path on an IPv4 connection
    let r4: SocketAddr = "198.18.3.2:4433".parse().unwrap();
    let n = kernel_pm_family_note(r4, &[], &[], &[u6], &[], false).unwrap();
    assert!(n.starts_with("the server had announced no IPv6 address when the first flight was acknowledged, so the IPv6 path(s) 2001:2:0:2::2 cannot join this IPv4 connection"), "{n}");
}

#[test]
fn conflict_is_refused() {
    let a: IpAddr = "198.18.1.2".parse().unwrap();
    let e = ResolvedPolicy::new([a].into(), [a].into()).unwrap_err();
    assert_eq!(e.to_string(), "198.18.1.2 is both trusted and untrusted");
}

#[test]
fn resolves_loopback_iface_and_missing_iface() {
    let p = PathPolicy {
        trusted: vec![PathSpec::Iface("lo".into())],
        untrusted: vec![],
    };
    let r = p.resolve().unwrap();
    let lo: IpAddr = "127.0.0.1".parse().unwrap();
    assert!(r.trusted.contains(&lo));
    assert_eq!(r.iface(lo).map(|i| i.name.as_str()), Some("lo"));
    assert_eq!(r.trusted_ifaces().len(), 1);
    // an address given literally gets the interface that holds it
    let p = PathPolicy {
        trusted: vec![PathSpec::Addr(lo)],
        untrusted: vec![],
    };
    let r = p.resolve().unwrap();
    assert_eq!(r.iface(lo).map(|i| i.name.as_str()), Some("lo"));
    assert_eq!(
        iface_of(lo).unwrap().map(|i| i.name),
        Some("lo".to_string())
    );
    // an address no interface holds has none
    let far: IpAddr = "198.18.250.250".parse().unwrap();
    assert_eq!(iface_of(far).unwrap(), None);
    let p = PathPolicy {
        trusted: vec![PathSpec::Iface("nonexist0".into())],
        untrusted: vec![],
    };
    assert!(matches!(p.resolve(), Err(PolicyError::NoSuchIface(_))));
}

#[test]
fn joins_go_to_the_address_the_peer_announced_of_the_connections_family() {
    use SocketAddr;
    let remote: SocketAddr = "198.18.4.2:7300".parse().unwrap();
    // Nothing announced and the initial address denied: nowhere yet.
    assert_eq!(join_target(remote, &[], true), None);
    assert_eq!(join_target(remote, &[], false), Some(remote));
    // A fleet server's join port, when the initial address is denied; not otherwise.
    let fleet: SocketAddr = "198.18.4.2:4462".parse().unwrap();
    assert_eq!(join_target(remote, &[fleet], true), Some(fleet));
    assert_eq!(join_target(remote, &[fleet], false), Some(remote));
    // Announced without a port: the connection's port; another family is skipped.
    let v6: SocketAddr = "[2001:db8::1]:4462".parse().unwrap();
    let bare: SocketAddr = "198.18.5.2:0".parse().unwrap();
    assert_eq!(
        join_target(remote, &[v6, bare], true),
        Some("198.18.5.2:7300".parse::<SocketAddr>().unwrap())
    );
    assert_eq!(join_target(remote, &[v6], true), None);
}
