//! What carries CMD's traffic in `nena run`: the BPF programs on its cgroup (nena-bpf's
//! `run`) and, with `--via`, what they send to in this process: the proxy (wire op 4 for
//! each original destination), the DNS responder and the datagram relay
//! ([`crate::proxy::carry`]), on loopback sockets; with `--mptcp-only`, the programs (or the
//! seccomp listener) that make CMD's TCP sockets MPTCP.

use crate::conn::ClientOptions;
use crate::proxy::carry::relay::Relay;
use crate::proxy::carry::responder::Responder;
use crate::proxy::{self, OriginalDst, ProxyLimits};
use anyhow::Context;
use nena_bpf::run::{MptcpOnly, Redirect, RunStats};
use nena_mptcp::mptcpize::{self, ChildSide, Mptcpizer, ParentSide};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, UdpSocket};

/// `--udp`: what becomes of CMD's datagrams other than DNS.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UdpMode {
    /// Through a nena session to the proxy server, which sends them on within --allow.
    Carry,
    /// Refused (EPERM at sendmsg/connect).
    Block,
}

/// `--via`: CMD's connections carried through nena to a `nena proxy server --allow ..`.
#[derive(Clone, Debug)]
pub struct Via {
    /// The client's options (the proxy server's address among them).
    pub opts: ClientOptions,
    /// CMD's datagrams other than DNS.
    pub udp: UdpMode,
    /// Sessions carried at once.
    pub max_sessions: usize,
    /// nena sessions being opened at once.
    pub max_connecting: usize,
    /// What the sessions count (`nena status`), if anything.
    pub metrics: Option<Arc<crate::ops::metrics::Metrics>>,
}

/// The loopback sockets of CMD's UDP: the DNS responder's and, with `--udp carry`, the
/// relay's, on 127.0.0.1 and (when the proxy listens there) ::1.
struct UdpSockets {
    dns4: UdpSocket,
    dns6: Option<UdpSocket>,
    relay4: Option<UdpSocket>,
    relay6: Option<UdpSocket>,
}

impl UdpSockets {
    async fn bind(v6: bool, mode: UdpMode) -> anyhow::Result<UdpSockets> {
        let carry = mode == UdpMode::Carry;
        let dns4 = UdpSocket::bind("127.0.0.1:0")
            .await
            .context("cannot bind the DNS responder on 127.0.0.1")?;
        let six = |what: &'static str| async move {
            if !v6 {
                return None;
            }
            UdpSocket::bind("[::1]:0")
                .await
                .map_err(|e| log::info!("no IPv6 {what} (::1: {e}): refused instead"))
                .ok()
        };
        let dns6 = six("DNS responder").await;
        let relay4 = if carry {
            Some(
                UdpSocket::bind("127.0.0.1:0")
                    .await
                    .context("cannot bind the datagram relay on 127.0.0.1")?,
            )
        } else {
            None
        };
        let relay6 = if carry {
            six("datagram relay").await
        } else {
            None
        };
        Ok(UdpSockets {
            dns4,
            dns6,
            relay4,
            relay6,
        })
    }

    fn plan(&self, mode: UdpMode) -> anyhow::Result<nena_bpf::run::Udp> {
        let addr = |s: Option<&UdpSocket>| s.map(|s| s.local_addr()).transpose();
        Ok(nena_bpf::run::Udp {
            dns4: Some(self.dns4.local_addr()?),
            dns6: addr(self.dns6.as_ref())?,
            relay4: addr(self.relay4.as_ref())?,
            relay6: addr(self.relay6.as_ref())?,
            block: mode == UdpMode::Block,
        })
    }
}

/// The BPF side, kept until CMD ended.
enum Attached {
    Redirect(Arc<Redirect>),
    Mptcp(MptcpOnly),
    /// `--mptcp-only` through seccomp (the kernel refused fmod_ret): answered once CMD
    /// started.
    Seccomp(Option<Mptcpizer>),
}

impl Attached {
    fn prog_ids(&self) -> Vec<u32> {
        match self {
            Attached::Redirect(r) => r.prog_ids().to_vec(),
            Attached::Mptcp(m) => m.prog_ids().to_vec(),
            Attached::Seccomp(_) => Vec::new(),
        }
    }

    fn stats(&self) -> RunStats {
        match self {
            Attached::Redirect(r) => r.stats(),
            Attached::Mptcp(m) => m.stats(),
            Attached::Seccomp(m) => RunStats {
                mptcp: m.as_ref().map_or(0, Mptcpizer::made),
                ..Default::default()
            },
        }
    }
}

/// CMD's traffic as attached: the programs, the proxy's task, the carriers and, for
/// `--mptcp-only` through seccomp, the two ends of the listener.
pub(super) struct Traffic {
    attached: Attached,
    proxy: Option<tokio::task::JoinHandle<crate::Result<()>>>,
    carriers: Carriers,
    seccomp_parent: Option<ParentSide>,
    /// Taken by the child's pre-exec closure.
    pub(super) seccomp_child: Option<ChildSide>,
}

/// What the programs and the carriers did (`nena run`'s last line).
#[derive(Debug, Clone, Default)]
pub struct Stats {
    /// The cgroup programs' counters.
    pub run: RunStats,
    /// DNS queries answered through nena, and answered SERVFAIL.
    pub dns_answered: u64,
    pub dns_failed: u64,
    /// The relay's datagrams sent on, replies and sessions.
    pub sent: u64,
    pub received: u64,
    pub sessions: u64,
}

impl Traffic {
    /// Attaches the programs to the cgroup at `cgroup` and, with `via`, starts the proxy and
    /// the carriers they send to (on this runtime); `refused_unix`: the AF_UNIX paths CMD may
    /// not connect to.
    pub(super) async fn attach(
        cgroup: &Path,
        via: Option<&Via>,
        refused_unix: &[&Path],
    ) -> anyhow::Result<Traffic> {
        let mut t = Traffic {
            attached: Attached::Seccomp(None),
            proxy: None,
            carriers: Carriers::default(),
            seccomp_parent: None,
            seccomp_child: None,
        };
        match via {
            Some(via) => t.redirect(cgroup, via, refused_unix).await?,
            None => match MptcpOnly::attach(cgroup) {
                Ok(m) => t.attached = Attached::Mptcp(m),
                Err(e) => {
                    // Not a warning: seccomp gives the same result (every socket of CMD's is
                    // MPTCP, `sockets made MPTCP N` at the end), only by another road.
                    log::info!(
                        "making the sockets MPTCP through seccomp user notification (the \
                         kernel refused the fmod_ret program: {})",
                        e.root_cause()
                    );
                    log::debug!("fmod_ret: {e:#}");
                    let (parent, child) = mptcpize::pair()?;
                    t.seccomp_parent = Some(parent);
                    t.seccomp_child = Some(child);
                }
            },
        }
        Ok(t)
    }

    /// `--via`: the proxy's listeners and the UDP sockets, the programs that send CMD's
    /// connects and datagrams there, the proxy and the carriers.
    async fn redirect(
        &mut self,
        cgroup: &Path,
        via: &Via,
        refused_unix: &[&Path],
    ) -> anyhow::Result<()> {
        let v4 = TcpListener::bind("127.0.0.1:0")
            .await
            .context("cannot listen on 127.0.0.1")?;
        let v6 = match TcpListener::bind("[::1]:0").await {
            Ok(l) => Some(l),
            Err(e) => {
                log::info!("no IPv6 proxy listener (::1: {e}): IPv6 connects are refused");
                None
            }
        };
        let a4 = v4.local_addr()?;
        let a6 = v6.as_ref().map(|l| l.local_addr()).transpose()?;
        let udp = UdpSockets::bind(a6.is_some(), via.udp).await?;
        let file = std::fs::File::open(cgroup)
            .with_context(|| format!("cannot open {}", cgroup.display()))?;
        let redirect = Arc::new(Redirect::attach(
            &file,
            Some(a4),
            a6,
            udp.plan(via.udp)?,
            refused_unix,
        )?);
        self.attached = Attached::Redirect(redirect.clone());
        let lookup = {
            let r = redirect.clone();
            OriginalDst(Arc::new(move |peer| r.take(peer)))
        };
        let shared = Arc::new(ClientOptions {
            buffer: crate::stream::PROXY_BUF,
            ..via.opts.clone()
        });
        // The command has ended (or been stopped) when the proxy stops: nothing to wait for.
        let limits = ProxyLimits {
            max_sessions: via.max_sessions,
            max_connecting: via.max_connecting,
            grace: Duration::ZERO,
            token: None,
            metrics: via.metrics.clone(),
            datagram_plane: false,
        };
        let connecting = Arc::new(tokio::sync::Semaphore::new(limits.max_connecting.max(1)));
        let dns = Arc::new(Responder::new(shared.clone(), connecting.clone(), None));
        self.carriers.start_dns(&dns, udp.dns4, udp.dns6);
        if via.udp == UdpMode::Carry {
            let r = redirect.clone();
            let relay = Arc::new(Relay::new(
                shared,
                connecting,
                None,
                Arc::new(move |peer| r.relay_dst(peer)),
            ));
            self.carriers.start_relay(&relay, udp.relay4, udp.relay6);
        }
        let mut listeners = vec![v4];
        listeners.extend(v6);
        log::info!(
            "proxy on {a4}{} for the cgroup, to {}",
            a6.map(|a| format!(" and {a}")).unwrap_or_default(),
            via.opts.remote
        );
        self.proxy = Some(tokio::spawn(proxy::serve_client(
            listeners,
            proxy::Entry::Redirected { lookup, dns },
            via.opts.clone(),
            limits,
        )));
        Ok(())
    }

    /// The ids of the programs attached to the cgroup (none through seccomp).
    pub(super) fn prog_ids(&self) -> Vec<u32> {
        self.attached.prog_ids()
    }

    /// Once CMD started: the seccomp listener answers its `socket()` calls.
    pub(super) fn started(&mut self) -> anyhow::Result<()> {
        if let Some(p) = self.seccomp_parent.take() {
            self.attached = Attached::Seccomp(Some(p.serve().context("the seccomp listener")?));
        }
        Ok(())
    }

    /// Once the cgroup is empty (`emptied`: else the programs stay until the cgroup is
    /// removed): the programs detached, the proxy and the carriers stopped; what they did.
    pub(super) async fn stop(self, emptied: bool) -> Stats {
        if emptied {
            if let Attached::Redirect(r) = &self.attached {
                r.detach();
            }
        }
        let run = self.attached.stats();
        if let Some(t) = self.proxy {
            t.abort();
            let _ = t.await;
        }
        let mut stats = self.carriers.stop().await;
        stats.run = run;
        stats
    }
}

/// The tasks of the DNS responder and the datagram relay, stopped when CMD ended.
#[derive(Default)]
struct Carriers {
    tasks: Vec<tokio::task::JoinHandle<crate::Result<()>>>,
    dns: Option<Arc<Responder>>,
    relay: Option<Arc<Relay>>,
}

impl Carriers {
    fn start_dns(&mut self, dns: &Arc<Responder>, v4: UdpSocket, v6: Option<UdpSocket>) {
        for s in std::iter::once(v4).chain(v6) {
            self.tasks.push(tokio::spawn(dns.clone().serve_udp(s)));
        }
        self.dns = Some(dns.clone());
    }

    fn start_relay(&mut self, relay: &Arc<Relay>, v4: Option<UdpSocket>, v6: Option<UdpSocket>) {
        for s in v4.into_iter().chain(v6) {
            self.tasks.push(tokio::spawn(relay.clone().serve(s)));
        }
        self.relay = Some(relay.clone());
    }

    async fn stop(self) -> Stats {
        for t in self.tasks {
            t.abort();
            if let Ok(Err(e)) = t.await {
                log::warn!("{e:#}");
            }
        }
        if let Some(r) = &self.relay {
            // Each flow ends its session cleanly (the proxy server logs what it carried).
            r.wind_down(Duration::from_secs(2)).await;
        }
        if let Some(d) = &self.dns {
            // So do the DNS sessions kept for further queries.
            d.close(Duration::from_secs(2)).await;
        }
        let n = |a: &AtomicU64| a.load(Ordering::Relaxed);
        Stats {
            run: RunStats::default(),
            dns_answered: self.dns.as_ref().map_or(0, |d| n(&d.stats.answered)),
            dns_failed: self.dns.as_ref().map_or(0, |d| n(&d.stats.failed)),
            sent: self.relay.as_ref().map_or(0, |r| n(&r.stats.sent)),
            received: self.relay.as_ref().map_or(0, |r| n(&r.stats.received)),
            sessions: self.relay.as_ref().map_or(0, |r| n(&r.stats.sessions)),
        }
    }
}
