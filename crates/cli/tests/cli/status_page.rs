//! The status page (`--status`, issue 58 item 2) in a real browser (root; Debian's
//! `chromium`, headless, in the lab's client host), driven over the DevTools protocol on a
//! pipe (`--remote-debugging-pipe`: JSON messages ended by NUL on descriptors 3 and 4): a
//! proxy client carries an echo session over both links while the page is open; the page
//! shows both links up and carrying, its chart moves, the WLAN (untrusted link) taken down
//! shows down within 2 s and the trusted link's share rises, and the link back shows up
//! again, with both changes on the page's time line.

use crate::harness::*;
use nena_lab::{Host, Link};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A pipe whose two ends are close-on-exec, each duplicated above 100 (so that placing them
/// on 3 and 4 in the child never collides with where they are).
fn pipe_high() -> (OwnedFd, OwnedFd) {
    let mut fds = [0 as RawFd; 2];
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    let high = |fd: RawFd| {
        let h = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 100) };
        assert!(h >= 100);
        unsafe { libc::close(fd) };
        unsafe { OwnedFd::from_raw_fd(h) }
    };
    (high(fds[0]), high(fds[1]))
}

/// Headless Chromium in a lab host, spoken to over the DevTools protocol on a pipe.
struct Browser {
    child: Child,
    to: std::fs::File,
    from: Receiver<Value>,
    next: u64,
    _profile: TempDir,
}

impl Browser {
    fn start(lab: &nena_lab::Lab, host: Host) -> Browser {
        let profile = TempDir::new("status-page-profile");
        let (their_in, our_out) = pipe_high();
        let (our_in, their_out) = pipe_high();
        let (r, w) = (their_in.as_raw_fd(), their_out.as_raw_fd());
        let profile_arg = format!("--user-data-dir={}", profile.path().display());
        let args = CHROMIUM_HEADLESS.into_iter().chain([
            "--remote-debugging-pipe",
            profile_arg.as_str(),
            "about:blank",
        ]);
        let mut cmd = lab.command(host, "chromium", args);
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // SAFETY: only async-signal-safe calls (dup2) between fork and exec.
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(&mut cmd, move || {
                if libc::dup2(r, 3) < 0 || libc::dup2(w, 4) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd
            .spawn()
            .expect("chromium (Debian package `chromium`, scripts/install-deps.sh)");
        drop((their_in, their_out));
        let (tx, rx) = std::sync::mpsc::channel();
        let mut from = std::fs::File::from(our_in);
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let mut chunk = [0u8; 65536];
            while let Ok(n) = from.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                buf.extend_from_slice(&chunk[..n]);
                while let Some(end) = buf.iter().position(|b| *b == 0) {
                    let msg: Vec<u8> = buf.drain(..=end).collect();
                    if let Ok(v) = serde_json::from_slice::<Value>(&msg[..end]) {
                        if tx.send(v).is_err() {
                            return;
                        }
                    }
                }
            }
        });
        Browser {
            child,
            to: std::fs::File::from(our_out),
            from: rx,
            next: 0,
            _profile: profile,
        }
    }

    /// One DevTools call (in `session`, if given): its result; panics on an error answer or
    /// none within 30 s.
    fn call(&mut self, session: Option<&str>, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = self.next;
        let mut msg = json!({"id": id, "method": method, "params": params});
        if let Some(s) = session {
            msg["sessionId"] = json!(s);
        }
        let mut bytes = serde_json::to_vec(&msg).unwrap();
        bytes.push(0);
        self.to.write_all(&bytes).expect("writing to chromium");
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.from.recv_timeout(left) {
                Ok(v) if v["id"] == json!(id) => {
                    assert!(v.get("error").is_none(), "{method}: {v}");
                    return v["result"].clone();
                }
                Ok(_) => continue, // an event, or another call's answer
                Err(RecvTimeoutError::Timeout) => panic!("{method}: no answer within 30 s"),
                Err(RecvTimeoutError::Disconnected) => panic!("{method}: chromium is gone"),
            }
        }
    }

    /// Open `url` in a new tab: the session to evaluate in.
    fn open(&mut self, url: &str) -> String {
        let t = self.call(None, "Target.createTarget", json!({ "url": url }));
        let a = self.call(
            None,
            "Target.attachToTarget",
            json!({"targetId": t["targetId"], "flatten": true}),
        );
        a["sessionId"].as_str().expect("a session id").to_string()
    }

    /// The value of a JavaScript expression in the tab of `session`.
    fn eval(&mut self, session: &str, expr: &str) -> Value {
        let r = self.call(
            Some(session),
            "Runtime.evaluate",
            json!({"expression": expr, "returnByValue": true}),
        );
        r["result"]["value"].clone()
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What the page shows, read from its DOM.
#[derive(Debug, Clone)]
struct Shown {
    /// Per link: up, bytes per second over the last second.
    links: std::collections::BTreeMap<String, (bool, f64)>,
    share: Option<f64>,
    /// Per series of the chart: its points.
    chart: std::collections::BTreeMap<String, String>,
    /// The time line: "LINK EVENT", newest first.
    events: Vec<String>,
    updated_ms: u64,
}

const READ_PAGE: &str = r#"JSON.stringify({
  links: [...document.querySelectorAll('#links tr[data-link]')].map(r => [r.dataset.link, r.dataset.up === 'true', +r.dataset.rate]),
  share: document.getElementById('share').dataset.value ?? null,
  chart: [...document.querySelectorAll('#chart polyline')].map(p => [p.dataset.series, p.getAttribute('points')]),
  events: [...document.querySelectorAll('#events li[data-event]')].map(e => e.dataset.link + ' ' + e.dataset.event),
  updated: +(document.getElementById('updated').dataset.ms || 0),
})"#;

/// What the page shows (none while it is still loading: its elements are not there yet).
fn shown(b: &mut Browser, session: &str) -> Option<Shown> {
    let v = b.eval(session, READ_PAGE);
    let v: Value = serde_json::from_str(v.as_str()?).unwrap();
    let links = v["links"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            let name = l[0].as_str().unwrap().to_string();
            (
                name,
                (l[1].as_bool().unwrap(), l[2].as_f64().unwrap_or(0.0)),
            )
        })
        .collect();
    let chart = v["chart"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c[0].as_str().unwrap_or_default().to_string(),
                c[1].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    Some(Shown {
        links,
        share: v["share"].as_str().and_then(|s| s.parse().ok()),
        chart,
        events: v["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e.as_str().unwrap().to_string())
            .collect(),
        updated_ms: v["updated"].as_u64().unwrap_or(0),
    })
}

/// Polls the page every 100 ms until `f` holds of what it shows: how long it took, and
/// what it showed then; panics after `timeout` with the last view.
fn until(
    b: &mut Browser,
    session: &str,
    what: &str,
    timeout: Duration,
    f: impl Fn(&Shown) -> bool,
) -> (Duration, Shown) {
    let start = Instant::now();
    loop {
        let s = shown(b, session);
        if let Some(s) = s.as_ref().filter(|s| f(s)) {
            return (start.elapsed(), s.clone());
        }
        assert!(
            start.elapsed() < timeout,
            "{what}: not within {timeout:?}: {s:#?}"
        );
        // sleep: the page updates twice a second; reading its DOM 10 times a second is enough.
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Echo traffic both ways through the proxy client at `entry` (client host) until dropped.
struct Load {
    stop: Arc<AtomicBool>,
    stream: TcpStream,
}

impl Load {
    fn start(lab: &nena_lab::Lab, entry: SocketAddr) -> Load {
        let stream = lab
            .run_in(Host::Client, move || TcpStream::connect(entry))
            .unwrap()
            .expect("connect to the proxy client");
        let stop = Arc::new(AtomicBool::new(false));
        let (mut w, mut r) = (stream.try_clone().unwrap(), stream.try_clone().unwrap());
        let s = stop.clone();
        std::thread::spawn(move || {
            let chunk = random(64 * 1024, 58);
            while !s.load(Ordering::Relaxed) && w.write_all(&chunk).is_ok() {}
        });
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 64 * 1024];
            while matches!(r.read(&mut buf), Ok(n) if n > 0) {}
        });
        Load { stop, stream }
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
    }
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn the_status_page_shows_both_links_carrying_and_the_wlan_going_down_and_back() {
    let lab = lab_with(|c| {
        c.trusted_rate = Some(nena_lab::Rate::mbit(10));
        c.untrusted_rate = Some(nena_lab::Rate::mbit(10));
    });
    let target: SocketAddr = "127.0.0.1:7410".parse().unwrap();
    let _echo = echo_server(&lab, target);
    let listen = server(&lab, 7411);
    let _ps = spawn_listening(
        &lab,
        Host::Server,
        &[
            "proxy",
            "server",
            "--listen",
            &listen,
            "--forward",
            "127.0.0.1:7410",
            "--no-control",
        ],
    );
    let mut args = vec![
        "proxy",
        "client",
        "--listen",
        "127.0.0.1:7412",
        "--to",
        &listen,
        "--no-control",
        "--status",
        "127.0.0.1:7413",
    ];
    args.extend_from_slice(&PATHS);
    let _pc = spawn_listening(&lab, Host::Client, &args);
    let _load = Load::start(&lab, "127.0.0.1:7412".parse().unwrap());

    let mut b = Browser::start(&lab, Host::Client);
    let tab = b.open("http://127.0.0.1:7413/");

    // Both links up and carrying (each at least 2.4 Mbit/s of the last second), and the
    // trusted share of the last 10 s below 90%.
    let carrying = |s: &Shown| {
        let both = ["trusted", "untrusted"].iter().all(|l| {
            s.links
                .get(*l)
                .is_some_and(|(up, rate)| *up && *rate > 300_000.0)
        });
        both && s.share.is_some_and(|x| x < 0.9)
    };
    let (_, before) = until(
        &mut b,
        &tab,
        "both links carrying",
        Duration::from_secs(30),
        carrying,
    );
    assert_eq!(before.chart.len(), 2, "{before:#?}");
    let share_before = before.share.unwrap();

    // The chart moves: the trusted series' points change from one update to the next.
    let first = before.chart["trusted"].clone();
    until(
        &mut b,
        &tab,
        "the chart moves",
        Duration::from_secs(10),
        |s| s.updated_ms > before.updated_ms && s.chart.get("trusted").is_some_and(|p| *p != first),
    );

    // The WLAN down: shown down within 2 s; the trusted share then rises.
    lab.set_link(Link::Untrusted, false).unwrap();
    let (took, _) = until(
        &mut b,
        &tab,
        "the WLAN shown down",
        Duration::from_secs(10),
        |s| s.links.get("untrusted").is_some_and(|(up, _)| !up),
    );
    eprintln!("the WLAN was shown down after {took:?}");
    assert!(
        took <= Duration::from_secs(2),
        "shown down only after {took:?}"
    );
    let (_, after) = until(
        &mut b,
        &tab,
        "the trusted share rises",
        Duration::from_secs(30),
        |s| s.share.is_some_and(|x| x > 0.95),
    );
    assert!(after.share.unwrap() > share_before);
    assert!(
        after.events.iter().any(|e| e == "untrusted down"),
        "{after:#?}"
    );

    // And back.
    lab.set_link(Link::Untrusted, true).unwrap();
    let (took, back) = until(
        &mut b,
        &tab,
        "the WLAN shown up",
        Duration::from_secs(10),
        |s| s.links.get("untrusted").is_some_and(|(up, _)| *up),
    );
    eprintln!("the WLAN was shown up again after {took:?}");
    assert!(
        took <= Duration::from_secs(2),
        "shown up only after {took:?}"
    );
    assert_eq!(
        back.events.first().map(String::as_str),
        Some("untrusted up"),
        "the newest event first: {back:#?}"
    );
}
