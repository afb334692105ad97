//! `nena run`'s launcher: CMD runs in a cgroup (v2) of its own, and its TCP connections are
//! carried by nena without CMD knowing. BPF programs attached to that cgroup (nena-bpf's
//! `run`) send its TCP connects to a proxy in this process, which asks the `nena proxy
//! server --allow ..` at `--via` for each original destination exactly as the SOCKS path
//! does (wire op 4). `--mptcp-only` instead makes the cgroup's TCP sockets MPTCP (what
//! mptcpize does) with no nena session: with the BPF hook fmod_ret/update_socket_protocol,
//! or, where the kernel refuses tracing programs, through seccomp user notification
//! (nena-mptcp's `mptcpize`). [`traffic`] holds both.
//!
//! With `--via`, nothing of CMD's leaves outside nena but by loopback: its DNS (UDP and TCP
//! to port 53, any address) is answered by a responder in this process through nena with
//! the proxy server's resolver (op 6); every other UDP datagram is carried by a datagram
//! relay through nena (`--udp carry`, op 7) or refused with EPERM (`--udp block`); and a
//! cgroup_skb/egress program drops any packet of the cgroup to a non-loopback destination
//! ([`crate::proxy::carry`], nena-bpf's `run`).
//!
//! CMD's names go nowhere else: it runs in a mount namespace of its own whose nsswitch.conf
//! names only `files`, `myhostname` and `dns`, with the AF_UNIX resolvers outside nena
//! (systemd-resolved's varlink socket, nscd, avahi) and the D-Bus system bus (systemd-
//! resolved's `org.freedesktop.resolve1`; `--system-bus` allows it) hidden, and refused
//! again by the cgroup's connect_unix program ([`namespace`]). `--mptcp-only` carries
//! nothing through nena and changes none of this.
//!
//! Whatever ends CMD (its own exit, a signal) or this process (SIGINT, SIGTERM, SIGHUP:
//! passed on to CMD, which gets 5 s), what is left of the cgroup is killed (`cgroup.kill`),
//! then the programs are detached and the cgroup removed: the [`Launcher`] guard. The
//! cgroup's programs are not links of this process: killed (SIGKILL, the OOM killer), it
//! leaves them attached, so CMD's processes stay without network (the proxy's ports closed,
//! the rest dropped at egress) until its watchdog ([`watchdog`]) kills them and removes the
//! cgroup; a later `nena run` removes whatever a killed one and its watchdog left.
//!
//! CMD does not run as root unless asked: under sudo it runs as the user who called sudo,
//! with `--user NAME|UID` as that user ([`user`]). It drops its privileges after it joined
//! the cgroup, so its traffic is carried all the same.
//!
//! The API: [`Launcher::prepare`] (cgroup, namespace, watchdog), [`Launcher::attach`] (the
//! programs and the carriers), [`Launcher::run`] (CMD started and supervised: [`Ended`]);
//! dropping the launcher undoes it all.

pub mod launcher;
pub mod namespace;
pub mod traffic;
pub mod user;
pub mod watchdog;

pub use launcher::{CannotRun, Ended, Launch, Launcher, GRACE};
pub use traffic::{Stats, UdpMode, Via};
pub use user::{PrivilegeDrop, RunAs, Why};
