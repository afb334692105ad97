//! Test helpers: nena-lab's two hosts joined by two veth paths ([`Net`]) with panicking
//! conveniences, a unique pin directory, captures, a delayed path; everything removed on
//! drop, even when a test fails.
#![allow(dead_code)]

pub mod gate;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

static N: AtomicU32 = AtomicU32::new(0);

/// Tests that measure time or rate run one at a time (they would load each other).
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    ONE.lock().unwrap_or_else(|e| e.into_inner())
}

fn uniq() -> String {
    format!(
        "{}{}",
        std::process::id() % 100000,
        N.fetch_add(1, Ordering::SeqCst)
    )
}

/// Run a command, panic with its output if it fails.
pub fn run(args: &[&str]) -> String {
    let o = Command::new(args[0])
        .args(&args[1..])
        .output()
        .unwrap_or_else(|e| panic!("{args:?}: {e}"));
    if !o.status.success() {
        panic!(
            "{args:?} failed: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
    }
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The tests' two hosts: nena-lab's [`DirectHosts`](nena_lab::DirectHosts) (client `c1`/`c2`
/// 198.18.100.1 and 198.18.101.1, server `s1`/`s2` 198.18.100.2 and 198.18.101.2).
pub type Net = nena_lab::DirectHosts;

pub const SERVER: &str = "198.18.100.2";
pub const SERVER2: &str = "198.18.101.2";
pub const CLIENT2: &str = "198.18.101.1";

/// The pair's operations as tests use them: a failure panics with the error.
pub trait NetExt {
    fn new() -> Self;
    fn sh(&self, ns: &str, cmd: &str) -> String;
    fn sh_c(&self, cmd: &str) -> String;
    fn sh_s(&self, cmd: &str) -> String;
    fn in_ns<T: Send>(&self, ns: &str, f: impl FnOnce() -> T + Send) -> T;
    fn listen(&self, ns: &str, addr: &str) -> TcpListener;
    fn connect(&self, ns: &str, addr: &str) -> TcpStream;
    /// `ss -tneH` in a namespace (with each socket's uid, if not 0).
    fn ss_e(&self, ns: &str) -> String;
    /// `ss -tniH` in a namespace.
    fn ss(&self, ns: &str) -> String;
}

impl NetExt for Net {
    fn new() -> Net {
        nena_lab::DirectHosts::up().expect("the two hosts and their paths")
    }
    fn sh(&self, ns: &str, cmd: &str) -> String {
        self.shell(ns, cmd).unwrap_or_else(|e| panic!("{e:#}"))
    }
    fn sh_c(&self, cmd: &str) -> String {
        self.sh(&self.client, cmd)
    }
    fn sh_s(&self, cmd: &str) -> String {
        self.sh(&self.server, cmd)
    }
    fn in_ns<T: Send>(&self, ns: &str, f: impl FnOnce() -> T + Send) -> T {
        self.run_in(ns, f).unwrap_or_else(|e| panic!("{e:#}"))
    }
    fn listen(&self, ns: &str, addr: &str) -> TcpListener {
        self.mptcp_listener(ns, addr.parse().unwrap())
            .unwrap_or_else(|e| panic!("{e:#}"))
    }
    fn connect(&self, ns: &str, addr: &str) -> TcpStream {
        self.mptcp_connect(ns, addr.parse().unwrap())
            .unwrap_or_else(|e| panic!("{e:#}"))
    }
    fn ss_e(&self, ns: &str) -> String {
        self.sh(ns, "ss -tneH")
    }
    fn ss(&self, ns: &str) -> String {
        self.sh(ns, "ss -tniH")
    }
}

/// An MPTCP connection made on the calling thread (which must be in the right namespace),
/// so that the socket gets this thread's credentials.
pub fn connect_here(addr: &str) -> TcpStream {
    let a: SocketAddr = addr.parse().unwrap();
    let s = nena_lab::mptcp_socket(a).expect("an MPTCP socket");
    s.connect(&a.into())
        .unwrap_or_else(|e| panic!("connect {a}: {e}"));
    s.into()
}

/// A unique pin directory under /sys/fs/bpf, removed on drop.
pub struct Pins(pub PathBuf);

impl Pins {
    pub fn new() -> Pins {
        nena_bpf::chains::loader::ensure_bpffs().unwrap();
        Pins(PathBuf::from(format!("/sys/fs/bpf/nena-t{}", uniq())))
    }
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Pins {
    fn drop(&mut self) {
        let _ = nena_bpf::chains::loader::remove_pins(&self.0);
    }
}

/// Accept one connection and stream `n` bytes to it, on a thread.
pub fn serve_bytes(l: TcpListener, n: usize) -> std::thread::JoinHandle<std::io::Result<()>> {
    std::thread::spawn(move || {
        let (mut s, _) = l.accept()?;
        s.set_write_timeout(Some(Duration::from_secs(2)))?;
        let buf = vec![0x5au8; 64 * 1024];
        let mut left = n;
        while left > 0 {
            let k = left.min(buf.len());
            s.write_all(&buf[..k])?;
            left -= k;
        }
        Ok(())
    })
}

/// Accept one connection and read until EOF, on a thread; returns the byte count.
pub fn sink(l: TcpListener) -> std::thread::JoinHandle<std::io::Result<u64>> {
    std::thread::spawn(move || {
        let (mut s, _) = l.accept()?;
        std::io::copy(&mut s, &mut std::io::sink())
    })
}

/// Read from `s` for at most `d` or until EOF; returns bytes read.
pub fn read_for(s: &mut TcpStream, d: Duration) -> u64 {
    s.set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let start = Instant::now();
    let mut buf = vec![0u8; 64 * 1024];
    let mut n = 0u64;
    while start.elapsed() < d {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(k) => n += k as u64,
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(e) => panic!("read: {e}"),
        }
    }
    n
}

/// Round-trip times of `n` one-byte ping-pongs over plain TCP from the client namespace to an
/// echo server bound to `addr` in the server namespace (an idle path's RTT), sorted.
pub fn ping_rtts(net: &Net, addr: &'static str, n: usize) -> Vec<Duration> {
    let echo = net.in_ns(&net.server.clone(), move || {
        TcpListener::bind(addr).unwrap()
    });
    let echo_t = std::thread::spawn(move || {
        let (mut e, _) = echo.accept().unwrap();
        let mut b = [0u8; 1];
        while e.read_exact(&mut b).is_ok() && e.write_all(&b).is_ok() {}
    });
    let mut pc = net.in_ns(&net.client.clone(), move || {
        TcpStream::connect(addr).unwrap()
    });
    pc.set_nodelay(true).unwrap();
    let mut rtts = vec![];
    for _ in 0..n {
        let t = Instant::now();
        let mut b = [7u8; 1];
        pc.write_all(&b).unwrap();
        pc.read_exact(&mut b).unwrap();
        rtts.push(t.elapsed());
    }
    drop(pc);
    let _ = echo_t.join();
    rtts.sort();
    rtts
}

/// tcpdump in a namespace, to a pcap file; stopped (by pid) on drop.
pub struct Capture {
    child: std::process::Child,
    file: std::path::PathBuf,
}

impl Capture {
    pub fn start(ns: &str, dev: &str) -> Capture {
        let file = std::env::temp_dir().join(format!("nena-policy-{ns}-{dev}.pcap"));
        let mut child = std::process::Command::new("ip")
            .args(["netns", "exec", ns, "tcpdump", "-U", "-n", "-i", dev, "-w"])
            .arg(&file)
            .arg("tcp")
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("tcpdump");
        // Until tcpdump says it listens (its file exists earlier than that); then its
        // stderr is drained so that it never blocks on a full pipe.
        let (tx, rx) = std::sync::mpsc::channel();
        let err = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for l in std::io::BufReader::new(err).lines().map_while(Result::ok) {
                if l.contains("listening on") {
                    let _ = tx.send(());
                }
            }
        });
        // (killed by Drop if it never does)
        let c = Capture { child, file };
        if rx.recv_timeout(Duration::from_secs(5)).is_err() {
            panic!("tcpdump in {ns} on {dev} did not say `listening on` within 5 s");
        }
        c
    }
    pub fn frames(&mut self) -> Vec<Vec<u8>> {
        self.timed_frames().into_iter().map(|(_, f)| f).collect()
    }

    /// Frames with their capture time (wall clock, as SystemTime).
    pub fn timed_frames(&mut self) -> Vec<(std::time::SystemTime, Vec<u8>)> {
        // tcpdump drops what it has not read when interrupted: until its file stops growing
        nena_testkit::wait_settled(Duration::from_millis(100), Duration::from_secs(2), || {
            std::fs::metadata(&self.file).map(|m| m.len()).unwrap_or(0)
        });
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        let _ = self.child.wait();
        let data = std::fs::read(&self.file).unwrap();
        let mut r = pcap_file::pcap::PcapReader::new(&data[..]).unwrap();
        let mut v = vec![];
        while let Some(p) = r.next_packet() {
            let p = p.unwrap();
            v.push((std::time::UNIX_EPOCH + p.timestamp, p.data.to_vec()));
        }
        v
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.file);
    }
}

/// A path with delay, without netem: a tap device in each of two namespaces and the lab's
/// user-space relay between them (`nena_lab::emulate::TapLink`, the lab's link emulator run
/// in this process) that holds every frame for `delay` (each way). The relay keeps the vCPUs
/// awake and runs at real-time priority so that the delay holds on a busy host (see
/// crates/lab/src/emulate/relay.rs).
pub struct DelayLink {
    _link: nena_lab::emulate::TapLink,
}

impl DelayLink {
    /// `ca`/`sa`: addresses (with prefix) of the client's and the server's tap.
    pub fn new(
        net: &Net,
        ctap: &str,
        ca: &str,
        stap: &str,
        sa: &str,
        delay: Duration,
    ) -> DelayLink {
        let link = nena_lab::emulate::TapLink::new(
            &net.client,
            ctap,
            &net.server,
            stap,
            nena_lab::LinkEmulation::both(nena_lab::Emulation {
                delay,
                ..nena_lab::Emulation::default()
            }),
        )
        .expect("tap link");
        net.sh_c(&format!(
            "ip addr add {ca} dev {ctap} && ip link set {ctap} up"
        ));
        net.sh_s(&format!(
            "ip addr add {sa} dev {stap} && ip link set {stap} up"
        ));
        DelayLink { _link: link }
    }
}
