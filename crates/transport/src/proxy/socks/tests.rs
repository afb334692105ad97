//! The SOCKS5 exchange, the UDP header and the `--allow` rules, byte by byte and by property.

use super::*;
use proptest::prelude::*;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

fn v4(a: [u8; 4], port: u16) -> Target {
    Target {
        host: Host::Ip(IpAddr::V4(Ipv4Addr::from(a))),
        port,
    }
}

/// Feeds `input` byte by byte, collecting everything.
fn bytewise(h: &mut Handshake, input: &[u8]) -> Result<Progress, SocksError> {
    let mut all = Progress::default();
    for (i, b) in input.iter().enumerate() {
        let p = h.feed(std::slice::from_ref(b))?;
        all.send.extend_from_slice(&p.send);
        if p.request.is_some() {
            all.request = p.request;
            all.leftover = input[i + 1..].to_vec();
            return Ok(all);
        }
    }
    Ok(all)
}

#[test]
fn the_rfcs_address_forms_are_accepted() {
    let v6: Ipv6Addr = "2001:db8::1".parse().unwrap();
    let cases: Vec<(Vec<u8>, Target)> = vec![
        (
            vec![5, 1, 0, 1, 198, 18, 3, 2, 0, 80],
            v4([198, 18, 3, 2], 80),
        ),
        (
            {
                let mut r = vec![5, 1, 0, 4];
                r.extend_from_slice(&v6.octets());
                r.extend_from_slice(&443u16.to_be_bytes());
                r
            },
            Target {
                host: Host::Ip(IpAddr::V6(v6)),
                port: 443,
            },
        ),
        (
            {
                let mut r = vec![5, 1, 0, 3, 11];
                r.extend_from_slice(b"example.org");
                r.extend_from_slice(&8080u16.to_be_bytes());
                r
            },
            Target {
                host: Host::Domain("example.org".into()),
                port: 8080,
            },
        ),
    ];
    for (req, want) in cases {
        // Offering several methods, the no-auth one among them.
        let mut input = vec![5, 3, 0x80, 0x02, 0x00];
        input.extend_from_slice(&req);
        input.extend_from_slice(b"GET /");
        // Whole, and byte by byte.
        let mut h = Handshake::new(None);
        let p = h.feed(&input).unwrap();
        assert_eq!(p.send, vec![5, 0]);
        assert_eq!(p.request.as_ref(), Some(&want));
        assert_eq!(p.leftover, b"GET /");
        let mut h = Handshake::new(None);
        let p = bytewise(&mut h, &input).unwrap();
        assert_eq!(p.send, vec![5, 0]);
        assert_eq!(p.request, Some(want.clone()));
        assert_eq!(p.leftover, b"GET /");
        // The target's encoding is the request's tail.
        let mut enc = Vec::new();
        want.encode_into(&mut enc);
        assert_eq!(enc, req[3..]);
    }
}

#[test]
fn a_truncated_exchange_waits_then_fails_at_eof() {
    let input = [5u8, 1, 0, 5, 1, 0, 3, 3, b'a', b'b', b'c', 0, 80];
    for cut in 0..input.len() {
        let mut h = Handshake::new(None);
        let p = h.feed(&input[..cut]).unwrap();
        assert!(p.request.is_none(), "cut {cut}");
        assert_eq!(h.eof(), Err(SocksError::Truncated));
        assert_eq!(SocksError::Truncated.reply(), None);
    }
    let mut h = Handshake::new(None);
    assert!(h.feed(&input).unwrap().request.is_some());
    assert_eq!(h.eof(), Ok(()));
}

#[test]
fn malformed_greetings_get_the_right_answer() {
    // Not version 5 (SOCKS4, or HTTP): no answer, closed.
    for bad in [&[4u8, 1, 0, 80][..], b"GET / HTTP/1.1\r\n"] {
        let e = Handshake::new(None).feed(bad).unwrap_err();
        assert_eq!(e, SocksError::Version(bad[0]));
        assert_eq!(e.reply(), None);
    }
    // Zero methods.
    let e = Handshake::new(None).feed(&[5, 0]).unwrap_err();
    assert_eq!(e, SocksError::NoMethods);
    assert_eq!(e.reply(), Some(vec![5, 0xff]));
    // Only username/password offered to a server without users, and the reverse.
    let e = Handshake::new(None).feed(&[5, 1, 2]).unwrap_err();
    assert_eq!(e.reply(), Some(vec![5, 0xff]));
    let users = Users::parse("alice:secret").unwrap();
    let e = Handshake::new(Some(users)).feed(&[5, 1, 0]).unwrap_err();
    assert_eq!(e, SocksError::NoAcceptableMethod(vec![0]));
    assert_eq!(e.reply(), Some(vec![5, 0xff]));
}

#[test]
fn malformed_requests_get_the_rfcs_reply() {
    let greet = [5u8, 1, 0];
    let check = |req: &[u8], err: SocksError, rep: Rep| {
        let mut input = greet.to_vec();
        input.extend_from_slice(req);
        let e = Handshake::new(None).feed(&input).unwrap_err();
        assert_eq!(e, err, "{req:?}");
        let r = e.reply().unwrap();
        assert_eq!(r[..2], [5, rep as u8], "{req:?}");
        assert_eq!(r.len(), 10, "VER REP RSV ATYP(IPv4) ADDR PORT");
    };
    // BIND, and a command RFC 1928 does not define.
    check(
        &[5, 2, 0, 1],
        SocksError::Command(2),
        Rep::CommandNotSupported,
    );
    check(
        &[5, 4, 0, 1],
        SocksError::Command(4),
        Rep::CommandNotSupported,
    );
    // Unknown address types.
    check(
        &[5, 1, 0, 2, 1, 2],
        SocksError::AddressType(2),
        Rep::AddressTypeNotSupported,
    );
    check(
        &[5, 1, 0, 0],
        SocksError::AddressType(0),
        Rep::AddressTypeNotSupported,
    );
    check(&[5, 1, 7, 1], SocksError::Reserved(7), Rep::GeneralFailure);
    check(
        &[5, 1, 0, 3, 0],
        SocksError::EmptyDomain,
        Rep::GeneralFailure,
    );
    check(
        &[5, 1, 0, 3, 2, b'a', b' ', 0, 80],
        SocksError::BadDomain,
        Rep::GeneralFailure,
    );
    // A request of another version after a good greeting: no answer.
    let e = Handshake::new(None).feed(&[5, 1, 0, 4, 1, 0]).unwrap_err();
    assert_eq!(e, SocksError::Version(4));
}

#[test]
fn udp_associate_is_read_with_the_clients_address_and_keeps_authentication() {
    // No authentication: the command and the address the client will send from.
    let mut h = Handshake::new(None);
    let p = h
        .feed(&[5, 1, 0, 5, 3, 0, 1, 198, 18, 1, 2, 0x30, 0x39])
        .unwrap();
    assert_eq!(p.send, vec![5, 0]);
    assert_eq!(p.command, Command::UdpAssociate);
    assert_eq!(p.request, Some(v4([198, 18, 1, 2], 12345)));
    // Zeros (the client does not know its address yet), byte by byte.
    let mut h = Handshake::new(None);
    let p = bytewise(&mut h, &[5, 1, 0, 5, 3, 0, 1, 0, 0, 0, 0, 0, 0]).unwrap();
    assert_eq!(p.request, Some(v4([0, 0, 0, 0], 0)));
    assert_eq!(h.command(), Command::UdpAssociate);
    // CONNECT stays CONNECT.
    let p = Handshake::new(None)
        .feed(&[5, 1, 0, 5, 1, 0, 1, 1, 2, 3, 4, 0, 80])
        .unwrap();
    assert_eq!(p.command, Command::Connect);
    // With users, UDP ASSOCIATE needs the password too: no request is read without it.
    let users = Users::parse("alice:secret").unwrap();
    let assoc = [5u8, 3, 0, 1, 0, 0, 0, 0, 0, 0];
    let e = Handshake::new(Some(users.clone()))
        .feed(&[&[5, 1, 0][..], &assoc].concat())
        .unwrap_err();
    assert_eq!(e, SocksError::NoAcceptableMethod(vec![0]));
    let wrong = [&[5u8, 1, 2, 1, 5][..], b"alice", &[5], b"wrong", &assoc].concat();
    let e = Handshake::new(Some(users.clone()))
        .feed(&wrong)
        .unwrap_err();
    assert_eq!(e, SocksError::AuthFailed);
    let right = [&[5u8, 1, 2, 1, 5][..], b"alice", &[6], b"secret", &assoc].concat();
    let mut h = Handshake::new(Some(users));
    let p = h.feed(&right).unwrap();
    assert_eq!(p.send, vec![5, 2, 1, 0]);
    assert_eq!(p.command, Command::UdpAssociate);
    assert_eq!(h.user(), "alice");
}

#[test]
fn udp_headers_parse_and_malformed_ones_are_refused() {
    // IPv4, IPv6 and a domain name, with data and without.
    let d = UdpPacket::parse(&[0, 0, 0, 1, 198, 18, 3, 2, 0x1b, 0x5f, b'h', b'i']).unwrap();
    assert_eq!(d.target, v4([198, 18, 3, 2], 7007));
    assert_eq!(d.data, b"hi");
    let v6: Ipv6Addr = "2001:2::2".parse().unwrap();
    let mut b = vec![0, 0, 0, 4];
    b.extend_from_slice(&v6.octets());
    b.extend_from_slice(&53u16.to_be_bytes());
    let d = UdpPacket::parse(&b).unwrap();
    assert_eq!(d.target.host, Host::Ip(IpAddr::V6(v6)));
    assert_eq!((d.target.port, d.data), (53, &b""[..]));
    let d = UdpPacket::parse(b"\0\0\0\x03\x0bexample.org\0\x35q").unwrap();
    assert_eq!(d.target.host, Host::Domain("example.org".into()));
    assert_eq!(d.data, b"q");
    // Each malformed case is an error.
    let cases: Vec<(Vec<u8>, UdpError)> = vec![
        (vec![], UdpError::Short(0)),
        (vec![0, 0], UdpError::Short(2)),
        (vec![0, 0, 0], UdpError::Short(3)),
        (vec![0, 0, 0, 1, 198, 18, 3, 2, 0], UdpError::Short(9)),
        (vec![0, 0, 0, 4, 0, 0], UdpError::Short(6)),
        (vec![0, 0, 0, 3, 5, b'a'], UdpError::Short(6)),
        (vec![0, 1, 0, 1, 1, 2, 3, 4, 0, 7], UdpError::Reserved(1)),
        (
            vec![0xff, 0, 0, 1, 1, 2, 3, 4, 0, 7],
            UdpError::Reserved(0xff00),
        ),
        (
            vec![0, 0, 1, 1, 1, 2, 3, 4, 0, 7, b'x'],
            UdpError::Fragment(1),
        ),
        (
            vec![0, 0, 0x81, 1, 1, 2, 3, 4, 0, 7],
            UdpError::Fragment(0x81),
        ),
        (
            vec![0, 0, 0, 2, 1, 2, 3, 4, 0, 7],
            UdpError::Address(SocksError::AddressType(2)),
        ),
        (
            vec![0, 0, 0, 0, 1, 2, 3, 4, 0, 7],
            UdpError::Address(SocksError::AddressType(0)),
        ),
        (
            vec![0, 0, 0, 3, 0, 0, 7],
            UdpError::Address(SocksError::EmptyDomain),
        ),
        (
            vec![0, 0, 0, 3, 2, b'a', 0, 0, 7],
            UdpError::Address(SocksError::BadDomain),
        ),
    ];
    for (bytes, want) in cases {
        assert_eq!(UdpPacket::parse(&bytes), Err(want), "{bytes:?}");
        fuzzing::udp_packet(&bytes);
    }
    // A reply too large for a UDP datagram once its header is added is not encoded.
    let big = vec![0u8; MAX_UDP_PAYLOAD - 10];
    let p = UdpPacket {
        target: v4([1, 2, 3, 4], 5),
        data: &big,
    };
    assert_eq!(p.encode().map(|e| e.len()), Some(MAX_UDP_PAYLOAD));
    let bigger = vec![0u8; MAX_UDP_PAYLOAD - 21];
    let p = UdpPacket {
        target: Target {
            host: Host::Ip(IpAddr::V6(v6)),
            port: 5,
        },
        data: &bigger,
    };
    assert_eq!(p.encode(), None);
}

#[test]
fn username_password_is_checked() {
    let users = Users::parse("# users\nalice:secret\n\nbob:b:c\n").unwrap();
    assert!(users.admits(b"bob", b"b:c"));
    assert!(!users.admits(b"alice", b"secre"));
    // The digest binds the split between name and password.
    assert!(!users.admits(b"alic", b"esecret"));
    let auth = |u: &[u8], p: &[u8]| {
        let mut v = vec![1, u.len() as u8];
        v.extend_from_slice(u);
        v.push(p.len() as u8);
        v.extend_from_slice(p);
        v
    };
    let mut input = vec![5, 2, 0, 2];
    input.extend(auth(b"alice", b"secret"));
    input.extend([5, 1, 0, 1, 198, 18, 3, 2, 0x1f, 0x40]);
    let mut h = Handshake::new(Some(users.clone()));
    let p = bytewise(&mut h, &input).unwrap();
    assert_eq!(p.send, vec![5, 2, 1, 0]);
    assert_eq!(p.request, Some(v4([198, 18, 3, 2], 8000)));
    assert_eq!(h.user(), "alice");
    // Wrong password: status 1, no request read.
    let mut input = vec![5, 1, 2];
    input.extend(auth(b"alice", b"wrong"));
    input.extend([5, 1, 0, 1, 198, 18, 3, 2, 0, 80]);
    let mut h = Handshake::new(Some(users.clone()));
    let e = h.feed(&input).unwrap_err();
    assert_eq!(e, SocksError::AuthFailed);
    assert_eq!(e.reply(), Some(vec![1, 1]));
    let e = Handshake::new(Some(users))
        .feed(&[5, 1, 2, 9, 1, b'a', 1, b'b'])
        .unwrap_err();
    assert_eq!(e, SocksError::AuthVersion(9));
    assert!(Users::parse("").is_err());
    assert!(Users::parse("nocolon").is_err());
    assert!(Users::parse(":pw").is_err());
    assert!(!format!("{:?}", Users::parse("a:topsecret").unwrap()).contains("topsecret"));
}

#[test]
fn replies_encode_their_bound_address() {
    assert_eq!(
        reply(Rep::NotAllowed, None),
        vec![5, 2, 0, 1, 0, 0, 0, 0, 0, 0]
    );
    let r = reply(Rep::Succeeded, Some("[2001:db8::2]:1080".parse().unwrap()));
    assert_eq!(r.len(), 4 + 16 + 2);
    assert_eq!(r[3], ATYP_IPV6);
    assert_eq!(Rep::from_u8(5), Some(Rep::ConnectionRefused));
    assert_eq!(Rep::from_u8(9), None);
    let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
    assert_eq!(Rep::of_connect_error(&refused), Rep::ConnectionRefused);
    let unreach = std::io::Error::from_raw_os_error(libc::EHOSTUNREACH);
    assert_eq!(Rep::of_connect_error(&unreach), Rep::HostUnreachable);
    // No source address of the destination's family (IPv6 off on the server).
    let noaddr = std::io::Error::from_raw_os_error(libc::EADDRNOTAVAIL);
    assert_eq!(Rep::of_connect_error(&noaddr), Rep::NetworkUnreachable);
}

fn sa(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

#[test]
fn allow_rules_match_cidr_ports_and_ipv6() {
    let r: AllowRule = "198.18.0.0/15:80-443".parse().unwrap();
    assert!(r.permits(sa("198.18.3.2:80")));
    assert!(r.permits(sa("198.19.255.255:443")));
    assert!(!r.permits(sa("198.20.0.1:80")));
    assert!(!r.permits(sa("198.18.3.2:79")));
    assert!(!r.permits(sa("198.18.3.2:444")));
    // An IPv4-mapped IPv6 address is the IPv4 address.
    assert!(r.permits(sa("[::ffff:198.18.3.2]:100")));
    // The network is masked: host bits in the rule do not matter.
    let r: AllowRule = "198.18.3.77/24".parse().unwrap();
    assert_eq!(r.net, "198.18.3.0".parse::<IpAddr>().unwrap());
    assert!(r.permits(sa("198.18.3.200:1")) && r.permits(sa("198.18.3.1:65535")));
    // One address, one port.
    let r: AllowRule = "198.18.3.2:8000".parse().unwrap();
    assert!(r.permits(sa("198.18.3.2:8000")));
    assert!(!r.permits(sa("198.18.3.2:8001")) && !r.permits(sa("198.18.3.3:8000")));
    // IPv6: bare (every port) and bracketed with ports.
    let r: AllowRule = "2001:db8::/32".parse().unwrap();
    assert!(r.permits(sa("[2001:db8:ffff::1]:22")));
    assert!(!r.permits(sa("[2001:db9::1]:22")));
    assert!(!r.permits(sa("198.18.3.2:22")));
    let r: AllowRule = "[2001:db8::/48]:443".parse().unwrap();
    assert!(r.permits(sa("[2001:db8:0:1::1]:443")));
    assert!(!r.permits(sa("[2001:db8:1::1]:443")));
    assert!(!r.permits(sa("[2001:db8::1]:80")));
    // 0/0 is everything of one family only.
    let r: AllowRule = "0.0.0.0/0".parse().unwrap();
    assert!(r.permits(sa("1.2.3.4:1")) && !r.permits(sa("[::1]:1")));
    for bad in [
        "198.18.0.0/33",
        "198.18.0.0/15:443-80",
        "198.18.0.0:99999",
        "host.example:80",
        "[2001:db8::/32]443",
        "2001:db8::/129",
        "",
    ] {
        assert!(bad.parse::<AllowRule>().is_err(), "{bad}");
    }
    // A list permits what any rule does; the empty list nothing.
    let list = AllowList(vec![
        "198.18.3.2:8000".parse().unwrap(),
        "198.18.4.0/24".parse().unwrap(),
    ]);
    let resolved = [
        sa("198.18.9.9:8000"),
        sa("198.18.3.2:8000"),
        sa("198.18.4.4:1"),
    ];
    assert_eq!(list.filter(&resolved), resolved[1..].to_vec());
    assert!(AllowList::default().filter(&resolved).is_empty());
}

/// `--allow 0.0.0.0/0:80` (and `::/0`, and any wide rule) reaches neither the proxy
/// server's loopback, its own addresses, link-local (the cloud metadata service), multicast
/// nor broadcast; a rule inside such a range reaches it.
#[test]
fn the_servers_own_host_is_reached_only_by_a_rule_inside_its_range() {
    let own = |ip: IpAddr| ip == "198.18.3.2".parse::<IpAddr>().unwrap();
    let list = |rules: &[&str]| AllowList(rules.iter().map(|r| r.parse().unwrap()).collect());
    let wide = list(&["0.0.0.0/0:80", "[::/0]:80", "198.18.0.0/15"]);
    for guarded in [
        "127.0.0.1:80",
        "127.9.9.9:80",
        "[::ffff:127.0.0.1]:80",
        "169.254.169.254:80",
        "0.0.0.0:80",
        "224.0.0.251:80",
        "255.255.255.255:80",
        "[::1]:80",
        "[::]:80",
        "[fe80::1]:80",
        "[fd00:ec2::254]:80",
        "[ff02::1]:80",
        "198.18.3.2:80",
        "198.18.3.2:8000",
        "[::ffff:198.18.3.2]:8000",
    ] {
        assert!(!wide.permits_with(sa(guarded), own), "{guarded}");
    }
    // The rest of the wide rules still holds.
    for open in ["203.0.113.7:80", "198.18.3.3:8000", "[2001:2::1]:80"] {
        assert!(wide.permits_with(sa(open), own), "{open}");
    }
    // Named explicitly: a rule inside the range.
    let named = list(&[
        "127.0.0.1:8080",
        "169.254.169.254/32",
        "198.18.3.2/32:8000",
        "[::1]:8080",
        "[fe80::/64]:80",
    ]);
    for ok in [
        "127.0.0.1:8080",
        "169.254.169.254:80",
        "198.18.3.2:8000",
        "[::1]:8080",
        "[fe80::1]:80",
    ] {
        assert!(named.permits_with(sa(ok), own), "{ok}");
    }
    // Still only what the rule covers.
    assert!(!named.permits_with(sa("127.0.0.1:8081"), own));
    assert!(!named.permits_with(sa("198.18.3.2:8001"), own));
    // A rule wider than an own address does not name it: 198.18.3.0/24 is not 198.18.3.2.
    assert!(!list(&["198.18.3.0/24"]).permits_with(sa("198.18.3.2:1"), own));
    // The host's own answer: loopback is held, a benchmarking address nobody here holds is
    // not.
    assert!(super::allow::host_address("127.0.0.1".parse().unwrap()));
    assert!(!super::allow::host_address(
        "198.19.254.254".parse().unwrap()
    ));
    // The refusal names the range.
    let why = list(&["0.0.0.0/0"]).guarded(sa("127.0.0.1:22"));
    assert_eq!(why, Some("loopback"));
    assert_eq!(list(&["0.0.0.0/0"]).guarded(sa("203.0.113.7:22")), None);
}

proptest! {
    #[test]
    fn fuzz_body_on_random_input(data in proptest::collection::vec(any::<u8>(), 0..600)) {
        fuzzing::handshake(&data);
    }

    #[test]
    fn fuzz_body_on_near_valid_input(
        methods in proptest::collection::vec(any::<u8>(), 0..4),
        atyp in prop_oneof![Just(1u8), Just(3u8), Just(4u8), any::<u8>()],
        tail in proptest::collection::vec(any::<u8>(), 0..40),
    ) {
        let mut data = vec![5, methods.len() as u8];
        data.extend_from_slice(&methods);
        data.extend_from_slice(&[5, 1, 0, atyp]);
        data.extend_from_slice(&tail);
        fuzzing::handshake(&data);
    }

    #[test]
    fn udp_fuzz_body_on_random_and_near_valid_input(
        data in proptest::collection::vec(any::<u8>(), 0..300),
        atyp in prop_oneof![Just(1u8), Just(3u8), Just(4u8), any::<u8>()],
        frag in prop_oneof![Just(0u8), any::<u8>()],
    ) {
        fuzzing::udp_packet(&data);
        let mut near = vec![0, 0, frag, atyp];
        near.extend_from_slice(&data);
        fuzzing::udp_packet(&near);
    }

    #[test]
    fn udp_packets_roundtrip(a in any::<[u8; 16]>(), port in any::<u16>(),
                             name in "[a-z0-9.-]{1,255}",
                             data in proptest::collection::vec(any::<u8>(), 0..1500)) {
        for host in [
            Host::Ip(IpAddr::V4(Ipv4Addr::new(a[0], a[1], a[2], a[3]))),
            Host::Ip(IpAddr::V6(Ipv6Addr::from(a))),
            Host::Domain(name.clone()),
        ] {
            let p = UdpPacket { target: Target { host, port }, data: &data };
            let enc = p.encode().unwrap();
            prop_assert_eq!(UdpPacket::parse(&enc), Ok(p.clone()));
            fuzzing::udp_packet(&enc);
        }
    }

    #[test]
    fn targets_roundtrip(a in any::<[u8; 16]>(), port in any::<u16>(),
                         name in "[a-z0-9.-]{1,255}") {
        for host in [
            Host::Ip(IpAddr::V4(Ipv4Addr::new(a[0], a[1], a[2], a[3]))),
            Host::Ip(IpAddr::V6(Ipv6Addr::from(a))),
            Host::Domain(name.clone()),
        ] {
            let t = Target { host, port };
            let mut enc = Vec::new();
            t.encode_into(&mut enc);
            for cut in 0..enc.len() {
                prop_assert_eq!(Target::decode(&enc[..cut]), Ok(None));
            }
            prop_assert_eq!(Target::decode(&enc), Ok(Some((t, enc.len()))));
        }
    }
}
