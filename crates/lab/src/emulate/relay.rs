//! The relay process of a lab's emulated links (`nena lab relay --prefix P`, started by
//! `nena lab up`, killed by `nena lab down`): it opens the TAP device at each end of every
//! emulated link and moves frames between them, one thread per link and direction, asking a
//! [`LinkModel`] when each frame leaves.
//!
//! Control: the lab writes `emulation.json` (a generation number and each link's
//! emulation) in its state directory and sends SIGHUP; the relay reloads it and writes the
//! generation it applied to `relay.ack`. The relay exits on SIGTERM/SIGINT, when a TAP
//! device goes away, or when the lab's router namespace is gone.
//!
//! Timing: on these VMs an idle vCPU halts and waking it overshoots sleeps by milliseconds;
//! while frames cross the relay, one spinning thread per CPU at SCHED_IDLE (named
//! `keep-awake`) keeps the vCPUs from halting while taking only cycles nothing else wants
//! (the policy tests' delay line measured 90th percentile sleep overshoot 2-4 ms without,
//! 0.14 ms with them). Timer slack is 1 ns, and the pumps run at SCHED_FIFO priority 10 so
//! that other work on a busy host does not hold frames back (measured here at load 8: RTT
//! 55 ms for 30 ms configured without it).
//!
//! Idle, the relay sleeps: a pump with no frame queued blocks in `ppoll` on its TAP device
//! and an eventfd (the control thread's "the emulation changed" or "stop") with no timeout,
//! and the keep-awake threads park once no frame has crossed for [`AWAKE_LINGER`]; the first
//! frame after that wakes them ([`Awake`]). `nena bench emulation` measures both: the idle
//! relay's CPU and the delay at 0-200 Mbit/s.

use super::{Direction, LinkEmulation, LinkModel, Verdict};
use crate::{netns, state_dir, Link};
use anyhow::{bail, Context, Result};
use nix::sys::eventfd::{EfdFlags, EventFd};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsFd, AsRawFd};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What the lab asks the relay to do (`emulation.json` in the state directory).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct Control {
    pub(crate) generation: u64,
    pub(crate) links: Vec<(Link, LinkEmulation)>,
}

pub(crate) const CONTROL: &str = "emulation.json";
pub(crate) const ACK: &str = "relay.ack";

pub(crate) fn read_control(dir: &Path) -> Result<Control> {
    let p = dir.join(CONTROL);
    let b = std::fs::read(&p).with_context(|| format!("cannot read {}", p.display()))?;
    serde_json::from_slice(&b).with_context(|| format!("corrupt {}", p.display()))
}

pub(crate) fn write_control(dir: &Path, c: &Control) -> Result<()> {
    let tmp = dir.join(format!("{CONTROL}.tmp"));
    std::fs::write(&tmp, serde_json::to_vec_pretty(c)?)
        .with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, dir.join(CONTROL))?;
    Ok(())
}

/// The generation the relay last applied, if any.
pub(crate) fn read_ack(dir: &Path) -> Option<u64> {
    std::fs::read_to_string(dir.join(ACK))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Open an existing (persistent) TAP device by name in the namespace `ns`.
fn open_tap(ns: &str, name: &str) -> Result<File> {
    let name = name.to_string();
    let ns2 = ns.to_string();
    netns::run_in(ns, move || -> Result<File> {
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/net/tun")
            .context("/dev/net/tun")?;
        #[repr(C)]
        struct IfReq {
            name: [u8; 16],
            flags: libc::c_short,
            pad: [u8; 22],
        }
        let mut req = IfReq {
            name: [0; 16],
            flags: (libc::IFF_TAP | libc::IFF_NO_PI) as libc::c_short,
            pad: [0; 22],
        };
        req.name[..name.len()].copy_from_slice(name.as_bytes());
        // A relay just stopped may still hold the device for a moment (its main thread shows
        // as exited before the others have released their fds): EBUSY, so retry for 2 s.
        let deadline = Instant::now() + Duration::from_secs(2);
        loop {
            // SAFETY: TUNSETIFF with a properly sized, initialised ifreq on an open tun fd.
            let r = unsafe { libc::ioctl(f.as_raw_fd(), libc::TUNSETIFF as _, &mut req) };
            if r == 0 {
                break;
            }
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EBUSY) || Instant::now() > deadline {
                bail!("TUNSETIFF {name} in {ns2}: {e}");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        // SAFETY: fcntl on an fd we own.
        unsafe {
            let fl = libc::fcntl(f.as_raw_fd(), libc::F_GETFL);
            libc::fcntl(f.as_raw_fd(), libc::F_SETFL, fl | libc::O_NONBLOCK);
        }
        Ok(f)
    })?
}

static RELOAD: AtomicBool = AtomicBool::new(false);
static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(sig: libc::c_int) {
    if sig == libc::SIGHUP {
        RELOAD.store(true, Ordering::SeqCst);
    } else {
        STOP.store(true, Ordering::SeqCst);
    }
}

/// A direction's emulation as the control thread last set it, and the eventfd that wakes
/// its pump when it changes (or when the relay stops).
struct Shared {
    version: AtomicU64,
    /// The version the pump last applied.
    applied: AtomicU64,
    em: Mutex<super::Emulation>,
    wake: EventFd,
}

impl Shared {
    fn new(em: super::Emulation) -> Result<Shared> {
        Ok(Shared {
            version: AtomicU64::new(0),
            applied: AtomicU64::new(0),
            em: Mutex::new(em),
            wake: EventFd::from_value_and_flags(0, EfdFlags::EFD_NONBLOCK | EfdFlags::EFD_CLOEXEC)
                .context("eventfd for a relay pump")?,
        })
    }

    /// Set a new emulation; the pump applies it before it reads another frame.
    fn set(&self, em: super::Emulation) {
        *self.em.lock().unwrap_or_else(|e| e.into_inner()) = em;
        self.version.fetch_add(1, Ordering::SeqCst);
        self.poke();
    }

    /// Has the pump applied the last change?
    fn applied(&self) -> bool {
        self.applied.load(Ordering::SeqCst) == self.version.load(Ordering::SeqCst)
    }

    /// Wake the pump (a change, or a stop flag it should look at).
    fn poke(&self) {
        let _ = self.wake.write(1);
    }
}

/// How long the keep-awake threads keep spinning after the last frame left the relay: long
/// enough to cover the gaps of a flow (a ping every few ms, ACK clocking), short enough that
/// an isolated frame (an ARP probe) costs little. Measured with `nena bench emulation`
/// (docs/BENCHMARKS.md).
pub const AWAKE_LINGER: Duration = Duration::from_millis(100);

/// The keep-awake threads and until when frames are in the relay: pumps call
/// [`Awake::frame`] with each frame's departure time, which wakes the parked threads; they
/// park again [`AWAKE_LINGER`] after the last departure (so a frame waiting out a long delay
/// keeps them spinning until it leaves). It also holds the one stop flag of the pumps and
/// keep-awake threads ([`Awake::stop`]; the relay process never sets it, it exits).
struct Awake {
    epoch: Instant,
    busy_until_ns: AtomicU64,
    spinning: AtomicBool,
    stop: AtomicBool,
    threads: std::sync::OnceLock<Vec<std::thread::Thread>>,
}

impl Awake {
    fn new(epoch: Instant) -> Arc<Awake> {
        Arc::new(Awake {
            epoch,
            busy_until_ns: AtomicU64::new(0),
            spinning: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            threads: std::sync::OnceLock::new(),
        })
    }

    /// Stop the keep-awake threads (unparked to see it) and the pumps (which see it once
    /// woken through their [`Shared::poke`]).
    fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        self.unpark();
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// A frame is in the relay until `leaves` (since the epoch; its arrival when dropped).
    fn frame(&self, leaves: Duration) {
        self.busy_until_ns
            .fetch_max(leaves.as_nanos() as u64, Ordering::Relaxed);
        if !self.spinning.swap(true, Ordering::SeqCst) {
            self.unpark();
        }
    }

    fn unpark(&self) {
        for t in self.threads.get().into_iter().flatten() {
            t.unpark();
        }
    }

    fn idle_for(&self) -> Duration {
        let last = Duration::from_nanos(self.busy_until_ns.load(Ordering::Relaxed));
        self.epoch.elapsed().saturating_sub(last)
    }

    /// The body of one keep-awake thread.
    fn keep_awake(&self) {
        while !self.stopped() {
            if !self.spinning.load(Ordering::SeqCst) {
                std::thread::park();
                continue;
            }
            for _ in 0..1000 {
                std::hint::spin_loop();
            }
            if self.idle_for() > AWAKE_LINGER {
                self.spinning.store(false, Ordering::SeqCst);
                // A frame between the check and the store set `spinning` to true again, or
                // sees it false and unparks us: either way no wake-up is lost.
                if self.idle_for() <= AWAKE_LINGER {
                    self.spinning.store(true, Ordering::SeqCst);
                }
            }
        }
    }
}

/// The relay process's main: runs until stopped. `prefix` names the lab.
pub fn relay_main(prefix: &str) -> Result<()> {
    crate::validate_prefix(prefix)?;
    let dir = state_dir(prefix);
    let control = read_control(&dir)?;
    // SAFETY: installing a handler that only stores to atomics; prctl on ourselves.
    unsafe {
        for s in [libc::SIGHUP, libc::SIGTERM, libc::SIGINT] {
            libc::signal(s, on_signal as *const () as libc::sighandler_t);
        }
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong);
    }
    let epoch = Instant::now();
    let mut shared: Vec<(Link, Direction, Arc<Shared>)> = Vec::new();
    let mut threads = Vec::new();
    let alive = Arc::new(AtomicBool::new(true));
    let awake = Awake::new(epoch);
    for (link, le) in &control.links {
        let [edge, router] = link.ends();
        let e = open_tap(&format!("{prefix}-{}", edge.host.name()), edge.iface)?;
        let r = open_tap(&format!("{prefix}-{}", router.host.name()), router.iface)?;
        for (dir_, from, to) in [
            (Direction::ToRouter, e.try_clone()?, r.try_clone()?),
            (Direction::FromRouter, r.try_clone()?, e.try_clone()?),
        ] {
            let em = le.get(dir_).clone();
            let sh = Arc::new(Shared::new(em.clone())?);
            shared.push((*link, dir_, sh.clone()));
            let seed = em.seed.unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(1, |d| d.as_nanos() as u64)
                    ^ (*link as u64) << 8
                    ^ dir_ as u64
            });
            let model = LinkModel::new(em, seed, epoch.elapsed());
            let name = format!(
                "{}-{}",
                &link.name()[..link.name().len().min(9)],
                if dir_ == Direction::ToRouter {
                    "up"
                } else {
                    "dn"
                }
            );
            let alive = alive.clone();
            let awake = awake.clone();
            threads.push(std::thread::Builder::new().name(name).spawn(move || {
                realtime();
                if let Err(e) = pump(from, to, model, &sh, &awake) {
                    log::warn!("relay: {e:#}");
                }
                alive.store(false, Ordering::SeqCst);
            })?);
        }
    }
    keep_awake(&awake);
    // Stay in the router's namespace so that `ip netns pids` (and `nena lab down`) see us.
    let _ = netns::enter_current_thread(&format!("{prefix}-router"));
    std::fs::write(dir.join(ACK), control.generation.to_string())?;
    let router_ns = netns::netns_path(&format!("{prefix}-router"));
    let mut tick = 0u64;
    loop {
        std::thread::sleep(Duration::from_millis(20));
        if STOP.load(Ordering::SeqCst) || !alive.load(Ordering::SeqCst) {
            break;
        }
        tick += 1;
        if tick.is_multiple_of(25) && !router_ns.exists() {
            break;
        }
        if RELOAD.swap(false, Ordering::SeqCst) {
            match read_control(&dir) {
                Ok(c) => {
                    for (link, d, sh) in &shared {
                        if let Some((_, le)) = c.links.iter().find(|(l, _)| l == link) {
                            sh.set(le.get(*d).clone());
                        }
                    }
                    // Acknowledge once every pump has applied its change (woken by its
                    // eventfd, it does so before reading another frame).
                    let t0 = Instant::now();
                    while shared.iter().any(|(_, _, sh)| !sh.applied())
                        && t0.elapsed() < Duration::from_secs(1)
                    {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    let _ = std::fs::write(dir.join(ACK), c.generation.to_string());
                }
                Err(e) => log::warn!("relay: reload: {e:#}"),
            }
        }
    }
    Ok(())
}

/// Move frames from `from` to `to` through the model until an fd fails or `awake` is
/// stopped (and the pump woken through `sh`). With no frame queued it sleeps until a frame or a
/// wake-up comes; with frames queued, until the first one is due.
fn pump(
    mut from: File,
    mut to: File,
    mut model: LinkModel,
    sh: &Shared,
    awake: &Awake,
) -> Result<()> {
    let epoch = awake.epoch;
    let mut queue: VecDeque<(Duration, Vec<u8>)> = VecDeque::new();
    let mut buf = vec![0u8; 65536];
    let mut seen = 0u64;
    let mut counter = [0u8; 8];
    loop {
        let now = epoch.elapsed();
        let wait = queue.front().map(|(at, _)| at.saturating_sub(now));
        let mut fds = [
            libc::pollfd {
                fd: from.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: sh.wake.as_fd().as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        let ts = wait.map(|w| libc::timespec {
            tv_sec: w.as_secs() as _,
            tv_nsec: w.subsec_nanos() as _,
        });
        let tsp = ts.as_ref().map_or(std::ptr::null(), |t| t as *const _);
        // SAFETY: two valid pollfds, a valid timespec or null (no timeout), no signal mask
        // change.
        let r = unsafe { libc::ppoll(fds.as_mut_ptr(), 2, tsp, std::ptr::null()) };
        if r > 0 && fds[1].revents & libc::POLLIN != 0 {
            // Clear the eventfd (non-blocking; a concurrent poke leaves it readable again).
            // SAFETY: reading 8 bytes into an 8-byte buffer from an eventfd we own.
            unsafe { libc::read(fds[1].fd, counter.as_mut_ptr().cast(), 8) };
        }
        if awake.stopped() {
            return Ok(());
        }
        let v = sh.version.load(Ordering::SeqCst);
        if v != seen {
            seen = v;
            let em = sh.em.lock().unwrap_or_else(|e| e.into_inner()).clone();
            model.update(em, epoch.elapsed());
            sh.applied.store(v, Ordering::SeqCst);
        }
        if r > 0 && fds[0].revents != 0 {
            if fds[0].revents & (libc::POLLERR | libc::POLLHUP | libc::POLLNVAL) != 0 {
                bail!("tap fd closed");
            }
            for _ in 0..256 {
                match from.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => {
                        let now = epoch.elapsed();
                        let verdict = model.on_frame(now, n);
                        awake.frame(match verdict {
                            Verdict::Deliver(at) => at,
                            Verdict::Drop(_) => now,
                        });
                        if let Verdict::Deliver(at) = verdict {
                            let frame = buf[..n].to_vec();
                            if queue.back().is_none_or(|(b, _)| *b <= at) {
                                queue.push_back((at, frame));
                            } else {
                                let i = queue.partition_point(|(t, _)| *t <= at);
                                queue.insert(i, (at, frame));
                            }
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e).context("reading a tap"),
                }
            }
        }
        let now = epoch.elapsed();
        while queue.front().is_some_and(|(at, _)| *at <= now) {
            let (_, frame) = queue.pop_front().expect("front exists");
            match to.write(&frame) {
                Ok(_) => {}
                // the far end is down (EIO) or its queue is full: the frame is lost, as on a wire
                Err(e) if e.raw_os_error() == Some(libc::EBADFD) => {
                    return Err(e).context("writing a tap")
                }
                Err(_) => {}
            }
        }
    }
}

/// Run the calling thread at SCHED_FIFO priority 10: on a loaded host (other builds) a
/// thread woken from its timer at normal priority waits for a CPU for milliseconds, which
/// would add to every frame's delay. A pump blocks in ppoll between frames, so it cannot
/// starve the host (and the kernel's RT throttling caps RT threads at 95% of a CPU anyway).
/// Without the privilege it stays at normal priority (with a warning).
pub fn realtime() {
    let param = libc::sched_param { sched_priority: 10 };
    // SAFETY: sched_setscheduler on the calling thread with an initialised parameter.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) } != 0 {
        log::warn!(
            "relay: no real-time priority ({}): delays will stretch when the host is busy",
            std::io::Error::last_os_error()
        );
    }
}

/// One thread per CPU at SCHED_IDLE that spins while frames cross (see the module comment
/// and [`Awake`]).
fn keep_awake(awake: &Arc<Awake>) -> Vec<std::thread::JoinHandle<()>> {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut v = Vec::new();
    for cpu in 0..cpus {
        let awake = awake.clone();
        let t = std::thread::Builder::new()
            .name("keep-awake".into())
            .spawn(move || {
                // SAFETY: plain syscalls on the calling thread with initialised arguments.
                unsafe {
                    let param = libc::sched_param { sched_priority: 0 };
                    libc::sched_setscheduler(0, libc::SCHED_IDLE, &param);
                    let mut set: libc::cpu_set_t = std::mem::zeroed();
                    libc::CPU_SET(cpu, &mut set);
                    libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set);
                }
                awake.keep_awake();
            });
        v.extend(t.ok());
    }
    let _ = awake
        .threads
        .set(v.iter().map(|h| h.thread().clone()).collect());
    // A frame may have come before the handles were known.
    awake.unpark();
    v
}

/// An emulated link between TAP devices in any two namespaces, relayed by threads of this
/// process for as long as it lives (for tests that build their own namespaces, such as the
/// policy tests' delay lines). The devices are created here (not persistent: they go when
/// it is dropped); addresses and routes are the caller's. `ToRouter` is `a` → `b`.
pub struct TapLink {
    shared: Vec<Arc<Shared>>,
    awake: Arc<Awake>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl TapLink {
    pub fn new(
        a_ns: &str,
        a_tap: &str,
        b_ns: &str,
        b_tap: &str,
        em: LinkEmulation,
    ) -> Result<TapLink> {
        let a = open_tap(a_ns, a_tap)?;
        let b = open_tap(b_ns, b_tap)?;
        let awake = Awake::new(Instant::now());
        let mut threads = Vec::new();
        let mut shared = Vec::new();
        for (i, (d, from, to)) in [
            (Direction::ToRouter, a.try_clone()?, b.try_clone()?),
            (Direction::FromRouter, b, a),
        ]
        .into_iter()
        .enumerate()
        {
            let e = em.get(d).clone();
            let sh = Arc::new(Shared::new(e.clone())?);
            shared.push(sh.clone());
            let model = LinkModel::new(
                e.clone(),
                e.seed.unwrap_or(i as u64 + 1),
                awake.epoch.elapsed(),
            );
            let awake = awake.clone();
            threads.push(
                std::thread::Builder::new()
                    .name(format!("taplink-{i}"))
                    .spawn(move || {
                        realtime();
                        if let Err(e) = pump(from, to, model, &sh, &awake) {
                            log::warn!("tap link: {e:#}");
                        }
                    })?,
            );
        }
        threads.extend(keep_awake(&awake));
        Ok(TapLink {
            shared,
            awake,
            threads,
        })
    }
}

impl Drop for TapLink {
    fn drop(&mut self) {
        self.awake.stop();
        for sh in &self.shared {
            sh.poke();
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}
