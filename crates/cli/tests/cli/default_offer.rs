//! The client's default offer is aead alone (issue 19, item 5): a server's preference can
//! never move a default client to a mode without integrity. A default `nena send` to a server
//! that prefers stream ends in aead; to a server that accepts only stream it fails with one
//! line naming the flag that would allow stream; naming stream still works.

use crate::harness::*;

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn a_default_client_never_ends_in_stream() {
    let lab = lab();
    let srv = TempDir::new("offer-srv");
    let srv_stream = TempDir::new("offer-srv-stream");
    let cli = TempDir::new("offer-cli");
    let file = cli.join("f.txt");
    std::fs::write(&file, text(100_000, 3)).unwrap();
    let file_s = file.display().to_string();
    // The server prefers stream: a default client still gets aead.
    let _prefers = serve(&lab, 7000, srv.path(), &["--mode", "stream,aead"]);
    let to = server(&lab, 7000);
    let mut args = vec!["send", &file_s, "--to", &to, "--json"];
    args.extend_from_slice(&PATHS);
    let r = client_json(&lab, &args);
    assert_eq!(r["mode"], "aead", "{r}");
    assert_eq!(
        std::fs::read(srv.join("f.txt")).unwrap(),
        std::fs::read(&file).unwrap()
    );
    // The server accepts only stream: a default client refuses, naming the flag.
    let _only = serve(&lab, 7001, srv_stream.path(), &["--mode", "stream"]);
    let to = server(&lab, 7001);
    let mut args = vec!["send", &file_s, "--to", &to];
    args.extend_from_slice(&PATHS);
    let out = client(&lab, &args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a default client accepted stream");
    assert!(
        err.contains("the server accepts [stream]") && err.contains("--mode stream"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(!srv_stream.join("f.txt").exists());
    // Named, stream is offered and chosen.
    args.extend_from_slice(&["--mode", "stream", "--json"]);
    let r = client_json(&lab, &args);
    assert_eq!(r["mode"], "stream", "{r}");
}
