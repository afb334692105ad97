//! `--mode kato-mpc` for the tools (`serve`, `send`, `get`, `perf`, `proxy`): nena-bpf's
//! `mpc::attachment::MpcAttachment` puts the negotiation programs on the interfaces the
//! command uses (nena-mptcp's `interfaces_owning` / `trusted_interfaces`) for as long as it
//! runs, with the thread that sweeps the server's stale records; here the transport gets a
//! lookup of what they recorded (read at once; the transport waits for keys on its
//! runtime's timer, and forgets each record once its connection is decided). The returned
//! [`Attached`] detaches the programs when dropped, which happens on a normal exit, on an
//! error, and on SIGINT or SIGTERM (SIGTERM is turned into SIGINT, which the tools already
//! stop on).

use nena_mptcp::path::{interfaces_owning, trusted_interfaces};
use nena_mptcp::PathSpec;
use nena_transport::conn::MpcLookup;
use std::net::SocketAddr;

/// The programs attached for one command; detached when dropped.
pub struct Attached {
    #[cfg(feature = "policy")]
    _attachment: nena_bpf::mpc::attachment::MpcAttachment,
}

/// The records of the programs on every interface of one command, for the transport.
#[cfg(feature = "policy")]
struct Records(nena_bpf::mpc::attachment::MpcReader);

#[cfg(feature = "policy")]
impl nena_transport::conn::MpcRecords for Records {
    fn read(
        &self,
        local: SocketAddr,
        remote: SocketAddr,
    ) -> Result<Option<nena_transport::conn::MpcSeen>, nena_transport::Error> {
        Ok(self
            .0
            .read(local, remote)?
            .map(|r| nena_transport::conn::MpcSeen {
                requested: r.requested,
                consented: r.consented,
                confirmed: r.confirmed,
                local_key: r.local_key,
                remote_key: r.remote_key,
            }))
    }

    fn forget(&self, local: SocketAddr, remote: SocketAddr) {
        self.0.forget(local, remote);
    }
}

/// A client's programs (on its trusted interfaces, for connections to `remote`'s port).
/// `none`: testing only, attach nothing (this side does not ask).
pub fn attach_client(
    trusted: &[PathSpec],
    remote: SocketAddr,
    none: bool,
) -> anyhow::Result<Option<(Attached, MpcLookup)>> {
    if none {
        return Ok(None);
    }
    let devs = trusted_interfaces(trusted)?;
    attach_for(&devs, remote.port(), false)
}

/// A server's programs (on the interfaces of its listening address).
pub fn attach_server(
    listen: SocketAddr,
    none: bool,
) -> anyhow::Result<Option<(Attached, MpcLookup)>> {
    if none {
        return Ok(None);
    }
    if listen.port() == 0 {
        anyhow::bail!("kato-mpc needs a fixed listening port (not 0)");
    }
    let devs = interfaces_owning(listen.ip())?;
    if devs.is_empty() {
        anyhow::bail!("no local interface has the address {}", listen.ip());
    }
    attach_for(&devs, listen.port(), true)
}

#[cfg(feature = "policy")]
fn attach_for(
    devs: &[String],
    port: u16,
    server: bool,
) -> anyhow::Result<Option<(Attached, MpcLookup)>> {
    use nena_bpf::mpc::attachment::MpcAttachment;
    use nena_bpf::mpc::MpcRole;
    let role = if server {
        MpcRole::Server
    } else {
        MpcRole::Client
    };
    let attachment = MpcAttachment::attach(devs, port, role)?;
    // SIGTERM becomes SIGINT, which the tools stop on cleanly (guards dropped).
    nena_transport::ops::stop::sigterm_as_sigint();
    let lookup = MpcLookup(std::sync::Arc::new(Records(attachment.reader())));
    Ok(Some((
        Attached {
            _attachment: attachment,
        },
        lookup,
    )))
}

#[cfg(not(feature = "policy"))]
fn attach_for(
    _devs: &[String],
    _port: u16,
    _server: bool,
) -> anyhow::Result<Option<(Attached, MpcLookup)>> {
    anyhow::bail!("kato-mpc needs BPF: this nena was built without the `policy` feature")
}
