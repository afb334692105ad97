//! An active attacker on the untrusted path (root, lab): `nena lab tamper` flips one payload
//! byte of one segment of the upload (TCP checksum kept valid). In every mode nena refuses
//! to store the altered file under its name; in `aead` the connection aborts at the altered
//! record and both ends name the integrity failure.
mod transfer_common;

use std::process::Command;
use std::time::Duration;
use transfer_common::*;

fn nena(args: &[&str]) -> std::process::Output {
    Command::new(NENA).args(args).output().unwrap()
}

#[test]
fn an_altered_byte_on_the_untrusted_path() {
    let lab = lab_with(|c| {
        c.offload = false;
        c.trusted_rate = Some(nena_lab::Rate::mbit(50));
        c.untrusted_rate = Some(nena_lab::Rate::mbit(50));
    });
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
        let out = nena(&[
            "lab",
            "tamper",
            "--prefix",
            &prefix,
            "untrusted",
            "--port",
            "7000",
            "--skip-bytes",
            "300K",
            "--offset",
            "77",
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let name = format!("f-{mode}");
        let mut args = vec![
            "send", &file_s, "--name", &name, "--to", &to, "--mode", mode, "--json",
        ];
        args.extend_from_slice(&PATHS);
        let sent = client(&lab, &args);
        let err = String::from_utf8_lossy(&sent.stderr).into_owned();
        let removed = nena(&[
            "lab",
            "tamper",
            "--prefix",
            &prefix,
            "untrusted",
            "--remove",
            "--json",
        ]);
        assert!(removed.status.success());
        let rec: serde_json::Value = serde_json::from_slice(&removed.stdout).unwrap();
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
        // ... and why: the integrity check in aead (both ends), the SHA-256 otherwise.
        if mode == "aead" {
            assert!(err.contains("integrity check failed"), "{mode}: {err}");
            s.wait_stderr("integrity check failed", Duration::from_secs(5));
        } else {
            assert!(err.contains("SHA-256 mismatch"), "{mode}: {err}");
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
    assert_eq!(r["verified"], true);
    assert_eq!(
        std::fs::read(srv.join("f-clean")).unwrap(),
        std::fs::read(&file).unwrap()
    );
}
