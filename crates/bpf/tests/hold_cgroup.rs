//! The first-flight hold checked (root, BPF, cgroup v2; a test binary of its own, since it
//! moves the whole test process between cgroups and makes the process's one hold): the hold
//! is attached to the cgroup the process was in when it was made; the process then moves to
//! another cgroup (as systemd or a container runtime may move it), so the program never sees
//! the connection's packets. The kernel's retransmission of a first flight the trusted path
//! never acknowledges leaves by the untrusted subflow, undropped, and the gate refuses the
//! connection in one line naming the hold, instead of taking those bytes for held ones.

mod common;

use common::gate::*;
use common::*;
use std::io::Write;
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::time::Duration;

/// Two cgroups of the test's own under the cgroup2 root; on drop the process goes back to
/// the cgroup it was in and both are removed.
struct Cgroups {
    home: PathBuf,
    made: Vec<PathBuf>,
}

impl Cgroups {
    fn new(names: &[&str]) -> Cgroups {
        let root = nena_bpf::cgroup::cgroup2_mount().expect("a cgroup2 mount");
        let own = std::fs::read_to_string("/proc/self/cgroup").unwrap();
        let rel = own
            .lines()
            .find_map(|l| l.strip_prefix("0::"))
            .expect("a cgroup v2 path")
            .trim()
            .trim_start_matches('/')
            .to_string();
        let mut c = Cgroups {
            home: root.join(rel),
            made: Vec::new(),
        };
        for n in names {
            let d = root.join(format!("nena-hold-test-{}-{n}", std::process::id()));
            std::fs::create_dir(&d).unwrap_or_else(|e| panic!("mkdir {}: {e}", d.display()));
            c.made.push(d);
        }
        c
    }

    /// Moves the whole process (every thread) into `dir`.
    fn enter(dir: &std::path::Path) {
        std::fs::write(dir.join("cgroup.procs"), std::process::id().to_string())
            .unwrap_or_else(|e| panic!("moving into {}: {e}", dir.display()));
    }
}

impl Drop for Cgroups {
    fn drop(&mut self) {
        let _ = std::fs::write(
            self.home.join("cgroup.procs"),
            std::process::id().to_string(),
        );
        for d in &self.made {
            // (a child that was spawned in it may take a moment to be reaped)
            let _ = nena_testkit::poll_until(Duration::from_secs(5), || {
                std::fs::remove_dir(d).is_ok() || !d.exists()
            });
        }
    }
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn bytes_sent_on_an_untrusted_subflow_without_a_drop_counted_refuse_naming_the_hold() {
    let cgroups = Cgroups::new(&["held", "elsewhere"]);
    let net = Net::new();
    unacknowledged_first_flight(&net, "5320");
    let l = net.listen(&net.server, &format!("{SERVER}:5320"));
    let server = std::thread::spawn(move || {
        let (mut s, _) = l.accept()?;
        s.set_read_timeout(Some(Duration::from_secs(10)))?;
        let mut got = Vec::new();
        let _ = std::io::Read::read_to_end(&mut s, &mut got);
        Ok::<_, std::io::Error>(got.len())
    });
    // The hold is made (and attached) in the first cgroup, then the process moves.
    Cgroups::enter(&cgroups.made[0]);
    nena_mptcp::hold::provide(nena_bpf::hold::BpfHold::factory);
    // (the first look makes the hold, attached to the cgroup the process is in now)
    let _ = nena_mptcp::hold::held(1);
    Cgroups::enter(&cgroups.made[1]);
    let (err, joined) = net.in_ns(&net.client.clone(), || {
        let remote = format!("{SERVER}:5320").parse().unwrap();
        let mut c = nena_mptcp::connect(remote, &gate_opts(Duration::from_secs(5)))
            .expect("connecting over the trusted path");
        let token = nena_mptcp::info(c.stream.as_fd()).unwrap().token;
        assert_eq!(
            nena_mptcp::hold::held(token),
            Some(0),
            "the connection is not held"
        );
        let joined = nena_testkit::poll_until(Duration::from_secs(3), || {
            nena_mptcp::subflows(c.stream.as_fd())
                .unwrap()
                .iter()
                .any(|s| s.local.is_some_and(|a| a.ip().to_string() == CLIENT2))
        });
        c.before_first_flight().unwrap();
        c.stream.write_all(&hello()).unwrap();
        let err = c
            .wait_first_flight_acked(hello().len() as u64, Duration::from_secs(5))
            .expect_err("the gate must not proceed");
        (err, joined)
    });
    assert!(joined, "no subflow over c2: nothing tested");
    assert!(
        matches!(
            err,
            nena_mptcp::MptcpError::Refused(nena_mptcp::Refusal::HoldNotInEffect { .. })
        ),
        "{err}"
    );
    let line = err.to_string();
    assert!(!line.contains('\n'), "{line}");
    assert!(
        line.contains("first-flight hold") && line.contains("another cgroup"),
        "{line}"
    );
    let _ = server.join();
    drop(net);
    drop(cgroups);
}
