//! Use cases of the issue, in two namespaces with real MPTCP (root, BPF, MPTCP). Each prints
//! its measurements as one JSON line (`cargo test -p nena-bpf --test usecases -- --nocapture`).
mod common;
use common::*;
use nena_bpf::{chains::packet, chains::spec, Hook, Policy};
use nena_mptcp::pm::PmSocket;
use std::os::fd::AsFd;
use std::time::{Duration, Instant, SystemTime};

fn chain(dev: &str, hook: Hook, links: &str) -> spec::ChainSpec {
    let t = format!(
        "[[chain]]\nname = \"uc\"\ndev = \"{dev}\"\nhook = \"{}\"\nlinks = [ {links} ]\n",
        hook.name()
    );
    spec::parse(&t).unwrap().chains.remove(0)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Frame bytes of the captured IPv4 packets that carry TCP payload from `server`: those
/// captured before `t`, and those from `t` on.
fn server_data_bytes(
    frames: &[(SystemTime, Vec<u8>)],
    server: [u8; 4],
    t: SystemTime,
) -> (u64, u64) {
    let (mut before, mut after) = (0, 0);
    for (at, f) in frames {
        let p = packet::parse(f).unwrap();
        if f[26..30] == server && p.ip_len > p.l4 - 14 + p.doff {
            if *at < t {
                before += f.len() as u64;
            } else {
                after += f.len() as u64;
            }
        }
    }
    (before, after)
}

/// MP_PRIO options (B flag) on the wire, with their capture times.
fn mp_prios(frames: &[(SystemTime, Vec<u8>)]) -> Vec<(SystemTime, bool)> {
    let mut v = vec![];
    for (t, f) in frames {
        for o in packet::mptcp_options(f) {
            if o.len() == 3 && o[2] >> 4 == 5 {
                v.push((*t, o[2] & 1 == 1));
            }
        }
    }
    v
}

/// How long a policy trial waits for its MP_PRIO on the wire.
const POLICY_WAIT_MS: u64 = 200;

/// Use case 4: set_backup from a policy against the same change through the path-manager
/// netlink API (MPTCP_PM_CMD_SET_FLAGS, as mptcpd does it). For each: how long the call takes,
/// and how long until the MP_PRIO is on the wire (tcpdump on the link).
#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn set_backup_policy_vs_netlink_latency() {
    let _one = serial(); // they measure time: one at a time
    let net = Net::new();
    let pins = Pins::new();
    net.sh_c("sysctl -qw net.mptcp.pm_type=1"); // userspace PM on the client, as with mptcpd
                                                // 50 Mbit/s per path (tbf at the server): both subflows busy, and few enough packets that
                                                // tcpdump sees every one
    for d in ["s1", "s2"] {
        net.sh_s(&format!(
            "tc qdisc add dev {d} root tbf rate 50mbit burst 16kb latency 20ms"
        ));
    }
    let c = net.client.clone();
    let p2 = pins.path().to_path_buf();
    let policy = net.in_ns(&c, move || Policy::attach(&p2, "c2").unwrap());
    let l = net.listen(&net.server, "198.18.100.2:5201");
    let srv = serve_bytes(l, 2_000_000_000);
    let mut conn = net.connect(&net.client, "198.18.100.2:5201");
    read_for(&mut conn, Duration::from_millis(50)); // fully established first
    let token = nena_mptcp::info(conn.as_fd()).unwrap().token;
    let mut pm = net.in_ns(&c, PmSocket::open).unwrap();
    let created = nena_testkit::poll_until(Duration::from_secs(2), || {
        read_for(&mut conn, Duration::from_millis(10));
        pm.subflow_create(
            token,
            CLIENT2.parse().unwrap(),
            None,
            "198.18.100.2:5201".parse().unwrap(),
        )
        .is_ok()
    });
    assert!(created, "SUBFLOW_CREATE failed");
    let mut local2 = None;
    assert!(nena_testkit::poll_until(Duration::from_secs(3), || {
        read_for(&mut conn, Duration::from_millis(20));
        local2 = nena_mptcp::subflows(conn.as_fd())
            .unwrap()
            .into_iter()
            .filter_map(|s| s.local)
            .find(|a| a.ip().to_string() == CLIENT2);
        local2.is_some()
    }));
    let local2 = local2.unwrap();
    let remote: std::net::SocketAddr = "198.18.100.2:5201".parse().unwrap();
    let mut cap = Capture::start(&c, "c2");
    // keep the download going (the client's ACKs carry the policy's MP_PRIO)
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop2 = stop.clone();
    let mut rd = conn.try_clone().unwrap();
    let reader = std::thread::spawn(move || {
        while !stop2.load(std::sync::atomic::Ordering::Relaxed) {
            read_for(&mut rd, Duration::from_millis(50));
        }
    });
    let trials = 10;
    let mut calls_nl = vec![];
    let mut calls_pol = vec![];
    let mut starts: Vec<(&str, SystemTime, bool)> = vec![];
    for i in 0..trials {
        let b = i % 2 == 0;
        let t0 = SystemTime::now();
        let s = Instant::now();
        pm.set_backup(token, local2, remote, b).unwrap();
        calls_nl.push(s.elapsed().as_secs_f64() * 1e6);
        starts.push(("netlink", t0, b));
        // sleep: trials 60 ms apart, each change's MP_PRIO timed apart from the next
        std::thread::sleep(Duration::from_millis(60));
    }
    // The policy marks the subflow backup with the MP_PRIO it adds to the client's next pure
    // ACK on it. Once the server treats it as backup, it sends nothing there and the client
    // has no ACK to carry a "not backup" any more: so each policy trial starts from "not
    // backup" restored through netlink (the kernel sends a dedicated ACK), and the policy is
    // measured on backup = true, the change that matters (hold an untrusted subflow back).
    let c2 = net.in_ns(&c, || nena_bpf::chains::loader::ifindex("c2").unwrap());
    for _ in 0..trials {
        pm.set_backup(token, local2, remote, false).unwrap();
        // sleep: trials 60 ms apart, each change's MP_PRIO timed apart from the next
        std::thread::sleep(Duration::from_millis(60));
        let ch = chain(
            "c2",
            Hook::Egress,
            r#"{ act = "set_backup", backup = true, repeat = 1 }"#,
        );
        let t0 = SystemTime::now();
        let s = Instant::now();
        policy
            .set_chain_ifindex(c2, Hook::Egress, Some(&ch))
            .unwrap();
        calls_pol.push(s.elapsed().as_secs_f64() * 1e6);
        starts.push(("policy", t0, true));
        // the MP_PRIO waits for a pure ACK of that subflow: give it longer than netlink's
        // dedicated ACK needs (on a slow host none came within 60 ms in 10 trials)
        // sleep: the window the policy has to place its MP_PRIO, whose delay is measured
        std::thread::sleep(Duration::from_millis(POLICY_WAIT_MS + 5));
        policy.set_chain_ifindex(c2, Hook::Egress, None).unwrap();
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    reader.join().unwrap();
    let frames = cap.timed_frames();
    let prios = mp_prios(&frames);
    let mut wire_nl = vec![];
    let mut wire_pol = vec![];
    for (i, (who, t0, b)) in starts.iter().enumerate() {
        // a netlink trial's MP_PRIO is on the wire before the next trial of the same flag
        // starts (trials alternate the flag); a policy trial waits POLICY_WAIT_MS for its ACK
        let deadline = match (*who, starts.get(i + 2)) {
            ("netlink", Some(("netlink", next, _))) => *next,
            ("netlink", _) => *t0 + Duration::from_millis(250),
            _ => *t0 + Duration::from_millis(POLICY_WAIT_MS),
        };
        let first = prios
            .iter()
            .find(|(t, pb)| t >= t0 && pb == b && *t < deadline);
        match (first, *who) {
            (Some((t, _)), w) => {
                let us = t.duration_since(*t0).unwrap().as_secs_f64() * 1e6;
                if w == "netlink" {
                    wire_nl.push(us)
                } else {
                    wire_pol.push(us)
                }
            }
            // the kernel sends a dedicated ACK for MP_PRIO: it is always on the wire
            (None, "netlink") => panic!(
                "netlink trial {i}: no MP_PRIO(B={b}) before the next trial of that flag; trials {starts:?}, seen {prios:?}"
            ),
            // the policy needs a pure ACK of that subflow to ride on
            (None, _) => {}
        }
    }
    assert!(!wire_pol.is_empty(), "the policy's MP_PRIO was never seen");
    let ss = net.ss(&net.server);
    println!(
        "{{\"use_case\": 4, \"trials\": {trials}, \"policy_seen\": {}, \"netlink_call_us\": {:.1}, \"policy_call_us\": {:.1}, \"netlink_to_wire_us\": {:.1}, \"policy_to_wire_us\": {:.1}}}",
        wire_pol.len(),
        median(calls_nl),
        median(calls_pol),
        median(wire_nl),
        median(wire_pol)
    );
    assert!(!ss.is_empty());
    drop(conn);
    let _ = srv.join();
}

/// Use case 1: trusted path first. The untrusted subflow (path 2) is held back: the policy sets
/// the B flag of its MP_JOIN SYN, so the server treats it as backup from birth and sends
/// nothing on it, until the first N bytes went over the trusted path and were acknowledged;
/// then it is released. The capture of the untrusted link shows no data before the release.
#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn trusted_path_first() {
    const N: u64 = 2_000_000;
    let _one = serial(); // they measure time: one at a time
    let net = Net::new();
    let pins = Pins::new();
    let c = net.client.clone();
    net.sh_c("ip mptcp endpoint add 198.18.101.1 dev c2 subflow");
    let p2 = pins.path().to_path_buf();
    let policy = net.in_ns(&c, move || Policy::attach(&p2, "c2").unwrap());
    let c2 = net.in_ns(&c, || nena_bpf::chains::loader::ifindex("c2").unwrap());
    policy
        .set_chain_ifindex(
            c2,
            Hook::Egress,
            Some(&chain(
                "c2",
                Hook::Egress,
                r#"{ act = "set_backup", backup = true }"#,
            )),
        )
        .unwrap();
    let mut cap = Capture::start(&c, "c2");
    let l = net.listen(&net.server, "198.18.100.2:5201");
    let srv = serve_bytes(l, 400_000_000);
    let mut conn = net.connect(&net.client, "198.18.100.2:5201");
    let t_start = SystemTime::now();
    // read until N bytes arrived (and so were acknowledged) and the untrusted subflow exists
    let mut got = 0;
    let mut joined = false;
    let t = Instant::now();
    while (got < N || !joined) && t.elapsed() < Duration::from_secs(5) {
        got += read_for(&mut conn, Duration::from_millis(5));
        joined = nena_mptcp::subflows(conn.as_fd())
            .unwrap()
            .iter()
            .any(|s| s.local.is_some_and(|a| a.ip().to_string() == CLIENT2));
    }
    // release: no more B flag from the policy, and the PM tells the peer (a dedicated ACK)
    policy.set_chain_ifindex(c2, Hook::Egress, None).unwrap();
    let t_release = SystemTime::now();
    net.sh_c("ip mptcp endpoint change 198.18.101.1 backup && ip mptcp endpoint change 198.18.101.1 nobackup");
    let mut after = 0;
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(700) {
        after += read_for(&mut conn, Duration::from_millis(50));
    }
    let frames = cap.timed_frames();
    let (before, later) = server_data_bytes(&frames, [198, 18, 100, 2], t_release);
    let join_syn_b = frames.iter().any(|(_, f)| {
        packet::mptcp_options(f)
            .iter()
            .any(|o| o.len() == 12 && o[2] >> 4 == 1 && o[2] & 1 == 1)
    });
    println!(
        "{{\"use_case\": 1, \"n_bytes\": {N}, \"subflow_joined_before_release\": {joined}, \"untrusted_data_bytes_before_release\": {before}, \"untrusted_data_bytes_after_release\": {later}, \"ms_to_release\": {:.1}, \"bytes_read_before_release\": {got}, \"bytes_read_after_release\": {after}}}",
        t_release.duration_since(t_start).unwrap().as_secs_f64() * 1e3
    );
    assert!(
        join_syn_b,
        "the MP_JOIN SYN on the untrusted link did not carry B = 1"
    );
    assert!(joined, "the untrusted subflow was not there to hold back");
    assert_eq!(before, 0, "data on the untrusted link before the release");
    assert!(
        later > 0,
        "the untrusted subflow carried nothing after the release"
    );
    drop(conn);
    let _ = srv.join();
}

/// Serve `size` bytes to every connection (a thread per connection) until the listener fails.
fn serve_each(l: std::net::TcpListener, size: usize) {
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { break };
            std::thread::spawn(move || {
                use std::io::Write;
                let _ = s.set_write_timeout(Some(Duration::from_secs(5)));
                let buf = vec![1u8; size];
                let _ = s.write_all(&buf);
            });
        }
    });
}

/// Flow completion time of a download of exactly `size` bytes.
fn fct(net: &Net, addr: &str, size: usize) -> f64 {
    use std::io::Read;
    let t = Instant::now();
    let mut c = net.connect(&net.client, addr);
    let mut buf = vec![0u8; 65536];
    let mut got = 0;
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    while got < size {
        match c.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) => panic!("read: {e}"),
        }
    }
    assert_eq!(got, size);
    t.elapsed().as_secs_f64() * 1e3
}

/// Two paths between the namespaces for use cases 2 and 3, user-space delay lines: fast
/// (cf -- sf, 198.18.`fast`.0/24, 10 ms each way) and slow (cs -- ss, 198.18.`slow`.0/24,
/// 25 ms each way). The client reaches the server's fast address over the slow path too
/// (routing table `table`) and joins the slow path for every connection (kernel PM endpoint).
fn two_paths(net: &Net, fast: u8, slow: u8, table: u32) -> (DelayLink, DelayLink) {
    let paths = (
        DelayLink::new(
            net,
            "cf",
            &format!("198.18.{fast}.1/24"),
            "sf",
            &format!("198.18.{fast}.2/24"),
            Duration::from_millis(10),
        ),
        DelayLink::new(
            net,
            "cs",
            &format!("198.18.{slow}.1/24"),
            "ss",
            &format!("198.18.{slow}.2/24"),
            Duration::from_millis(25),
        ),
    );
    net.sh_c(&format!(
        "ip route add 198.18.{fast}.2/32 dev cs table {table} && ip rule add from 198.18.{slow}.1 table {table}"
    ));
    net.sh_c(&format!(
        "ip mptcp endpoint add 198.18.{slow}.1 dev cs subflow"
    ));
    paths
}

/// Use case 2: small-flow path manager. Two paths of 20 ms and 50 ms RTT (user-space delay
/// lines, 50 and 10 Mbit/s); the client joins the slow path for every connection (kernel PM
/// endpoint). With the policy, a subflow on the slow path is born backup (set_backup on its
/// MP_JOIN SYN), so a small flow stays on the fast path (a flow that grows past a threshold
/// would get it released by user space, as in use case 1). Measured: flow completion time of
/// small flows against the default, and the data each put on the slow path (capture).
#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn small_flow_path_manager() {
    let small: usize = std::env::var("UC2_SIZE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let runs = 15;
    let _one = serial(); // they measure time: one at a time
    let net = Net::new();
    let pins = Pins::new();
    let _paths = two_paths(&net, 104, 105, 101);
    net.sh_s("tc qdisc add dev sf root tbf rate 50mbit burst 32kb latency 100ms");
    net.sh_s("tc qdisc add dev ss root tbf rate 10mbit burst 32kb latency 100ms");
    let l = net.in_ns(&net.server.clone(), || {
        nena_mptcp::listen("198.18.104.2:5301".parse().unwrap(), None).unwrap()
    });
    serve_each(l, small);
    let addr = "198.18.104.2:5301";
    fct(&net, addr, small); // warm up (ARP, routes)
    let c = net.client.clone();
    let mut cap = Capture::start(&c, "cs");
    let mut default = vec![];
    for _ in 0..runs {
        default.push(fct(&net, addr, small));
    }
    let p2 = pins.path().to_path_buf();
    let policy = net.in_ns(&c, move || Policy::attach(&p2, "cs").unwrap());
    let cs = net.in_ns(&c, || nena_bpf::chains::loader::ifindex("cs").unwrap());
    let t_policy = SystemTime::now();
    policy
        .set_chain_ifindex(
            cs,
            Hook::Egress,
            Some(&chain(
                "cs",
                Hook::Egress,
                r#"{ act = "set_backup", backup = true }"#,
            )),
        )
        .unwrap();
    let mut held = vec![];
    for _ in 0..runs {
        held.push(fct(&net, addr, small));
    }
    let st = policy.status().unwrap();
    let marked = st
        .hooks
        .iter()
        .find(|h| h.hook == Hook::Egress)
        .unwrap()
        .links[0]
        .hits;
    let frames = cap.timed_frames();
    let (slow_default, slow_policy) = server_data_bytes(&frames, [198, 18, 104, 2], t_policy);
    let (d, h) = (median(default), median(held));
    println!(
        "{{\"use_case\": 2, \"flow_bytes\": {small}, \"runs\": {runs}, \"fct_default_ms\": {d:.1}, \"fct_policy_ms\": {h:.1}, \"change_pct\": {:.1}, \"slow_path_bytes_default\": {slow_default}, \"slow_path_bytes_policy\": {slow_policy}, \"joins_marked\": {marked}}}",
        (h - d) / d * 100.0
    );
    assert!(marked >= 1, "no join was marked");
    assert_eq!(
        slow_policy, 0,
        "small flows put data on the slow path despite the policy"
    );
}

/// Download goodput (bit/s) over `d`, after `warm` of warm-up, on a fresh connection.
fn goodput(net: &Net, addr: &str, warm: Duration, d: Duration) -> f64 {
    let mut c = net.connect(&net.client, addr);
    read_for(&mut c, warm);
    let t = Instant::now();
    let n = read_for(&mut c, d);
    n as f64 * 8.0 / t.elapsed().as_secs_f64()
}

/// Use case 3: an ECF-like scheduler driven from user space through `rate_limit`. Two paths of
/// 20 ms and 50 ms RTT (delay lines) with deep bottleneck queues (tbf, 20 and 10 Mbit/s), a
/// loss-based sender (cubic) and a bounded receive buffer: by default the sender fills the
/// slow path's queue, its RTT grows, and the data waiting there for the fast path's holes
/// fills the receive buffer. The controller measures each path's base RTT and gives the slow
/// subflow a window of its own bandwidth-delay product (x 1.2), through `rate_limit` on the
/// sender's ingress of that path, so the slow path carries what it can deliver in time and no
/// queue. Goodput against the default is printed (Linux 6.18 gives no gain, BENCHMARKS.md);
/// what is asserted is the mechanism: in a capture at the server, no ACK of the capped
/// connection's slow subflow advertises more than the cap.
#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn ecf_like_scheduler_through_rate_limit() {
    let _one = serial(); // they measure time: one at a time
    let net = Net::new();
    let pins = Pins::new();
    let _paths = two_paths(&net, 106, 107, 102);
    let rmem = std::env::var("UC3_RMEM").unwrap_or("196608".into());
    net.sh_c(&format!("sysctl -qw net.ipv4.tcp_rmem='4096 65536 {rmem}'"));
    net.sh_s("sysctl -qw net.ipv4.tcp_congestion_control=reno");
    net.sh_s("tc qdisc add dev sf root tbf rate 20mbit burst 32kb latency 300ms");
    net.sh_s("tc qdisc add dev ss root tbf rate 10mbit burst 32kb latency 300ms");
    let l = net.in_ns(&net.server.clone(), || {
        nena_mptcp::listen("198.18.106.2:5401".parse().unwrap(), None).unwrap()
    });
    serve_each(l, 400_000_000);
    let addr = "198.18.106.2:5401";
    // the controller: base RTT of the slow path (the least of 9 one-byte ping-pongs, taken
    // before any transfer so that no queue is left on the path) and its rate
    let base_rtt_us = ping_rtts(&net, "198.18.107.2:5409", 9)[0].as_secs_f64() * 1e6;
    let (warm, span) = (Duration::from_millis(1500), Duration::from_secs(4));
    let default = goodput(&net, addr, warm, span);
    let s = net.server.clone();
    let slow_rate = 10_000_000u64;
    let factor: f64 = std::env::var("UC3_FACTOR")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1.2);
    let window = (slow_rate as f64 / 8.0 * base_rtt_us / 1e6 * factor) as u64;
    let p2 = pins.path().to_path_buf();
    let policy = net.in_ns(&s, move || Policy::attach(&p2, "ss").unwrap());
    let ss_idx = net.in_ns(&s, || nena_bpf::chains::loader::ifindex("ss").unwrap());
    policy
        .set_chain_ifindex(
            ss_idx,
            Hook::Ingress,
            Some(&chain(
                "ss",
                Hook::Ingress,
                &format!(r#"{{ act = "rate_limit", window = {window} }}"#),
            )),
        )
        .unwrap();
    // capture what reaches the server on the slow path, after the XDP program (taps see a
    // frame after XDP has run on it)
    let mut cap = Capture::start(&s, "ss");
    let capped = goodput(&net, addr, warm, span);
    let frames = cap.frames();
    let hits = policy
        .status()
        .unwrap()
        .hooks
        .iter()
        .find(|h| h.hook == Hook::Ingress)
        .unwrap()
        .links[0]
        .hits;
    println!(
        "{{\"use_case\": 3, \"default_bps\": {default:.0}, \"ecf_like_bps\": {capped:.0}, \"change_pct\": {:.1}, \"slow_base_rtt_us\": {base_rtt_us:.0}, \"slow_window\": {window}, \"acks_capped\": {hits}}}",
        (capped - default) / default * 100.0
    );
    assert!(hits > 0, "rate_limit never capped an ACK of the slow path");
    assert!(capped > 0.0 && default > 0.0);
    // What the mechanism guarantees, however loaded the host: on the capped connection's
    // slow subflow, no ACK reaches the server advertising more than the cap (in the unit of
    // the window scale the client offered in its MP_JOIN SYN, rounded to the nearest unit as
    // the actor does). The goodput figures above are measurements, not assertions.
    let (acks, max_wire, cap_wire) = slow_subflow_windows(&frames, [198, 18, 107, 1], window);
    println!("{{\"use_case\": 3, \"slow_acks\": {acks}, \"max_window_wire\": {max_wire}, \"cap_wire\": {cap_wire}}}");
    assert!(
        acks >= 50,
        "only {acks} ACKs of the capped slow subflow captured"
    );
    assert!(
        max_wire <= cap_wire,
        "an ACK of the slow subflow advertised {max_wire} units, the cap is {cap_wire}"
    );
}

/// The ACKs from `client` on the subflow whose MP_JOIN SYN the capture holds (the capped
/// connection's slow subflow): how many, the largest window field, and the cap `window` in
/// the units of the window scale that SYN offered (rounded to the nearest unit).
fn slow_subflow_windows(frames: &[Vec<u8>], client: [u8; 4], window: u64) -> (usize, u64, u64) {
    let tcp = |f: &[u8]| {
        let p = packet::parse(f)?;
        (!p.v6 && f.get(23) == Some(&6)).then_some(p)
    };
    let ports = |f: &[u8], l4: usize| {
        (
            u16::from_be_bytes([f[l4], f[l4 + 1]]),
            u16::from_be_bytes([f[l4 + 2], f[l4 + 3]]),
        )
    };
    // the MP_JOIN SYN from the client (SYN without ACK, an MPTCP option of subtype 1)
    let syn = frames
        .iter()
        .find(|f| {
            tcp(f).is_some_and(|p| {
                f[26..30] == client
                    && f[p.l4 + 13] & 0x12 == 0x02
                    && packet::mptcp_options(f)
                        .iter()
                        .any(|o| o.len() > 2 && o[2] >> 4 == 1)
            })
        })
        .expect("the capture holds the slow subflow's MP_JOIN SYN");
    let p = tcp(syn).unwrap();
    let flow = ports(syn, p.l4);
    let shift = packet::options(syn)
        .unwrap()
        .iter()
        .find(|(k, o)| *k == 3 && o.len() == 3)
        .map(|(_, o)| u64::from(o[2].min(14)))
        .expect("the MP_JOIN SYN offers a window scale");
    let cap_wire = ((window + ((1u64 << shift) >> 1)) >> shift).max(1);
    let (mut n, mut max) = (0, 0u64);
    for f in frames {
        let Some(p) = tcp(f) else { continue };
        let flags = f[p.l4 + 13];
        // ACKs of that subflow from the client, the handshake's SYN left out
        if f[26..30] != client || ports(f, p.l4) != flow || flags & 0x10 == 0 || flags & 0x02 != 0 {
            continue;
        }
        n += 1;
        max = max.max(u64::from(u16::from_be_bytes([f[p.l4 + 14], f[p.l4 + 15]])));
    }
    (n, max, cap_wire)
}
