//! The control socket of a running command: a Unix socket, owner-only (its directory 0700,
//! the socket 0600, and a peer whose uid is neither the command's nor root's is closed
//! unanswered), that answers every connection with one JSON line, the command's
//! [`Snapshot`], and closes. [`ask`] is the other end (`nena status`).

use super::watch::{Snapshot, Watch};
use anyhow::{bail, Context, Result};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};

/// How long `nena status` waits for a command's answer.
pub const ASK_TIMEOUT: Duration = Duration::from_secs(3);

/// Where commands put their control sockets: /run/nena/control for root, else
/// `$XDG_RUNTIME_DIR/nena`, else /tmp/nena-UID.
pub fn default_dir() -> PathBuf {
    let uid = nix::unistd::geteuid();
    if uid.is_root() {
        return PathBuf::from("/run/nena/control");
    }
    match std::env::var_os("XDG_RUNTIME_DIR") {
        Some(d) if !d.is_empty() => PathBuf::from(d).join("nena"),
        _ => PathBuf::from(format!("/tmp/nena-{uid}")),
    }
}

/// The socket of a command in `role` with process id `pid` in `dir`.
pub fn socket_path(dir: &Path, role: &str, pid: u32) -> PathBuf {
    dir.join(format!("{role}-{pid}.sock"))
}

/// A control socket being served; removing it (and nothing else) when dropped.
#[derive(Debug)]
pub struct ControlSocket {
    pub path: PathBuf,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for ControlSocket {
    fn drop(&mut self) {
        self.task.abort();
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Binds the control socket at `path` (its directory made 0700 if it is new; a socket left
/// there by a command that is gone is replaced, one that answers is not) and serves
/// `watch`'s snapshots on it (on the current runtime).
pub async fn serve_control(path: &Path, watch: Arc<Watch>) -> Result<ControlSocket> {
    if let Some(dir) = path.parent() {
        if !dir.exists() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .with_context(|| format!("creating the control directory {}", dir.display()))?;
        }
    }
    if path.exists() {
        if UnixStream::connect(path).await.is_ok() {
            bail!(
                "the control socket {} answers: another command uses it (give --control PATH)",
                path.display()
            );
        }
        std::fs::remove_file(path)
            .with_context(|| format!("removing the stale control socket {}", path.display()))?;
    }
    // Owner-only from the moment it exists: bound under a umask that leaves no group or
    // other bits (umask is per process; the window is this call).
    let old = nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o177));
    let bound = UnixListener::bind(path);
    nix::sys::stat::umask(old);
    let listener =
        bound.with_context(|| format!("binding the control socket {}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .with_context(|| format!("making {} owner-only", path.display()))?;
    let me = nix::unistd::geteuid().as_raw();
    let task = tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = listener.accept().await else {
                continue;
            };
            let allowed = s.peer_cred().is_ok_and(|c| c.uid() == me || c.uid() == 0);
            if !allowed {
                log::warn!("control socket: a connection from another user; closed");
                continue;
            }
            let mut line = serde_json::to_vec(&watch.snapshot()).unwrap_or_default();
            line.push(b'\n');
            tokio::spawn(async move {
                let _ = tokio::time::timeout(ASK_TIMEOUT, s.write_all(&line)).await;
                let _ = s.shutdown().await;
            });
        }
    });
    Ok(ControlSocket {
        path: path.to_path_buf(),
        task,
    })
}

/// Asks the command at the control socket `path` for its figures.
pub async fn ask(path: &Path) -> Result<Snapshot> {
    let talk = async {
        let mut s = UnixStream::connect(path).await?;
        let mut buf = Vec::new();
        s.read_to_end(&mut buf).await?;
        anyhow::Ok(buf)
    };
    let buf = tokio::time::timeout(ASK_TIMEOUT, talk)
        .await
        .map_err(|_| anyhow::anyhow!("no answer within {ASK_TIMEOUT:?}"))?
        .with_context(|| format!("asking {}", path.display()))?;
    if buf.is_empty() {
        bail!(
            "{} closed without an answer (another user's command?)",
            path.display()
        );
    }
    serde_json::from_slice(&buf)
        .with_context(|| format!("the answer of {} is not a nena status", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::metrics::{Metrics, Role};

    /// The socket is owner-only, answers with the snapshot, refuses a second command on the
    /// same path, and is gone once dropped.
    #[tokio::test]
    async fn a_control_socket_answers_its_owner_and_is_removed() {
        let dir = tempfile::tempdir().unwrap();
        let path = socket_path(&dir.path().join("nena"), "serve", 4242);
        let w = Watch::new(Metrics::new(Role::Serve));
        w.tell("listen", "198.18.3.2:7000");
        let c = serve_control(&path, w.clone()).await.unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let dmode = std::fs::metadata(path.parent().unwrap())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(dmode & 0o777, 0o700);
        let s = ask(&path).await.unwrap();
        assert_eq!(s.role, "serve");
        assert_eq!(s.pid, std::process::id());
        assert_eq!(s.about, w.snapshot().about);
        let again = serve_control(&path, w.clone()).await.unwrap_err();
        assert!(format!("{again:#}").contains("answers"), "{again:#}");
        drop(c);
        assert!(!path.exists());
    }

    /// A socket file left by a command that is gone is replaced.
    #[tokio::test]
    async fn a_stale_socket_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("serve-1.sock");
        drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
        assert!(path.exists());
        let w = Watch::new(Metrics::new(Role::Serve));
        let _c = serve_control(&path, w).await.unwrap();
        assert_eq!(ask(&path).await.unwrap().role, "serve");
    }
}
