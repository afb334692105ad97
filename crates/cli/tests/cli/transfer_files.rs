//! `nena serve` / `send` / `get` over the lab's two paths, in each protecting mode (root): what
//! needs the kernel's paths. Key updates, both directions at once and hostile names moved to
//! the in-memory network: crates/transport/tests/net_key_updates.rs, net_file_names.rs.

use crate::harness::*;

fn sha256_hex(data: &[u8]) -> String {
    // The tests compare against nena's own report, so use an independent implementation:
    // the coreutils tool.
    let dir = TempDir::new("sha");
    let p = dir.join("f");
    std::fs::write(&p, data).unwrap();
    let out = std::process::Command::new("sha256sum")
        .arg(&p)
        .output()
        .expect("sha256sum");
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .next()
        .unwrap()
        .to_string()
}

fn gbit_lab() -> nena_lab::LabGuard {
    lab_with(|c| {
        c.trusted_rate = Some(nena_lab::Rate::mbit(1000));
        c.untrusted_rate = Some(nena_lab::Rate::mbit(1000));
    })
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn sizes_arrive_byte_exact_over_two_paths_in_aead() {
    sizes_arrive_byte_exact("aead");
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn sizes_arrive_byte_exact_over_two_paths_in_stream() {
    sizes_arrive_byte_exact("stream");
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn sizes_arrive_byte_exact_over_two_paths_in_kato() {
    sizes_arrive_byte_exact("kato");
}

/// Files of 0 B to 100 MiB (a record of 16 KiB and one byte either side of it among them)
/// up and down in `mode`, compared with the original and with an independent SHA-256.
fn sizes_arrive_byte_exact(mode: &str) {
    // 1 Gbit/s per path: fast, yet slow enough that the big transfer is spread over both
    // paths for sure (on an unlimited veth 100 MiB can be done before the second subflow is).
    let lab = gbit_lab();
    let srv = TempDir::new("srv");
    let cli = TempDir::new("cli");
    let _s = serve(&lab, 7000, srv.path(), &[]);
    let to = server(&lab, 7000);
    let record = 16 * 1024;
    for size in [
        0usize,
        1,
        63,
        64,
        65,
        record - 1,
        record,
        record + 1,
        1 << 20,
        100 << 20,
    ] {
        let data = random(size, size as u64 + 1);
        let name = format!("f{size}");
        let src = cli.join(&name);
        std::fs::write(&src, &data).unwrap();
        let src_s = src.display().to_string();
        let mut args = vec![
            "send",
            &src_s,
            "--to",
            &to,
            "--json",
            "--timeout",
            "10",
            "--mode",
            mode,
        ];
        args.extend_from_slice(&PATHS);
        let sent = client_json(&lab, &args);
        assert_eq!(sent["mode"], mode);
        assert_eq!(sent["cipher"].is_string(), mode != "kato", "{sent}");
        assert_eq!(sent["bytes"], size as u64);
        assert_eq!(sent["paths"]["mptcp"], true);
        let expect = sha256_hex(&data);
        assert_eq!(sent["sha256"], expect.as_str());
        assert_eq!(
            std::fs::read(srv.join(&name)).unwrap(),
            data,
            "stored copy of {size} B differs"
        );

        let back = cli.join(&format!("back{size}"));
        let back_s = back.display().to_string();
        let mut args = vec![
            "get",
            &name,
            "--from",
            &to,
            "--out",
            &back_s,
            "--json",
            "--timeout",
            "10",
            "--mode",
            mode,
        ];
        args.extend_from_slice(&PATHS);
        let got = client_json(&lab, &args);
        assert_eq!(got["mode"], mode);
        assert_eq!(got["sha256"], expect.as_str());
        assert_eq!(
            std::fs::read(&back).unwrap(),
            data,
            "fetched copy of {size} B differs"
        );

        if size >= 100 << 20 {
            // A big transfer uses both paths, and the report says so (1 MiB takes a few
            // milliseconds on veth: done before the second subflow is up).
            for r in [&sent, &got] {
                assert_eq!(r["paths"]["multipath"], true, "{r}");
                let (t, u) = bytes_by_trust(r);
                assert!(
                    t > 0 && u > 0,
                    "bytes per subflow: trusted {t}, untrusted {u}"
                );
            }
        }
    }
    // No temporary (hidden) file is left on either side.
    for d in [srv.path(), cli.path()] {
        for e in std::fs::read_dir(d).unwrap() {
            let n = e.unwrap().file_name().to_string_lossy().into_owned();
            assert!(!n.starts_with('.'), "left over: {n}");
        }
    }
}
