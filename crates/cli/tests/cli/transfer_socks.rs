//! `nena proxy client --socks5` / `nena proxy server --allow` through the lab (root): curl
//! through SOCKS5 to python's http.server in the server host, byte-exact (a domain name the
//! proxy server resolves, IPv4 with username/password); the RFC 1928 reply
//! codes for a destination outside `--allow` (0x02), a closed port (0x05), an unsupported
//! command (0x07) and address type (0x08); a server with no `--allow` refuses everything;
//! 1,000 concurrent SOCKS sessions echoed byte-exact; a second real SOCKS5 client, ncat
//! (`--proxy-type socks5 --proxy-dns remote`: the name travels to the proxy server).

use crate::harness::*;
use nena_lab::Host;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Stdio;
use std::time::Duration;

/// Raise this process's soft limit of open files to its hard limit.
fn raise_nofile_limit() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: plain struct out-parameter.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}

/// SOCKS5 by hand: greeting (no auth), then CONNECT with `req` (`ATYP ADDR PORT`, or a whole
/// custom request when `raw` is set). Returns the reply code, or the error.
pub(crate) fn socks_connect(
    proxy: SocketAddr,
    req: &[u8],
    raw: bool,
) -> std::io::Result<(u8, TcpStream)> {
    let mut s = TcpStream::connect(proxy)?;
    s.set_read_timeout(Some(Duration::from_secs(20)))?;
    s.write_all(&[5, 1, 0])?;
    let mut m = [0u8; 2];
    s.read_exact(&mut m)?;
    assert_eq!(m, [5, 0], "method reply");
    let mut r = if raw { Vec::new() } else { vec![5, 1, 0] };
    r.extend_from_slice(req);
    s.write_all(&r)?;
    let mut head = [0u8; 4];
    s.read_exact(&mut head)?;
    assert_eq!(head[0], 5, "reply version");
    let rest = match head[3] {
        1 => 4 + 2,
        4 => 16 + 2,
        other => panic!("reply address type {other}"),
    };
    let mut bnd = vec![0u8; rest];
    s.read_exact(&mut bnd)?;
    Ok((head[1], s))
}

/// `curl -sS URL` through the SOCKS proxy `proxy` (a `--proxy` URL) in the client host.
fn curl(lab: &nena_lab::Lab, proxy: &str, url: &str) -> std::process::Output {
    lab.command(
        Host::Client,
        "curl",
        ["-sS", "--max-time", "30", "--proxy", proxy, url],
    )
    .output()
    .unwrap()
}

/// A SOCKS5 request's `ATYP ADDR PORT` for an IPv4 address.
pub(crate) fn v4(ip: [u8; 4], port: u16) -> Vec<u8> {
    let mut r = vec![1];
    r.extend_from_slice(&ip);
    r.extend_from_slice(&port.to_be_bytes());
    r
}

#[test]
fn socks5_through_both_proxies_with_allow_rules() {
    let lab = lab();
    let dir = TempDir::new("socks");
    let body = random(3 * 1024 * 1024 + 17, 42);
    std::fs::write(dir.join("blob.bin"), &body).unwrap();

    let _http = http_server(&lab, &dir, None);
    // An echo server for the concurrent sessions.
    let _echo = echo_server(&lab, "127.0.0.1:8007".parse().unwrap());
    // Loopback of the server host, ports 8000-8010 only: the server's own address
    // (198.18.3.2) is outside the list.
    let listen = server(&lab, 7401);
    let ps = spawn_listening(
        &lab,
        Host::Server,
        &[
            "-v",
            "proxy",
            "server",
            "--listen",
            &listen,
            "--allow",
            "127.0.0.0/8:8000-8010",
            "--allow",
            "[::1]:8000",
        ],
    );
    let mut args = vec![
        "-v",
        "proxy",
        "client",
        "--socks5",
        "127.0.0.1:1080",
        "--to",
        &listen,
    ];
    args.extend_from_slice(&PATHS);
    let pc = spawn_listening(&lab, Host::Client, &args);

    // curl, the name resolved by the proxy server (ATYP domain; `localhost` also resolves to
    // ::1, which --allow permits but the lab's hosts have no IPv6: the server goes on to
    // 127.0.0.1), and an IPv4 literal (ATYP IPv4): byte-exact. (IPv6 destinations: the unit
    // tests of nena_transport::proxy::socks.)
    for url in [
        "http://localhost:8000/blob.bin",
        "http://127.0.0.2:8000/blob.bin",
    ] {
        let out = curl(&lab, "socks5h://127.0.0.1:1080", url);
        assert!(
            out.status.success(),
            "curl {url} failed: {}\nproxy client: {}\nproxy server: {}",
            String::from_utf8_lossy(&out.stderr),
            pc.stderr(),
            ps.stderr()
        );
        assert!(
            out.stdout == body,
            "{url}: curl got {} bytes, not the file",
            out.stdout.len()
        );
    }
    assert!(
        ps.stderr().contains("CONNECT 127.0.0.2:8000"),
        "{}",
        ps.stderr()
    );

    // Outside --allow: curl fails, and the reply is 0x02.
    let out = curl(
        &lab,
        "socks5h://127.0.0.1:1080",
        "http://198.18.3.2:8000/blob.bin",
    );
    assert!(
        !out.status.success(),
        "curl reached a destination outside --allow"
    );
    assert!(out.stdout.is_empty());
    let entry: SocketAddr = "127.0.0.1:1080".parse().unwrap();
    let codes = lab
        .run_in(Host::Client, move || {
            let code = |req: &[u8], raw| socks_connect(entry, req, raw).unwrap().0;
            let mut dom = vec![3, 9];
            dom.extend_from_slice(b"localhost");
            dom.extend_from_slice(&8001u16.to_be_bytes());
            vec![
                // Outside --allow: the server's address, and an allowed address's other port.
                code(&v4([198, 18, 3, 2], 8000), false),
                code(&v4([127, 0, 0, 1], 22), false),
                // Allowed, nothing listening: connection refused (IPv4 and a domain name).
                code(&v4([127, 0, 0, 1], 8001), false),
                code(&dom, false),
                // BIND, and an unknown address type: answered by the proxy client.
                code(&[5, 2, 0, 1, 127, 0, 0, 1, 0, 80], true),
                code(&[5, 1, 0, 9, 0, 0], true),
            ]
        })
        .unwrap();
    assert_eq!(
        codes,
        vec![0x02, 0x02, 0x05, 0x05, 0x07, 0x08],
        "\nproxy server: {}",
        ps.stderr()
    );
    assert!(
        ps.stderr()
            .contains("CONNECT 198.18.3.2:8000 refused: connection not allowed by ruleset"),
        "{}",
        ps.stderr()
    );

    // ncat (nmap's), a second SOCKS5 client: a domain name resolved by the proxy server,
    // the echo server's answer byte-exact.
    let msg = text(200_000, 9);
    let mut ncat = lab
        .command(
            Host::Client,
            "ncat",
            [
                "--proxy",
                "127.0.0.1:1080",
                "--proxy-type",
                "socks5",
                "--proxy-dns",
                "remote",
                "localhost",
                "8007",
            ],
        )
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ncat (scripts/install-deps.sh installs it)");
    let mut stdin = ncat.stdin.take().unwrap();
    let sent = msg.clone();
    let writer = std::thread::spawn(move || stdin.write_all(&sent));
    let out = ncat.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(
        out.status.success() && out.stdout == msg,
        "ncat: {} ({} bytes back)\n{}\nproxy client: {}",
        out.status,
        out.stdout.len(),
        String::from_utf8_lossy(&out.stderr),
        pc.stderr()
    );
    assert!(
        ps.stderr().contains("CONNECT localhost:8007"),
        "{}",
        ps.stderr()
    );

    // 1,000 concurrent sessions through SOCKS to the echo server, each byte-exact. This
    // process holds both ends of each (the clients, and the echo server's thread).
    raise_nofile_limit();
    const SESSIONS: usize = 1000;
    let results = lab
        .run_in(Host::Client, move || {
            let barrier = std::sync::Arc::new(std::sync::Barrier::new(SESSIONS));
            let threads: Vec<_> = (0..SESSIONS)
                .map(|i| {
                    let barrier = barrier.clone();
                    std::thread::spawn(move || -> Result<(), String> {
                        let msg = random(16 * 1024, i as u64);
                        let opened = (|| {
                            let (code, mut s) =
                                socks_connect(entry, &v4([127, 0, 0, 1], 8007), false)
                                    .map_err(|e| format!("session {i}: {e}"))?;
                            if code != 0 {
                                return Err(format!("session {i}: reply {code}"));
                            }
                            s.write_all(&msg).map_err(|e| e.to_string())?;
                            Ok(s)
                        })();
                        // All open at once before any ends; a session that failed to open
                        // still arrives here, or the others would wait for it forever.
                        barrier.wait();
                        let mut s = opened?;
                        s.shutdown(std::net::Shutdown::Write)
                            .map_err(|e| e.to_string())?;
                        let mut back = Vec::new();
                        s.read_to_end(&mut back)
                            .map_err(|e| format!("session {i}: {e}"))?;
                        if back != msg {
                            return Err(format!("session {i}: echo differs ({} B)", back.len()));
                        }
                        Ok(())
                    })
                })
                .collect();
            threads
                .into_iter()
                .map(|t| t.join().unwrap())
                .collect::<Vec<_>>()
        })
        .unwrap();
    let errors: Vec<&String> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    // The kernel's misplaced record 0 (docs/investigations/kernel-41-bytes; see transfer_proxy.rs)
    // is caught by aead at the proxy server, which tells the client; the client opens a new
    // session, so no application sees it: no error at all. The server's aborts must all be of that
    // kind (record 0, the client told).
    let aborts: Vec<String> = ps
        .stderr()
        .lines()
        .filter(|l| l.contains("integrity check failed"))
        .map(str::to_string)
        .collect();
    assert!(
        aborts
            .iter()
            .all(|l| l.contains("(record 0 of the peer's stream")
                && l.contains("the client was told and may retry")),
        "{aborts:#?}"
    );
    assert!(
        errors.is_empty(),
        "{errors:?}\n{aborts:#?}\nproxy client: {}",
        pc.stderr()
    );
    // Each went through the proxy server as its own request.
    let connects = ps.stderr().matches("CONNECT 127.0.0.1:8007").count();
    assert!(
        connects >= SESSIONS - errors.len(),
        "{connects} CONNECTs logged"
    );
}

#[test]
fn a_proxy_server_without_allow_refuses_every_request() {
    let lab = lab();
    let listen = server(&lab, 7411);
    let ps = spawn_listening(
        &lab,
        Host::Server,
        &["proxy", "server", "--listen", &listen],
    );
    let mut args = vec![
        "proxy",
        "client",
        "--socks5",
        "127.0.0.1:1081",
        "--to",
        &listen,
    ];
    args.extend_from_slice(&PATHS);
    let _pc = spawn_listening(&lab, Host::Client, &args);
    let entry: SocketAddr = "127.0.0.1:1081".parse().unwrap();
    // Its own proxy port on loopback and the server's address: refused, 0x02.
    let codes = lab
        .run_in(Host::Client, move || {
            [v4([127, 0, 0, 1], 7411), v4([198, 18, 3, 2], 7411)]
                .iter()
                .map(|r| socks_connect(entry, r, false).unwrap().0)
                .collect::<Vec<_>>()
        })
        .unwrap();
    assert_eq!(codes, vec![0x02, 0x02], "{}", ps.stderr());
    assert!(ps.stderr().contains("every SOCKS request will be refused"));
}

/// `--allow 0.0.0.0/0:8000` (GATEWAY.md's kind of rule) reaches neither the proxy server
/// host's loopback, its own address nor the cloud metadata address (169.254.169.254, given
/// to the server host's loopback here, where a cloud's hypervisor would answer): each is
/// refused with 0x02 and the server's log names the guarded range, while a listener on
/// every one of them accepts. Named by rules of their own, loopback and the metadata
/// address are reached (0x00); the server's own address, named by no rule, still is not.
#[test]
fn a_wide_allow_rule_never_reaches_the_proxy_servers_own_host() {
    let lab = lab();
    sh(&lab, Host::Server, "ip addr add 169.254.169.254/32 dev lo");
    let dir = TempDir::new("socks-guard");
    let _http = http_server(&lab, &dir, None);
    let entry = |port: u16| -> SocketAddr { SocketAddr::from(([127, 0, 0, 1], port)) };
    let targets = [
        v4([127, 0, 0, 1], 8000),
        v4([198, 18, 3, 2], 8000),
        v4([169, 254, 169, 254], 8000),
    ];
    let codes_through = |extra: &[&str], listen_port: u16, socks_port: u16| {
        let listen = server(&lab, listen_port);
        let mut ps_args = vec![
            "-v",
            "proxy",
            "server",
            "--listen",
            &listen,
            "--allow",
            "0.0.0.0/0:8000",
        ];
        ps_args.extend_from_slice(extra);
        let ps = spawn_listening(&lab, Host::Server, &ps_args);
        let socks = format!("127.0.0.1:{socks_port}");
        let mut args = vec!["proxy", "client", "--socks5", &socks, "--to", &listen];
        args.extend_from_slice(&PATHS);
        let _pc = spawn_listening(&lab, Host::Client, &args);
        let at = entry(socks_port);
        let reqs = targets.to_vec();
        let codes = lab
            .run_in(Host::Client, move || {
                reqs.iter()
                    .map(|r| socks_connect(at, r, false).unwrap().0)
                    .collect::<Vec<_>>()
            })
            .unwrap();
        (codes, ps)
    };
    let (codes, ps) = codes_through(&[], 7451, 1091);
    assert_eq!(codes, vec![0x02, 0x02, 0x02], "{}", ps.stderr());
    // The server logs each refusal as it answers it: waited for, the last may still be on
    // its way to the log when the client has its reply.
    for why in [
        "127.0.0.1:8000 is guarded (loopback)",
        "198.18.3.2:8000 is guarded (an address of the proxy server's host)",
        "169.254.169.254:8000 is guarded (link-local, with the cloud metadata service",
    ] {
        ps.wait_stderr(why, Duration::from_secs(10));
    }
    let (codes, ps) = codes_through(
        &["--allow", "127.0.0.1:8000", "--allow", "169.254.169.254/32"],
        7452,
        1092,
    );
    assert_eq!(codes, vec![0x00, 0x02, 0x00], "{}", ps.stderr());
}

#[test]
fn socks5_username_and_password() {
    let lab = lab();
    let dir = TempDir::new("socks-auth");
    std::fs::write(dir.join("users"), "# SOCKS users\nalice:s3cret pass\n").unwrap();
    let page = b"<p>hello through nena</p>\n".repeat(1000);
    std::fs::write(dir.join("page.html"), &page).unwrap();
    let _http = http_server(&lab, &dir, None);
    let listen = server(&lab, 7421);
    let _ps = spawn_listening(
        &lab,
        Host::Server,
        &[
            "proxy",
            "server",
            "--listen",
            &listen,
            "--allow",
            "127.0.0.1:8000",
        ],
    );
    let users = dir.join("users").display().to_string();
    let mut args = vec![
        "-v",
        "proxy",
        "client",
        "--socks5",
        "127.0.0.1:1082",
        "--socks-user-file",
        &users,
        "--to",
        &listen,
    ];
    args.extend_from_slice(&PATHS);
    let pc = spawn_listening(&lab, Host::Client, &args);
    // curl sends IPv4 itself here (socks5: curl resolves), with the user's password.
    let url = "http://127.0.0.1:8000/page.html";
    let out = curl(&lab, "socks5://alice:s3cret%20pass@127.0.0.1:1082", url);
    assert!(
        out.status.success() && out.stdout == page,
        "{}\n{}",
        String::from_utf8_lossy(&out.stderr),
        pc.stderr()
    );
    // A wrong password, and no credentials at all: refused before any request.
    for proxy in [
        "socks5://alice:wrong@127.0.0.1:1082",
        "socks5://127.0.0.1:1082",
    ] {
        let out = curl(&lab, proxy, url);
        assert!(!out.status.success() && out.stdout.is_empty(), "{proxy}");
    }
    // (The proxy logs a refusal after answering it: wait for the line.)
    let log = pc.wait_stderr(
        "no acceptable authentication method",
        Duration::from_secs(5),
    );
    assert!(log.contains("wrong user name or password"), "{log}");
}

/// IPv6 end to end: the lab is IPv4 only, so this test gives the server host's link an
/// address of RFC 5180's benchmarking range (2001:2::/48, the IPv6 twin of 198.18.0.0/15)
/// and nothing else; python's http.server listens there; curl asks the SOCKS proxy for the
/// IPv6 literal and gets the file byte-exact; a hand-made request with ATYP 4 (IPv6) is
/// answered "succeeded" on an allowed port and "not allowed" (0x02) on another.
#[test]
fn socks5_ipv6_destination_end_to_end() {
    let lab = lab();
    let ns = lab.netns(Host::Server);
    for args in [
        vec![
            "netns",
            "exec",
            &ns,
            "sysctl",
            "-qw",
            "net.ipv6.conf.lo.disable_ipv6=0",
        ],
        vec![
            "netns",
            "exec",
            &ns,
            "sysctl",
            "-qw",
            "net.ipv6.conf.eth0.disable_ipv6=0",
        ],
        vec![
            "-n",
            &ns,
            "-6",
            "addr",
            "add",
            "2001:2::2/64",
            "dev",
            "eth0",
            "nodad",
        ],
    ] {
        let st = std::process::Command::new("ip")
            .args(&args)
            .status()
            .unwrap();
        assert!(st.success(), "ip {args:?}");
    }
    let dir = TempDir::new("socks6");
    let body = random(1024 * 1024 + 5, 6);
    std::fs::write(dir.join("blob.bin"), &body).unwrap();
    let mut cmd = lab.command(
        Host::Server,
        "python3",
        [
            "-m",
            "http.server",
            "8000",
            "--bind",
            "2001:2::2",
            "--directory",
            dir.path().to_str().unwrap(),
        ],
    );
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let _http = Killed(cmd.spawn().unwrap());
    wait_accepts(
        &lab,
        Host::Server,
        "[2001:2::2]:8000".parse().unwrap(),
        "http.server",
    );
    let listen = server(&lab, 7431);
    let ps = spawn_listening(
        &lab,
        Host::Server,
        &[
            "-v",
            "proxy",
            "server",
            "--listen",
            &listen,
            "--allow",
            // The server host's own address: named alone (a wider rule does not reach it).
            "[2001:2::2/128]:8000",
        ],
    );
    let mut args = vec![
        "proxy",
        "client",
        "--socks5",
        "127.0.0.1:1083",
        "--to",
        &listen,
    ];
    args.extend_from_slice(&PATHS);
    let pc = spawn_listening(&lab, Host::Client, &args);
    let out = curl(
        &lab,
        "socks5h://127.0.0.1:1083",
        "http://[2001:2::2]:8000/blob.bin",
    );
    assert!(
        out.status.success() && out.stdout == body,
        "curl: {} ({} bytes)\n{}\nproxy client: {}\nproxy server: {}",
        out.status,
        out.stdout.len(),
        String::from_utf8_lossy(&out.stderr),
        pc.stderr(),
        ps.stderr()
    );
    assert!(
        ps.stderr().contains("CONNECT [2001:2::2]:8000"),
        "{}",
        ps.stderr()
    );
    let entry: SocketAddr = "127.0.0.1:1083".parse().unwrap();
    let v6 = |port: u16| {
        let mut r = vec![4];
        r.extend_from_slice(&"2001:2::2".parse::<std::net::Ipv6Addr>().unwrap().octets());
        r.extend_from_slice(&port.to_be_bytes());
        r
    };
    let (ok, refused) = lab
        .run_in(Host::Client, move || {
            let (ok, mut s) = socks_connect(entry, &v6(8000), false).unwrap();
            // The connection works: an HTTP request through it is answered.
            s.write_all(b"HEAD /blob.bin HTTP/1.0\r\n\r\n").unwrap();
            let mut head = [0u8; 12];
            s.read_exact(&mut head).unwrap();
            assert_eq!(
                &head[..9],
                b"HTTP/1.0 ",
                "{:?}",
                String::from_utf8_lossy(&head)
            );
            (ok, socks_connect(entry, &v6(22), false).unwrap().0)
        })
        .unwrap();
    assert_eq!((ok, refused), (0x00, 0x02), "{}", ps.stderr());
}

/// The proxy server's access token comes before its `--allow` rules (issue 22, item 3): a
/// SOCKS client without the token, or with another one, gets 0x02 for a destination the
/// rules permit, and its log says a token is required; with the token the same request
/// succeeds and is echoed byte-exact. A SOCKS client sent to a `--forward` server gets 0x02
/// and the reason (it used to be relayed to the forward target and fail as "general
/// failure").
#[test]
fn the_access_token_comes_before_the_allow_rules() {
    let lab = lab();
    let dir = TempDir::new("socks-token");
    let (token, other) = token_files(&dir);
    let (token, other) = (token.as_str(), other.as_str());
    let _echo = echo_server(&lab, "127.0.0.1:8017".parse().unwrap());
    let listen = server(&lab, 7431);
    let ps = spawn_listening(
        &lab,
        Host::Server,
        &[
            "-v",
            "proxy",
            "server",
            "--listen",
            &listen,
            "--allow",
            "127.0.0.0/8",
            "--token-file",
            token,
        ],
    );
    let forward_listen = server(&lab, 7432);
    let _forward = spawn_listening(
        &lab,
        Host::Server,
        &[
            "proxy",
            "server",
            "--listen",
            &forward_listen,
            "--forward",
            "127.0.0.1:8017",
        ],
    );
    let client = |entry: &str, to: &str, extra: &[&str]| {
        let mut args = vec!["-v", "proxy", "client", "--socks5", entry, "--to", to];
        args.extend_from_slice(&PATHS);
        args.extend_from_slice(extra);
        spawn_listening(&lab, Host::Client, &args)
    };
    let without = client("127.0.0.1:1091", &listen, &[]);
    let wrong = client("127.0.0.1:1092", &listen, &["--token-file", other]);
    let right = client("127.0.0.1:1093", &listen, &["--token-file", token]);
    let misdirected = client("127.0.0.1:1094", &forward_listen, &[]);

    let payload = random(256 * 1024 + 3, 7);
    let sent = payload.clone();
    let (codes, echoed) = lab
        .run_in(Host::Client, move || {
            let req = v4([127, 0, 0, 1], 8017);
            let codes: Vec<u8> = [1091, 1092, 1094]
                .iter()
                .map(|p| {
                    let entry: SocketAddr = format!("127.0.0.1:{p}").parse().unwrap();
                    socks_connect(entry, &req, false).unwrap().0
                })
                .collect();
            let (code, mut s) =
                socks_connect("127.0.0.1:1093".parse().unwrap(), &req, false).unwrap();
            assert_eq!(code, 0, "the client with the token was refused");
            s.write_all(&payload).unwrap();
            s.shutdown(std::net::Shutdown::Write).unwrap();
            let mut back = Vec::new();
            s.read_to_end(&mut back).unwrap();
            (codes, back)
        })
        .unwrap();
    assert_eq!(
        codes,
        vec![0x02, 0x02, 0x02],
        "without, wrong, misdirected\nserver:\n{}",
        ps.stderr()
    );
    assert!(
        echoed == sent,
        "echoed {} of {} bytes",
        echoed.len(),
        sent.len()
    );
    for p in [&without, &wrong] {
        p.wait_stderr("a valid access token is required", Duration::from_secs(10));
    }
    misdirected.wait_stderr(
        "forwards every session to its one --forward target",
        Duration::from_secs(10),
    );
    // Both refusals were for the token, and only the session with it got as far as a
    // connect.
    ps.wait_stderr_n(
        "CONNECT 127.0.0.1:8017 refused: connection not allowed by ruleset (a valid access token",
        2,
        Duration::from_secs(10),
    );
    let log = ps.wait_stderr("session done", Duration::from_secs(10));
    let connected = log
        .lines()
        .filter(|l| l.ends_with(": CONNECT 127.0.0.1:8017"))
        .count();
    assert_eq!(connected, 1, "{log}");
    assert!(right.stderr().contains("SOCKS CONNECT 127.0.0.1:8017"));
}
