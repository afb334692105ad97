//! `nena status`: asks the running `serve`, `proxy` and `gateway` commands of this user (of
//! every user, as root) over their control sockets and prints what each is doing now:
//! sessions, refusals, waits for the trusted link, and per path and interface the bytes
//! since its start and the throughput over the last second and minute (text, or `--json`).
use crate::exit::Exit;
use anyhow::anyhow;
use nena_transport::ops::status::{self, PathFigures, Snapshot};
use nena_transport::text::units::human;
use std::path::{Path, PathBuf};

#[derive(clap::Args, Debug)]
pub struct StatusArgs {
    /// Ask only the command at this control socket (its --control).
    #[arg(long, value_name = "PATH")]
    pub control: Option<PathBuf>,
    /// Where to look for control sockets. Default: where the commands put them
    /// (/run/nena/control as root, else $XDG_RUNTIME_DIR/nena, else /tmp/nena-UID).
    #[arg(long, value_name = "DIR", conflicts_with = "control")]
    pub dir: Option<PathBuf>,
    /// One JSON array of the commands' answers.
    #[arg(long)]
    pub json: bool,
}

pub fn status(a: StatusArgs) -> Result<(), Exit> {
    let sockets = match &a.control {
        Some(p) => vec![p.clone()],
        None => {
            let dir = a.dir.clone().unwrap_or_else(status::default_dir);
            let found = sockets_in(&dir);
            if found.is_empty() {
                return Err(Exit::from(anyhow!(
                    "no running nena command has a control socket in {} (serve, proxy and \
                     gateway make one unless --no-control; give --control PATH for one \
                     elsewhere)",
                    dir.display()
                )));
            }
            found
        }
    };
    let answers = crate::runtime::block_on(async {
        let mut out = Vec::new();
        for p in &sockets {
            out.push((p.clone(), status::ask(p).await));
        }
        out
    })?;
    let mut got: Vec<Snapshot> = Vec::new();
    let mut failed = Vec::new();
    for (p, r) in answers {
        match r {
            Ok(s) => got.push(s),
            Err(e) => failed.push(format!("{}: {e:#}", p.display())),
        }
    }
    for f in &failed {
        eprintln!("nena: status: {f}");
    }
    if got.is_empty() {
        return Err(Exit::from(anyhow!(
            "no command answered ({} control socket(s) tried)",
            failed.len()
        )));
    }
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&got).map_err(anyhow::Error::from)?
        );
    } else {
        for (i, s) in got.iter().enumerate() {
            if i > 0 {
                println!();
            }
            print!("{}", render(s));
        }
    }
    Ok(())
}

/// The `*.sock` files in `dir` and in its subdirectories (a packaged unit's socket lies in a
/// runtime directory of its own, /run/nena/control/serve/), sorted; those left by a command
/// that is gone (nothing listens on them: it was killed) are removed on the way.
fn sockets_in(dir: &Path) -> Vec<PathBuf> {
    let gone = |p: &Path| {
        std::os::unix::net::UnixStream::connect(p)
            .is_err_and(|e| e.kind() == std::io::ErrorKind::ConnectionRefused)
    };
    let entries = |d: &Path| -> Vec<PathBuf> {
        std::fs::read_dir(d)
            .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
            .unwrap_or_default()
    };
    let top = entries(dir);
    let below = top
        .iter()
        .filter(|p| p.symlink_metadata().is_ok_and(|m| m.is_dir()))
        .flat_map(|d| entries(d));
    let mut v: Vec<PathBuf> = top
        .iter()
        .cloned()
        .chain(below)
        .filter(|p| p.extension().is_some_and(|x| x == "sock"))
        .filter(|p| !(gone(p) && std::fs::remove_file(p).is_ok()))
        .collect();
    v.sort();
    v
}

/// Bytes per second as bits per second, people's unit for links.
fn bits(per_s: f64) -> String {
    let b = per_s * 8.0;
    if b >= 1e9 {
        format!("{:.2} Gbit/s", b / 1e9)
    } else if b >= 1e6 {
        format!("{:.1} Mbit/s", b / 1e6)
    } else if b >= 1e3 {
        format!("{:.0} kbit/s", b / 1e3)
    } else {
        format!("{b:.0} bit/s")
    }
}

/// Seconds as `2d 3h 4m 5s` (the largest units only as needed).
fn uptime(secs: u64) -> String {
    let parts = [
        (secs / 86400, "d"),
        (secs / 3600 % 24, "h"),
        (secs / 60 % 60, "m"),
    ];
    let mut out: Vec<String> = parts
        .iter()
        .skip_while(|(n, _)| *n == 0)
        .map(|(n, u)| format!("{n}{u}"))
        .collect();
    out.push(format!("{}s", secs % 60));
    out.join(" ")
}

/// `a=1, b=2` of a map's entries (`none` when empty).
fn entries(m: &std::collections::BTreeMap<String, u64>) -> String {
    if m.is_empty() {
        return "none".into();
    }
    m.iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// One command's answer as text.
fn render(s: &Snapshot) -> String {
    render_at(s, unix_now_ms())
}

/// [`render`] with times relative to `now_ms`.
fn render_at(s: &Snapshot, now_ms: u64) -> String {
    use std::fmt::Write;
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{} (pid {}, nena {}, up {})",
        s.role,
        s.pid,
        s.version,
        uptime(s.uptime_s)
    );
    for (k, v) in &s.about {
        let _ = writeln!(o, "  {k}: {v}");
    }
    let _ = writeln!(
        o,
        "  sessions: {} open; ended: {}; by mode: {}; handshakes: {} ({} resumed)",
        s.sessions_open,
        entries(&s.sessions_ended),
        entries(&s.sessions_by_mode),
        s.handshakes,
        s.resumed
    );
    let _ = writeln!(
        o,
        "  refusals: {}; integrity failures: {}",
        entries(&s.refusals),
        s.integrity_failures
    );
    if s.role != "serve" && s.role != "proxy_server" {
        let _ = writeln!(
            o,
            "  trusted link: {} waiting for it now, {} waits since the start, {} gave up",
            s.waiting_for_trusted_link, s.trusted_link_waits, s.trusted_link_wait_timeouts
        );
    }
    let table = |o: &mut String, title: &str, rows: &[PathFigures]| {
        if rows.is_empty() {
            let _ = writeln!(o, "  {title}: nothing carried yet");
            return;
        }
        let _ = writeln!(
            o,
            "  {title:<16} {:>10} {:>10}   {:>25}   {:>25}   {:>8}",
            "sent", "received", "last second (up / down)", "last minute (up / down)", "RTT"
        );
        for p in rows {
            let name = match (p.metered, p.today) {
                (true, Some((up, down))) => {
                    format!("{} (metered; today {})", p.name, human(up + down))
                }
                (true, None) => format!("{} (metered)", p.name),
                _ => p.name.clone(),
            };
            let rtt = p.rtt_ms.map_or("-".to_string(), |r| format!("{r:.1} ms"));
            let _ = writeln!(
                o,
                "  {name:<16} {:>10} {:>10}   {:>25}   {:>25}   {rtt:>8}",
                human(p.sent),
                human(p.received),
                format!("{} / {}", bits(p.sent_per_s_1s), bits(p.received_per_s_1s)),
                format!(
                    "{} / {}",
                    bits(p.sent_per_s_1min),
                    bits(p.received_per_s_1min)
                ),
            );
        }
    };
    if !s.links.is_empty() {
        let _ = writeln!(o, "  links:");
        for l in &s.links {
            let addrs: Vec<String> = l.addresses.iter().map(|a| a.to_string()).collect();
            let _ = writeln!(
                o,
                "    {:<12} {:<9}{} {:<4} for {:<12} {}",
                l.name,
                l.trust,
                if l.metered { " metered" } else { "" },
                if l.up { "up" } else { "DOWN" },
                ago(now_ms, l.since_unix_ms),
                if addrs.is_empty() {
                    "no address".to_string()
                } else {
                    addrs.join(" ")
                }
            );
        }
    }
    table(&mut o, "paths", &s.paths);
    if !s.interfaces.is_empty() {
        table(&mut o, "interfaces", &s.interfaces);
    }
    let last = |n: usize, len: usize| len.saturating_sub(n);
    if !s.link_events.is_empty() {
        let _ = writeln!(o, "  link events (the last 5):");
        for e in &s.link_events[last(5, s.link_events.len())..] {
            let _ = writeln!(
                o,
                "    {} ago: {} {}",
                ago(now_ms, e.unix_ms),
                e.name,
                e.event
            );
        }
    }
    if !s.recent.is_empty() {
        let _ = writeln!(o, "  refusals and integrity failures (the last 5):");
        for r in &s.recent[last(5, s.recent.len())..] {
            let cause = if r.cause.is_empty() {
                String::new()
            } else {
                format!(" ({})", r.cause)
            };
            let _ = writeln!(
                o,
                "    {} ago: {}{cause}",
                ago(now_ms, r.unix_s * 1000),
                r.outcome.replace('_', " ")
            );
        }
    }
    o
}

/// How long before `now_ms` the time `then_ms` was, as [`uptime`] writes it.
fn ago(now_ms: u64, then_ms: u64) -> String {
    uptime(now_ms.saturating_sub(then_ms) / 1000)
}

/// Milliseconds since the Unix epoch, now.
fn unix_now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A unit's socket one directory down is found; a stale one is removed; other files
    /// are left alone.
    #[test]
    fn sockets_are_found_one_directory_down_and_stale_ones_removed() {
        let dir = tempfile::tempdir().unwrap();
        let unit = dir.path().join("serve");
        std::fs::create_dir(&unit).unwrap();
        let live = unit.join("serve.sock");
        let _l = std::os::unix::net::UnixListener::bind(&live).unwrap();
        let stale = dir.path().join("gateway-1.sock");
        drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
        std::fs::write(dir.path().join("notes.txt"), "x").unwrap();
        assert_eq!(sockets_in(dir.path()), vec![live]);
        assert!(!stale.exists());
        assert!(dir.path().join("notes.txt").exists());
    }

    #[test]
    fn a_snapshot_reads_as_text() {
        let s = Snapshot {
            role: "proxy_client".into(),
            pid: 7,
            version: "0.1.0".into(),
            uptime_s: 75,
            sessions_open: 2,
            sessions_ended: [("ok".to_string(), 5u64)].into_iter().collect(),
            paths: vec![PathFigures {
                name: "trusted".into(),
                sent: 3_000_000,
                received: 9_000_000,
                sent_per_s_1s: 125_000.0,
                received_per_s_1s: 1_250_000.0,
                rtt_ms: Some(21.25),
                ..PathFigures::default()
            }],
            links: vec![status::LinkStatus {
                name: "wlan0".into(),
                trust: "untrusted".into(),
                metered: false,
                up: false,
                addresses: vec![],
                since_unix_ms: 1_000_000,
            }],
            link_events: vec![status::LinkEvent {
                unix_ms: 1_000_000,
                name: "wlan0".into(),
                event: "down".into(),
                addresses: vec![],
            }],
            recent: vec![nena_transport::ops::metrics::Recent {
                unix_s: 1_010,
                outcome: "refused".into(),
                cause: "not_allowed".into(),
            }],
            ..Snapshot::default()
        };
        let t = render_at(&s, 1_030_000);
        assert!(
            t.starts_with("proxy_client (pid 7, nena 0.1.0, up 1m 15s)"),
            "{t}"
        );
        assert!(t.contains("sessions: 2 open; ended: ok 5"), "{t}");
        assert!(t.contains("1.0 Mbit/s / 10.0 Mbit/s"), "{t}");
        assert!(t.contains("trusted link: 0 waiting"), "{t}");
        assert!(t.contains("21.2 ms"), "{t}");
        assert!(t.contains("wlan0        untrusted DOWN for 30s"), "{t}");
        assert!(t.contains("30s ago: wlan0 down"), "{t}");
        assert!(t.contains("20s ago: refused (not_allowed)"), "{t}");
    }
}
