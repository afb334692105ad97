//! Root test of `nena_mptcp::mptcpize`: a child that installed the filter gets MPTCP sockets
//! for its `socket(AF_INET, SOCK_STREAM, 0)`, counted by the parent's `Mptcpizer`; once the
//! `Mptcpizer` is dropped its thread has ended. The child is python3 (as `nena run`'s CMD
//! would be), which makes one TCP socket and exits with whether the kernel made it MPTCP.

use nena_mptcp::mptcpize::{pair, Mptcpizer};
use std::os::unix::process::CommandExt;
use std::process::Command;

/// The child: one TCP socket (`socket.socket()`: AF_INET, SOCK_STREAM | SOCK_CLOEXEC,
/// protocol 0); exit status 0 when it is MPTCP (SO_PROTOCOL 262), 1 when not.
const CHILD: &str = "import socket, sys\n\
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)\n\
sys.exit(0 if s.getsockopt(socket.SOL_SOCKET, socket.SO_PROTOCOL) == 262 else 1)\n";

fn mptcp_available() -> bool {
    // SAFETY: a socket we close at once.
    unsafe {
        let s = libc::socket(libc::AF_INET, libc::SOCK_STREAM, libc::IPPROTO_MPTCP);
        if s < 0 {
            return false;
        }
        libc::close(s);
    }
    true
}

#[test]
fn a_filtered_childs_tcp_socket_is_mptcp() {
    if !mptcp_available() {
        eprintln!("skipped: no MPTCP sockets in this namespace");
        return;
    }
    let (parent, child) = pair().unwrap();
    // Not blind: without the filter the same child's socket is plain TCP.
    let plain = Command::new("python3")
        .args(["-c", CHILD])
        .status()
        .unwrap();
    assert_eq!(
        plain.code(),
        Some(1),
        "an unfiltered socket was already MPTCP"
    );
    let mut cmd = Command::new("python3");
    cmd.args(["-c", CHILD]);
    // SAFETY: install() makes only system calls (seccomp, sendmsg, close, prctl).
    unsafe {
        cmd.pre_exec(move || child.install());
    }
    let mut proc_ = Reap(cmd.spawn().unwrap());
    let server: Mptcpizer = parent.serve().unwrap();
    let status = proc_.0.wait().unwrap();
    assert_eq!(status.code(), Some(0), "the child's socket was not MPTCP");
    assert!(server.made() >= 1, "made {}", server.made());
    // Dropping it ends its thread (joined): it must not hang.
    drop(server);
}

/// Kills and reaps the child when the test ends, failed or not.
struct Reap(std::process::Child);

impl Drop for Reap {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn dropping_an_mptcpizer_while_its_child_runs_ends_its_thread() {
    let (parent, child) = pair().unwrap();
    let mut cmd = Command::new("sleep");
    cmd.arg("30");
    // SAFETY: as above.
    unsafe {
        cmd.pre_exec(move || child.install());
    }
    let _child = Reap(cmd.spawn().unwrap());
    let server = parent.serve().unwrap();
    let t = std::time::Instant::now();
    drop(server); // joins the thread: returns only if the thread ended
    assert!(t.elapsed() < std::time::Duration::from_secs(5));
}
