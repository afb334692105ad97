//! `nena eavesdrop` on synthetic captures (no network needed).
use crate::harness::nena;

use nena_analyze::craft;
use std::net::SocketAddrV4;
use std::path::{Path, PathBuf};

/// A scratch directory (tempfile), removed on drop.
struct TempDir(tempfile::TempDir);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        TempDir(
            tempfile::Builder::new()
                .prefix(&format!("nena-eavesdrop-{tag}-"))
                .tempdir()
                .unwrap(),
        )
    }
    fn file(&self, name: &str, data: &[u8]) -> PathBuf {
        let p = self.0.path().join(name);
        std::fs::write(&p, data).unwrap();
        p
    }
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn addrs() -> (SocketAddrV4, SocketAddrV4) {
    (
        "198.18.2.2:40000".parse().unwrap(),
        "198.18.3.2:5201".parse().unwrap(),
    )
}

fn text_file() -> Vec<u8> {
    let mut rng = nena_testkit::Prng::new(0x9e3779b97f4a7c15);
    (0..20_000)
        .map(|_| {
            let x = rng.next_u64();
            b"abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ.,"[(x >> 40) as usize % 55]
        })
        .collect()
}

#[test]
fn plain_iperf_digits_are_readable_like_figure_13() {
    let t = TempDir::new("digits");
    let (c, srv) = addrs();
    let digits = b"0123456789".repeat(300);
    let cap = t.file("iperf.pcap", &craft::connection(c, srv, &digits, 1448));
    let out = nena(&["eavesdrop", s(&cap), "--max", "1"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let first = text.lines().next().unwrap();
    assert!(
        first.contains("198.18.2.2:40000 -> 198.18.3.2:5201") && first.contains("len=1448"),
        "{first}"
    );
    assert!(
        text.contains("    0123456789012345678901234567890123456789012345678901234567890123\n"),
        "{text}"
    );
    assert!(text.contains("(showing 1 of 3 payload segments)"), "{text}");
    assert!(text.contains("3000 bytes"), "{text}");

    let out = nena(&["eavesdrop", s(&cap), "--hex", "--max", "1", "--bytes", "32"]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains(
            "    0000  30 31 32 33 34 35 36 37  38 39 30 31 32 33 34 35   0123456789012345"
        ),
        "{text}"
    );
    assert!(text.contains("... 1416 more bytes"), "{text}");
}

#[test]
fn known_file_leak_and_no_leak() {
    let t = TempDir::new("known");
    let (c, srv) = addrs();
    let file = text_file();
    let known = t.file("known.txt", &file);
    let plain = t.file("plain.pcap", &craft::connection(c, srv, &file, 1448));
    // stand-in for a scrambled transfer: every byte changed, position-dependently
    let garbled: Vec<u8> = file
        .iter()
        .enumerate()
        .map(|(i, b)| b ^ (1 + (i % 251) as u8))
        .collect();
    let scrambled = t.file("scrambled.pcap", &craft::connection(c, srv, &garbled, 1448));

    let out = nena(&["eavesdrop", s(&plain), "--known", s(&known), "--summary"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("LEAK: 19985 of 19985 runs of the known file appear"),
        "{text}"
    );
    assert!(!text.contains("#4 "), "--summary shows no segments: {text}");

    let out = nena(&[
        "eavesdrop",
        s(&scrambled),
        "--known",
        s(&known),
        "--summary",
    ]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("no 16-byte run of the known file appears (19985 runs checked)"),
        "{text}"
    );

    let out = nena(&["eavesdrop", s(&plain), "--known", s(&known), "--json"]);
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["segments"], 14);
    assert_eq!(v["payload_bytes"], 20_000);
    assert_eq!(
        v["flows"][0]["label"],
        "198.18.2.2:40000 -> 198.18.3.2:5201"
    );
    assert_eq!(v["flows"][0]["stream_bytes"], 20_000);
    assert_eq!(v["known"]["runs_checked"], 19_985);
    assert_eq!(v["known"]["runs_found"], 19_985);
    assert_eq!(v["known"]["leak"], true);
    assert_eq!(v["known"]["first_matches"][0]["known_offset"], 0);
    assert_eq!(v["known"]["first_matches"][0]["length"], 20_000);
    assert!(v.get("shown").is_none());

    let out = nena(&[
        "eavesdrop",
        s(&scrambled),
        "--known",
        s(&known),
        "--json",
        "--max",
        "2",
        "--bytes",
        "8",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["known"]["runs_found"], 0);
    assert_eq!(v["known"]["leak"], false);
    assert_eq!(v["shown"].as_array().unwrap().len(), 2);
    assert_eq!(
        v["shown"][0]["payload"].as_str().unwrap().len(),
        16,
        "8 bytes in hex"
    );
}

#[test]
fn bad_input_is_a_one_line_error_with_status_2() {
    let t = TempDir::new("bad");
    let junk = t.file("junk.pcap", b"this is not a capture at all");
    let out = nena(&["eavesdrop", s(&junk)]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.starts_with("nena: ") && err.contains("not a pcap or pcapng file"),
        "{err}"
    );
    assert_eq!(err.trim_end().lines().count(), 1);

    let out = nena(&["eavesdrop", "/nonexistent/x.pcap"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no such capture file"));

    let (c, srv) = addrs();
    let cap = t.file("ok.pcap", &craft::connection(c, srv, b"hello", 1448));
    let out = nena(&["eavesdrop", s(&cap), "--known", "/nonexistent/known"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read known file"));

    // a capture cut off mid-packet: analysed up to the damage, with a warning, status 0
    let full = craft::connection(c, srv, &text_file(), 1448);
    let cut = t.file("cut.pcap", &full[..full.len() - 700]);
    let out = nena(&["eavesdrop", s(&cut), "--summary"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("warning: capture is cut off after"), "{text}");

    // a known file shorter than one run
    let tiny = t.file("tiny", b"short");
    let out = nena(&["eavesdrop", s(&cap), "--known", s(&tiny), "--summary"]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("shorter than 16 bytes"));
}
