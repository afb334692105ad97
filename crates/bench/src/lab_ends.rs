//! The two ends the lab benches compare in one lab: `nena serve` (every mode) and a bare
//! kernel-MPTCP listener in the server host, a nena client's options over the lab's two
//! client links, and one raw kernel-MPTCP exchange
//! ([`nena_transport::baseline::raw_mptcp`]: its server end on a thread in the server host,
//! its client end on a thread in the client host, both counts checked). Used by
//! [`crate::transfer`] and [`crate::aggregation`].

use anyhow::{anyhow, bail, Context, Result};
use nena_lab::{start_nena_serve, Host, Lab, Link, NenaServer};
use nena_transport::baseline::raw_mptcp::{self, ClientRun, Outcome, Request};
use nena_transport::conn::ClientOptions;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};

/// `nena serve` on `nena_port` and the kernel-MPTCP listener on `raw_port`, in the server
/// host of a lab, with the served directory (removed when this is dropped, after the
/// server is stopped: fields drop in order).
pub struct Servers {
    pub nena: NenaServer,
    pub raw: TcpListener,
    pub raw_port: u16,
    dir: RemoveDir,
}

impl Servers {
    /// Starts both; `nena serve` serves (and stores into) a fresh directory named after the
    /// lab's `prefix`, which `prepare` may fill first.
    pub fn start(
        lab: &Lab,
        nena: &Path,
        nena_port: u16,
        raw_port: u16,
        prepare: impl FnOnce(&Path) -> Result<()>,
    ) -> Result<Servers> {
        let dir = std::env::temp_dir().join(format!("nena-bench-{}", lab.prefix()));
        std::fs::create_dir_all(&dir)?;
        // Removed on every way out from here on, errors included.
        let dir = RemoveDir(dir);
        prepare(&dir.0)?;
        let nena = start_nena_serve(lab, nena, nena_port, &dir.0)?;
        let raw_addr = SocketAddr::new(lab.server_addr(), raw_port);
        let raw = lab
            .run_in(Host::Server, || nena_mptcp::listen(raw_addr, None))?
            .with_context(|| format!("listening on {raw_addr} for the plain-MPTCP baseline"))?;
        Ok(Servers {
            nena,
            raw,
            raw_port,
            dir,
        })
    }

    /// The served directory.
    pub fn dir(&self) -> &Path {
        &self.dir.0
    }

    /// One raw kernel-MPTCP exchange `req` from the client's trusted address (the in-kernel
    /// path manager adds the untrusted subflow, as for any MPTCP application). Fails unless
    /// both ends counted the same bytes. Returns the client's run, the server's outcome, and
    /// the seconds of the client's part alone, from before its connect to its end (timed on
    /// its thread, without the threads' start).
    pub fn raw_exchange(&self, lab: &Lab, req: Request) -> Result<(ClientRun, Outcome, f64)> {
        let remote = SocketAddr::new(lab.server_addr(), self.raw_port);
        let local = SocketAddr::new(lab.client_addr(Link::Trusted), 0);
        let l = self.raw.try_clone()?;
        let server = lab.spawn_in(Host::Server, move || raw_mptcp::serve_one(&l));
        let (client, seconds) = lab.run_in(Host::Client, || {
            let t0 = std::time::Instant::now();
            let r = raw_mptcp::client(local, remote, req, None);
            (r, t0.elapsed().as_secs_f64())
        })?;
        let server = server
            .join()
            .map_err(|_| anyhow!("the raw MPTCP server thread panicked"))???;
        let client = client?;
        if client.outcome.bytes() != server.bytes() {
            bail!(
                "plain MPTCP: the client counted {} bytes, the server {}",
                client.outcome.bytes(),
                server.bytes()
            );
        }
        Ok((client, server, seconds))
    }
}

/// Removes a directory when dropped.
pub(crate) struct RemoveDir(pub(crate) PathBuf);

impl Drop for RemoveDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A nena client's options to `nena serve` on `port` of the lab's server, over the lab's
/// `trusted` and `untrusted` interfaces, offering `mode` alone.
pub fn client_options(lab: &Lab, port: u16, mode: nena_proto::Mode) -> ClientOptions {
    client_options_to(SocketAddr::new(lab.server_addr(), port), mode)
}

/// A nena client's options to `remote` over the lab's `trusted` and `untrusted` interfaces
/// (from inside the lab's client host), offering `mode` alone.
pub fn client_options_to(remote: SocketAddr, mode: nena_proto::Mode) -> ClientOptions {
    use nena_mptcp::{PathPolicy, PathSpec};
    ClientOptions::new(
        remote,
        PathPolicy {
            trusted: vec![PathSpec::Iface("trusted".into())],
            untrusted: vec![PathSpec::Iface("untrusted".into())],
        },
        vec![mode],
    )
}
