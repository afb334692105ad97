//! Pinned server keys (trust on first use), the production code of both ends over the
//! in-memory network (`testing::net`): the client's options made by
//! `ClientSettings::resolve`, as every client command makes them from `--known-servers` and
//! `--server-key`, dialing a `MemoryNet`; `nena serve`'s accept loop (`serve_on`) with keys
//! from `load_or_create_key` (`--key-file`). The first contact pins the server's key in the
//! known_servers file and says so once; the same server is accepted silently afterwards
//! (send, get, perf); the server restarted with another key is refused before a byte of the
//! file is sent, in one line naming the file and the command that accepts the new key;
//! forgetting lets the next contact pin the new key; `--server-key` accepts only its key
//! (base64 or hex) and needs a mode with key agreement; after first contact a server of an
//! attacker's that a lying resolver sends the client to is refused, and stores nothing.
//!
//! Replaces the lab tests `transfer_pinning.rs::first_contact_pins_a_changed_key_is_refused_until_forgotten`
//! and `transfer_names.rs::after_first_contact_a_lying_resolver_cannot_impersonate_the_server`.
//! How a name is resolved (only by queries that leave by a trusted interface) needs the
//! kernel's routes and stays in the lab: crates/cli/tests/cli/transfer_names.rs.

mod logs;

use nena_proto::{KeyText, Mode, PublicKey, ServerKey};
use nena_transport::app::file_client::{get, perf, send, PerfParams};
use nena_transport::app::file_server::serve_on;
use nena_transport::app::files::FileServerConfig;
use nena_transport::app::names::FileName;
use nena_transport::conn::settings::{ClientSettings, SettingsError};
use nena_transport::conn::ClientOptions;
use nena_transport::keys::{load_or_create_key, parse_public_key, KnownServers, ServerKeyCheck};
use nena_transport::resolve::ServerAddr;
use nena_transport::testing::net::{serve_options, MemoryNet};
use nena_transport::testing::pair::Dir;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

fn addr(s: &str) -> SocketAddr {
    s.parse().unwrap()
}

/// `nena serve --key-file` on the memory network at `at`, storing into `dir`, proving `key`.
fn serve(
    net: &Arc<MemoryNet>,
    at: SocketAddr,
    dir: &Path,
    key: ServerKey,
) -> tokio::task::JoinHandle<()> {
    let listener = net.listen(at);
    let mut opts = serve_options(at, FileServerConfig::new(dir));
    opts.accept.key = Some(key);
    tokio::spawn(async move { serve_on(listener, opts).await.unwrap() })
}

/// A client command's settings (`--trusted 127.0.0.1`, `--mode aead`), with `known` as
/// `--known-servers` or `key` as `--server-key`.
fn settings(known: Option<&Path>, key: Option<PublicKey>) -> ClientSettings {
    ClientSettings {
        trusted: vec!["127.0.0.1".parse().unwrap()],
        untrusted: Vec::new(),
        metered: Vec::new(),
        modes: vec![Mode::Aead],
        suite: None,
        aead_epoch_log2: None,
        stream_epoch_log2: None,
        allow_fallback: false,
        allow_plain: false,
        timeout: Duration::from_secs(10),
        token_file: None,
        recover: true,
        resume: true,
        reuse: true,
        cc: None,
        resolver: None,
        known_servers: known.map(Path::to_path_buf),
        server_key: key,
    }
}

/// The options `settings` make for the server at `to` (an address, as given), dialing `net`.
fn options(net: &Arc<MemoryNet>, s: &ClientSettings, to: SocketAddr) -> ClientOptions {
    let mut o = s
        .resolve(&ServerAddr::from(to), false)
        .unwrap_or_else(|e| panic!("{e:#}"));
    o.dialer = net.clone();
    o
}

/// A new key file made as `nena serve --key-file` makes it (mode 0600), and the key: made
/// once, the same key when loaded again.
fn key_file(path: &Path) -> ServerKey {
    let (key, made) = load_or_create_key(path).unwrap();
    assert!(made, "{}: a new key file", path.display());
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(path).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600, "the key file is private");
    let (again, made) = load_or_create_key(path).unwrap();
    assert!(!made);
    assert_eq!(
        again.public(),
        key.public(),
        "the key file is kept, not remade"
    );
    key
}

fn pattern(n: usize, seed: u32) -> Vec<u8> {
    (0..n as u32)
        .map(|i| (i.wrapping_add(seed).wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect()
}

/// The lines that said a first contact with a pin in `known`.
fn first_contacts(known: &Path) -> usize {
    logs::lines_with(&known.display().to_string())
        .iter()
        .filter(|l| l.contains("first contact"))
        .count()
}

/// The bytes the last connection carried to the server: a refused client sent its hello,
/// never `file_len` bytes of data.
fn sent_on_last(net: &MemoryNet) -> u64 {
    net.taps().last().expect("a connection").len(Dir::ToServer)
}

fn names_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn perf_params() -> PerfParams {
    PerfParams {
        up: true,
        down: false,
        bytes: Some(100_000),
        time: Duration::from_secs(10),
        interval: None,
        omit: None,
    }
}

/// One line, as the CLI prints an error.
fn one_line(e: &nena_transport::Error) -> String {
    let msg = format!("{e:#}");
    assert!(!msg.trim().contains('\n'), "one line: {msg}");
    msg
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_contact_pins_a_changed_key_is_refused_until_forgotten() {
    logs::keep();
    let work = tempfile::tempdir().unwrap();
    let (store, keys, cli) = (
        work.path().join("store"),
        work.path().join("keys"),
        work.path().join("cli"),
    );
    for d in [&store, &keys, &cli] {
        std::fs::create_dir(d).unwrap();
    }
    let key1 = key_file(&keys.join("key1"));
    let key2 = key_file(&keys.join("key2"));
    let (k1, k2) = (key1.public(), key2.public());
    assert_ne!(k1, k2);
    let (k1s, k2s) = (KeyText(&k1).to_string(), KeyText(&k2).to_string());
    let known: PathBuf = cli.join("known_servers");
    let known_s = known.display().to_string();
    let to = addr("198.18.3.2:7000");
    let net = MemoryNet::new();
    let data = pattern(200_000, 7);
    let file = cli.join("f.bin");
    std::fs::write(&file, &data).unwrap();
    let name = |n: &str| FileName::new(n).unwrap();
    let pinned = settings(Some(&known), None);

    let server = serve(&net, to, &store, key1);
    // 1. First contact: pinned, said once.
    let o = options(&net, &pinned, to);
    send(&o, &file, &name("a"), &()).await.unwrap();
    assert_eq!(first_contacts(&known), 1);
    let entry = std::fs::read_to_string(&known).unwrap();
    assert_eq!(entry, format!("{to} ed25519 {k1s}\n"));
    // 2. The same server again: accepted, nothing said; get and perf check it too.
    send(&o, &file, &name("b"), &()).await.unwrap();
    let back = cli.join("back");
    get(&o, &name("a"), &back, false, &()).await.unwrap();
    assert!(std::fs::read(&back).unwrap() == data);
    perf(&o, perf_params(), |_| {}).await.unwrap();
    assert_eq!(
        first_contacts(&known),
        1,
        "a known server is accepted silently"
    );

    // 3. The server restarted with another key: refused before a byte of the file, the
    //    known_servers file untouched, nothing stored.
    net.close(to);
    tokio::time::timeout(Duration::from_secs(10), server)
        .await
        .expect("the first server ends")
        .unwrap();
    let _server = serve(&net, to, &store, key2);
    let e = send(&o, &file, &name("c"), &()).await.unwrap_err();
    let msg = one_line(&e);
    for part in [
        known_s.as_str(),
        &format!("nena known-servers forget {to}"),
        &k2s,
        &k1s,
        "impostor",
        "nothing was sent",
    ] {
        assert!(msg.contains(part), "`{part}` missing: {msg}");
    }
    let sent = sent_on_last(&net);
    assert!(sent < 4096, "a refused client sent {sent} bytes");
    assert_eq!(
        names_in(&store),
        ["a", "b"],
        "a refused client stored something"
    );
    assert_eq!(std::fs::read_to_string(&known).unwrap(), entry);
    for e in [
        get(&o, &name("a"), &cli.join("got-c"), false, &())
            .await
            .unwrap_err(),
        perf(&o, perf_params(), |_| {}).await.unwrap_err(),
    ] {
        let msg = one_line(&e);
        assert!(
            msg.contains(&format!("nena known-servers forget {to}")),
            "{msg}"
        );
    }
    assert!(!cli.join("got-c").exists());

    // 4. `--server-key`: a wrong key refused, the right one (base64 or hex) accepted; a mode
    //    without key agreement cannot take one (the command line's usage error).
    let wrong = options(&net, &settings(None, Some(k1)), to);
    let msg = one_line(&send(&wrong, &file, &name("d"), &()).await.unwrap_err());
    assert!(
        msg.contains("--server-key") && msg.contains("nothing was sent"),
        "{msg}"
    );
    assert!(!store.join("d").exists());
    let hex: String = k2.iter().map(|b| format!("{b:02x}")).collect();
    for (n, text) in [("e1", k2s.as_str()), ("e2", hex.as_str())] {
        let k = parse_public_key(text).unwrap();
        let o = options(&net, &settings(None, Some(k)), to);
        send(&o, &file, &name(n), &()).await.unwrap();
    }
    assert!(std::fs::read(store.join("e2")).unwrap() == data);
    let mut kato = settings(None, Some(k2));
    kato.modes = vec![Mode::Kato];
    match kato.resolve(&ServerAddr::from(to), false) {
        Err(SettingsError::Invalid(e)) => assert!(
            e.to_string()
                .contains("--server-key needs a mode with key agreement"),
            "{e}"
        ),
        other => panic!("--server-key with kato: {:?}", other.map(|_| ())),
    }

    // 5. Forgotten: the next contact pins the new key, and says so.
    assert_eq!(
        KnownServers::new(known.clone())
            .forget(&to.to_string())
            .unwrap(),
        1
    );
    send(&o, &file, &name("g"), &()).await.unwrap();
    assert_eq!(first_contacts(&known), 2);
    assert_eq!(
        std::fs::read_to_string(&known).unwrap(),
        format!("{to} ed25519 {k2s}\n")
    );
}

/// After first contact the pinned key decides, not the resolver: the name's resolver lies
/// (poisoned, or the attacker controls it) and gives the address of the attacker's nena
/// server, which proves its own key. Refused before a byte of the file is sent, in one line
/// naming the file and the command; the attacker stores nothing. The pin is the name's as
/// the user wrote it (`srv.lab:7000`), whatever address it resolved to.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_first_contact_a_lying_resolver_cannot_impersonate_the_server() {
    logs::keep();
    let work = tempfile::tempdir().unwrap();
    let (right, wrong) = (work.path().join("right"), work.path().join("wrong"));
    std::fs::create_dir(&right).unwrap();
    std::fs::create_dir(&wrong).unwrap();
    let known = work.path().join("known_servers");
    let (real, attacker) = (addr("198.18.3.2:7000"), addr("198.18.3.3:7000"));
    let net = MemoryNet::new();
    let _right = serve(&net, real, &right, key_file(&work.path().join("right.key")));
    let _wrong = serve(
        &net,
        attacker,
        &wrong,
        key_file(&work.path().join("wrong.key")),
    );
    let file = work.path().join("letter.bin");
    std::fs::write(&file, pattern(100_000, 43)).unwrap();
    let srv_lab: ServerAddr = "srv.lab:7000".parse().unwrap();
    // The options for `--to srv.lab:7000` once its name resolved to `resolved` (which
    // resolver answered is the lab's subject).
    let via = |resolved: SocketAddr| {
        let mut o = options(&net, &settings(Some(&known), None), resolved);
        o.server_key = Some(ServerKeyCheck::known(
            &srv_lab,
            Arc::new(KnownServers::new(known.clone())),
        ));
        o
    };
    // First contact through the honest resolver: the right server's key is pinned by name.
    send(&via(real), &file, &FileName::new("one").unwrap(), &())
        .await
        .unwrap();
    assert!(right.join("one").exists());
    let pinned = std::fs::read_to_string(&known).unwrap();
    assert!(pinned.starts_with("srv.lab:7000 ed25519 "), "{pinned}");
    // The resolver now lies.
    let e = send(&via(attacker), &file, &FileName::new("two").unwrap(), &())
        .await
        .unwrap_err();
    let msg = one_line(&e);
    for part in [
        known.display().to_string().as_str(),
        "nena known-servers forget srv.lab:7000",
        "impostor",
    ] {
        assert!(msg.contains(part), "`{part}` missing: {msg}");
    }
    let sent = sent_on_last(&net);
    assert!(sent < 4096, "{sent} bytes sent to the attacker's server");
    assert!(
        names_in(&wrong).is_empty(),
        "the attacker's server stored {:?}",
        names_in(&wrong)
    );
    assert_eq!(std::fs::read_to_string(&known).unwrap(), pinned);
}
