//! kato-mpc's server state stays bounded and swept (issue 41, finding 4), in the lab: with
//! `nena serve`'s table of completed handshakes full of fresh made-up records (as real
//! handshakes nobody accepted would leave it), a legitimate kato-mpc transfer still
//! succeeds, scrambled and byte-exact, within seconds, and the table keeps its size; records
//! older than a minute go while serve runs, without any connection to trigger it.

use super::*;
use nena_bpf::mpc::Established;

/// The server's table on its lab interface, read in its namespace.
fn table<T: Send + 'static>(
    lab: &nena_lab::Lab,
    f: impl FnOnce(&Established) -> T + Send + 'static,
) -> T {
    lab.run_in(Host::Server, move || {
        let t = Established::of("eth0")
            .unwrap()
            .expect("serve's programs on eth0");
        f(&t)
    })
    .unwrap()
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn kato_mpc_transfers_go_through_with_the_servers_table_full_and_stale_records_are_swept() {
    let lab = lab();
    let srv = TempDir::new("mpcfull");
    let cli = TempDir::new("mpcfullc");
    let s = serve(&lab, 7240, srv.path(), &["--mode", "kato-mpc"]);
    let to = server(&lab, 7240);
    let (cap, len) = table(&lab, |t| {
        let cap = t.capacity();
        assert_eq!(t.fill(cap, 7240, Duration::ZERO).unwrap(), cap);
        (cap, t.len())
    });
    assert_eq!(cap, 16384);
    // (An LRU map may push an entry out a little before it holds its size.)
    assert!(len >= cap as usize * 9 / 10, "filled: {len} of {cap}");

    // A legitimate transfer: its completing ACK takes the place of the oldest record.
    let file = random(300_000, 41);
    let p = cli.join("up.bin");
    std::fs::write(&p, &file).unwrap();
    let ps = p.display().to_string();
    let mut a = vec![
        "send",
        &ps,
        "--to",
        &to,
        "--mode",
        "kato-mpc",
        "--json",
        "--timeout",
        "10",
    ];
    a.extend_from_slice(&PATHS);
    let t0 = std::time::Instant::now();
    let (r, _) = run_json(&lab, &a);
    let took = t0.elapsed();
    assert!(took < Duration::from_secs(10), "took {took:?}");
    assert_eq!(r["mode"], "kato-mpc", "{r}");
    assert_eq!(r["kato_mpc"]["scrambled"], true, "{r}");
    assert_eq!(std::fs::read(srv.join("up.bin")).unwrap(), file);
    assert!(!s.stderr().contains("refused"), "{}", s.stderr());
    let len = table(&lab, |t| t.len());
    assert!(len <= cap as usize, "bounded: {len}");

    // Stale records (made two minutes ago) go by serve's sweeper alone.
    let stale = table(&lab, |t| {
        t.fill(1000, 7241, Duration::from_secs(120)).unwrap();
        t.stale()
    });
    assert!(stale >= 900, "{stale} stale records written");
    let waited = nena_testkit::wait_until(
        "serve's sweeper to delete the stale records",
        Duration::from_secs(20),
        || table(&lab, |t| t.stale()) == 0,
    );
    eprintln!("{stale} stale records swept within {waited:?}");
    // The fresh records stay until read or a minute old.
    assert!(table(&lab, |t| t.len()) > cap as usize / 2);
}
