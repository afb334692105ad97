//! `nena_bpf::cgroup::OwnCgroup` (root): a child that joined the cgroup between fork and exec
//! is in it; dropping the guard kills what is left and removes the directory, a child that
//! is still running included.

use nena_bpf::cgroup::OwnCgroup;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::time::Duration;

/// Kills and reaps the child when the test ends, failed or not.
struct Reap(std::process::Child);

impl Drop for Reap {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn a_joined_child_is_killed_and_the_cgroup_removed_on_drop() {
    let cg = OwnCgroup::create("nena-test-cg").unwrap();
    let dir = cg.dir().to_path_buf();
    assert!(dir.is_dir(), "{}", dir.display());
    let name = dir.file_name().unwrap().to_string_lossy().into_owned();
    assert!(name.starts_with("nena-test-cg-"), "{name}");
    assert!(!cg.populated());

    let joiner = cg.joiner().unwrap();
    let mut cmd = Command::new("sleep");
    cmd.arg("30");
    // SAFETY: join() makes only system calls (open, write, close).
    unsafe {
        cmd.pre_exec(move || joiner.join());
    }
    let mut child = Reap(cmd.spawn().unwrap());
    let pid = child.0.id().to_string();
    let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap();
    assert!(procs.lines().any(|l| l == pid), "{pid} not in {procs:?}");
    assert!(cg.populated());

    drop(cg);
    assert!(!dir.exists(), "{} is left", dir.display());
    // cgroup.kill killed the child: it ends by SIGKILL.
    let status = nena_testkit::wait_for(
        "the child's end by its cgroup",
        Duration::from_secs(5),
        || child.0.try_wait().unwrap(),
    );
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(libc::SIGKILL));
}

#[test]
#[cfg_attr(not(feature = "netns"), ignore = "needs root: --features netns")]
fn an_empty_cgroup_goes_on_remove_and_drop_then_does_nothing() {
    let mut cg = OwnCgroup::create("nena-test-cg").unwrap();
    let dir = cg.dir().to_path_buf();
    cg.remove();
    assert!(!dir.exists());
    drop(cg);
}
