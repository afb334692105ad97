//! `--metrics` (issue 22, item 4) scraped by a real Prometheus (Debian's `prometheus`,
//! installed by scripts/install-deps.sh) in the lab: `nena serve`, `nena proxy server` and
//! `nena proxy client` each expose OpenMetrics text; a known workload runs (uploads of known
//! sizes, proxy sessions echoed byte-exact over both paths); the test then asks Prometheus's
//! query API, until it has scraped the final values, for counters that must equal the
//! workload's, the bytes (counted by path from the subflows) included: those the server
//! received, and the proxy client's by the trust class of the path that carried them. The
//! server's counters of a workload with refusals (the sessions by outcome, the refusals by
//! cause, the handshakes) need no kernel: crates/transport/tests/net_metrics.rs.

use crate::harness::*;
use nena_lab::Host;
use std::net::SocketAddr;
use std::time::Duration;

/// Prometheus in the server host (its loopback), scraping `targets` every 200 ms; returns
/// once its `/-/ready` answers 200.
fn prometheus(lab: &nena_lab::Lab, dir: &TempDir, targets: &[&str]) -> Killed {
    let list: Vec<String> = targets.iter().map(|t| format!("'{t}'")).collect();
    let config = format!(
        "global:\n  scrape_interval: 200ms\n  scrape_timeout: 200ms\n\
         scrape_configs:\n  - job_name: nena\n    static_configs:\n      - targets: [{}]\n",
        list.join(", ")
    );
    let cfg = dir.join("prometheus.yml");
    std::fs::write(&cfg, config).unwrap();
    let data = dir.join("tsdb");
    let child = lab
        .command(
            Host::Server,
            "prometheus",
            [
                &format!("--config.file={}", cfg.display()),
                &format!("--storage.tsdb.path={}", data.display()),
                "--web.listen-address=127.0.0.1:9090",
                "--log.level=warn",
            ],
        )
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(dir.join("prometheus.log")).unwrap())
        .spawn()
        .expect("prometheus (Debian package `prometheus`, scripts/install-deps.sh)");
    let p = Killed(child);
    nena_testkit::wait_until("prometheus ready", Duration::from_secs(30), || {
        get(lab, "http://127.0.0.1:9090/-/ready").is_some_and(|b| b.contains("Ready"))
    });
    p
}

/// `curl -s URL` in the server host: the body of a 2xx answer.
fn get(lab: &nena_lab::Lab, url: &str) -> Option<String> {
    let out = lab
        .command(Host::Server, "curl", ["-sf", "--max-time", "5", url])
        .output()
        .unwrap();
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The value of an instant PromQL query that yields one sample (None: no sample yet).
fn query(lab: &nena_lab::Lab, promql: &str) -> Option<f64> {
    let out = lab
        .command(
            Host::Server,
            "curl",
            [
                "-sf",
                "--max-time",
                "5",
                "http://127.0.0.1:9090/api/v1/query",
                "--data-urlencode",
                &format!("query={promql}"),
            ],
        )
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    assert_eq!(v["status"], "success", "{promql}: {v}");
    let r = v["data"]["result"].as_array()?;
    assert!(r.len() <= 1, "{promql}: more than one series: {v}");
    r.first()?["value"][1].as_str()?.parse().ok()
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn prometheus_scrapes_the_counters_of_a_known_workload() {
    let lab = lab();
    let dir = TempDir::new("metrics");
    let files = TempDir::new("metrics-files");
    let (token, _) = token_files(&dir);
    let token = token.as_str();

    let srv = serve(
        &lab,
        7701,
        files.path(),
        &["--token-file", token, "--metrics", "127.0.0.1:9464"],
    );
    let echo: SocketAddr = "127.0.0.1:7702".parse().unwrap();
    let _echo = echo_server(&lab, echo);
    let listen = server(&lab, 7703);
    let ps = spawn_listening(
        &lab,
        Host::Server,
        &[
            "-v",
            "proxy",
            "server",
            "--listen",
            &listen,
            "--forward",
            "127.0.0.1:7702",
            "--metrics",
            "127.0.0.1:9465",
        ],
    );
    // The proxy client's endpoint on its trusted address, so that Prometheus in the server
    // host reaches it over the lab's router.
    let mut args = vec![
        "-v",
        "proxy",
        "client",
        "--listen",
        "127.0.0.1:7704",
        "--to",
        &listen,
        "--metrics",
        "198.18.1.2:9466",
        // A session per connection: the proxies' counts below are per session.
        "--no-reuse",
    ];
    args.extend_from_slice(&PATHS);
    let pc = spawn_listening(&lab, Host::Client, &args);
    for p in [&srv, &ps, &pc] {
        // The startup line names the endpoint (it listens before the command does).
        assert!(!p.stderr().contains("cannot listen"), "{}", p.stderr());
    }
    let _prom = prometheus(
        &lab,
        &dir,
        &["127.0.0.1:9464", "127.0.0.1:9465", "198.18.1.2:9466"],
    );

    // The workload. Uploads: three of known sizes with the token.
    let to = server(&lab, 7701);
    let send = |file: &std::path::Path, name: &str, token: &str| {
        let mut args = vec![
            "send",
            file.to_str().unwrap(),
            "--name",
            name,
            "--to",
            &to,
            "--token-file",
            token,
        ];
        args.extend_from_slice(&PATHS);
        client(&lab, &args)
    };
    let sizes = [1_000_000usize, 2_345_678, 17];
    for (i, n) in sizes.iter().enumerate() {
        let f = dir.join(&format!("up{i}"));
        std::fs::write(&f, random(*n, i as u64)).unwrap();
        let out = send(&f, &format!("up{i}"), token);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // Four proxy sessions, each echoed byte-exact.
    let entry: SocketAddr = "127.0.0.1:7704".parse().unwrap();
    for i in 0..4u64 {
        let payload = random(200_000, 100 + i);
        let sent = payload.clone();
        let back = exchange(&lab, entry, payload).expect("an echoed session");
        assert!(back == sent, "session {i}: echo differs");
    }
    ps.wait_stderr_n("session done", 4, Duration::from_secs(10));
    pc.wait_stderr_n("session done", 4, Duration::from_secs(10));

    // What Prometheus must hold once it scraped the end of the workload: each value is
    // waited for (scrapes come every 200 ms), and a wrong one fails after 30 s with what
    // it read.
    let expect = |promql: &str, ok: &dyn Fn(f64) -> bool, what: &str| {
        let mut last = None;
        // (every 200 ms: Prometheus scrapes no more often)
        if nena_testkit::poll_until_every(
            Duration::from_secs(30),
            Duration::from_millis(200),
            || {
                last = query(&lab, promql);
                last.is_some_and(ok)
            },
        ) {
            return;
        }
        panic!(
            "{promql}: {last:?}, expected {what}\nserve:\n{}",
            srv.stderr()
        );
    };
    let eq = |n: f64| move |v: f64| v == n;
    expect(
        r#"sum(nena_sessions_total{role="serve",outcome="ok"})"#,
        &eq(3.0),
        "3 uploads",
    );
    expect(
        r#"sum(nena_sessions_total{role="serve"})"#,
        &eq(3.0),
        "no other outcome",
    );
    // The server received the uploads (three files, the requests, each record's 16-byte tag
    // and framing): at least the files, at most 1% and 64 KiB more.
    let uploaded: usize = sizes.iter().sum();
    let min = uploaded as f64;
    let max = min * 1.01 + 65536.0;
    expect(
        r#"sum(nena_bytes_total{role="serve",direction="received"})"#,
        &move |v| v >= min && v <= max,
        &format!("{min}..{max} bytes"),
    );
    // The proxies: four sessions each, no refusal, and the client's bytes by trust class
    // (both paths were offered; every session sent at least its 200,000 bytes in total).
    for role in ["proxy_server", "proxy_client"] {
        expect(
            &format!(r#"sum(nena_sessions_total{{role="{role}",outcome="ok"}})"#),
            &eq(4.0),
            "4 sessions",
        );
        expect(
            &format!(r#"sum(nena_sessions_total{{role="{role}"}})"#),
            &eq(4.0),
            "no other outcome",
        );
    }
    expect(
        r#"sum(nena_bytes_total{role="proxy_client",direction="sent"})"#,
        &|v| v >= 800_000.0,
        "the 4 x 200,000 bytes sent",
    );
    expect(
        r#"sum(nena_bytes_total{role="proxy_client",path=~"trusted|untrusted",direction="sent"})"#,
        &|v| v >= 800_000.0,
        "every byte on a named path",
    );
}

/// The sum of the `nena_bytes_total` series of a scrape `text` whose labels hold `labels`.
fn bytes_total(text: &str, labels: &str) -> u64 {
    text.lines()
        .filter(|l| l.starts_with("nena_bytes_total{") && l.contains(labels))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// Issue 58, item 3: the bytes of an upload that takes about 30 s (60 MB over two 8 Mbit/s
/// links) show in the server's `nena_bytes_total` while it runs, read from its subflows
/// every second, and the end adds only the rest (the total is the upload's, not twice it).
#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn a_long_uploads_bytes_show_in_the_metrics_before_it_ends() {
    let lab = lab_with(|c| {
        c.trusted_rate = Some(nena_lab::Rate::mbit(8));
        c.untrusted_rate = Some(nena_lab::Rate::mbit(8));
    });
    let dir = TempDir::new("metrics-live");
    let files = TempDir::new("metrics-live-files");
    let (token, _) = token_files(&dir);
    let srv = serve(
        &lab,
        7711,
        files.path(),
        &["--token-file", &token, "--metrics", "127.0.0.1:9467"],
    );
    let size = 60_000_000usize;
    let big = dir.join("big");
    std::fs::write(&big, random(size, 58)).unwrap();
    let to = server(&lab, 7711);
    let mut args = vec![
        "send",
        big.to_str().unwrap(),
        "--name",
        "big",
        "--to",
        &to,
        "--token-file",
        &token,
    ];
    args.extend_from_slice(&PATHS);
    let mut upload = Killed(
        lab.command(Host::Client, NENA, &args)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(dir.join("send.log")).unwrap())
            .spawn()
            .unwrap(),
    );
    let received = || {
        get(&lab, "http://127.0.0.1:9467/metrics")
            .map_or(0, |t| bytes_total(&t, r#"direction="received""#))
    };
    // (every 200 ms: the server counts once a second)
    let mut last = 0;
    let shown =
        nena_testkit::poll_until_every(Duration::from_secs(20), Duration::from_millis(200), || {
            last = received();
            last >= 4_000_000
        });
    let running = upload.0.try_wait().unwrap().is_none();
    assert!(
        shown,
        "after 20 s of the upload the metrics show {last} bytes received\n{}",
        srv.stderr()
    );
    assert!(
        running,
        "the upload ended before 4 MB of it showed in the metrics (the test's links are too \
         fast for it to tell)"
    );
    assert!(
        last < size as u64,
        "{last} bytes shown before the end of a {size}-byte upload"
    );
    let status = upload.0.wait().unwrap();
    assert!(
        status.success(),
        "{}",
        std::fs::read_to_string(dir.join("send.log")).unwrap_or_default()
    );
    // Once the session ended: the whole upload, counted once (its framing and tags at most
    // 1% and 64 KiB more).
    let max = size as u64 + size as u64 / 100 + 65536;
    let done =
        nena_testkit::poll_until_every(Duration::from_secs(10), Duration::from_millis(200), || {
            last = received();
            last >= size as u64
        });
    assert!(
        done && last <= max,
        "{last} bytes counted for a {size}-byte upload, expected at most {max}"
    );
}
