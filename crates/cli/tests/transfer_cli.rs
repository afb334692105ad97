//! Bad input to the transfer tools: exit status 2 and one clear line, before any network
//! activity (no lab needed).
mod transfer_common;

use transfer_common::NENA;

fn run(args: &[&str]) -> (Option<i32>, String) {
    let out = std::process::Command::new(NENA)
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn bad_arguments_are_usage_errors() {
    let dir = std::env::temp_dir();
    let dir_s = dir.to_str().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (
            &[
                "send",
                "/nonexistent/file",
                "--to",
                "198.18.3.2:7000",
                "--trusted",
                "198.18.1.2",
            ],
            "/nonexistent/file",
        ),
        (
            &[
                "send",
                dir_s,
                "--to",
                "198.18.3.2:7000",
                "--trusted",
                "198.18.1.2",
            ],
            "not a regular file",
        ),
        (
            &["get", "x", "--from", "198.18.3.2:7000"],
            "no trusted path",
        ),
        (
            &[
                "get",
                "../x",
                "--from",
                "198.18.3.2:7000",
                "--trusted",
                "198.18.1.2",
            ],
            "single path component",
        ),
        (
            &[
                "perf",
                "--to",
                "198.18.3.2:7000",
                "--mode",
                "aes",
                "--trusted",
                "198.18.1.2",
            ],
            "unknown mode",
        ),
        (
            &[
                "perf",
                "--to",
                "198.18.3.2:7000",
                "--bytes",
                "12x",
                "--trusted",
                "198.18.1.2",
            ],
            "unit",
        ),
        (
            &[
                "perf",
                "--to",
                "198.18.3.2:7000",
                "--bytes",
                "0",
                "--trusted",
                "198.18.1.2",
            ],
            "more than 0",
        ),
        (
            &["perf", "--to", "nowhere", "--trusted", "198.18.1.2"],
            "ADDR:PORT",
        ),
        (
            &["perf", "--to", "198.18.3.2:7000", "--trusted", "bad/iface"],
            "invalid path",
        ),
        (
            &[
                "serve",
                "--listen",
                "198.18.3.2:7000",
                "--dir",
                "/nonexistent/dir",
            ],
            "/nonexistent/dir",
        ),
        (&["bench", "transfer", "--reps", "0"], "--reps"),
        (
            &["bench", "transfer", "--time", "3", "--omit", "3"],
            "--omit",
        ),
        (
            &[
                "perf",
                "--to",
                "198.18.3.2:7000",
                "--time",
                "2",
                "--omit",
                "2",
                "--trusted",
                "198.18.1.2",
            ],
            "--omit",
        ),
        (
            &["bench", "transfer", "--setting", "wifi"],
            "unknown setting",
        ),
    ];
    for (args, needle) in cases {
        let (code, err) = run(args);
        assert_eq!(code, Some(2), "nena {args:?}: {err}");
        assert!(err.contains(needle), "nena {args:?}: {err}");
    }
}
