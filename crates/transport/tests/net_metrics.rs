//! `nena serve --metrics` (issue 22, item 4): the counters of a known workload, the
//! production code of both ends over the in-memory network (`testing::net`): `nena send` and
//! `get` (`file_client`) against `serve_on` with `--token-file` (`Limits::token`) and its
//! counters (`Metrics`, as `--metrics` serves them: `Metrics::encode` is the endpoint's
//! body). Three uploads of known sizes with the token, two with another token, a download of
//! a file that is not there: the sessions by outcome, the refusals by cause, the handshakes,
//! no integrity failure and nothing in progress must equal the workload's. The proxies'
//! counters of sessions and refusals are crates/transport/tests/net_forward.rs's.
//!
//! Moved here from the lab test `transfer_metrics.rs::prometheus_scrapes_the_counters_of_a_known_workload`,
//! which keeps what needs the lab: a real Prometheus scraping the three commands' endpoints,
//! and the bytes, which are counted by path from the subflows (`nena_bytes_total`; a memory
//! connection has none).

use nena_proto::Mode;
use nena_transport::app::file_client::{get, send};
use nena_transport::app::file_server::{serve_on, ServeOptions};
use nena_transport::app::files::FileServerConfig;
use nena_transport::app::names::FileName;
use nena_transport::ops::metrics::{Metrics, Role};
use nena_transport::testing::net::{serve_options, MemoryNet};
use nena_transport::wire::AccessToken;
use std::net::SocketAddr;
use std::time::Duration;

/// The value of the series `name` (its labels included, as the endpoint prints it); `None`
/// when the endpoint has no such line.
fn value(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .map(|v| v.trim().parse::<f64>().unwrap())
}

/// The sum of every series of `family` whose labels contain each of `labels`.
fn sum(text: &str, family: &str, labels: &[&str]) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(&format!("{family}{{")))
        .filter(|l| labels.iter().all(|x| l.contains(x)))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
        .sum()
}

fn pattern(n: usize, seed: u32) -> Vec<u8> {
    (0..n as u32)
        .map(|i| (i.wrapping_add(seed).wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_servers_counters_equal_a_known_workload() {
    let work = tempfile::tempdir().unwrap();
    let store = work.path().join("store");
    std::fs::create_dir(&store).unwrap();
    let token = AccessToken::new(b"the token of the metrics test".to_vec()).unwrap();
    let bad = AccessToken::new(b"not the token of this server".to_vec()).unwrap();
    let at: SocketAddr = "198.18.3.2:7701".parse().unwrap();
    let net = MemoryNet::new();
    let metrics = Metrics::new(Role::Serve);
    let listener = net.listen(at);
    let mut opts = ServeOptions {
        metrics: Some(metrics.clone()),
        ..serve_options(at, FileServerConfig::new(&store))
    };
    opts.session.limits.token = Some(token.clone());
    let server = tokio::spawn(async move { serve_on(listener, opts).await.unwrap() });

    // The workload. Uploads: three of known sizes with the token, two with another token; a
    // download of a file that is not there.
    let with = |t: &AccessToken| {
        let mut o = net.options(at, vec![Mode::Aead]);
        o.token = Some(t.clone());
        o
    };
    let sizes = [1_000_000usize, 2_345_678, 17];
    let src = work.path().join("up");
    for (i, n) in sizes.iter().enumerate() {
        std::fs::write(&src, pattern(*n, i as u32)).unwrap();
        let name = FileName::new(&format!("up{i}")).unwrap();
        send(&with(&token), &src, &name, &()).await.unwrap();
    }
    for name in ["a", "b"] {
        let e = send(&with(&bad), &src, &FileName::new(name).unwrap(), &())
            .await
            .unwrap_err();
        assert!(format!("{e:#}").contains("access denied"), "{e:#}");
    }
    let missing = FileName::new("not-there").unwrap();
    get(
        &with(&token),
        &missing,
        &work.path().join("got"),
        false,
        &(),
    )
    .await
    .unwrap_err();
    // Every session has ended once the server has: its counters are final.
    net.close(at);
    tokio::time::timeout(Duration::from_secs(10), server)
        .await
        .expect("the server ends once its listener is closed")
        .unwrap();

    let text = metrics.encode();
    let serve = "role=\"serve\"";
    let expect = |got: f64, want: f64, what: &str| {
        assert_eq!(got, want, "{what}:\n{text}");
    };
    expect(
        sum(&text, "nena_sessions_total", &[serve, "outcome=\"ok\""]),
        3.0,
        "3 uploads",
    );
    expect(
        sum(
            &text,
            "nena_sessions_total",
            &[serve, "outcome=\"refused\""],
        ),
        3.0,
        "3 refusals",
    );
    expect(
        sum(&text, "nena_sessions_total", &[serve]),
        6.0,
        "no other outcome",
    );
    let cause = |c: &str| {
        value(
            &text,
            &format!("nena_refusals_total{{role=\"serve\",cause=\"{c}\"}}"),
        )
    };
    expect(
        cause("access_denied").unwrap_or(-1.0),
        2.0,
        "2 wrong tokens",
    );
    expect(cause("not_found").unwrap_or(-1.0), 1.0, "1 missing file");
    let line = |name: &str| value(&text, name).unwrap_or(-1.0);
    expect(
        line("nena_handshake_seconds_count{role=\"serve\"}"),
        6.0,
        "6 handshakes",
    );
    expect(
        line("nena_integrity_failures_total{role=\"serve\"}"),
        0.0,
        "no integrity failure",
    );
    expect(
        line("nena_sessions_active{role=\"serve\"}"),
        0.0,
        "nothing in progress",
    );
}
