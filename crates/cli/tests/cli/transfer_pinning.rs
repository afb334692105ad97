//! Pinned server keys in the lab (root): the first connection pins the server's key in
//! the client's known_servers file and says so once; the same server is accepted silently
//! afterwards; the server restarted with a new key is refused before a byte of the file is
//! sent, with one line naming the file and the command that accepts the new key; `nena
//! known-servers forget` then lets the next contact pin the new key; `--server-key` accepts
//! only the given key (base64 or hex); send, get and perf all check it.

use crate::harness::*;

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `nena key show --key-file F` (creates the key file if missing): the public key.
fn key_of(file: &std::path::Path) -> String {
    let out = nena(&["key", "show", "--key-file", &file.display().to_string()]);
    assert!(out.status.success(), "{}", stderr(&out));
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn first_contact_pins_a_changed_key_is_refused_until_forgotten() {
    let lab = lab();
    let (srv, cli) = (TempDir::new("pin-s"), TempDir::new("pin-c"));
    // (The keys outside the directory served: a server refuses to serve its own key.)
    let keys = TempDir::new("pin-k");
    let (key1, key2) = (keys.join("key1"), keys.join("key2"));
    let (k1, k2) = (key_of(&key1), key_of(&key2));
    assert_ne!(k1, k2);
    assert_eq!(k1, key_of(&key1), "the key file is kept, not remade");
    let known = cli.join("known_servers");
    let known_s = known.display().to_string();
    let to = server(&lab, 7000);
    let data = random(200_000, 7);
    let file = cli.join("f.bin");
    std::fs::write(&file, &data).unwrap();
    let file_s = file.display().to_string();
    let send = |name: &str, extra: &[&str]| {
        let mut a = vec!["send", &file_s, "--name", name, "--to", &to];
        a.extend_from_slice(&PATHS);
        a.extend_from_slice(extra);
        client(&lab, &a)
    };

    let key1_s = key1.display().to_string();
    let mut s = serve(&lab, 7000, srv.path(), &["--key-file", &key1_s]);
    // 1. First contact: pinned, said once.
    let first = send("a", &["--known-servers", &known_s]);
    assert!(first.status.success(), "{}", stderr(&first));
    assert_eq!(
        stderr(&first).matches("first contact").count(),
        1,
        "{}",
        stderr(&first)
    );
    let pinned = std::fs::read_to_string(&known).unwrap();
    assert_eq!(pinned, format!("{to} ed25519 {k1}\n"));
    // 2. The same server again: accepted, nothing said; get and perf check it too.
    let again = send("b", &["--known-servers", &known_s]);
    assert!(again.status.success(), "{}", stderr(&again));
    assert!(
        !stderr(&again).contains("first contact"),
        "{}",
        stderr(&again)
    );
    let back = cli.join("back").display().to_string();
    let mut g = vec![
        "get",
        "a",
        "--out",
        &back,
        "--from",
        &to,
        "--known-servers",
        &known_s,
    ];
    g.extend_from_slice(&PATHS);
    assert!(client(&lab, &g).status.success());
    assert!(std::fs::read(&back).unwrap() == data);

    // 3. The server restarted with another key: refused, the file untouched, nothing stored.
    s.terminate();
    let key2_s = key2.display().to_string();
    let mut s = serve(&lab, 7000, srv.path(), &["--key-file", &key2_s]);
    let refused = send("c", &["--known-servers", &known_s]);
    assert_eq!(refused.status.code(), Some(1), "{}", stderr(&refused));
    let msg = stderr(&refused);
    assert_eq!(msg.trim().lines().count(), 1, "{msg}");
    for part in [
        known_s.as_str(),
        &format!("nena known-servers forget {to}"),
        &k2,
        &k1,
        "nothing was sent",
    ] {
        assert!(msg.contains(part), "`{part}` missing: {msg}");
    }
    assert!(!srv.join("c").exists(), "a refused client sent the file");
    assert_eq!(std::fs::read_to_string(&known).unwrap(), pinned);
    let mut p = vec![
        "perf",
        "--to",
        &to,
        "--time",
        "1",
        "--known-servers",
        &known_s,
    ];
    p.extend_from_slice(&PATHS);
    assert_eq!(client(&lab, &p).status.code(), Some(1));

    // 4. `--server-key`: a wrong key refused, the right one (hex or base64) accepted.
    let wrong = send("d", &["--server-key", &k1]);
    assert_eq!(wrong.status.code(), Some(1), "{}", stderr(&wrong));
    assert!(
        stderr(&wrong).contains("--server-key"),
        "{}",
        stderr(&wrong)
    );
    assert!(!srv.join("d").exists());
    let hex: String = nena_transport::keys::parse_public_key(&k2)
        .unwrap()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    for (name, k) in [("e1", k2.as_str()), ("e2", hex.as_str())] {
        let ok = send(name, &["--server-key", k]);
        assert!(ok.status.success(), "{}", stderr(&ok));
    }
    let kato = send("f", &["--server-key", &k2, "--mode", "kato"]);
    assert_eq!(kato.status.code(), Some(2), "{}", stderr(&kato));

    // 5. Forgotten: the next contact pins the new key.
    let f = nena(&["known-servers", "forget", &to, "--known-servers", &known_s]);
    assert!(f.status.success(), "{}", stderr(&f));
    let later = send("g", &["--known-servers", &known_s]);
    assert!(later.status.success(), "{}", stderr(&later));
    assert!(stderr(&later).contains("first contact"));
    assert_eq!(
        std::fs::read_to_string(&known).unwrap(),
        format!("{to} ed25519 {k2}\n")
    );
    s.terminate();
    // The server made its key file private.
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&key2).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600);
}
