//! `nena bench sessions`: many concurrent sessions held open against one server, what each
//! idle session costs each side and whether the load slows the next one down (issue 21 item
//! 6, issue 59 item 4).
//!
//! Two servers, each in a lab of its own ([`Against`]):
//! - **`serve`** (the default, [`serve`]): one `nena serve` in the server host; the load's
//!   clients are `nena bench sessions-worker` processes in the client host ([`worker`]), as
//!   many as the per-process descriptor limit needs. Each load session is a perf test of
//!   `payload` bytes each way, checked byte for byte, held before its end marker
//!   ([`nena_transport::app::perf::Held`]): open and idle on both sides.
//! - **`proxy`** ([`proxy`]): `nena proxy server --allow` an echo target, and one
//!   `nena proxy client --socks5`; every application connection is made by this process (a
//!   SOCKS5 CONNECT, a payload distinct per session read back whole).
//!
//! The phases are the same:
//! 1. **Idle:** `probes` sessions opened one after another on the idle server; the time of
//!    each from the connect to its 64 bytes back.
//! 2. **Load:** `sessions` sessions opened (at most `opening` at a time per client process),
//!    each carrying its payload there and back and then staying open, idle. Then the resident
//!    memory (`VmRSS`) and the open descriptors of the server and of the client processes
//!    (summed), against the same read before the load: the growth divided by the sessions is
//!    the memory per idle session of each side.
//! 3. **Under load:** `probes` more sessions opened one after another while all of the load
//!    stays open: the median time against the idle median is the cost of the load to a new
//!    session.
//! 4. Every load session ends cleanly (serve: the end markers and both verdicts; proxy: a
//!    half-close answered by the echo's close with nothing more).
//! 5. The server's counters from its `--metrics` endpoint ([`METRICS_PORT`]): its integrity
//!    failures, and the openings the client proxy retried (context, in the report).
//!
//! Targets (ratios in one run): at most [`TARGET_KIB_PER_SESSION`] of resident memory per idle
//! session on each side, a new session under load within [`TARGET_OPEN_RATIO`] times its idle
//! time, every session byte-exact. The bench refuses a count the host's descriptor limit
//! cannot take ([`plan`]), before anything starts, naming the most it can.

mod measured;
mod proxy;
mod serve;
pub mod worker;

use crate::harness::median;
use crate::host::{kernel, loadavg};
use crate::own_lab::in_own_lab;
use anyhow::{bail, Result};
use measured::Measured;
pub(crate) use measured::{metric_in, scrape_metrics, start_echo};
pub use measured::{
    Against, Plan, SessionsOptions, ECHO_PORT, METRICS_PORT, SERVER_PORT, SOCKS_PORT, SPARE_FDS,
};
use nena_lab::{Lab, LabConfig};
pub use proxy::{socks_connect, socks_connect_on};
use serde::Serialize;
use std::time::Duration;

/// Target: resident memory per idle session, each side (KiB).
pub const TARGET_KIB_PER_SESSION: f64 = 32.0;
/// Target: a new session's open time under load against an idle pair's.
pub const TARGET_OPEN_RATIO: f64 = 2.0;

/// One side's resident memory and descriptors (the client side: its processes summed).
#[derive(Debug, Clone, Serialize)]
pub struct Side {
    /// Before the load (after the idle probes: runtime and allocator have served sessions).
    pub rss_idle_kib: u64,
    /// With every load session open and idle.
    pub rss_loaded_kib: u64,
    /// After the load closed.
    pub rss_after_kib: u64,
    /// (loaded - idle) / sessions open.
    pub kib_per_session: f64,
    /// Before any load session.
    pub fds_idle: usize,
    pub fds_loaded: usize,
    /// (fds loaded - fds idle) / sessions open.
    pub fds_per_session: f64,
}

/// What the bench measured, and its verdicts.
#[derive(Debug, Clone, Serialize)]
pub struct SessionsReport {
    pub against: Against,
    /// Sessions asked for.
    pub asked: usize,
    /// Sessions run: `asked`, or fewer with `at_most_the_limit` on a host whose descriptor
    /// limit cannot take them.
    pub sessions: usize,
    /// Client processes holding the load (`proxy`: the one client proxy).
    pub client_processes: usize,
    pub payload: usize,
    pub mode: String,
    /// Load sessions that opened and carried their payload there and back.
    pub opened: usize,
    /// Load sessions that also ended cleanly.
    pub verified: usize,
    /// The first errors (at most 10).
    pub errors: Vec<String>,
    /// Sessions the client proxy opened again because the server found the opening altered
    /// (`nena_retried_openings_total`; docs/investigations/kernel-41-bytes); `None`: not
    /// readable, or no client proxy (`serve`).
    pub retried_openings: Option<u64>,
    /// Sessions the server ended on an integrity failure (`nena_integrity_failures_total`);
    /// `None`: not readable.
    pub server_integrity_failures: Option<u64>,
    /// Time to open the whole load.
    pub open_all_seconds: f64,
    pub client: Side,
    pub server: Side,
    /// Context: the host's TCP socket memory (`/proc/net/sockstat`, every socket of the
    /// host) grown per load session (KiB).
    pub kernel_tcp_kib_per_session: f64,
    /// Median open time of a probe session on the idle server (ms).
    pub idle_open_ms: f64,
    /// Median open time of a probe session with the load open (ms).
    pub loaded_open_ms: f64,
    /// loaded_open_ms / idle_open_ms.
    pub open_ratio: f64,
    /// This process's descriptor limit (soft, raised to the hard one), which every process
    /// of the bench has.
    pub nofile_limit: u64,
    pub target_kib_per_session: f64,
    pub target_open_ratio: f64,
    pub memory_ok: bool,
    pub open_ok: bool,
    pub exact_ok: bool,
    pub pass: bool,
    pub kernel: String,
    pub loadavg_start: String,
    pub loadavg_end: String,
}

/// The most sessions one process taking `per` descriptors each holds under `limit`.
fn most_per_process(limit: u64, per: u64) -> usize {
    (limit.saturating_sub(SPARE_FDS) / per) as usize
}

/// The most sessions the server (`serve`: with `probes` more sessions of its own) or the one
/// client proxy (`proxy`) holds under descriptor limit `limit`.
pub fn max_sessions_for(against: Against, limit: u64, probes: usize) -> usize {
    let (server, client) = against.fds_per_session();
    match against {
        Against::Serve => most_per_process(limit, server).saturating_sub(probes),
        Against::Proxy => most_per_process(limit, client),
    }
}

/// How `sessions` are spread under descriptor limit `limit`, at most `per_process` in each
/// client process when given; or the error naming the process that cannot hold them and the
/// most this host takes.
pub fn plan(
    against: Against,
    sessions: usize,
    probes: usize,
    limit: u64,
    per_process: Option<usize>,
) -> Result<Plan> {
    let (server_fds, client_fds) = against.fds_per_session();
    let most = max_sessions_for(against, limit, probes);
    if sessions > most {
        let (need, who, how) = match against {
            Against::Serve => (
                server_fds * (sessions + probes) as u64 + SPARE_FDS,
                "nena serve",
                format!("{server_fds} per session and per probe"),
            ),
            Against::Proxy => (
                client_fds * sessions as u64 + SPARE_FDS,
                "the client proxy",
                format!("{client_fds} per session"),
            ),
        };
        bail!(
            "{sessions} sessions need {need} open files in {who} ({how}, and {SPARE_FDS} to \
             spare), and the limit here is {limit} (raising the hard limit needs \
             CAP_SYS_RESOURCE, or LimitNOFILE= in a systemd unit): at most --sessions {most} \
             on this host"
        );
    }
    let per = match against {
        Against::Proxy => sessions.max(1),
        Against::Serve => {
            let fit = most_per_process(limit, client_fds);
            if fit == 0 {
                bail!("a worker process holds no session under the descriptor limit {limit}");
            }
            per_process.unwrap_or(fit).clamp(1, fit)
        }
    };
    Ok(Plan {
        sessions,
        processes: sessions.div_ceil(per).max(1),
        per_process: per,
    })
}

/// This process's soft descriptor limit, raised to the hard one first (as every nena process
/// does: the servers, the proxies and the workers run with the same).
pub fn nofile_limit() -> Result<u64> {
    nena_transport::conn::raise_nofile_limit();
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit fills the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        bail!(
            "reading the open-file limit: {}",
            std::io::Error::last_os_error()
        );
    }
    Ok(lim.rlim_cur)
}

/// Bring up a lab, run the bench in it, tear it down (also on Ctrl-C).
pub fn run(
    opts: &SessionsOptions,
    progress: impl FnMut(&str) + Send + 'static,
) -> Result<SessionsReport> {
    if opts.sessions == 0 || opts.probes == 0 || opts.opening == 0 || opts.payload == 0 {
        bail!("sessions, probes, opening and payload must each be at least 1");
    }
    let limit = nofile_limit()?;
    let plan = match plan(
        opts.against,
        opts.sessions,
        opts.probes,
        limit,
        opts.per_process,
    ) {
        Ok(p) => p,
        Err(e) if opts.at_most_the_limit => {
            let most = max_sessions_for(opts.against, limit, opts.probes);
            if most == 0 {
                return Err(e);
            }
            log::warn!("{e:#}; running {most}");
            plan(opts.against, most, opts.probes, limit, opts.per_process)?
        }
        Err(e) => return Err(e),
    };
    let prefix = format!("ns{}", std::process::id());
    let cfg = LabConfig {
        verify: true,
        ..LabConfig::with_prefix(&prefix)
    };
    let run_opts = SessionsOptions {
        sessions: plan.sessions,
        ..opts.clone()
    };
    let asked = opts.sessions;
    in_own_lab(&cfg, move |prefix| {
        let lab = Lab::open(prefix)?;
        let loadavg_start = loadavg();
        let m = match run_opts.against {
            Against::Serve => serve::measure(&lab, &run_opts, plan, progress)?,
            Against::Proxy => proxy::measure(&lab, &run_opts, progress)?,
        };
        Ok(report(&run_opts, plan, limit, m, loadavg_start))
    })
    .map(|r| SessionsReport { asked, ..r })
}

/// The report of `m`, its verdicts judged.
fn report(
    opts: &SessionsOptions,
    plan: Plan,
    limit: u64,
    m: Measured,
    loadavg_start: String,
) -> SessionsReport {
    let per =
        |before: u64, after: u64| after.saturating_sub(before) as f64 / m.opened.max(1) as f64;
    let side = |i: usize| Side {
        rss_idle_kib: m.idle[i].rss_kib,
        rss_loaded_kib: m.loaded[i].rss_kib,
        rss_after_kib: m.after[i].rss_kib,
        kib_per_session: per(m.idle[i].rss_kib, m.loaded[i].rss_kib),
        fds_idle: m.idle[i].fds,
        fds_loaded: m.loaded[i].fds,
        fds_per_session: per(m.idle[i].fds as u64, m.loaded[i].fds as u64),
    };
    let (client, server) = (side(0), side(1));
    let idle_open_ms = median_ms(&m.idle_opens);
    let loaded_open_ms = median_ms(&m.loaded_opens);
    let open_ratio = loaded_open_ms / idle_open_ms.max(1e-9);
    let memory_ok = client.kib_per_session <= TARGET_KIB_PER_SESSION
        && server.kib_per_session <= TARGET_KIB_PER_SESSION;
    let open_ok = open_ratio <= TARGET_OPEN_RATIO;
    let exact_ok = m.verified == opts.sessions;
    SessionsReport {
        against: opts.against,
        asked: opts.sessions,
        sessions: opts.sessions,
        client_processes: plan.processes,
        payload: opts.payload,
        mode: opts.mode.clone(),
        opened: m.opened,
        verified: m.verified,
        errors: m.errors,
        retried_openings: m.retried_openings,
        server_integrity_failures: m.server_integrity_failures,
        open_all_seconds: m.open_all.as_secs_f64(),
        client,
        server,
        kernel_tcp_kib_per_session: per(m.tcp_kib_idle, m.tcp_kib_loaded),
        idle_open_ms,
        loaded_open_ms,
        open_ratio,
        nofile_limit: limit,
        target_kib_per_session: TARGET_KIB_PER_SESSION,
        target_open_ratio: TARGET_OPEN_RATIO,
        memory_ok,
        open_ok,
        exact_ok,
        pass: memory_ok && open_ok && exact_ok,
        kernel: kernel(),
        loadavg_start,
        loadavg_end: loadavg(),
    }
}

fn median_ms(v: &[Duration]) -> f64 {
    let mut ms: Vec<f64> = v.iter().map(|d| d.as_secs_f64() * 1e3).collect();
    median(&mut ms)
}

/// The human table.
pub fn table(r: &SessionsReport) -> String {
    let what = match r.against {
        Against::Serve => format!(
            "perf sessions against one nena serve from {} worker process(es)",
            r.client_processes
        ),
        Against::Proxy => "SOCKS5 sessions through one proxy pair".to_string(),
    };
    let mut s = format!(
        "{} {what} ({}, {} B there and back each), open at once; kernel {}, load {} -> {}\n",
        r.sessions, r.mode, r.payload, r.kernel, r.loadavg_start, r.loadavg_end
    );
    if r.sessions < r.asked {
        s += &format!(
            "{} sessions were asked for; this host's descriptor limit ({}) takes at most {}\n",
            r.asked, r.nofile_limit, r.sessions
        );
    }
    s += &format!(
        "opened {} in {:.1} s, closed cleanly {}; descriptor limit {}\n",
        r.opened, r.open_all_seconds, r.verified, r.nofile_limit
    );
    s += &format!(
        "{:<14} {:>10} {:>12} {:>10} {:>12} {:>9} {:>10} {:>12}\n",
        "",
        "RSS idle",
        "RSS loaded",
        "RSS after",
        "KiB/session",
        "fds idle",
        "fds loaded",
        "fds/session"
    );
    let (client, server) = match r.against {
        Against::Serve => ("clients", "nena serve"),
        Against::Proxy => ("client proxy", "server proxy"),
    };
    for (name, side) in [(client, &r.client), (server, &r.server)] {
        s += &format!(
            "{:<14} {:>7} KiB {:>9} KiB {:>7} KiB {:>12.1} {:>9} {:>10} {:>12.2}\n",
            name,
            side.rss_idle_kib,
            side.rss_loaded_kib,
            side.rss_after_kib,
            side.kib_per_session,
            side.fds_idle,
            side.fds_loaded,
            side.fds_per_session
        );
    }
    s += &format!(
        "kernel TCP memory (whole host) per session: {:.1} KiB (context)\n",
        r.kernel_tcp_kib_per_session
    );
    s += &format!(
        "a new session (median of the probes): idle {:.2} ms, under load {:.2} ms: {:.2}x\n",
        r.idle_open_ms, r.loaded_open_ms, r.open_ratio
    );
    let known = |v: Option<u64>| v.map_or("unknown".to_string(), |n| n.to_string());
    if r.against == Against::Proxy {
        s += &format!(
            "openings retried by the client proxy: {} (the server found them altered: \
             docs/investigations/kernel-41-bytes)\n",
            known(r.retried_openings)
        );
    }
    s += &format!(
        "integrity failures at the server: {}\n",
        known(r.server_integrity_failures)
    );
    let mark = |ok: bool| if ok { "ok" } else { "MISSED" };
    s += &format!(
        "verdicts: memory per idle session <= {:.0} KiB each side: {}; new session under load \
         <= {:.1}x idle: {}; every session byte-exact and closed cleanly: {}\n",
        r.target_kib_per_session,
        mark(r.memory_ok),
        r.target_open_ratio,
        mark(r.open_ok),
        mark(r.exact_ok)
    );
    for e in &r.errors {
        s += &format!("  error: {e}\n");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::measured::counter_in;
    use super::*;

    #[test]
    fn the_session_budget_leaves_room_for_each_processs_descriptors() {
        // The proxy pair: the one client proxy, three per session.
        assert_eq!(max_sessions_for(Against::Proxy, 20_000, 21), 6_581);
        assert_eq!(max_sessions_for(Against::Proxy, 100, 21), 0);
        let most = max_sessions_for(Against::Proxy, 1_048_576, 21) as u64;
        assert!(3 * most + SPARE_FDS <= 1_048_576);
        assert!(3 * (most + 1) + SPARE_FDS > 1_048_576);
        let p = plan(Against::Proxy, 6_581, 21, 20_000, None).unwrap();
        assert_eq!((p.processes, p.per_process), (1, 6_581));
        let e = plan(Against::Proxy, 6_582, 21, 20_000, None).unwrap_err();
        assert!(
            format!("{e}").starts_with("6582 sessions need 20002 open files in the client proxy"),
            "{e}"
        );
        // nena serve: one per session and per probe in the server; the clients spread over
        // as many workers as two descriptors per session need.
        assert_eq!(max_sessions_for(Against::Serve, 20_000, 21), 19_723);
        let p = plan(Against::Serve, 10_000, 21, 20_000, None).unwrap();
        assert_eq!((p.sessions, p.processes, p.per_process), (10_000, 2, 9_872));
        let p = plan(Against::Serve, 10_000, 21, 20_000, Some(2_500)).unwrap();
        assert_eq!((p.processes, p.per_process), (4, 2_500));
        let p = plan(Against::Serve, 60, 3, 20_000, Some(30)).unwrap();
        assert_eq!((p.processes, p.per_process), (2, 30));
        // More per process than fit is held to what fits.
        let p = plan(Against::Serve, 19_723, 21, 20_000, Some(50_000)).unwrap();
        assert_eq!((p.processes, p.per_process), (2, 9_872));
        let e = plan(Against::Serve, 19_724, 21, 20_000, None).unwrap_err();
        assert!(
            format!("{e}").starts_with("19724 sessions need 20001 open files in nena serve"),
            "{e}"
        );
    }

    #[test]
    fn counters_are_read_from_the_exposition() {
        let text = "# HELP nena_retried_openings_total Sessions opened again.\n\
                    # TYPE nena_retried_openings_total counter\n\
                    nena_retried_openings_total{role=\"proxy_client\"} 3\n\
                    nena_retried_openings_total_created{role=\"proxy_client\"} 1.7e9\n\
                    nena_integrity_failures_total{role=\"a\"} 1\n\
                    nena_integrity_failures_total{role=\"b\"} 2\n";
        assert_eq!(counter_in(text, "nena_retried_openings_total"), Some(3));
        assert_eq!(counter_in(text, "nena_integrity_failures_total"), Some(3));
        assert_eq!(counter_in(text, "nena_sessions_total"), None);
    }

    #[test]
    fn medians() {
        let d = |ms: u64| Duration::from_millis(ms);
        assert_eq!(median_ms(&[d(3), d(1), d(2)]), 2.0);
        assert_eq!(median_ms(&[d(4), d(1), d(2), d(3)]), 2.5);
        assert!(median_ms(&[]).is_nan());
    }
}
