//! The first-flight hold (root, BPF; two namespaces with real MPTCP and the in-kernel path
//! manager): while a connection is held, no payload of it leaves by an interface outside its
//! trusted set, the join on the other path included (its handshake passes, its data is
//! dropped and counted); the data still arrives, by the trusted path; released, the other
//! path carries data again. Deterministic: the trusted set is one interface, whatever the
//! scheduler chooses.

mod common;

use common::*;
use nena_mptcp::hold::FlightHold;
use std::io::Write;
use std::os::fd::AsFd;
use std::time::Duration;

/// Payload bytes the server's subflows from the client address `peer` received (`ss -ti`);
/// `None` when there is no such subflow.
fn received_from(net: &Net, peer: &str) -> Option<u64> {
    let out = net.ss(&net.server);
    let mut lines = out.lines();
    let mut n = None;
    while let Some(l) = lines.next() {
        let from = l.split_whitespace().nth(4).unwrap_or("");
        if from.rsplit_once(':').is_some_and(|(a, _)| a == peer) {
            let info = lines.next().unwrap_or("");
            *n.get_or_insert(0) += info
                .split_whitespace()
                .find_map(|w| w.strip_prefix("bytes_received:"))
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0);
        }
    }
    n
}

#[test]
fn a_held_connection_sends_no_payload_off_its_trusted_interface_until_released() {
    let _one = serial();
    let net = Net::new();
    net.sh_c(&format!("ip mptcp endpoint add {CLIENT2} dev c2 subflow"));
    let hold = nena_bpf::hold::BpfHold::load().expect("loading the hold (root and BPF needed)");
    let c1 = net.in_ns(&net.client.clone(), || {
        // SAFETY: a C string.
        unsafe { libc::if_nametoindex(c"c1".as_ptr()) }
    });
    let l = net.listen(&net.server, &format!("{SERVER}:5301"));
    let sink_t = sink(l);
    let mut s = net.connect(&net.client, &format!("{SERVER}:5301"));
    let token = nena_mptcp::info(s.as_fd()).unwrap().token;
    assert_ne!(c1, 0, "no c1 in the client namespace");
    hold.hold(token, &[c1]).unwrap();
    assert_eq!(hold.dropped(token), Some(0));
    // (the kernel opens the join once the connection is fully established: after data)
    let chunk = vec![7u8; 64 * 1024];
    let mut sent = 0u64;
    assert!(
        nena_testkit::poll_until(Duration::from_secs(5), || {
            s.write_all(&chunk).unwrap();
            sent += chunk.len() as u64;
            nena_mptcp::subflows(s.as_fd()).unwrap().len() >= 2
        }),
        "the in-kernel PM opened no join from {CLIENT2} (its handshake is not held)"
    );
    for _ in 0..32 {
        s.write_all(&chunk).unwrap();
        sent += chunk.len() as u64;
    }
    assert!(
        nena_testkit::poll_until(Duration::from_secs(5), || hold
            .dropped(token)
            .is_some_and(|d| d > 0)),
        "the scheduler put nothing on the join in 2 MB"
    );
    assert_eq!(
        received_from(&net, CLIENT2),
        Some(0),
        "payload crossed the untrusted path while held"
    );

    hold.release(token);
    assert_eq!(hold.dropped(token), None);
    assert!(
        nena_testkit::poll_until(Duration::from_secs(10), || {
            s.write_all(&chunk).unwrap();
            sent += chunk.len() as u64;
            received_from(&net, CLIENT2).is_some_and(|n| n > 0)
        }),
        "released, the join carries nothing: server {}\nclient {}",
        net.ss(&net.server),
        net.ss(&net.client)
    );
    drop(s);
    let got = sink_t.join().unwrap().unwrap();
    assert_eq!(got, sent, "the server got {got} of {sent} bytes");
}
