//! `nena attack` (root, lab): the known-plaintext attack on kato recovers most of what an
//! eavesdropper on the untrusted link captured of a text transfer, every recovered byte
//! right, given 100-byte excerpts of the text; from the same transfer in `aead` it recovers
//! nothing. Plus its handling of bad input.

use crate::harness::*;
use nena_lab::Link;
use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

fn attack(cap: &Path, cribs: &Path, out: &Path) -> serde_json::Value {
    let o = Command::new(NENA)
        .args(["attack", cap.to_str().unwrap(), "--crib-file"])
        .arg(cribs)
        .arg("--out")
        .arg(out)
        .arg("--json")
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "nena attack: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap()
}

/// The attack's JSON and its report for people, from two runs.
fn attack_both(cap: &Path, cribs: &Path, out: &Path) -> (serde_json::Value, String) {
    let json = attack(cap, cribs, out);
    let o = Command::new(NENA)
        .args(["attack", cap.to_str().unwrap(), "--crib-file"])
        .arg(cribs)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    (json, String::from_utf8_lossy(&o.stdout).into_owned())
}

/// Bytes of the windows that anchor a recovered chunk in the text.
const ANCHOR: usize = 64;

/// Where each `ANCHOR`-byte window of `text` starts, for the windows that occur once: the
/// text is words from a short list, and shorter windows repeat (1,108 distinct 32-byte
/// windows occur more than once in the 600 kB text below; no 64-byte window does). A
/// chunk aligned by a repeated window would be compared at the wrong place.
fn windows(text: &[u8]) -> HashMap<&[u8], Option<usize>> {
    let mut m = HashMap::new();
    for (i, w) in text.windows(ANCHOR).enumerate() {
        m.entry(w).and_modify(|at| *at = None).or_insert(Some(i));
    }
    m
}

/// Recovered bytes that are the text, at a consistent place: each chunk is aligned to the
/// text by its first window that occurs once there, then compared byte for byte. Returns
/// (bytes equal to the text, bytes different, bytes outside the text: request and trailer).
fn check_chunks(text: &[u8], recovered: &[u8], chunks: &[serde_json::Value]) -> (u64, u64, u64) {
    let idx = windows(text);
    let (mut same, mut diff, mut outside) = (0u64, 0u64, 0u64);
    for c in chunks {
        let off = c["offset"].as_u64().unwrap() as usize;
        let len = c["len"].as_u64().unwrap() as usize;
        let bytes = &recovered[off..off + len];
        let anchor = (0..len.saturating_sub(ANCHOR)).find_map(|k| {
            idx.get(&bytes[k..k + ANCHOR])
                .copied()
                .flatten()
                .map(|t| t as i64 - k as i64)
        });
        let Some(shift) = anchor else {
            diff += len as u64;
            continue;
        };
        for (k, b) in bytes.iter().enumerate() {
            let t = shift + k as i64;
            if t < 0 || t as usize >= text.len() {
                outside += 1;
            } else if text[t as usize] == *b {
                same += 1;
            } else {
                diff += 1;
            }
        }
    }
    (same, diff, outside)
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn attack_recovers_a_kato_transfer() {
    // Wire-sized segments and equal rates: both paths carry the file.
    let lab = lab_with(|c| {
        c.offload = false;
        c.trusted_rate = Some(nena_lab::Rate::mbit(20));
        c.untrusted_rate = Some(nena_lab::Rate::mbit(20));
    });
    let srv = TempDir::new("atk-srv");
    let dir = TempDir::new("atk");
    let _s = serve(&lab, 7000, srv.path(), &["--mode", "aead,stream,kato"]);
    let to = server(&lab, 7000);
    let text = text(600_000, 99);
    let file = dir.join("letter.txt");
    std::fs::write(&file, &text).unwrap();
    // 40 excerpts of 100 bytes spread over the text (hex lines: excerpts span newlines).
    let cribs: String = (0..40)
        .map(|i| i * (text.len() - 100) / 40)
        .map(|o| {
            let hex: String = text[o..o + 100]
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            format!("hex:{hex}\n")
        })
        .collect();
    let cribs_file = dir.join("cribs.txt");
    std::fs::write(&cribs_file, cribs).unwrap();
    // 30 cribs of another text (what a user with the wrong guesses has).
    let other = crate::harness::text(30 * 100, 7);
    let wrong: String = other
        .chunks(100)
        .map(|c| {
            format!(
                "hex:{}\n",
                c.iter().map(|b| format!("{b:02x}")).collect::<String>()
            )
        })
        .collect();
    let wrong_cribs = dir.join("wrong-cribs.txt");
    std::fs::write(&wrong_cribs, wrong).unwrap();

    for mode in ["kato", "aead"] {
        let cap = dir.join(&format!("untrusted-{mode}.pcap"));
        let c = lab.capture(Link::Untrusted, &cap).unwrap();
        let file_s = file.display().to_string();
        let name = format!("letter-{mode}.txt");
        let mut args = vec![
            "send", &file_s, "--name", &name, "--to", &to, "--mode", mode, "--json",
        ];
        args.extend_from_slice(&PATHS);
        let sent = client_json(&lab, &args);
        c.stop().unwrap();
        let (_, untrusted) = bytes_by_trust(&sent);
        assert!(
            untrusted > 100_000,
            "{mode}: the untrusted path carried only {untrusted} bytes: {sent}"
        );
        let out = dir.join(&format!("recovered-{mode}.bin"));
        // Cribs that are not in the text: nothing recovered, and the report must not read as
        // "kato held" (the capture's structure tells kato from a cipher without a crib).
        let (r, report) = attack_both(&cap, &wrong_cribs, &out);
        assert_eq!(r["bytes_recovered"].as_u64(), Some(0), "{r:#}");
        let verdict = r["structure"]["verdict"].as_str().unwrap().to_string();
        if mode == "kato" {
            assert_eq!(verdict, "structured", "{r:#}");
            assert!(report.contains("NOT safe"), "{report}");
        } else {
            assert_eq!(verdict, "random", "{r:#}");
            assert!(report.contains("does not tell which"), "{report}");
        }
        let r = attack(&cap, &cribs_file, &out);
        let recovered = std::fs::read(&out).unwrap();
        let seen = r["bytes_seen"].as_u64().unwrap();
        let got = r["bytes_recovered"].as_u64().unwrap();
        assert!(seen > 100_000, "{mode}: the capture holds {seen} bytes");
        if mode == "kato" {
            // At least half of what crossed the untrusted link, and every byte right.
            assert!(
                got * 2 >= seen,
                "kato: recovered {got} of {seen} bytes seen: {r:#}"
            );
            let chunks: Vec<serde_json::Value> = r["streams"]
                .as_array()
                .unwrap()
                .iter()
                .flat_map(|s| s["chunks"].as_array().unwrap().clone())
                .collect();
            let (same, diff, outside) = check_chunks(&text, &recovered, &chunks);
            if diff != 0 {
                // Keep what it takes to look again: the capture, the text and the cribs.
                let keep = std::env::temp_dir().join(format!("nena-attack-{}", std::process::id()));
                std::fs::create_dir_all(&keep).unwrap();
                for f in [&cap, &file, &cribs_file] {
                    std::fs::copy(f, keep.join(f.file_name().unwrap())).unwrap();
                }
                panic!(
                    "kato: {diff} recovered bytes are wrong (capture, text and cribs kept in {})",
                    keep.display()
                );
            }
            assert!(
                same * 2 >= seen,
                "{same} bytes of the text among {seen} seen"
            );
            // What is outside the text is nena's own protocol (the request, the trailer).
            assert!(outside < 1000, "{outside} bytes outside the text");
        } else {
            assert_eq!(got, 0, "aead: recovered {got} bytes: {r:#}");
            assert!(recovered.is_empty());
        }
    }
}

#[test]
fn bad_input_is_a_clear_error() {
    let dir = TempDir::new("atk-bad");
    let out = dir.join("out");
    let run = |args: &[&str]| {
        let o = Command::new(NENA).args(args).output().unwrap();
        (
            o.status.code(),
            String::from_utf8_lossy(&o.stderr).into_owned(),
        )
    };
    let cap = dir.join("not-a-capture");
    std::fs::write(&cap, b"hello, this is not a pcap").unwrap();
    let cribs = dir.join("cribs");
    std::fs::write(&cribs, "x".repeat(80)).unwrap();
    let empty = dir.join("empty");
    std::fs::write(&empty, "\n\n").unwrap();
    let badhex = dir.join("badhex");
    std::fs::write(&badhex, "hex:zz\n").unwrap();
    let (c, s, o) = (
        cap.to_str().unwrap(),
        cribs.to_str().unwrap(),
        out.to_str().unwrap(),
    );
    for (args, want) in [
        (
            vec!["attack", "/nonexistent.pcap", "--crib-file", s, "--out", o],
            "no such capture",
        ),
        (
            vec!["attack", c, "--crib-file", s, "--out", o],
            "not a pcap",
        ),
        (vec!["attack", c, "--out", o], "not a pcap"),
        (
            vec![
                "attack",
                c,
                "--crib-file",
                empty.to_str().unwrap(),
                "--out",
                o,
            ],
            "holds no crib",
        ),
        (
            vec![
                "attack",
                c,
                "--crib-file",
                badhex.to_str().unwrap(),
                "--out",
                o,
            ],
            "hex digits",
        ),
        (
            vec!["attack", c, "--crib-file", "/nonexistent", "--out", o],
            "cannot read crib file",
        ),
    ] {
        let (code, err) = run(&args);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(
            err.starts_with("nena: ") && err.contains(want),
            "{args:?}: {err}"
        );
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    }
    // An empty capture is not bad input: nothing to recover, and it says so.
    let pcap = nena_analyze::craft::pcap(&[]);
    let cap = dir.join("empty.pcap");
    std::fs::write(&cap, pcap).unwrap();
    let o = Command::new(NENA)
        .args([
            "attack",
            cap.to_str().unwrap(),
            "--crib-file",
            s,
            "--out",
            o,
        ])
        .output()
        .unwrap();
    assert!(o.status.success());
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("recovered 0 bytes"), "{text}");
    assert_eq!(std::fs::read(&out).unwrap().len(), 0);
}
