//! `nena gateway`: a Linux router that carries what the hosts of its LAN send through nena,
//! with nothing to configure on them but their default route.
//!
//! ```text
//! LAN host ──> [lan] gateway ══nena/MPTCP (trusted + untrusted)══> nena proxy server ──> dest
//! ```
//!
//! An nftables table ([`nft`]) sends every TCP connection that arrives on a LAN interface,
//! IPv4 and IPv6, to a transparent listener (TPROXY: the accepted socket's local address is
//! the destination the LAN host asked for), and the proxy client of [`crate::proxy`] carries
//! each one in a nena session of its own to the `nena proxy server --allow ..`, which
//! connects to that destination as it does for SOCKS (`Entry::Transparent`). The same
//! table drops every packet the host would forward from or to the LAN, so nothing of the
//! LAN crosses any path around nena; UDP that is not carried is refused (ICMP port
//! unreachable) where the LAN host sees it. What is installed ([`host`]) is removed on
//! exit, and what a killed gateway left is replaced at the next start. Before any of it,
//! the kill switch ([`killswitch`]) is closed for the LAN interfaces: a table of its own
//! that drops the LAN's forwarding too, and that no exit removes, so the LAN stays cut off
//! while the gateway is stopped, restarting or failed, until an operator opens it.

pub mod bounds;
pub mod host;
pub mod ingress;
pub mod killswitch;
pub mod nft;
pub mod rates;
pub mod udp;

use crate::conn::ClientOptions;
use crate::proxy::warm::{Keeping, Warm};
use crate::proxy::{self, Entry, ProxyLimits};
use anyhow::{Context, Result};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

pub use host::Installed;
pub use nft::Plan;

/// A TCP listener with IP_TRANSPARENT / IPV6_TRANSPARENT on `addr` (CAP_NET_ADMIN), the
/// end of the TPROXY rule.
pub fn transparent_listener(addr: SocketAddr) -> Result<std::net::TcpListener> {
    let s = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    s.set_cloexec(true)?;
    s.set_reuse_address(true)?;
    if addr.is_ipv4() {
        s.set_ip_transparent_v4(true)
    } else {
        s.set_only_v6(true)?;
        s.set_ip_transparent_v6(true)
    }
    .with_context(|| format!("cannot make a transparent socket on {addr} (CAP_NET_ADMIN)"))?;
    s.bind(&SockAddr::from(addr))
        .with_context(|| format!("cannot listen on {addr}"))?;
    s.listen(1024)?;
    s.set_nonblocking(true)?;
    Ok(s.into())
}

/// What the gateway does with the LAN's UDP other than DNS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UdpMode {
    /// Carried through nena (a session per LAN socket) to the proxy server.
    Carry,
    /// Refused (ICMP port unreachable): QUIC falls back to TCP.
    Block,
}

/// The gateway: the kill switch (the caller closes it first, before anything that can
/// fail; closed again here, which changes nothing), listeners, the table and its routing,
/// then the proxy client and the datagram side until it stops (a signal); `ready` is told
/// the plan once the table is in place. Everything installed but the kill switch is
/// removed when this returns, whatever ended it.
pub async fn run(
    lan: Vec<String>,
    udp: UdpMode,
    warm: Keeping,
    opts: ClientOptions,
    limits: ProxyLimits,
    caps: bounds::Caps,
    ready: impl FnOnce(&Plan),
) -> Result<()> {
    host::check_lan(&lan)?;
    killswitch::lock(&lan)?;
    let lan_names = lan.clone();
    let v4 = transparent_listener("127.0.0.1:0".parse()?)?;
    let port = v4.local_addr()?.port();
    let mut listeners = vec![tokio::net::TcpListener::from_std(v4)?];
    // ::1 on the same port: one number in the rules.
    let v6 = match transparent_listener(SocketAddr::new("::1".parse()?, port)) {
        Ok(l) => {
            listeners.push(tokio::net::TcpListener::from_std(l)?);
            true
        }
        Err(e) => {
            log::warn!("no IPv6 listener on [::1]:{port} ({e:#}): IPv6 from the LAN is refused");
            false
        }
    };
    // Datagrams: DNS always, the rest with --udp carry; one port for both families.
    let u4 = udp::tproxy_socket("127.0.0.1:0".parse()?)?;
    let uport = u4.local_addr()?.port();
    let mut usocks = vec![u4];
    if v6 {
        match udp::tproxy_socket(SocketAddr::new("::1".parse()?, uport)) {
            Ok(s) => usocks.push(s),
            Err(e) => log::warn!("no IPv6 datagram socket on [::1]:{uport}: {e:#}"),
        }
    }
    let mut plan = Plan {
        lan,
        tcp_port: port,
        dns_port: Some(uport),
        udp_port: (udp == UdpMode::Carry).then_some(uport),
        v6: v6 && usocks.len() == 2,
    };
    let installed = Installed::install(&mut plan)?;
    // Sessions opened ahead for the LAN's connections (TCP, DNS and datagram flows alike).
    let warm = (warm.size > 0).then(|| Arc::new(Warm::keeping(warm)));
    let opts = ClientOptions {
        warm: warm.clone().map(|w| w as Arc<dyn crate::conn::Ahead>),
        ..opts
    };
    if let Some(w) = &warm {
        // As the proxy's own sessions are (`proxy::serve_client`).
        w.fill(&ClientOptions {
            buffer: crate::stream::PROXY_BUF,
            ..opts.clone()
        });
    }
    ready(&plan);
    let datagrams = Arc::new(udp::Datagrams::new(
        Arc::new(ClientOptions {
            buffer: crate::stream::PROXY_BUF,
            ..opts.clone()
        }),
        Arc::new(tokio::sync::Semaphore::new(limits.max_connecting.max(1))),
        limits.metrics.clone(),
        udp == UdpMode::Carry,
        &lan_names,
        caps,
    ));
    let tcp_hosts = bounds::HostSessions::new(caps.tcp_per_host);
    let mut udp_tasks = tokio::task::JoinSet::new();
    for s in usocks {
        udp_tasks.spawn(datagrams.clone().serve(s));
    }
    let served = tokio::select! {
        r = proxy::serve_client(listeners, Entry::Transparent { hosts: tcp_hosts.clone() }, opts, limits) => r.map_err(anyhow::Error::from),
        Some(r) = udp_tasks.join_next() => match r {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(e.context("the gateway's datagram side")),
            Err(e) => Err(anyhow::anyhow!("the gateway's datagram side panicked: {e}")),
        },
    };
    udp_tasks.abort_all();
    datagrams.close(Duration::from_secs(2)).await;
    if let Some(w) = &warm {
        log::info!(
            "gateway: {} connections took a session opened ahead or given back by the flow \
             before, {} found none ready; {} replaced before they expired; {} given back for \
             the next flow",
            w.taken(),
            w.missed(),
            w.replaced(),
            w.given_back()
        );
        w.close().await;
    }
    let st = &datagrams.stats;
    log::info!(
        "gateway datagrams: DNS answered {}, sent {}, received {}, dropped {}",
        st.dns_answered.load(std::sync::atomic::Ordering::Relaxed),
        st.sent.load(std::sync::atomic::Ordering::Relaxed),
        st.received.load(std::sync::atomic::Ordering::Relaxed),
        st.dropped.load(std::sync::atomic::Ordering::Relaxed),
    );
    udp::log_bounds(&datagrams, &tcp_hosts);
    drop(installed);
    served
}
