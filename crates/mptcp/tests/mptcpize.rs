//! Root test of `nena_mptcp::mptcpize`: a child that installed the filter gets MPTCP sockets
//! for its `socket(AF_INET, SOCK_STREAM, 0)`, counted by the parent's `Mptcpizer`; once the
//! `Mptcpizer` is dropped its thread has ended. The child is this test binary itself, run
//! again with `MPTCPIZE_CHILD` set (it exits with the protocol of the socket it made).

use nena_mptcp::mptcpize::{pair, Mptcpizer};
use std::os::unix::process::CommandExt;
use std::process::Command;

const CHILD: &str = "MPTCPIZE_CHILD";

/// In the child: one TCP socket, exit status 0 when it is MPTCP (SO_PROTOCOL), 1 when not,
/// 2 when it cannot be created.
#[test]
fn child_makes_a_socket() {
    if std::env::var_os(CHILD).is_none() {
        return;
    }
    // SAFETY: plain system calls on a socket of our own.
    let code = unsafe {
        let s = libc::socket(libc::AF_INET, libc::SOCK_STREAM, 0);
        if s < 0 {
            2
        } else {
            let mut proto: libc::c_int = 0;
            let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
            libc::getsockopt(
                s,
                libc::SOL_SOCKET,
                libc::SO_PROTOCOL,
                (&mut proto as *mut libc::c_int).cast(),
                &mut len,
            );
            i32::from(proto != libc::IPPROTO_MPTCP)
        }
    };
    std::process::exit(code);
}

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
    if std::env::var_os(CHILD).is_some() {
        return;
    }
    if !mptcp_available() {
        eprintln!("skipped: no MPTCP sockets in this namespace");
        return;
    }
    let (parent, child) = pair().unwrap();
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", "child_makes_a_socket", "--test-threads=1"])
        .env(CHILD, "1");
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
    if std::env::var_os(CHILD).is_some() {
        return;
    }
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
