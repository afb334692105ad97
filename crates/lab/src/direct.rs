//! Two hosts joined directly by two veth paths, without the lab's router, relay or
//! source-based rules on the server: the smallest two-path MPTCP setting, for tests of
//! programs attached to one end's interfaces (the BPF chains and tenants, kato-mpc).
//!
//! ```text
//!   PREFIX-client                       PREFIX-server
//!     c1 198.18.100.1/24 ─── path 1 ─── s1 198.18.100.2/24
//!     c2 198.18.101.1/24 ─── path 2 ─── s2 198.18.101.2/24
//! ```
//!
//! The client reaches the server's first address over path 2 too, from 198.18.101.1 (a
//! source-based rule), so the in-kernel path manager can join it there. The namespaces are
//! named like a lab's (`PREFIX-client`, `PREFIX-server`, PREFIX from
//! [`unique_prefix`](crate::unique_prefix)), so [`Lab::down`](crate::Lab::down) removes them
//! with the processes left inside, on drop and after a crash alike.

use crate::hostns::{host_netns, mptcp_limits, sysctl_in};
use crate::netns;
use crate::run::{ip, netns_exec, run};
use anyhow::{Context, Result};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};

/// One path of [`DirectHosts`]: a veth pair and its two addresses (/24).
#[derive(Debug, Clone, Copy)]
pub struct DirectPath {
    /// The client's end of the veth pair (`c1`, `c2`).
    pub client_dev: &'static str,
    pub client_addr: Ipv4Addr,
    /// The server's end (`s1`, `s2`).
    pub server_dev: &'static str,
    pub server_addr: Ipv4Addr,
}

/// The two paths of [`DirectHosts::up`].
pub const DIRECT_PATHS: [DirectPath; 2] = [
    DirectPath {
        client_dev: "c1",
        client_addr: Ipv4Addr::new(198, 18, 100, 1),
        server_dev: "s1",
        server_addr: Ipv4Addr::new(198, 18, 100, 2),
    },
    DirectPath {
        client_dev: "c2",
        client_addr: Ipv4Addr::new(198, 18, 101, 1),
        server_dev: "s2",
        server_addr: Ipv4Addr::new(198, 18, 101, 2),
    },
];

/// A client and a server namespace joined by [`DIRECT_PATHS`]; both removed on drop.
#[derive(Debug)]
pub struct DirectHosts {
    /// The client's namespace (`PREFIX-client`).
    pub client: String,
    /// The server's namespace (`PREFIX-server`).
    pub server: String,
    prefix: String,
}

impl DirectHosts {
    /// Build the two hosts and their paths under a new unique prefix, MPTCP enabled with
    /// two subflows and two accepted addresses on each side.
    pub fn up() -> Result<DirectHosts> {
        let prefix = crate::unique_prefix();
        // From here on, a failure drops the half-built pair, which removes it.
        let pair = DirectHosts {
            client: format!("{prefix}-client"),
            server: format!("{prefix}-server"),
            prefix,
        };
        for ns in [&pair.client, &pair.server] {
            host_netns(ns)?;
            sysctl_in(ns, "net.mptcp.enabled", "1")?;
            mptcp_limits(ns)?;
        }
        for p in DIRECT_PATHS {
            run(ip(
                None,
                &[
                    "link",
                    "add",
                    p.client_dev,
                    "netns",
                    &pair.client,
                    "type",
                    "veth",
                    "peer",
                    "name",
                    p.server_dev,
                    "netns",
                    &pair.server,
                ],
            ))?;
            for (ns, dev, addr) in [
                (&pair.client, p.client_dev, p.client_addr),
                (&pair.server, p.server_dev, p.server_addr),
            ] {
                run(ip(
                    Some(ns),
                    &["addr", "add", &format!("{addr}/24"), "dev", dev],
                ))?;
                run(ip(Some(ns), &["link", "set", dev, "up"]))?;
            }
        }
        let [first, second] = DIRECT_PATHS;
        let to_first = format!("{}/32", first.server_addr);
        run(ip(
            Some(&pair.client),
            &[
                "route",
                "add",
                &to_first,
                "dev",
                second.client_dev,
                "table",
                "100",
            ],
        ))?;
        let from_second = second.client_addr.to_string();
        run(ip(
            Some(&pair.client),
            &["rule", "add", "from", &from_second, "table", "100"],
        ))?;
        Ok(pair)
    }

    /// `sh -c CMD` inside the namespace `ns`; its stdout, or an error naming the command
    /// with its stderr.
    pub fn shell(&self, ns: &str, cmd: &str) -> Result<String> {
        let mut c = netns_exec(ns, "sh");
        c.args(["-c", cmd]);
        run(c)
    }

    /// Run `f` on a thread inside the namespace `ns` and return its result. Sockets made
    /// there stay in that namespace wherever they are used.
    pub fn run_in<T: Send>(&self, ns: &str, f: impl FnOnce() -> T + Send) -> Result<T> {
        netns::run_in(ns, f)
    }

    /// An MPTCP listener (`SO_REUSEADDR`) on `addr` in the namespace `ns`.
    pub fn mptcp_listener(&self, ns: &str, addr: SocketAddr) -> Result<TcpListener> {
        self.run_in(ns, || -> std::io::Result<TcpListener> {
            let s = mptcp_socket(addr)?;
            s.set_reuse_address(true)?;
            s.bind(&SockAddr::from(addr))?;
            s.listen(128)?;
            Ok(s.into())
        })?
        .with_context(|| format!("MPTCP listener on {addr} in {ns}"))
    }

    /// An MPTCP connection to `addr` from the namespace `ns` (the route picks the source).
    pub fn mptcp_connect(&self, ns: &str, addr: SocketAddr) -> Result<TcpStream> {
        self.run_in(ns, || -> std::io::Result<TcpStream> {
            let s = mptcp_socket(addr)?;
            s.connect(&SockAddr::from(addr))?;
            Ok(s.into())
        })?
        .with_context(|| format!("MPTCP connect to {addr} from {ns}"))
    }
}

/// A new `IPPROTO_MPTCP` stream socket of `addr`'s family.
pub fn mptcp_socket(addr: SocketAddr) -> std::io::Result<Socket> {
    Socket::new(
        Domain::for_address(addr),
        Type::STREAM,
        Some(Protocol::MPTCP),
    )
}

impl Drop for DirectHosts {
    fn drop(&mut self) {
        // As a lab goes down: the processes left in the namespaces ended, then the namespaces.
        if let Err(e) = crate::Lab::down(&self.prefix) {
            eprintln!("nena-lab: tearing down the pair `{}`: {e:#}", self.prefix);
        }
    }
}
