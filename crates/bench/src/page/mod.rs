//! `nena bench page`: many short flows through `nena gateway` (issue 39, item 4). A page of
//! an HTML document and [`site::OBJECTS`] objects on two host names is loaded as a browser
//! loads it ([`loader`]: DNS once per name, up to six keep-alive HTTP/1.1 connections per
//! name, every byte checked), in a lab of its own whose trusted and untrusted links each
//! delay every packet by [`DEFAULT_DELAY_MS`] ms each way, two ways in each repetition,
//! the order rotating:
//!
//! - **gateway**: the loader in the LAN host behind the client, which knows nothing of
//!   nena: its DNS and TCP go through `nena gateway` on the client (one nena session per
//!   TCP connection and per DNS query) to `nena proxy server` on the server host, which
//!   connects to the web server and asks dnsmasq;
//! - **mptcp**: the loader in the client host with MPTCP sockets (as `mptcpize` gives an
//!   unmodified browser), straight to the web server and to dnsmasq: the in-kernel path
//!   manager adds the untrusted subflow to every connection, and a load where either link
//!   carried under 1% of the bytes fails the verdict (it would be no multipath baseline).
//!
//! Verdict: the gateway's median page time at most [`summary::RATIO_TARGET`] times plain
//! MPTCP's in the same run. Beside it, what the difference is made of: the gateway's nena
//! handshakes per page and their time (its `--metrics`), each connection's connect time and
//! first request's time to first byte against its later requests', each name's lookup time,
//! and each variant's share of bytes on the untrusted link.

pub(crate) mod ends;
pub mod loader;
pub mod site;
pub mod summary;

use crate::host::{cpu_model, kernel, loadavg};
use crate::own_lab::in_own_lab;
use crate::peers::traffic::moved_bytes;
use anyhow::{bail, Result};
use loader::LoadConfig;
use nena_lab::{Emulation, Host, Lab, LabConfig, LinkEmulation, SERVER_ADDR};
use serde::Serialize;
use site::Page;
use std::net::{SocketAddr, SocketAddrV4};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use summary::{Failure, Run, Summary, Variant};

/// The one-way delay of each of the client's two links, each direction, by default.
pub const DEFAULT_DELAY_MS: u64 = 20;
/// Connections per host name, as browsers open them for HTTP/1.1.
pub const PER_HOST: usize = 6;
/// The client host's two links, as its byte counters name them.
const LINKS: [&str; 2] = ["trusted", "untrusted"];
/// Bound on one page load.
const LOAD_TIMEOUT: Duration = Duration::from_secs(60);

/// What the bench runs.
#[derive(Debug, Clone)]
pub struct PageOptions {
    pub reps: usize,
    /// One-way delay of the trusted and of the untrusted link, each direction.
    pub delay: Duration,
    /// `nena` (gateway, proxy server, the lab's relay).
    pub nena: PathBuf,
    pub dnsmasq: PathBuf,
    /// A wait before each measured load: the page after a pause (the gateway idle, its
    /// sessions opened ahead older than they may wait, `proxy::warm`); zero by default.
    pub pause: Duration,
    /// More arguments for `nena gateway`, in order (`--warm-idle 0`, `--warm 0`).
    pub gateway_args: Vec<String>,
}

/// The whole bench.
#[derive(Debug, Clone, Serialize)]
pub struct PageReport {
    pub reps: usize,
    pub delay_ms: f64,
    pub objects: usize,
    /// Body bytes of the page (the document and every object).
    pub page_bytes: u64,
    pub per_host: usize,
    /// The wait before each measured load, seconds.
    pub pause_s: f64,
    pub gateway_args: Vec<String>,
    #[serde(flatten)]
    pub summary: Summary,
    pub runs: Vec<Run>,
    pub failures: Vec<Failure>,
    pub cpu: String,
    pub kernel: String,
    pub loadavg_start: String,
    pub loadavg_end: String,
}

/// Bring up the bench's lab (a LAN host behind the client, both client links delayed),
/// run the bench in it, tear it down (also on Ctrl-C).
pub fn run(opts: &PageOptions, progress: impl FnMut(&str) + Send + 'static) -> Result<PageReport> {
    if opts.reps == 0 {
        bail!("the bench needs at least one repetition");
    }
    if crate::peers::find_program(&opts.dnsmasq).is_none() {
        bail!(
            "dnsmasq ({}) is not an executable file here; scripts/install-deps.sh installs \
             it (Debian's dnsmasq-base), or name yours with --dnsmasq",
            opts.dnsmasq.display()
        );
    }
    let prefix = format!("pg{}", std::process::id());
    let delayed = LinkEmulation::both(Emulation {
        delay: opts.delay,
        ..Emulation::default()
    });
    let cfg = LabConfig {
        verify: true,
        lan: true,
        relay_exe: Some(opts.nena.clone()),
        trusted_emulation: Some(delayed.clone()),
        untrusted_emulation: Some(delayed),
        ..LabConfig::with_prefix(&prefix)
    };
    let opts = opts.clone();
    in_own_lab(&cfg, move |prefix| run_on(prefix, &opts, progress))
}

/// The directory of the processes' logs, removed when dropped.
struct WorkDir(PathBuf);

impl Drop for WorkDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn run_on(prefix: &str, opts: &PageOptions, mut progress: impl FnMut(&str)) -> Result<PageReport> {
    let loadavg_start = loadavg();
    let lab = Lab::open(prefix)?;
    let dir = WorkDir(std::env::temp_dir().join(format!("nena-bench-page-{prefix}")));
    std::fs::create_dir_all(&dir.0)?;
    let page = Arc::new(Page::new(site::HTTP_PORT));
    let web = SocketAddrV4::new(SERVER_ADDR, site::HTTP_PORT);
    let _web = site::serve(&lab, web, page.clone())?;
    let _dns = ends::dnsmasq(&lab, &opts.dnsmasq, SERVER_ADDR, &dir.0)?;
    // The proxy server's resolver (the first nameserver of its resolv.conf) is dnsmasq.
    let _conf = ends::ResolvConf::new(&lab, Host::Server, SERVER_ADDR)?;
    let mut proxy = ends::proxy_server(&lab, &opts.nena, SERVER_ADDR, web, &dir.0)?;
    let mut gateway = ends::gateway(&lab, &opts.nena, SERVER_ADDR, &opts.gateway_args, &dir.0)?;
    progress(&format!(
        "lab {prefix} up: {} objects, {} bytes, {} ms each way on each link",
        page.objects.len(),
        page.bytes(),
        opts.delay.as_millis()
    ));
    let resolver = SocketAddr::from((SERVER_ADDR, 53));
    let pause = opts.pause;
    let mut measure = |v: Variant, rep: usize| -> Result<Run> {
        let mut pause_bytes = None;
        if rep > 0 && !pause.is_zero() {
            let b0 = moved_bytes(&lab, Host::Client, &LINKS)?;
            // sleep: the pause is what this measures: the gateway idles before the load.
            std::thread::sleep(pause);
            let b1 = moved_bytes(&lab, Host::Client, &LINKS)?;
            pause_bytes = Some([0, 1].map(|i| b1[i].saturating_sub(b0[i])));
        }
        proxy.check_running()?;
        gateway.check_running()?;
        let run = one_load(&lab, v, rep, resolver, page.clone())?;
        Ok(Run { pause_bytes, ..run })
    };
    // One unmeasured load each first (neighbour tables, the processes' first sessions).
    for v in Variant::ALL {
        measure(v, 0).map_err(|e| e.context(format!("the warm-up load, {v}")))?;
    }
    let (mut runs, mut failures) = (Vec::new(), Vec::new());
    for rep in 1..=opts.reps {
        for k in 0..Variant::ALL.len() {
            let v = Variant::ALL[(rep - 1 + k) % Variant::ALL.len()];
            match measure(v, rep) {
                Ok(r) => {
                    progress(&format!(
                        "rep {rep:>2}  {v:<8} {:>7.3} s  {} objects  {} connections  {}  {:>5.1}% untrusted",
                        r.seconds,
                        r.objects,
                        r.connections.len(),
                        r.handshakes
                            .map_or("no nena handshake".to_string(), |h| format!("{h} nena handshakes")),
                        r.untrusted_share * 100.0
                    ));
                    runs.push(r);
                }
                Err(e) => {
                    let f = Failure {
                        variant: v,
                        rep,
                        error: format!("{e:#}"),
                    };
                    progress(&format!("rep {rep:>2}  {v:<8} FAILED: {}", f.error));
                    failures.push(f);
                }
            }
        }
    }
    let summary = summary::summarize(&runs, &failures, page.objects.len(), page.bytes());
    Ok(PageReport {
        reps: opts.reps,
        delay_ms: opts.delay.as_secs_f64() * 1e3,
        objects: page.objects.len(),
        page_bytes: page.bytes(),
        per_host: PER_HOST,
        pause_s: opts.pause.as_secs_f64(),
        gateway_args: opts.gateway_args.clone(),
        summary,
        runs,
        failures,
        cpu: cpu_model().unwrap_or_default(),
        kernel: kernel(),
        loadavg_start,
        loadavg_end: loadavg(),
    })
}

/// One measured page load of variant `v`.
fn one_load(
    lab: &Lab,
    v: Variant,
    rep: usize,
    resolver: SocketAddr,
    page: Arc<Page>,
) -> Result<Run> {
    let (host, mptcp) = match v {
        Variant::Gateway => (Host::Lan, false),
        Variant::Mptcp => (Host::Client, true),
    };
    let cfg = LoadConfig {
        resolver,
        mptcp,
        per_host: PER_HOST,
        timeout: LOAD_TIMEOUT,
    };
    let hs0 = ends::handshakes(lab)?;
    let b0 = moved_bytes(lab, Host::Client, &LINKS)?;
    let loaded = lab.run_in(host, move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        rt.block_on(loader::load(&cfg, page))
    })??;
    let b1 = moved_bytes(lab, Host::Client, &LINKS)?;
    let hs1 = ends::handshakes(lab)?;
    let (untrusted_share, multipath) =
        summary::path_split(b1[0].saturating_sub(b0[0]), b1[1].saturating_sub(b0[1]));
    // Only the gateway makes nena sessions; plain MPTCP's loads are checked to have made
    // none (nothing of the client went through the gateway).
    let handshakes = hs1.0.saturating_sub(hs0.0);
    let (handshakes, handshake_mean_ms) = match v {
        Variant::Gateway => (
            Some(handshakes),
            (handshakes > 0).then(|| (hs1.1 - hs0.1) / handshakes as f64 * 1e3),
        ),
        Variant::Mptcp if handshakes == 0 => (None, None),
        Variant::Mptcp => {
            bail!("the gateway made {handshakes} nena sessions during a plain MPTCP load")
        }
    };
    Ok(Run {
        variant: v,
        rep,
        seconds: loaded.seconds,
        objects: loaded.objects,
        bytes: loaded.bytes,
        lookups: loaded.lookups,
        connections: loaded.connections,
        handshakes,
        handshake_mean_ms,
        untrusted_share,
        multipath,
        pause_bytes: None,
    })
}

/// The human table.
pub fn table(r: &PageReport) -> String {
    let mut heading = format!(
        "page of {} objects ({} bytes) on two host names, up to {} connections per name, \
         {} ms each way on each link; medians of {} loads",
        r.objects, r.page_bytes, r.per_host, r.delay_ms, r.reps
    );
    if r.pause_s > 0.0 {
        heading.push_str(&format!(", each after a pause of {} s", r.pause_s));
    }
    if !r.gateway_args.is_empty() {
        heading.push_str(&format!("; nena gateway {}", r.gateway_args.join(" ")));
    }
    let footer = format!(
        "{}; {}; load {} -> {}",
        r.cpu,
        r.kernel,
        r.loadavg_start.trim(),
        r.loadavg_end.trim()
    );
    summary::table(&r.summary, &r.failures, &heading, &footer)
}
