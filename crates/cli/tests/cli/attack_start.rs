//! `nena attack` without a crib (issue 41, finding 1): kato's initial window is 56 zero bytes
//! and the key, so the first bytes of each direction read with no known plaintext (56 of
//! every 65). From a real kato session's `--forward` opening with an access token, and from a
//! lab capture of a kato download: what comes back, and that every byte of it is right.

use crate::harness::*;
use nena_analyze::attack::recover_from_start;
use nena_lab::Link;
use nena_proto::{
    ClientConfig, ClientHandshake, Mode, Progress, ServerConfig, ServerHandshake, Session,
    ENTROPY_LEN,
};
use nena_transport::wire::{AccessToken, ConnectRequest, Reply, Request, Service};
use std::path::Path;
use std::process::Command;

/// A kato handshake between nena-proto's client and server: the hello, the accept, and the
/// client's and the server's sessions.
fn kato_session() -> (Vec<u8>, Vec<u8>, Session, Session) {
    let entropy: [u8; ENTROPY_LEN] = std::array::from_fn(|i| (i as u8).wrapping_mul(29) ^ 0xa5);
    let mut c = ClientHandshake::new(&ClientConfig::offering(&[Mode::Kato]), entropy).unwrap();
    let hello = c.first_flight().to_vec();
    let mut s = ServerHandshake::new(
        &ServerConfig::accepting(&[Mode::Kato]),
        [0x42; nena_proto::SERVER_ENTROPY_LEN],
    );
    let Ok(Progress::Done {
        value: (accept, ss),
        ..
    }) = s.read(&hello)
    else {
        panic!("server handshake")
    };
    let Ok(Progress::Done { value: (_, cs), .. }) = c.read(&accept) else {
        panic!("client handshake")
    };
    (hello, accept, cs, ss)
}

/// `nena attack CAPTURE --out OUT [--json]`, no crib: the JSON and the report.
fn attack_no_crib(cap: &Path, out: &Path) -> (serde_json::Value, String) {
    let run = |json: bool| {
        let mut cmd = Command::new(NENA);
        cmd.arg("attack").arg(cap).arg("--out").arg(out);
        if json {
            cmd.arg("--json");
        }
        let o = cmd.output().unwrap();
        assert!(
            o.status.success(),
            "nena attack: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let json = serde_json::from_str(&run(true)).unwrap();
    (json, run(false))
}

/// Plaintext bytes that 56-of-65 gives of `n` bytes from a direction's start.
fn known_of(n: usize) -> u64 {
    (0..n).filter(|k| (1..=56).contains(&(k % 65))).count() as u64
}

/// Every chunk of `start` (a `from_start` entry) is `plain` at its place, byte for byte, where
/// `plain` is what the direction sent from its first protected byte; returns the bytes
/// compared.
fn check_start(start: &serde_json::Value, recovered: &[u8], plain: &[u8]) -> u64 {
    let first = start["dsn"].as_u64().unwrap();
    let mut compared = 0;
    for c in start["chunks"].as_array().unwrap() {
        let at = (c["dsn"].as_u64().unwrap() - first) as usize;
        let len = c["len"].as_u64().unwrap() as usize;
        let off = c["offset"].as_u64().unwrap() as usize;
        let got = &recovered[off..off + len];
        let end = (at + len).min(plain.len());
        if at >= end {
            continue;
        }
        assert_eq!(
            got[..end - at],
            plain[at..end],
            "recovered bytes at {at} are wrong"
        );
        compared += (end - at) as u64;
    }
    compared
}

/// The case, with the real codec: a proxy client's `--forward` opening (connect
/// request with a 44-byte access token, its tag, and an application's HTTP request) in a
/// kato session. With no crib, 145 of its 164 bytes come back, every one right, the whole
/// token included; `nena attack` prints it beside the capture.
#[test]
fn a_kato_forward_opening_reads_without_a_crib_token_and_all() {
    let (hello, _, client, _) = kato_session();
    let (mut tx, _) = client.split();
    let token = b"nena-access-2026-7f3a9c41d0e2b58816af23c9d7e";
    assert_eq!(token.len(), 44);
    let req = ConnectRequest {
        target: None,
        token: Some(AccessToken::new(token.to_vec()).unwrap()),
        service: Service::Stream,
        plane: None,
        reuse: false,
    };
    let mut opening = req.encode_tagged(tx.app_mac_key());
    opening.extend_from_slice(
        b"GET /q HTTP/1.1\r\nHost: intranet.example\r\nUser-Agent: curl/8\r\n\r\n",
    );
    let pad = 164 - opening.len();
    opening.extend_from_slice(&[b'-'; 164][..pad]);
    assert_eq!(opening.len(), 164);
    let mut wire = vec![0u8; opening.len()];
    tx.seal_from(&opening, &mut wire);
    assert_ne!(wire, *opening);

    let got = recover_from_start(&wire);
    let right = got
        .iter()
        .enumerate()
        .filter(|(k, g)| **g == Some(opening[*k]))
        .count();
    let wrong = got.iter().flatten().count() - right;
    assert_eq!((right, wrong), (145, 0), "{got:?}");
    // The token is bytes 6..50 of the opening (magic, op, length before it).
    let at = opening.windows(44).position(|w| w == token).unwrap();
    assert_eq!(at, 6);
    assert!(got[at..at + 44]
        .iter()
        .zip(token)
        .all(|(g, t)| *g == Some(*t)));

    // The same through `nena attack`, on a capture of a connection that carried the hello
    // and then the opening (one TCP stream: its sequence numbers are its DSNs).
    let dir = TempDir::new("atk-start");
    let mut stream = hello.clone();
    stream.extend_from_slice(&wire);
    let cap = dir.join("opening.pcap");
    let pcap = nena_analyze::craft::connection(
        "198.18.0.2:40100".parse().unwrap(),
        "198.18.3.2:7000".parse().unwrap(),
        &stream,
        1400,
    );
    std::fs::write(&cap, pcap).unwrap();
    let out = dir.join("recovered.bin");
    let (r, report) = attack_no_crib(&cap, &out);
    let starts = r["from_start"].as_array().unwrap();
    assert_eq!(starts.len(), 1, "{r:#}");
    assert_eq!(starts[0]["recovered"].as_u64(), Some(145), "{r:#}");
    assert_eq!(starts[0]["len"].as_u64(), Some(164));
    let recovered = std::fs::read(&out).unwrap();
    assert_eq!(check_start(&starts[0], &recovered, &opening), 145);
    // Beside the capture: the first line holds the token's first ten bytes.
    assert!(report.contains("145 of 164 bytes"), "{report}");
    assert!(
        report.contains(std::str::from_utf8(&token[..10]).unwrap()),
        "{report}"
    );
}

/// A real capture: a kato download in the lab, the trusted link captured (the untrusted one
/// is down, so that each direction's first bytes are on the captured link after the hello and
/// the accept). `nena attack` with no crib reads both directions' first bytes, 56 of every 65,
/// each of them right: the GET request, the server's reply header and the file's start.
#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn nena_attack_without_a_crib_reads_both_directions_of_a_kato_capture() {
    let lab = lab_with(|c| c.offload = false);
    lab.set_link(Link::Untrusted, false).unwrap();
    let srv = TempDir::new("atk-start-srv");
    let dir = TempDir::new("atk-start-lab");
    let text = text(3000, 41);
    std::fs::write(srv.join("letter.txt"), &text).unwrap();
    let _s = serve(&lab, 7010, srv.path(), &["--mode", "kato"]);
    let from = server(&lab, 7010);
    let cap = dir.join("trusted.pcap");
    let c = lab.capture(Link::Trusted, &cap).unwrap();
    let dest = dir.join("got.txt");
    let dest_s = dest.display().to_string();
    let args = [
        "get",
        "letter.txt",
        "--from",
        &from,
        "--mode",
        "kato",
        "--out",
        &dest_s,
        "--json",
        "--trusted",
        "trusted",
    ];
    client_json(&lab, &args);
    c.stop().unwrap();
    assert_eq!(std::fs::read(&dest).unwrap(), text);

    let out = dir.join("recovered.bin");
    let (r, report) = attack_no_crib(&cap, &out);
    let recovered = std::fs::read(&out).unwrap();
    let starts = r["from_start"].as_array().unwrap();
    let of = |dir: &str| {
        starts
            .iter()
            .find(|s| s["direction"] == dir)
            .unwrap_or_else(|| panic!("no {dir} start: {r:#}"))
    };
    // Client to server: the GET request.
    let get = Request::Get {
        name: "letter.txt".into(),
    }
    .encode();
    let c2s = of("client_to_server");
    assert_eq!(check_start(c2s, &recovered, &get), known_of(get.len()));
    // Server to client: the reply header, then the file.
    let mut down = Reply::ok(text.len() as u64).encode();
    down.extend_from_slice(&text);
    let s2c = of("server_to_client");
    let len = s2c["len"].as_u64().unwrap() as usize;
    assert!(len >= down.len(), "{s2c:#}");
    assert_eq!(s2c["recovered"].as_u64(), Some(known_of(len)), "{s2c:#}");
    assert_eq!(check_start(s2c, &recovered, &down), known_of(down.len()));
    assert!(
        report.contains("without a crib, from the first byte of"),
        "{report}"
    );
}

/// Issue 41, finding 2, documented as a limit: kato's application MAC keys (file trailers,
/// connect requests) derive from its two scrambling keys, and a direction's key follows from
/// its first 65 scrambled bytes and the plaintext of positions 57..=64. A session whose two
/// directions both pass 65 bytes with those bytes known or guessed (here an HTTP exchange
/// through a `--forward` proxy: header text) gives an eavesdropper on an untrusted path
/// the MAC keys of both directions, the keys nena's trailers and connect tags use.
#[test]
fn known_bytes_at_57_in_each_direction_give_kato_mac_keys_away() {
    let (_, _, client, server) = kato_session();
    let (mut ctx, _) = client.split();
    let (mut stx, _) = server.split();
    let seal = |tx: &mut nena_proto::Protector, plain: &[u8]| {
        let mut w = vec![0u8; plain.len()];
        tx.seal_from(plain, &mut w);
        w
    };
    let up =
        b"GET /report.pdf HTTP/1.1\r\nHost: files.example\r\nAccept: */*\r\nUser-Agent: x\r\n\r\n";
    let down = b"HTTP/1.1 200 OK\r\nContent-Type: application/pdf\r\nContent-Length: 48213\r\n\r\n%PDF-1.7";
    let (wu, wd) = (seal(&mut ctx, up), seal(&mut stx, down));
    let c2s = nena_analyze::start::key_from_start(&wu, up[57..65].try_into().unwrap()).unwrap();
    let s2c = nena_analyze::start::key_from_start(&wd, down[57..65].try_into().unwrap()).unwrap();
    let (mac_c2s, mac_s2c) = nena_proto::keys::kato_app_mac_keys(&c2s, &s2c);
    assert_eq!(Some(&*mac_c2s), ctx.app_mac_key(), "the client's MAC key");
    assert_eq!(Some(&*mac_s2c), stx.app_mac_key(), "the server's MAC key");
}
