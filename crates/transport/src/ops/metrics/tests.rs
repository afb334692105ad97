//! The endpoint's limits, the encoding and how sessions' ends are counted.

use super::*;
use crate::ops::access::ErrorReply;
use crate::wire::Status;
use std::sync::Arc;
use std::time::Duration;

/// Slow clients (slowloris) cannot hold the endpoint (issue 41, finding 6): connections
/// past the cap are closed at once, one that never finishes its header is closed after
/// the header timeout, and then a scrape is served.
#[tokio::test]
async fn slow_clients_are_capped_and_timed_out() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let limits = EndpointLimits {
        max_connections: 3,
        header_timeout: Duration::from_millis(500),
        lifetime: Duration::from_secs(30),
    };
    let server = tokio::spawn(serve_within(listener, Metrics::new(Role::Serve), limits));
    let mut slow = Vec::new();
    for _ in 0..3 {
        let mut c = tokio::net::TcpStream::connect(addr).await.unwrap();
        c.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
            .await
            .unwrap();
        slow.push(c);
    }
    // The endpoint shows no event when it has taken a connection (too short a pause makes
    // the fourth's check fail, never pass wrongly).
    // sleep: 100 ms for the endpoint to take the three.
    tokio::time::sleep(Duration::from_millis(100)).await;
    // The fourth is closed without an answer while the three hold their slots.
    let mut extra = tokio::net::TcpStream::connect(addr).await.unwrap();
    let _ = extra
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .await;
    let mut got = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), extra.read_to_end(&mut got)).await;
    assert!(matches!(read, Ok(Ok(0)) | Ok(Err(_))), "{read:?} {got:?}");
    // Each slow one is closed once its header is late (well before 10 s).
    for c in &mut slow {
        let mut buf = Vec::new();
        let r = tokio::time::timeout(Duration::from_secs(10), c.read_to_end(&mut buf)).await;
        assert!(
            r.is_ok(),
            "a client that never finished its header was kept"
        );
    }
    drop(slow);
    // The slots are given back after the endpoint closed the slow ones, which shows no
    // event here (too short a pause fails the scrape below, never passes it wrongly).
    // sleep: 100 ms for the endpoint to give the slots back.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut c = tokio::net::TcpStream::connect(addr).await.unwrap();
    c.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut text = String::new();
    c.read_to_string(&mut text).await.unwrap();
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    server.abort();
}

/// The text a scrape gets: every family, the labels of what was recorded, and the
/// OpenMetrics end marker.
#[test]
fn sessions_bytes_refusals_and_handshakes_are_encoded() {
    let m = Metrics::new(Role::Serve);
    let text = m.encode();
    assert!(
        text.contains("nena_sessions_active{role=\"serve\"} 0"),
        "{text}"
    );
    assert!(
        text.contains("nena_integrity_failures_total{role=\"serve\"} 0"),
        "{text}"
    );
    assert!(
        text.contains("nena_retried_openings_total{role=\"serve\"} 0"),
        "{text}"
    );
    let active = m.begin();
    assert!(m
        .encode()
        .contains("nena_sessions_active{role=\"serve\"} 1"));
    m.handshake(Duration::from_millis(3), false);
    let used = PathsUsed {
        paths: vec![("198.18.3.2".into(), 1000, 2000)],
        path_rtt_us: vec![("198.18.3.2".into(), 12_500)],
        joins: 1,
        ..PathsUsed::default()
    };
    m.end("aead", Outcome::Ok, &used);
    m.end(
        "aead",
        Outcome::Refused("access_denied"),
        &PathsUsed::default(),
    );
    m.end("stream", Outcome::Integrity, &PathsUsed::default());
    m.retried_opening();
    drop(active);
    let text = m.encode();
    for line in [
        "nena_sessions_active{role=\"serve\"} 0",
        "nena_sessions_total{role=\"serve\",mode=\"aead\",outcome=\"ok\"} 1",
        "nena_sessions_total{role=\"serve\",mode=\"aead\",outcome=\"refused\"} 1",
        "nena_sessions_total{role=\"serve\",mode=\"stream\",outcome=\"integrity_failure\"} 1",
        "nena_refusals_total{role=\"serve\",cause=\"access_denied\"} 1",
        "nena_integrity_failures_total{role=\"serve\"} 1",
        "nena_retried_openings_total{role=\"serve\"} 1",
        "nena_bytes_total{role=\"serve\",path=\"198.18.3.2\",direction=\"sent\"} 1000",
        "nena_bytes_total{role=\"serve\",path=\"198.18.3.2\",direction=\"received\"} 2000",
        "nena_subflow_events_total{role=\"serve\",event=\"join\"} 1",
        "nena_handshake_seconds_count{role=\"serve\"} 1",
        "nena_handshake_seconds_bucket{le=\"0.004\",role=\"serve\"} 1",
        "nena_handshake_seconds_bucket{le=\"0.002\",role=\"serve\"} 0",
        "nena_path_rtt_seconds{role=\"serve\",path=\"198.18.3.2\"} 0.0125",
    ] {
        assert!(text.contains(line), "{line} missing from\n{text}");
    }
    // The refusal and the integrity failure are kept with their causes, in order.
    let recent: Vec<(String, String)> = m
        .recent()
        .into_iter()
        .map(|r| (r.outcome, r.cause))
        .collect();
    assert_eq!(
        recent,
        vec![
            ("refused".to_string(), "access_denied".to_string()),
            ("integrity_failure".to_string(), String::new())
        ]
    );
    let (kind, name, rtt) = &m.rtts()[0];
    assert_eq!(
        (*kind, name.as_str(), rtt.rtt_us),
        ("path", "198.18.3.2", 12_500)
    );
    assert!(text.ends_with("# EOF\n"), "{text}");
}

/// Errors are told apart by their types, not their words.
#[test]
fn outcomes_of_errors() {
    use crate::error::{Doing, Error};
    let refused: Error = ErrorReply::new(Status::TooLarge, "too large").into();
    assert_eq!(
        Outcome::of(&refused.during(Doing::ReadingRequest)),
        Outcome::Refused("file_too_large")
    );
    let corrupt: Error = ErrorReply::new(Status::Corrupt, "tag").into();
    assert_eq!(Outcome::of(&corrupt), Outcome::Integrity);
    let se = std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        nena_proto::SessionError::Truncated { records: 3 },
    );
    let e = Error::from(se).during(Doing::ReceivingFileData);
    assert_eq!(Outcome::of(&e), Outcome::Integrity);
    let stop = Error::from(std::io::Error::other(crate::proxy::ends::ShuttingDown));
    assert_eq!(
        Outcome::of(&stop.during(Doing::SocksExchange)),
        Outcome::Aborted
    );
    let handshake = Error::from(std::io::Error::from(std::io::ErrorKind::TimedOut)).handshake();
    assert_eq!(
        Outcome::of(&handshake.during(Doing::WritingFirstFlight)),
        Outcome::Refused("handshake")
    );
    assert_eq!(
        Outcome::of(&anyhow::anyhow!("connection reset").into()),
        Outcome::Failed
    );
}

#[test]
fn trusted_link_waits_follow_the_process_totals() {
    let m = Metrics::new(Role::Gateway);
    m.trusted_waits(nena_mptcp::TrustedWaits {
        waiting: 2,
        waited: 3,
        gave_up: 1,
    });
    let text = {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &m.registry).unwrap();
        out
    };
    for line in [
        "nena_sessions_waiting_for_trusted_link{role=\"gateway\"} 2",
        "nena_trusted_link_waits_total{role=\"gateway\"} 3",
        "nena_trusted_link_wait_timeouts_total{role=\"gateway\"} 1",
    ] {
        assert!(text.contains(line), "{line} in {text}");
    }
    // Totals only grow: a later reading that is the same changes nothing.
    m.trusted_waits(nena_mptcp::TrustedWaits {
        waiting: 0,
        waited: 3,
        gave_up: 1,
    });
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, &m.registry).unwrap();
    assert!(
        out.contains("nena_trusted_link_waits_total{role=\"gateway\"} 3"),
        "{out}"
    );
    assert!(out.contains("nena_sessions_waiting_for_trusted_link{role=\"gateway\"} 0"));
}

/// A client's bytes per interface: a counter by interface, metered or not, and direction;
/// the same since the local midnight in a gauge that goes back to 0 when the day changes
/// (the counter does not), with the midnight it counts from.
#[test]
fn interface_bytes_are_counted_in_total_and_for_today() {
    use super::day::Day;
    let m = Metrics::new(Role::ProxyClient);
    let used = |t: u64, u: u64| PathsUsed {
        paths: vec![("trusted".into(), t, 0), ("untrusted".into(), u, 7)],
        ifaces: vec![("lte0".into(), true, t, 0), ("wlan0".into(), false, u, 7)],
        ..PathsUsed::default()
    };
    m.end("aead", Outcome::Ok, &used(1200, 5_000_000));
    m.end("aead", Outcome::Ok, &used(800, 1_000_000));
    let text = m.encode();
    let today = Day::now();
    for line in [
        "nena_interface_bytes_total{role=\"proxy_client\",interface=\"lte0\",metered=\"true\",direction=\"sent\"} 2000".to_string(),
        "nena_interface_bytes_total{role=\"proxy_client\",interface=\"wlan0\",metered=\"false\",direction=\"sent\"} 6000000".into(),
        "nena_interface_bytes_total{role=\"proxy_client\",interface=\"wlan0\",metered=\"false\",direction=\"received\"} 14".into(),
        "nena_interface_bytes_today{role=\"proxy_client\",interface=\"lte0\",metered=\"true\",direction=\"sent\"} 2000".into(),
        format!("nena_interface_bytes_today_start_seconds{{role=\"proxy_client\"}} {}", today.start_unix),
    ] {
        assert!(text.contains(&line), "{line} missing from\n{text}");
    }
    // The next day: the gauges are back to 0, the counters are not.
    let tomorrow = Day::of(today.start_unix + 86_400 + 3_600);
    m.roll_day(tomorrow);
    m.end("aead", Outcome::Ok, &used(0, 0));
    let text = m.encode();
    for line in [
        "nena_interface_bytes_total{role=\"proxy_client\",interface=\"lte0\",metered=\"true\",direction=\"sent\"} 2000",
        "nena_interface_bytes_today{role=\"proxy_client\",interface=\"lte0\",metered=\"true\",direction=\"sent\"} 0",
        "nena_interface_bytes_today{role=\"proxy_client\",interface=\"wlan0\",metered=\"false\",direction=\"sent\"} 0",
    ] {
        assert!(text.contains(line), "{line} missing from\n{text}");
    }
}

/// `families` names what a scrape has once every family has a series: the same families with
/// the same types, and every sample under one of their sample names. A fresh scrape leaves
/// out the families without a series, which `families` lists all the same.
#[test]
fn families_name_every_family_a_scrape_can_have() {
    use std::collections::BTreeSet;
    let described = |text: &str| -> BTreeSet<(String, String)> {
        text.lines()
            .filter_map(|l| l.strip_prefix("# TYPE "))
            .map(|l| {
                let (name, kind) = l.split_once(' ').expect("a TYPE line: name and type");
                (name.to_string(), kind.to_string())
            })
            .collect()
    };
    let m = Metrics::new(Role::ProxyClient);
    let listed: BTreeSet<(String, String)> = m
        .families()
        .iter()
        .map(|f| (f.name.clone(), f.kind.clone()))
        .collect();
    assert_eq!(listed.len(), m.families().len(), "a family listed twice");
    let fresh = described(&m.encode());
    assert!(fresh.is_subset(&listed), "{fresh:?} against {listed:?}");
    assert!(fresh.len() < listed.len(), "{fresh:?}");

    // A series in every family.
    let active = m.begin();
    m.handshake(Duration::from_millis(3), true);
    m.retried_opening();
    m.datagrams(&DatagramCounts {
        udp_sent: 1,
        ..DatagramCounts::default()
    });
    let used = PathsUsed {
        paths: vec![("trusted".into(), 10, 20)],
        ifaces: vec![("wlan0".into(), false, 10, 20)],
        path_rtt_us: vec![("trusted".into(), 30_000)],
        iface_rtt_us: vec![("wlan0".into(), 30_000)],
        joins: 1,
        ..PathsUsed::default()
    };
    m.end("aead", Outcome::Refused("access_denied"), &used);
    m.end("aead", Outcome::Integrity, &PathsUsed::default());
    drop(active);
    let text = m.encode();
    assert_eq!(described(&text), listed, "{text}");
    let samples: BTreeSet<String> = m.families().iter().flat_map(|f| f.samples()).collect();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let name = line.split(['{', ' ']).next().unwrap_or_default();
        assert!(
            samples.contains(name),
            "{name} (`{line}`) not in {samples:?}"
        );
    }
}

/// The figure of `nena_bytes_total` for `path` and `direction` in `m`'s scrape (0: none).
fn bytes_of(m: &Metrics, path: &str, direction: &str) -> u64 {
    let want = format!("path=\"{path}\",direction=\"{direction}\"");
    m.encode()
        .lines()
        .find(|l| l.starts_with("nena_bytes_total{") && l.contains(&want))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap_or(0)
}

/// Issue 58, item 3: a running session's bytes per path show while it runs, a second's
/// worth at a time, and the end counts only what was not counted yet (also when a path's
/// figure fell, as when a subflow closed and took its bytes along): the total is the
/// session's last reading, never twice.
#[tokio::test(start_paused = true)]
async fn a_running_sessions_bytes_are_counted_while_it_runs_and_once() {
    use std::sync::atomic::{AtomicU64, Ordering};
    let m = Metrics::new(Role::Serve);
    let tally = Tally::begin(Some(&m));
    let carried = Arc::new(AtomicU64::new(0));
    let read = {
        let carried = carried.clone();
        move || PathsUsed {
            paths: vec![("198.18.2.2".into(), 10, carried.load(Ordering::SeqCst))],
            ..PathsUsed::default()
        }
    };
    let (seen_tx, mut seen_rx) = tokio::sync::mpsc::unbounded_channel();
    let work = {
        let (carried, m) = (carried.clone(), m.clone());
        async move {
            for second in 1..=30u64 {
                carried.store(second * 1_000_000, Ordering::SeqCst);
                // sleep: the counted second itself is the subject (a paused clock).
                tokio::time::sleep(LIVE_EVERY).await;
                seen_tx
                    .send(bytes_of(&m, "198.18.2.2", "received"))
                    .unwrap();
            }
            // A subflow closes: the path's figure falls, then rises a little.
            carried.store(5_000_000, Ordering::SeqCst);
            // sleep: one more counted second (a paused clock), with the fallen figure.
            tokio::time::sleep(LIVE_EVERY).await;
            "done"
        }
    };
    assert_eq!(tally.live(read.clone(), work).await, "done");
    let mut seen = Vec::new();
    while let Ok(v) = seen_rx.try_recv() {
        seen.push(v);
    }
    // Each second's figure is in the scrape by the end of that second.
    let expected: Vec<u64> = (1..=30).map(|s| s * 1_000_000).collect();
    assert_eq!(seen, expected);
    // The end: its reading is below what was counted; nothing more is added, nothing twice.
    tally.paths_used(read());
    tally.finish::<()>(&Ok(()));
    assert_eq!(bytes_of(&m, "198.18.2.2", "received"), 30_000_000);
    assert_eq!(bytes_of(&m, "198.18.2.2", "sent"), 10);
}

/// Without a live count (a short session) the end counts everything, as before.
#[test]
fn a_session_counted_only_at_its_end_counts_all_its_bytes() {
    let m = Metrics::new(Role::Serve);
    let tally = Tally::begin(Some(&m));
    tally.paths_used(PathsUsed {
        paths: vec![("198.18.2.2".into(), 7, 1234)],
        ..PathsUsed::default()
    });
    tally.finish::<()>(&Ok(()));
    assert_eq!(bytes_of(&m, "198.18.2.2", "received"), 1234);
    assert_eq!(bytes_of(&m, "198.18.2.2", "sent"), 7);
}

/// Only the last RECENT refusals are kept, the newest last.
#[test]
fn recent_keeps_the_last_refusals() {
    let m = Metrics::new(Role::ProxyServer);
    for _ in 0..super::RECENT {
        m.end("aead", Outcome::Refused("handshake"), &PathsUsed::default());
    }
    m.end(
        "aead",
        Outcome::Refused("not_allowed"),
        &PathsUsed::default(),
    );
    let r = m.recent();
    assert_eq!(r.len(), super::RECENT);
    assert_eq!(r.last().unwrap().cause, "not_allowed");
    assert!(r[..super::RECENT - 1]
        .iter()
        .all(|x| x.cause == "handshake"));
}

/// A datagram session's end: its subflows' bytes and its plane's added per path and per
/// interface, the lowest RTT kept, and counted so.
#[test]
fn a_datagram_sessions_subflows_and_plane_add_up() {
    let subflows = PathsUsed {
        paths: vec![("trusted".into(), 100, 200)],
        ifaces: vec![("lte".into(), false, 100, 200)],
        path_rtt_us: vec![("trusted".into(), 30_000)],
        joins: 1,
        ..PathsUsed::default()
    };
    let plane = PathsUsed {
        paths: vec![("trusted".into(), 10, 20), ("untrusted".into(), 1, 2)],
        ifaces: vec![("lte".into(), false, 10, 20), ("wlan".into(), false, 1, 2)],
        path_rtt_us: vec![("trusted".into(), 20_000)],
        ..PathsUsed::default()
    };
    let all = subflows.plus(&plane);
    assert_eq!(
        all.paths,
        vec![("trusted".into(), 110, 220), ("untrusted".into(), 1, 2)]
    );
    assert_eq!(
        all.ifaces,
        vec![
            ("lte".into(), false, 110, 220),
            ("wlan".into(), false, 1, 2)
        ]
    );
    assert_eq!(all.path_rtt_us, vec![("trusted".into(), 20_000)]);
    assert_eq!(all.joins, 1);
    let m = Metrics::new(Role::Gateway);
    let tally = Tally::begin(Some(&m));
    tally.paths_used(all);
    tally.finish::<()>(&Ok(()));
    assert_eq!(bytes_of(&m, "trusted", "sent"), 110);
    assert_eq!(bytes_of(&m, "untrusted", "received"), 2);
}
