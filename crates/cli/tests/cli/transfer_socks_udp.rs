//! SOCKS5 UDP ASSOCIATE through `nena proxy client --socks5` and `nena proxy server --allow`
//! in the lab (root), with a SOCKS5 UDP client written here (std sockets): what needs the
//! kernel. Captures of both client links during a random payload's echo round trip from the
//! server host's UDP echo (198.18.3.2:7007), the datagram plane on: neither link carries a
//! UDP packet but the plane's sealed ones, nor a 16-byte run of the payload; the proxy
//! client's stop (SIGTERM) ends an association whose control connection is still open. The
//! association's logic (`--allow`, the datagrams the proxy client drops and why, the counts,
//! its end with the control connection, username/password) needs no kernel:
//! crates/transport/tests/net_socks_udp.rs.

use crate::harness::*;
use crate::transfer_run_dns_udp::udp_echo;
use nena_lab::{Host, Link};
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpStream, UdpSocket};
use std::time::Duration;

/// How long the test waits for an event at most.
const WAIT: Duration = Duration::from_secs(20);

/// `nena -v proxy server` on 198.18.3.2:PORT, permitting only the echo: its address, and it.
fn proxy_server(lab: &nena_lab::Lab, port: u16) -> (String, Proc) {
    let listen = server(lab, port);
    let args = [
        "-v", "proxy", "server", "--listen", &listen, "--allow", ALLOW,
    ];
    let p = spawn_listening(lab, Host::Server, &args);
    (listen, p)
}

/// `nena -v proxy client --socks5 ENTRY --to LISTEN EXTRA..` in the client host.
fn socks_client(lab: &nena_lab::Lab, entry: &str, listen: &str, extra: &[&str]) -> Proc {
    let mut args = vec!["-v", "proxy", "client", "--socks5", entry, "--to", listen];
    args.extend_from_slice(&PATHS);
    args.extend_from_slice(extra);
    spawn_listening(lab, Host::Client, &args)
}

/// What the proxy server permits: the echo only.
const ALLOW: &str = "198.18.3.2/32:7007";
/// The echo `--allow` permits.
pub(crate) const ECHO: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(198, 18, 3, 2), 7007);

/// SOCKS5 UDP ASSOCIATE on a new control connection to `entry` (with `auth`, RFC 1929
/// username/password): the reply code and, when it succeeded, the relay's address
/// (BND.ADDR, BND.PORT) and the control connection.
pub(crate) fn associate(
    entry: SocketAddr,
    auth: Option<(&str, &str)>,
) -> std::io::Result<(u8, Option<(SocketAddr, TcpStream)>)> {
    let mut s = TcpStream::connect(entry)?;
    s.set_read_timeout(Some(WAIT))?;
    let method = if auth.is_some() { 2 } else { 0 };
    s.write_all(&[5, 1, method])?;
    let mut m = [0u8; 2];
    s.read_exact(&mut m)?;
    if m[1] != method {
        return Ok((m[1], None));
    }
    if let Some((u, p)) = auth {
        let mut a = vec![1, u.len() as u8];
        a.extend_from_slice(u.as_bytes());
        a.push(p.len() as u8);
        a.extend_from_slice(p.as_bytes());
        s.write_all(&a)?;
        s.read_exact(&mut m)?;
        assert_eq!(m, [1, 0], "authentication");
    }
    // DST.ADDR and DST.PORT zero: the client does not say where it will send from.
    s.write_all(&[5, 3, 0, 1, 0, 0, 0, 0, 0, 0])?;
    let mut r = [0u8; 10];
    s.read_exact(&mut r)?;
    assert_eq!(
        (r[0], r[2], r[3]),
        (5, 0, 1),
        "reply header (IPv4 BND.ADDR)"
    );
    if r[1] != 0 {
        return Ok((r[1], None));
    }
    let bnd = SocketAddr::from(([r[4], r[5], r[6], r[7]], u16::from_be_bytes([r[8], r[9]])));
    Ok((0, Some((bnd, s))))
}

/// A datagram for the association: `RSV RSV FRAG ATYP(IPv4) DST.ADDR DST.PORT DATA`.
pub(crate) fn to(dst: SocketAddrV4, frag: u8, data: &[u8]) -> Vec<u8> {
    let mut d = vec![0, 0, frag, 1];
    d.extend_from_slice(&dst.ip().octets());
    d.extend_from_slice(&dst.port().to_be_bytes());
    d.extend_from_slice(data);
    d
}

/// One datagram received on `udp` (a read timeout of 20 s: the failure is the assert's).
fn recv(udp: &UdpSocket) -> Vec<u8> {
    let mut b = vec![0u8; 65535];
    let n = udp.recv(&mut b).expect("a datagram back");
    b.truncate(n);
    b
}

/// A UDP socket of the client host on loopback, connected to the association's relay.
pub(crate) fn client_socket(lab: &nena_lab::Lab, relay: SocketAddr) -> UdpSocket {
    lab.run_in(Host::Client, move || {
        let u = UdpSocket::bind("127.0.0.1:0")?;
        u.set_read_timeout(Some(WAIT))?;
        u.connect(relay)?;
        Ok::<_, std::io::Error>(u)
    })
    .unwrap()
    .unwrap()
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn socks5_udp_associate_round_trip_leaves_nothing_in_the_clear() {
    let lab = lab();
    let dir = TempDir::new("socks-udp");
    let _echo = udp_echo(&lab);
    let (listen, _ps) = proxy_server(&lab, 7441);
    let pc = socks_client(&lab, "127.0.0.1:1085", &listen, &[]);
    let (cap_t, cap_u) = (dir.join("trusted.pcap"), dir.join("untrusted.pcap"));
    let ct = lab.capture(Link::Trusted, &cap_t).unwrap();
    let cu = lab.capture(Link::Untrusted, &cap_u).unwrap();
    // A payload of this run's own: random, 1,200 bytes.
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    let payload = random(1200, seed);
    let known = dir.join("payload.bin");
    std::fs::write(&known, &payload).unwrap();

    let entry: SocketAddr = "127.0.0.1:1085".parse().unwrap();
    let (code, assoc) = lab
        .run_in(Host::Client, move || associate(entry, None))
        .unwrap()
        .unwrap();
    assert_eq!(code, 0, "UDP ASSOCIATE refused\n{}", pc.stderr());
    let (relay, control) = assoc.unwrap();
    let udp = client_socket(&lab, relay);
    // The echo round trip, twice, with two payloads.
    let second = random(700, seed ^ 0x5a5a);
    for p in [&payload, &second] {
        udp.send(&to(ECHO, 0, p)).unwrap();
        let back = recv(&udp);
        assert!(
            back == to(ECHO, 0, p),
            "not the echo of {} bytes: {} bytes back\nproxy client: {}",
            p.len(),
            back.len(),
            pc.stderr()
        );
    }
    drop(control);
    pc.wait_stderr(
        &format!("UDP ASSOCIATE on {relay} ended: the control connection closed"),
        WAIT,
    );

    ct.stop().unwrap();
    cu.stop().unwrap();
    for (link, file) in [(Link::Trusted, &cap_t), (Link::Untrusted, &cap_u)] {
        assert!(
            packets(file, "tcp") > 0 || link == Link::Untrusted,
            "{link:?}: nothing captured?"
        );
        assert_eq!(
            udp_not_sealed(file, 7441),
            0,
            "{link:?}: UDP that is not the datagram plane's"
        );
        assert_eq!(
            runs_found(file, &known),
            0,
            "{link:?}: a 16-byte run of the payload in the clear"
        );
    }
}

/// The proxy client's stop (SIGTERM) ends an association (`--socks-user-file`, its
/// password given) whose control connection is still open; its session ends cleanly on
/// the server too.
#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn the_proxy_clients_stop_ends_an_association() {
    let lab = lab();
    let dir = TempDir::new("socks-udp-auth");
    std::fs::write(dir.join("users"), "alice:s3cret\n").unwrap();
    let _echo = udp_echo(&lab);
    let (listen, ps) = proxy_server(&lab, 7442);
    let users = dir.join("users").display().to_string();
    let pc = socks_client(
        &lab,
        "127.0.0.1:1086",
        &listen,
        &["--socks-user-file", &users],
    );
    let entry: SocketAddr = "127.0.0.1:1086".parse().unwrap();
    let (code, assoc) = lab
        .run_in(Host::Client, move || {
            associate(entry, Some(("alice", "s3cret")))
        })
        .unwrap()
        .unwrap();
    assert_eq!(code, 0, "{}", pc.stderr());
    let (relay, _control) = assoc.unwrap();
    let udp = client_socket(&lab, relay);
    let payload = random(512, 77);
    udp.send(&to(ECHO, 0, &payload)).unwrap();
    assert!(recv(&udp) == to(ECHO, 0, &payload), "{}", pc.stderr());
    // The proxy's stop ends the association (its control connection still open) and the
    // proxy exits.
    let mut pc = pc;
    assert!(pc.terminate().success(), "{}", pc.stderr());
    let stopped = format!("UDP ASSOCIATE on {relay} ended: the proxy is stopping");
    pc.wait_stderr(&stopped, WAIT);
    ps.wait_stderr("datagrams: 1 sent, 1 received, 0 not permitted", WAIT);
}
