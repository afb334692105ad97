//! The policy programs on emulated lab links (root, lab): an emulated link is a TAP pair and
//! the relay instead of a veth pair, and TC programs attach to it the same. Both links
//! emulated (delay and jitter): an aead upload uses both subflows and arrives intact; with
//! `nena lab tamper` on the untrusted link's router end the byte is altered and aead refuses
//! the upload, as on veth links (`transfer_tamper.rs`).

use crate::harness::*;
use std::process::Command;
use std::time::{Duration, Instant};

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn tamper_and_a_multipath_upload_on_emulated_links() {
    let t0 = Instant::now();
    let lab = lab_with(|c| {
        c.relay_exe = Some(NENA.into());
        c.offload = false;
        // Rate limits (tbf on the TAP ends) keep the uploads longer than the untrusted join
        // takes, however busy the host: unlimited, a 4 MiB upload beside two busy loops once
        // ended in 0.12 s on the trusted subflow alone.
        c.trusted_rate = Some(nena_lab::Rate::mbit(40));
        c.untrusted_rate = Some(nena_lab::Rate::mbit(40));
        for link in [nena_lab::Link::Trusted, nena_lab::Link::Untrusted] {
            c.set_link_emulation(
                link,
                Some(nena_lab::LinkEmulation::both(nena_lab::Emulation {
                    delay: Duration::from_millis(5),
                    jitter: Duration::from_millis(1),
                    ..nena_lab::Emulation::default()
                })),
            );
        }
    });
    let prefix = lab.prefix().to_string();
    let st = nena_lab::Lab::status(&prefix).unwrap();
    assert!(st.links[..2]
        .iter()
        .all(|l| l.kind.as_deref() == Some("tap")));
    let srv = TempDir::new("emu-srv");
    let cli = TempDir::new("emu-cli");
    let _s = serve(&lab, 7000, srv.path(), &[]);
    let to = server(&lab, 7000);
    let file = cli.join("f.bin");
    std::fs::write(&file, random(4 << 20, 9)).unwrap();
    let file_s = file.display().to_string();

    // a clean upload over both emulated paths
    let mut args = vec!["send", &file_s, "--name", "clean", "--to", &to, "--json"];
    args.extend_from_slice(&PATHS);
    let r = client_json(&lab, &args);
    assert_eq!(
        std::fs::read(srv.join("clean")).unwrap(),
        std::fs::read(&file).unwrap()
    );
    let (t, u) = bytes_by_trust(&r);
    assert!(t > 0 && u > 0, "not multipath over the emulated links: {r}");

    // the tamper program on the untrusted TAP's router end
    let out = Command::new(NENA)
        .args([
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
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // libbpf's raw lines stay off a user's terminal (issue 22: "Parent Qdisc doesn't exists")
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("libbpf:"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut args = vec!["send", &file_s, "--name", "altered", "--to", &to, "--json"];
    args.extend_from_slice(&PATHS);
    let sent = client(&lab, &args);
    let rec = Command::new(NENA)
        .args([
            "lab",
            "tamper",
            "--prefix",
            &prefix,
            "untrusted",
            "--remove",
            "--json",
        ])
        .output()
        .unwrap();
    assert!(
        !String::from_utf8_lossy(&rec.stderr).contains("libbpf:"),
        "{}",
        String::from_utf8_lossy(&rec.stderr)
    );
    let rec: serde_json::Value = serde_json::from_slice(&rec.stdout).unwrap();
    assert_eq!(rec["fired"], true, "nothing altered on the TAP link: {rec}");
    assert!(!sent.status.success(), "the altered upload succeeded");
    assert!(
        String::from_utf8_lossy(&sent.stderr).contains("integrity check failed"),
        "{}",
        String::from_utf8_lossy(&sent.stderr)
    );
    assert!(!srv.join("altered").exists());
    eprintln!("test time {:?}", t0.elapsed());
}
