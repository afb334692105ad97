//! Test helpers: two network namespaces joined by two veth paths, MPTCP sockets created in a
//! namespace, a unique pin directory; everything removed on drop, even when a test fails.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::FromRawFd;
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

/// Client `c` and server `s`:
///   path 1: c1 198.18.100.1/24 <-> s1 198.18.100.2/24
///   path 2: c2 198.18.101.1/24 <-> s2 198.18.101.2/24
/// The client reaches 198.18.100.2 over path 2 from 198.18.101.1 (policy routing).
pub struct Net {
    pub c: String,
    pub s: String,
    /// A test-lab prefix (`nena_lab::unique_prefix`): the namespaces are `PREFIX-client` and
    /// `PREFIX-server`, so a test process killed before its drop leaves nothing for long:
    /// the next test process's first prefix tears them down (`reclaim_dead_test_labs`).
    prefix: String,
}

pub const SERVER: &str = "198.18.100.2";
pub const SERVER2: &str = "198.18.101.2";
pub const CLIENT2: &str = "198.18.101.1";

impl Net {
    pub fn new() -> Net {
        let prefix = nena_lab::unique_prefix();
        let net = Net {
            c: format!("{prefix}-client"),
            s: format!("{prefix}-server"),
            prefix,
        };
        run(&["ip", "netns", "add", &net.c]);
        run(&["ip", "netns", "add", &net.s]);
        for (i, (ca, sa)) in [
            ("198.18.100.1", "198.18.100.2"),
            ("198.18.101.1", "198.18.101.2"),
        ]
        .iter()
        .enumerate()
        {
            let (cd, sd) = (format!("c{}", i + 1), format!("s{}", i + 1));
            run(&[
                "ip", "link", "add", &cd, "netns", &net.c, "type", "veth", "peer", "name", &sd,
                "netns", &net.s,
            ]);
            net.sh_c(&format!(
                "ip addr add {ca}/24 dev {cd} && ip link set {cd} up"
            ));
            net.sh_s(&format!(
                "ip addr add {sa}/24 dev {sd} && ip link set {sd} up"
            ));
        }
        for ns in [&net.c, &net.s] {
            net.sh(ns, "ip link set lo up && sysctl -qw net.mptcp.enabled=1 && ip mptcp limits set subflow 2 add_addr_accepted 2");
        }
        net.sh_c("ip route add 198.18.100.2/32 dev c2 table 100 && ip rule add from 198.18.101.1 table 100");
        net
    }

    pub fn sh(&self, ns: &str, cmd: &str) -> String {
        run(&["ip", "netns", "exec", ns, "sh", "-c", cmd])
    }
    pub fn sh_c(&self, cmd: &str) -> String {
        self.sh(&self.c, cmd)
    }
    pub fn sh_s(&self, cmd: &str) -> String {
        self.sh(&self.s, cmd)
    }

    /// Run `f` on a thread that has entered namespace `ns`.
    pub fn in_ns<T: Send + 'static>(&self, ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
        let path = format!("/run/netns/{ns}");
        std::thread::spawn(move || {
            let fd = std::fs::File::open(&path).expect("netns file");
            use std::os::fd::AsRawFd;
            // SAFETY: setns on this thread only, with a valid namespace fd.
            let r = unsafe { libc::setns(fd.as_raw_fd(), libc::CLONE_NEWNET) };
            assert_eq!(r, 0, "setns {path}: {}", std::io::Error::last_os_error());
            f()
        })
        .join()
        .expect("thread in netns")
    }

    /// An MPTCP listener in `ns`.
    pub fn listen(&self, ns: &str, addr: &str) -> TcpListener {
        let a: SocketAddr = addr.parse().unwrap();
        self.in_ns(ns, move || {
            let fd = mptcp_socket();
            let l = unsafe { TcpListener::from_raw_fd(fd) };
            let sa = socket2_addr(&a);
            let one: libc::c_int = 1;
            unsafe {
                libc::setsockopt(
                    fd,
                    libc::SOL_SOCKET,
                    libc::SO_REUSEADDR,
                    &one as *const _ as _,
                    4,
                );
                assert_eq!(
                    libc::bind(
                        fd,
                        &sa as *const _ as _,
                        std::mem::size_of::<libc::sockaddr_in>() as u32
                    ),
                    0,
                    "bind"
                );
                assert_eq!(libc::listen(fd, 16), 0, "listen");
            }
            l
        })
    }

    /// An MPTCP connection from `ns`.
    pub fn connect(&self, ns: &str, addr: &str) -> TcpStream {
        let a: SocketAddr = addr.parse().unwrap();
        self.in_ns(ns, move || {
            let fd = mptcp_socket();
            let s = unsafe { TcpStream::from_raw_fd(fd) };
            let sa = socket2_addr(&a);
            let r = unsafe {
                libc::connect(
                    fd,
                    &sa as *const _ as _,
                    std::mem::size_of::<libc::sockaddr_in>() as u32,
                )
            };
            assert_eq!(r, 0, "connect {a}: {}", std::io::Error::last_os_error());
            s
        })
    }

    /// `ss -tneH` in a namespace (with each socket's uid, if not 0).
    pub fn ss_e(&self, ns: &str) -> String {
        self.sh(ns, "ss -tneH")
    }

    /// `ss -tni` in a namespace.
    pub fn ss(&self, ns: &str) -> String {
        self.sh(ns, "ss -tniH")
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        // As a lab goes down: processes left in the namespaces ended, then the namespaces.
        if let Err(e) = nena_lab::Lab::down(&self.prefix) {
            eprintln!("{e:#}");
        }
    }
}

/// An MPTCP connection made on the calling thread (which must be in the right namespace),
/// so that the socket gets this thread's credentials.
pub fn connect_here(addr: &str) -> TcpStream {
    let a: SocketAddr = addr.parse().unwrap();
    let fd = mptcp_socket();
    // SAFETY: fd is a new socket we own.
    let s = unsafe { TcpStream::from_raw_fd(fd) };
    let sa = socket2_addr(&a);
    // SAFETY: connect(2) with a sockaddr_in of the size given.
    let r = unsafe {
        libc::connect(
            fd,
            &sa as *const _ as _,
            std::mem::size_of::<libc::sockaddr_in>() as u32,
        )
    };
    assert_eq!(r, 0, "connect {a}: {}", std::io::Error::last_os_error());
    s
}

fn mptcp_socket() -> i32 {
    // SAFETY: plain socket(2).
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM, 262) };
    assert!(fd >= 0, "MPTCP socket: {}", std::io::Error::last_os_error());
    fd
}

fn socket2_addr(a: &SocketAddr) -> libc::sockaddr_in {
    let SocketAddr::V4(v4) = a else {
        panic!("IPv4 only here")
    };
    libc::sockaddr_in {
        sin_family: libc::AF_INET as u16,
        sin_port: v4.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from_ne_bytes(v4.ip().octets()),
        },
        sin_zero: [0; 8],
    }
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
    let echo = net.in_ns(&net.s.clone(), move || TcpListener::bind(addr).unwrap());
    let echo_t = std::thread::spawn(move || {
        let (mut e, _) = echo.accept().unwrap();
        let mut b = [0u8; 1];
        while e.read_exact(&mut b).is_ok() && e.write_all(&b).is_ok() {}
    });
    let mut pc = net.in_ns(&net.c.clone(), move || TcpStream::connect(addr).unwrap());
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

/// Wait until `f` is true, polling, for at most `d`.
pub fn wait_until(d: Duration, mut f: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while start.elapsed() < d {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    f()
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
        std::thread::sleep(Duration::from_millis(300));
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
            &net.c,
            ctap,
            &net.s,
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
