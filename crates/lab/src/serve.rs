//! `nena serve` (or another listening nena command) in a lab host, for the runs that
//! measure nena (the transfer and sessions benchmarks, the scenario runner): started, waited
//! for until it listens, killed when dropped.

use crate::{Host, Lab};
use anyhow::{anyhow, bail, Context, Result};
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::Duration;

/// A `nena serve` process, killed (and reaped) on drop.
pub struct NenaServer(Child);

impl NenaServer {
    /// The server process's pid.
    pub fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for NenaServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Start `nena serve` (the binary `nena`) in the lab's server host on `port` (at
/// [`Lab::server_listen_addr`]) (every mode
/// accepted, `plain` included), storing into `dir`, and wait until it listens. Killed when
/// dropped.
pub fn start_nena_serve(lab: &Lab, nena: &Path, port: u16, dir: &Path) -> Result<NenaServer> {
    let listen = lab.server_listen_addr(port).to_string();
    let mut args = vec![
        "serve".to_string(),
        "--listen".into(),
        listen,
        "--dir".into(),
        dir.display().to_string(),
    ];
    args.extend(["--mode".into(), "aead,stream,kato,plain".into()]);
    start_nena(lab, Host::Server, nena, &args, &[])
}

/// Start `nena ARGS` (a command that prints "listening on ..." as its first line: `serve`,
/// `proxy server`, `proxy client`) in `host` with the environment `env` added, and wait
/// until it listens. Its standard error is this process's. Killed when dropped.
pub fn start_nena(
    lab: &Lab,
    host: Host,
    nena: &Path,
    args: &[String],
    env: &[(&str, &str)],
) -> Result<NenaServer> {
    let what = args
        .iter()
        .take_while(|a| !a.starts_with('-'))
        .cloned()
        .collect::<Vec<_>>()
        .join(" ");
    let mut cmd = lab.command(host, nena, args);
    cmd.envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let mut child = cmd
        .spawn()
        .with_context(|| format!("starting nena {what} in the lab"))?;
    // Wait for its "listening on" line.
    let out = child.stdout.take().ok_or_else(|| anyhow!("no stdout"))?;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        let mut lines = std::io::BufReader::new(out).lines();
        if let Some(Ok(l)) = lines.next() {
            let _ = tx.send(l);
        }
        for _ in lines {}
    });
    let server = NenaServer(child);
    match rx.recv_timeout(Duration::from_secs(10)) {
        Ok(l) if l.contains("listening on") => Ok(server),
        Ok(l) => bail!("nena {what} said {l:?} instead of listening"),
        Err(_) => bail!("nena {what} did not start listening within 10s"),
    }
}
