//! An active attacker on the untrusted path (root, lab): `nena lab tamper` flips one payload
//! byte of one segment of the upload (TCP checksum kept valid). In every mode nena refuses
//! to store the altered file under its name; in `aead` the connection aborts at the altered
//! record and both ends name the integrity failure. (A blind flip: the attacker who also
//! rewrites the trailer is `transfer_forge.rs`.) The attacker program itself changes exactly
//! the byte its record names. What an altered byte does to the protocol above the kernel (an
//! altered opening retried by the proxy client, `nena perf`'s pattern check) runs without
//! root over the in-memory network: crates/transport/tests/net_tamper.rs.
use crate::harness::nena;

use crate::harness::*;
use nena_lab::{Host, Link};
use std::io::{Read, Write};
use std::process::Command;
use std::time::Duration;

/// `nena lab tamper --prefix P untrusted ARGS...`, which must succeed; its standard output.
fn tamper_cmd(prefix: &str, args: &[&str]) -> Vec<u8> {
    tamper_cmd_on(prefix, "untrusted", args)
}

/// `nena lab tamper --prefix P LINK ARGS...`, which must succeed; its standard output.
fn tamper_cmd_on(prefix: &str, link: &str, args: &[&str]) -> Vec<u8> {
    let mut all = vec!["lab", "tamper", "--prefix", prefix, link];
    all.extend_from_slice(args);
    let out = nena(&all);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// Attach the tamper program to the untrusted link.
fn attach_tamper(prefix: &str, args: &[&str]) {
    tamper_cmd(prefix, args);
}

/// What the tamper program did (`--show` or `--remove`, as JSON).
fn tamper_record(prefix: &str, what: &str) -> serde_json::Value {
    serde_json::from_slice(&tamper_cmd(prefix, &[what, "--json"])).unwrap()
}

/// The lab of these tests: wire-sized segments (no offloads), both paths at 50 Mbit/s.
fn tamper_lab() -> nena_lab::LabGuard {
    lab_with(|c| {
        c.offload = false;
        c.trusted_rate = Some(nena_lab::Rate::mbit(50));
        c.untrusted_rate = Some(nena_lab::Rate::mbit(50));
    })
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn an_altered_byte_on_the_untrusted_path() {
    let lab = tamper_lab();
    let prefix = lab.prefix().to_string();
    let srv = TempDir::new("tamper-srv");
    let cli = TempDir::new("tamper-cli");
    let s = serve(
        &lab,
        7000,
        srv.path(),
        &["--mode", "aead,stream,kato,plain"],
    );
    let to = server(&lab, 7000);
    let file = cli.join("f.bin");
    std::fs::write(&file, random(3 << 20, 5)).unwrap();
    let file_s = file.display().to_string();
    for mode in ["aead", "stream", "kato", "plain"] {
        attach_tamper(
            &prefix,
            &["--port", "7000", "--skip-bytes", "300K", "--offset", "77"],
        );
        let name = format!("f-{mode}");
        let mut args = vec![
            "send", &file_s, "--name", &name, "--to", &to, "--mode", mode, "--json",
        ];
        args.extend_from_slice(&PATHS);
        let sent = client(&lab, &args);
        let err = String::from_utf8_lossy(&sent.stderr).into_owned();
        let rec = tamper_record(&prefix, "--remove");
        // The attack happened (otherwise this test would prove nothing) ...
        assert_eq!(rec["fired"], true, "{mode}: nothing was altered: {rec}");
        assert!(rec["altered"].as_u64().unwrap() >= 1);
        // ... the upload failed and nothing is stored under the name ...
        assert!(
            !sent.status.success(),
            "{mode}: the altered upload succeeded"
        );
        assert!(
            !srv.join(&name).exists(),
            "{mode}: an altered file was stored"
        );
        // ... and why: the integrity check in aead (both ends), the trailer's MAC in stream
        // and kato, its SHA-256 in plain (no key).
        match mode {
            "aead" => {
                assert!(err.contains("integrity check failed"), "{mode}: {err}");
                s.wait_stderr("integrity check failed", Duration::from_secs(5));
            }
            "plain" => assert!(err.contains("SHA-256 mismatch"), "{mode}: {err}"),
            _ => assert!(err.contains("trailer MAC mismatch"), "{mode}: {err}"),
        }
    }
    // Nothing of the attacker is left on the router: no filter, no clsact qdisc.
    let ns = format!("{prefix}-router");
    let filters = Command::new("tc")
        .args(["-n", &ns, "filter", "show", "dev", "untrusted", "ingress"])
        .output()
        .unwrap();
    assert!(
        filters.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&filters.stdout)
    );
    let qdiscs = Command::new("tc")
        .args(["-n", &ns, "qdisc", "show", "dev", "untrusted"])
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&qdiscs.stdout).contains("clsact"));
    // Without the attacker the same upload goes through.
    let mut args = vec!["send", &file_s, "--name", "f-clean", "--to", &to, "--json"];
    args.extend_from_slice(&PATHS);
    let r = client_json(&lab, &args);
    assert_eq!(r["mode"], "aead", "{r}");
    assert_eq!(
        std::fs::read(srv.join("f-clean")).unwrap(),
        std::fs::read(&file).unwrap()
    );
}

/// The attacker itself, on plain TCP across the untrusted link, both ways: the receiver gets
/// exactly one byte different, where the record says and as it says; after `--remove` the
/// program is gone.
#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn exactly_one_byte_changes_where_the_record_says() {
    let lab = lab_with(|c| c.offload = false);
    let prefix = lab.prefix().to_string();
    let data = random(400_000, 11);
    for toward in ["server", "client"] {
        let port = if toward == "server" { 7101 } else { 7102 };
        attach_tamper(
            &prefix,
            &[
                "--port",
                &port.to_string(),
                "--toward",
                toward,
                "--skip-bytes",
                "100000",
                "--offset",
                "5",
            ],
        );
        let listener = lab.listen_on_server(port).unwrap();
        let dst = std::net::SocketAddr::new(lab.server_addr(), port);
        let mut client = lab
            .connect(Link::Untrusted, dst, Duration::from_secs(5))
            .unwrap();
        let (mut server, _) = listener.accept().unwrap();
        let (mut tx, mut rx) = if toward == "server" {
            (client.try_clone().unwrap(), server.try_clone().unwrap())
        } else {
            (server.try_clone().unwrap(), client.try_clone().unwrap())
        };
        let sent = data.clone();
        let writer = std::thread::spawn(move || {
            tx.write_all(&sent).unwrap();
            tx.shutdown(std::net::Shutdown::Write).unwrap();
        });
        let mut got = Vec::new();
        rx.read_to_end(&mut got).unwrap();
        writer.join().unwrap();
        let _ = (client.flush(), server.flush());
        let rec = tamper_record(&prefix, "--show");
        // The program's id, to check that --remove frees it.
        let ingress = toward == "server";
        let id = lab
            .run_in(Host::Router, move || {
                nena_bpf::attack::tamper::attached_prog_id("untrusted", ingress)
            })
            .unwrap()
            .unwrap()
            .expect("attached");
        tamper_cmd(&prefix, &["--remove"]);

        assert_eq!(got.len(), data.len());
        let changed: Vec<usize> = (0..data.len()).filter(|&i| got[i] != data[i]).collect();
        assert_eq!(changed.len(), 1, "{toward}: bytes changed at {changed:?}");
        let i = changed[0];
        assert_eq!(rec["fired"], true, "{rec}");
        assert_eq!(rec["offset_in_flow"].as_u64().unwrap() as usize, i, "{rec}");
        assert_eq!(rec["old_byte"].as_u64().unwrap() as u8, data[i]);
        assert_eq!(rec["new_byte"].as_u64().unwrap() as u8, got[i]);
        assert_eq!(got[i], data[i] ^ 0x20, "the default mask");
        assert!(i >= 100_000, "{i}: inside the part that should pass");
        // Gone: the filter (no tamper left to show) and the program itself.
        let after = tamper_cmd(&prefix, &["--show"]);
        assert!(String::from_utf8_lossy(&after).contains("no tamper program"));
        nena_testkit::wait_until(
            &format!("program {id} to be unloaded"),
            Duration::from_secs(3),
            || !prog_exists(id),
        );
    }
}

/// Whether a BPF program with this id is loaded (bpftool, so that the test needs no BPF
/// crate of its own).
fn prog_exists(id: u32) -> bool {
    Command::new("bpftool")
        .args(["prog", "show", "id", &id.to_string()])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}
