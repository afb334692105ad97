//! `nena lab ...`: the network-namespace lab (client with a trusted and an untrusted link,
//! router, server). A thin layer over the `nena-lab` crate.
use crate::exit::{CmdResult, Exit};
#[cfg(feature = "policy")]
use anyhow::anyhow;
use clap::{Args, Subcommand};
use nena_lab::emulate::{parse_duration, parse_ge_loss, parse_loss, parse_outage};
use nena_lab::{
    CaptureOptions, Direction, Emulation, Host, Lab, LabConfig, LabStatus, Link, LinkEmulation,
    Loss, Outage, PmMode, Rate, RateTrace,
};
use std::path::PathBuf;
use std::time::Duration;

#[derive(Args, Debug, Clone)]
pub struct Common {
    /// Name prefix of the lab's namespaces (<prefix>-client, -router, -server).
    #[arg(long, default_value = "nena")]
    pub prefix: String,
}

#[derive(Subcommand, Debug)]
pub enum LabCmd {
    /// Build the lab (again: reconciles an existing or half-built lab).
    Up(Box<UpArgs>),
    /// Remove the lab: captures and processes inside it, namespaces, veths, qdiscs, state.
    Down(Common),
    /// Show hosts, links, addresses, rates, link state, MPTCP settings and captures.
    Status(StatusArgs),
    /// Change a link: rate limit, or take it down / bring it up.
    Set(SetArgs),
    /// Capture a link to a pcap file (tcpdump in the link's namespace).
    Capture(CaptureArgs),
    /// Stop background captures (of one link, or all).
    CaptureStop(CaptureStopArgs),
    /// Run a command inside a host: `nena lab exec client -- ip addr`.
    Exec(ExecArgs),
    /// Run a scenario file (links, events, traffic runs) end to end, each run in its own
    /// lab, writing captures, socket samples, plots and DIR/summary.json.
    Run(crate::cmd::scenario::RunArgs),
    /// The relay of the emulated links (started by `nena lab up`, stopped by `down`).
    #[command(hide = true)]
    Relay(Common),
    /// Attack simulator for tests and demonstrations: an active attacker on one link who
    /// flips one payload byte of one TCP segment (keeping the checksum valid).
    #[cfg(feature = "policy")]
    Tamper(TamperArgs),
}

#[cfg(feature = "policy")]
#[derive(Args, Debug)]
#[command(after_long_help = "\
A TC program on the router's end of LINK watches the first TCP flow to (or, with --toward \
client, from) PORT whose SYN it sees, lets --skip-bytes of its payload pass, then XORs \
--mask into byte --offset of the next data segment, fixes the TCP checksum, and does it \
once (a retransmission of that byte is altered the same way). Attach it before the \
transfer starts. --show prints what it did, --remove takes it off; `nena lab down` removes \
it too. It assumes MPTCP's DSS checksum is off (net.mptcp.checksum_enabled=0, the default).")]
pub struct TamperArgs {
    #[command(flatten)]
    pub common: Common,
    /// trusted, untrusted or server.
    #[arg(value_parser = parse_link)]
    pub link: Link,
    /// Which way the altered segment travels (attaching: default server; with --show or
    /// --remove: default both ways).
    #[arg(long, value_parser = ["server", "client"])]
    pub toward: Option<String>,
    /// The server's TCP port (the nena server's, e.g. 4433). Required to attach.
    #[arg(long)]
    pub port: Option<u16>,
    /// Payload bytes of the flow that pass untouched before the byte is altered.
    #[arg(long, default_value = "65536", value_parser = crate::cmd::transfer::parse_bytes)]
    pub skip_bytes: u64,
    /// Which byte of the chosen segment to alter.
    #[arg(long, default_value = "100")]
    pub offset: u32,
    /// XOR mask (not 0), decimal or 0x-hex.
    #[arg(long, default_value = "0x20", value_parser = parse_mask)]
    pub mask: u8,
    /// Print what the attached program did instead of attaching.
    #[arg(long, conflicts_with = "remove")]
    pub show: bool,
    /// Remove the attached program (and print what it did).
    #[arg(long)]
    pub remove: bool,
    /// JSON output.
    #[arg(long)]
    pub json: bool,
}

#[cfg(feature = "policy")]
fn parse_mask(s: &str) -> Result<u8, String> {
    let v = match s.strip_prefix("0x") {
        Some(h) => u8::from_str_radix(h, 16),
        None => s.parse(),
    }
    .map_err(|_| format!("`{s}` is not a byte (0..255 or 0x00..0xff)"))?;
    if v == 0 {
        return Err("the mask must not be 0 (it would change nothing)".into());
    }
    Ok(v)
}

#[derive(Args, Debug)]
pub struct UpArgs {
    #[command(flatten)]
    pub common: Common,
    /// MPTCP path manager of the client: kernel (endpoint for 198.18.2.2) or userspace.
    #[arg(long, default_value = "kernel", value_parser = parse_pm)]
    pub pm: PmMode,
    /// Rate limit of the trusted link, both directions (e.g. 100mbit).
    #[arg(long, value_parser = parse_rate)]
    pub trusted_rate: Option<Rate>,
    /// Rate limit of the untrusted link, both directions (e.g. 20mbit).
    #[arg(long, value_parser = parse_rate)]
    pub untrusted_rate: Option<Rate>,
    /// Rate limit of the router-server link, both directions.
    #[arg(long, value_parser = parse_rate)]
    pub server_rate: Option<Rate>,
    /// Skip the TCP reachability check after building.
    #[arg(long)]
    pub no_verify: bool,
    /// Turn off TSO/GSO on the links: packets of at most one MSS, as on a real wire
    /// (captures then look like the papers' figures; throughput is lower).
    #[arg(long)]
    pub no_offload: bool,
    /// Print the resulting status as JSON.
    #[arg(long)]
    pub json: bool,
    /// One-way delay on the trusted link, each direction (e.g. 20ms). Any emulation flag makes
    /// the link a TAP pair with the lab's relay instead of a veth pair.
    #[arg(long, value_parser = parse_dur, allow_hyphen_values = true, help_heading = "Emulation")]
    pub trusted_delay: Option<Duration>,
    /// Jitter on the trusted link: each frame's delay is drawn uniformly in delay ± jitter.
    #[arg(long, value_parser = parse_dur, allow_hyphen_values = true, help_heading = "Emulation")]
    pub trusted_jitter: Option<Duration>,
    /// Random loss on the trusted link, each direction (5% or 0.05).
    #[arg(long, value_parser = parse_loss_arg, conflicts_with = "trusted_ge_loss", allow_hyphen_values = true, help_heading = "Emulation")]
    pub trusted_loss: Option<Loss>,
    /// Gilbert-Elliott loss on the trusted link: p,r[,1-h[,1-k]] (e.g. 1%,30%).
    #[arg(long, value_parser = parse_ge_arg, allow_hyphen_values = true, help_heading = "Emulation")]
    pub trusted_ge_loss: Option<Loss>,
    /// Rate trace of the trusted link: CSV `time_s,rate` or a mahimahi delivery trace.
    #[arg(long, value_parser = parse_trace_arg, help_heading = "Emulation")]
    pub trusted_trace: Option<RateTrace>,
    /// Outage of the trusted link, START+DURATION from `up` (e.g. 16s+5s); repeatable.
    #[arg(long, value_parser = parse_outage_arg, allow_hyphen_values = true, help_heading = "Emulation")]
    pub trusted_outage: Vec<Outage>,
    /// Let jitter reorder frames on the trusted link.
    #[arg(long, help_heading = "Emulation")]
    pub trusted_reorder: bool,
    /// One-way delay on the untrusted link, each direction (e.g. 20ms). Any emulation flag makes
    /// the link a TAP pair with the lab's relay instead of a veth pair.
    #[arg(long, value_parser = parse_dur, allow_hyphen_values = true, help_heading = "Emulation")]
    pub untrusted_delay: Option<Duration>,
    /// Jitter on the untrusted link: each frame's delay is drawn uniformly in delay ± jitter.
    #[arg(long, value_parser = parse_dur, allow_hyphen_values = true, help_heading = "Emulation")]
    pub untrusted_jitter: Option<Duration>,
    /// Random loss on the untrusted link, each direction (5% or 0.05).
    #[arg(long, value_parser = parse_loss_arg, conflicts_with = "untrusted_ge_loss", allow_hyphen_values = true, help_heading = "Emulation")]
    pub untrusted_loss: Option<Loss>,
    /// Gilbert-Elliott loss on the untrusted link: p,r[,1-h[,1-k]] (e.g. 1%,30%).
    #[arg(long, value_parser = parse_ge_arg, allow_hyphen_values = true, help_heading = "Emulation")]
    pub untrusted_ge_loss: Option<Loss>,
    /// Rate trace of the untrusted link: CSV `time_s,rate` or a mahimahi delivery trace.
    #[arg(long, value_parser = parse_trace_arg, help_heading = "Emulation")]
    pub untrusted_trace: Option<RateTrace>,
    /// Outage of the untrusted link, START+DURATION from `up` (e.g. 16s+5s); repeatable.
    #[arg(long, value_parser = parse_outage_arg, allow_hyphen_values = true, help_heading = "Emulation")]
    pub untrusted_outage: Vec<Outage>,
    /// Let jitter reorder frames on the untrusted link.
    #[arg(long, help_heading = "Emulation")]
    pub untrusted_reorder: bool,
    /// One-way delay on the router-server link, each direction (e.g. 20ms). Any emulation flag makes
    /// the link a TAP pair with the lab's relay instead of a veth pair.
    #[arg(long, value_parser = parse_dur, allow_hyphen_values = true, help_heading = "Emulation")]
    pub server_delay: Option<Duration>,
    /// Jitter on the router-server link: each frame's delay is drawn uniformly in delay ± jitter.
    #[arg(long, value_parser = parse_dur, allow_hyphen_values = true, help_heading = "Emulation")]
    pub server_jitter: Option<Duration>,
    /// Random loss on the router-server link, each direction (5% or 0.05).
    #[arg(long, value_parser = parse_loss_arg, conflicts_with = "server_ge_loss", allow_hyphen_values = true, help_heading = "Emulation")]
    pub server_loss: Option<Loss>,
    /// Gilbert-Elliott loss on the router-server link: p,r[,1-h[,1-k]] (e.g. 1%,30%).
    #[arg(long, value_parser = parse_ge_arg, allow_hyphen_values = true, help_heading = "Emulation")]
    pub server_ge_loss: Option<Loss>,
    /// Rate trace of the router-server link: CSV `time_s,rate` or a mahimahi delivery trace.
    #[arg(long, value_parser = parse_trace_arg, help_heading = "Emulation")]
    pub server_trace: Option<RateTrace>,
    /// Outage of the router-server link, START+DURATION from `up` (e.g. 16s+5s); repeatable.
    #[arg(long, value_parser = parse_outage_arg, allow_hyphen_values = true, help_heading = "Emulation")]
    pub server_outage: Vec<Outage>,
    /// Let jitter reorder frames on the router-server link.
    #[arg(long, help_heading = "Emulation")]
    pub server_reorder: bool,
}

#[derive(Args, Debug)]
pub struct StatusArgs {
    #[command(flatten)]
    pub common: Common,
    /// Machine-readable output.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
#[command(group(clap::ArgGroup::new("change").required(true).multiple(true).args(["rate", "no_rate", "down", "up", "delay", "jitter", "loss", "ge_loss", "trace", "outage", "reorder", "no_reorder"])))]
pub struct SetArgs {
    #[command(flatten)]
    pub common: Common,
    /// trusted, untrusted or server.
    #[arg(value_parser = parse_link)]
    pub link: Link,
    /// Rate limit both directions of the link (e.g. 20mbit).
    #[arg(long, value_parser = parse_rate, conflicts_with = "no_rate")]
    pub rate: Option<Rate>,
    /// Remove the rate limit.
    #[arg(long)]
    pub no_rate: bool,
    /// Take the link down (both ends).
    #[arg(long, conflicts_with = "up")]
    pub down: bool,
    /// Bring the link up (and restore its routes).
    #[arg(long)]
    pub up: bool,
    /// One-way delay (e.g. 20ms). Emulation flags change only what they name; a link that
    /// was a veth pair becomes a TAP pair with the relay (a short gap).
    #[arg(long, value_parser = parse_dur, allow_hyphen_values = true, help_heading = "Emulation")]
    pub delay: Option<Duration>,
    /// Jitter: each frame's delay is drawn uniformly in delay ± jitter.
    #[arg(long, value_parser = parse_dur, allow_hyphen_values = true, help_heading = "Emulation")]
    pub jitter: Option<Duration>,
    /// Random loss (5% or 0.05; 0 for none).
    #[arg(long, value_parser = parse_loss_arg, conflicts_with = "ge_loss", allow_hyphen_values = true, help_heading = "Emulation")]
    pub loss: Option<Loss>,
    /// Gilbert-Elliott loss: p,r[,1-h[,1-k]].
    #[arg(long, value_parser = parse_ge_arg, allow_hyphen_values = true, help_heading = "Emulation")]
    pub ge_loss: Option<Loss>,
    /// Rate trace file (CSV `time_s,rate` or mahimahi), timed from now.
    #[arg(long, value_parser = parse_trace_arg, help_heading = "Emulation")]
    pub trace: Option<RateTrace>,
    /// Outage START+DURATION from now (0+5s: at once, for 5 s); repeatable; replaces the
    /// link's outages.
    #[arg(long, value_parser = parse_outage_arg, allow_hyphen_values = true, help_heading = "Emulation")]
    pub outage: Vec<Outage>,
    /// Let jitter reorder frames.
    #[arg(long, conflicts_with = "no_reorder", help_heading = "Emulation")]
    pub reorder: bool,
    /// Keep frames in order under jitter (the default).
    #[arg(long, help_heading = "Emulation")]
    pub no_reorder: bool,
    /// Which direction the emulation flags change (to-router/up or from-router/down;
    /// default both).
    #[arg(long, value_parser = parse_direction, help_heading = "Emulation")]
    pub direction: Option<Direction>,
}

#[derive(Args, Debug)]
pub struct CaptureArgs {
    #[command(flatten)]
    pub common: Common,
    /// trusted, untrusted or server.
    #[arg(value_parser = parse_link)]
    pub link: Link,
    /// The pcap file to write.
    pub file: PathBuf,
    /// Stop after this many packets.
    #[arg(long)]
    pub count: Option<u64>,
    /// Stop after this many seconds.
    #[arg(long)]
    pub seconds: Option<f64>,
    /// Only packets matching this tcpdump filter (e.g. "tcp").
    #[arg(long)]
    pub filter: Option<String>,
    /// Bytes to keep of each packet (default: all).
    #[arg(long)]
    pub snaplen: Option<u32>,
    /// Return at once and leave the capture running; stop it with `nena lab capture-stop`
    /// (or `nena lab down`). Prints tcpdump's pid.
    #[arg(long, conflicts_with = "seconds")]
    pub background: bool,
}

#[derive(Args, Debug)]
pub struct CaptureStopArgs {
    #[command(flatten)]
    pub common: Common,
    /// Only captures of this link.
    #[arg(value_parser = parse_link)]
    pub link: Option<Link>,
}

#[derive(Args, Debug)]
pub struct ExecArgs {
    #[command(flatten)]
    pub common: Common,
    /// client, router or server.
    #[arg(value_parser = parse_host)]
    pub host: Host,
    /// The command and its arguments (after `--`).
    #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
    pub cmd: Vec<String>,
}

fn parse_dur(s: &str) -> Result<Duration, String> {
    parse_duration(s).map_err(|e| e.to_string())
}
fn parse_loss_arg(s: &str) -> Result<Loss, String> {
    parse_loss(s).map_err(|e| e.to_string())
}
fn parse_ge_arg(s: &str) -> Result<Loss, String> {
    parse_ge_loss(s).map_err(|e| e.to_string())
}
fn parse_outage_arg(s: &str) -> Result<Outage, String> {
    parse_outage(s).map_err(|e| e.to_string())
}
fn parse_trace_arg(s: &str) -> Result<RateTrace, String> {
    RateTrace::from_file(std::path::Path::new(s)).map_err(|e| e.to_string())
}
fn parse_direction(s: &str) -> Result<Direction, String> {
    s.parse()
}

/// The emulation the `--X-...` flags of `up` ask for on one link (`None`: no flag given).
#[allow(clippy::too_many_arguments)]
fn link_emulation(
    delay: Option<Duration>,
    jitter: Option<Duration>,
    loss: Option<Loss>,
    ge: Option<Loss>,
    trace: Option<RateTrace>,
    outages: Vec<Outage>,
    reorder: bool,
) -> Option<LinkEmulation> {
    if delay.is_none()
        && jitter.is_none()
        && loss.is_none()
        && ge.is_none()
        && trace.is_none()
        && outages.is_empty()
        && !reorder
    {
        return None;
    }
    Some(LinkEmulation::both(Emulation {
        delay: delay.unwrap_or_default(),
        jitter: jitter.unwrap_or_default(),
        loss: ge.or(loss).unwrap_or_default(),
        trace,
        outages,
        reorder,
        seed: None,
    }))
}

fn parse_rate(s: &str) -> Result<Rate, String> {
    s.parse::<Rate>().map_err(|e| e.to_string())
}
fn parse_link(s: &str) -> Result<Link, String> {
    s.parse()
}
fn parse_host(s: &str) -> Result<Host, String> {
    s.parse()
}
fn parse_pm(s: &str) -> Result<PmMode, String> {
    s.parse()
}

pub fn run(c: LabCmd) -> CmdResult {
    let prefix = match &c {
        LabCmd::Up(a) => &a.common.prefix,
        LabCmd::Down(a) => &a.prefix,
        LabCmd::Status(a) => &a.common.prefix,
        LabCmd::Set(a) => &a.common.prefix,
        LabCmd::Capture(a) => &a.common.prefix,
        LabCmd::CaptureStop(a) => &a.common.prefix,
        LabCmd::Exec(a) => &a.common.prefix,
        LabCmd::Relay(a) => &a.prefix,
        #[cfg(feature = "policy")]
        LabCmd::Tamper(a) => &a.common.prefix,
        LabCmd::Run(a) => &a.prefix,
    };
    nena_lab::validate_prefix(prefix).map_err(Exit::usage)?;
    match c {
        LabCmd::Up(a) => up(*a),
        LabCmd::Down(a) => {
            Lab::down(&a.prefix)?;
            println!("lab `{}` is down", a.prefix);
            Ok(())
        }
        LabCmd::Status(a) => {
            let st = Lab::status(&a.common.prefix)?;
            if a.json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&st).map_err(anyhow::Error::from)?
                );
            } else {
                print!("{}", render_status(&st));
            }
            Ok(())
        }
        LabCmd::Set(a) => set(a),
        LabCmd::Capture(a) => capture(a),
        LabCmd::CaptureStop(a) => {
            let lab = Lab::open(&a.common.prefix)?;
            let stopped = lab.stop_captures(a.link)?;
            for (r, st) in &stopped {
                println!(
                    "stopped capture {} of the {} link: {} ({} packets{})",
                    r.pid,
                    r.link,
                    r.file.display(),
                    st.captured
                        .map(|n| n.to_string())
                        .unwrap_or_else(|| "?".into()),
                    match st.dropped_by_kernel {
                        Some(d) if d > 0 => format!(", {d} DROPPED by the kernel"),
                        _ => String::new(),
                    }
                );
            }
            if stopped.is_empty() {
                println!("no capture was running");
            }
            Ok(())
        }
        LabCmd::Exec(a) => exec(a),
        LabCmd::Relay(a) => Ok(nena_lab::emulate::relay_main(&a.prefix)?),
        #[cfg(feature = "policy")]
        LabCmd::Tamper(a) => tamper(a),
        LabCmd::Run(a) => crate::cmd::scenario::run(&a),
    }
}

fn up(a: UpArgs) -> CmdResult {
    let cfg = LabConfig {
        prefix: a.common.prefix.clone(),
        pm: a.pm,
        trusted_rate: a.trusted_rate,
        untrusted_rate: a.untrusted_rate,
        server_rate: a.server_rate,
        verify: !a.no_verify,
        offload: !a.no_offload,
        trusted_emulation: link_emulation(
            a.trusted_delay,
            a.trusted_jitter,
            a.trusted_loss,
            a.trusted_ge_loss,
            a.trusted_trace,
            a.trusted_outage,
            a.trusted_reorder,
        ),
        untrusted_emulation: link_emulation(
            a.untrusted_delay,
            a.untrusted_jitter,
            a.untrusted_loss,
            a.untrusted_ge_loss,
            a.untrusted_trace,
            a.untrusted_outage,
            a.untrusted_reorder,
        ),
        server_emulation: link_emulation(
            a.server_delay,
            a.server_jitter,
            a.server_loss,
            a.server_ge_loss,
            a.server_trace,
            a.server_outage,
            a.server_reorder,
        ),
        relay_exe: None,
    };
    let was_up = Lab::is_up(&cfg.prefix);
    Lab::up(&cfg)?;
    let st = Lab::status(&cfg.prefix)?;
    if a.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&st).map_err(anyhow::Error::from)?
        );
    } else {
        if was_up {
            println!(
                "lab `{}` was already up; reconciled it with the requested settings",
                cfg.prefix
            );
        } else {
            println!("lab `{}` is up", cfg.prefix);
        }
        print!("{}", render_status(&st));
    }
    Ok(())
}

fn set(a: SetArgs) -> CmdResult {
    let lab = Lab::open(&a.common.prefix)?;
    if a.down {
        lab.set_link(a.link, false)?;
        println!("{} link is down", a.link);
    }
    if a.up {
        lab.set_link(a.link, true)?;
        println!("{} link is up", a.link);
    }
    if let Some(r) = a.rate {
        lab.set_rate(a.link, Some(r))?;
        println!("{} link limited to {r} each way", a.link);
    }
    if a.no_rate {
        lab.set_rate(a.link, None)?;
        println!("{} link has no rate limit", a.link);
    }
    let emulate = a.delay.is_some()
        || a.jitter.is_some()
        || a.loss.is_some()
        || a.ge_loss.is_some()
        || a.trace.is_some()
        || !a.outage.is_empty()
        || a.reorder
        || a.no_reorder;
    if !emulate {
        if a.direction.is_some() {
            return Err(Exit::usage(anyhow::anyhow!(
                "--direction applies to the emulation flags (--delay, --loss, ...)"
            )));
        }
        return Ok(());
    }
    let dirs = match a.direction {
        Some(d) => vec![d],
        None => Direction::BOTH.to_vec(),
    };
    let current = lab.config().emulation(a.link).cloned().unwrap_or_default();
    for d in dirs {
        let mut e = current.get(d).clone();
        if let Some(v) = a.delay {
            e.delay = v;
        }
        if let Some(v) = a.jitter {
            e.jitter = v;
        }
        if let Some(v) = a.ge_loss.or(a.loss) {
            e.loss = v;
        }
        if let Some(v) = &a.trace {
            e.trace = Some(v.clone());
        }
        if !a.outage.is_empty() {
            e.outages = a.outage.clone();
        }
        if a.reorder {
            e.reorder = true;
        }
        if a.no_reorder {
            e.reorder = false;
        }
        lab.set_emulation(a.link, d, e.clone())?;
        println!("{} link {d}: {e}", a.link);
    }
    Ok(())
}

fn capture(a: CaptureArgs) -> CmdResult {
    if let Some(s) = a.seconds {
        if !(s.is_finite() && s > 0.0) {
            return Err(Exit::usage(anyhow::anyhow!(
                "--seconds must be a positive number"
            )));
        }
    }
    if a.count == Some(0) {
        return Err(Exit::usage(anyhow::anyhow!("--count must be at least 1")));
    }
    let lab = Lab::open(&a.common.prefix)?;
    let opts = CaptureOptions {
        count: a.count,
        snaplen: a.snaplen,
        filter: a.filter.clone(),
    };
    let cap = lab.capture_with(a.link, &a.file, &opts)?;
    if a.background {
        let file = cap.file().display().to_string();
        let pid = cap.detach();
        println!("{pid}");
        eprintln!("capturing the {} link to {file} in the background (tcpdump pid {pid}); stop with `nena lab capture-stop`", a.link);
        return Ok(());
    }
    eprintln!(
        "capturing the {} link to {} (Ctrl-C to stop)",
        a.link,
        cap.file().display()
    );
    let file = cap.file().to_path_buf();
    let stats = cap.run_until_interrupted(a.seconds.map(Duration::from_secs_f64))?;
    eprintln!(
        "{} packets captured{} -> {}",
        stats
            .captured
            .map(|n| n.to_string())
            .unwrap_or_else(|| "?".into()),
        match stats.dropped_by_kernel {
            Some(d) if d > 0 => format!(" ({d} dropped by the kernel)"),
            _ => String::new(),
        },
        file.display()
    );
    Ok(())
}

fn exec(a: ExecArgs) -> CmdResult {
    use std::os::unix::process::CommandExt;
    let lab = Lab::open(&a.common.prefix)?;
    let mut cmd = lab.command(a.host, &a.cmd[0], &a.cmd[1..]);
    // Replace ourselves: the command's exit status (and signals, and the terminal) are its own.
    let err = cmd.exec();
    Err(anyhow::Error::from(err)
        .context(format!("cannot run `ip netns exec {}`", lab.netns(a.host)))
        .into())
}

/// The human-readable status.
pub fn render_status(st: &LabStatus) -> String {
    use std::fmt::Write;
    let mut o = String::new();
    let state = if st.up {
        "up"
    } else if st.partial {
        "partially built (run `nena lab down` to clean up)"
    } else {
        "down"
    };
    let _ = writeln!(o, "lab `{}`: {state}", st.prefix);
    for h in &st.hosts {
        let _ = writeln!(
            o,
            "  {:<7} netns {}{}",
            h.host.name(),
            h.netns,
            if h.exists { "" } else { " (missing)" }
        );
    }
    if st.up {
        let _ = writeln!(o, "links:");
        for l in &st.links {
            let show = |r: Option<Rate>| {
                r.map(|r| r.to_string())
                    .unwrap_or_else(|| "unlimited".into())
            };
            let rate = match (l.rate, l.router_rate) {
                (None, None) => "no rate limit".to_string(),
                (Some(a), Some(b)) if a == b => format!("rate {a}"),
                (a, b) => format!("rate {} out, {} in", show(a), show(b)),
            };
            let _ = writeln!(
                o,
                "  {:<9} {} {} {} <-> router {} {}  {}  {rate}{}",
                l.link.name(),
                l.edge_host.name(),
                l.edge_iface,
                l.edge_addr,
                l.router_iface,
                l.router_addr,
                if !l.exists {
                    "MISSING"
                } else if l.up {
                    "up"
                } else {
                    "DOWN"
                },
                if l.gso == Some(false) && l.kind.as_deref() != Some("tap") {
                    "  offloads off"
                } else {
                    ""
                },
            );
            if let Some(e) = &l.emulation {
                for d in Direction::BOTH {
                    let _ = writeln!(o, "            {d:<11} {}", e.get(d));
                }
            }
        }
    }
    if let Some(m) = &st.mptcp {
        let _ = writeln!(
            o,
            "mptcp: client {}, server {}, path manager {}",
            if m.client_enabled {
                "enabled"
            } else {
                "DISABLED"
            },
            if m.server_enabled {
                "enabled"
            } else {
                "DISABLED"
            },
            m.pm.map(|p| p.to_string()).unwrap_or_else(|| "?".into())
        );
        if m.client_endpoints.is_empty() {
            let _ = writeln!(o, "  client endpoints: none");
        }
        for e in &m.client_endpoints {
            let _ = writeln!(o, "  client endpoint: {e}");
        }
        let _ = writeln!(
            o,
            "  limits: client {}; server {}",
            m.client_limits, m.server_limits
        );
    }
    if let Some(p) = st.relay_pid {
        let _ = writeln!(o, "relay: pid {p} (TAP pairs of the emulated links)");
    }
    for c in &st.captures {
        let _ = writeln!(
            o,
            "capture: tcpdump {} on the {} link -> {}",
            c.pid,
            c.link,
            c.file.display()
        );
    }
    o
}

#[cfg(feature = "policy")]
fn tamper(a: TamperArgs) -> CmdResult {
    use nena_policy::tamper::{self, TamperConfig, TamperRecord};
    let lab = Lab::open(&a.common.prefix)?;
    let end = a.link.router();
    // Toward the server: packets arriving at the router from the client (ingress); toward
    // the client: packets leaving the router (egress). For the server link the reverse.
    let hook_of = |toward_server: bool| toward_server != (a.link == Link::Server);
    let dev = end.iface;
    let print = |r: Option<TamperRecord>, what: &str| -> CmdResult {
        if a.json {
            println!(
                "{}",
                serde_json::to_string_pretty(&r).map_err(anyhow::Error::from)?
            );
            return Ok(());
        }
        match r {
            None => println!("no tamper program on the {} link", a.link),
            Some(r) => {
                let flow = r.flow.as_deref().unwrap_or("(no SYN seen yet)");
                if r.fired {
                    println!(
                        "{what}: flow {flow}: byte at payload offset {} (TCP seq {}) altered \
                         {:#04x} -> {:#04x}, in {} segment(s) of {} seen",
                        r.offset_in_flow, r.seq, r.old_byte, r.new_byte, r.altered, r.seen
                    );
                } else {
                    println!(
                        "{what}: flow {flow}: nothing altered yet ({} data segments seen)",
                        r.seen
                    );
                }
            }
        }
        Ok(())
    };
    if a.show || a.remove {
        // The direction named, or both: the first program found is reported (one per hook).
        let hooks: Vec<bool> = match a.toward.as_deref() {
            Some(t) => vec![hook_of(t == "server")],
            None => vec![hook_of(true), hook_of(false)],
        };
        let mut found = None;
        for ingress in hooks {
            let r = if a.show {
                lab.run_in(end.host, || tamper::show(dev, ingress))??
            } else {
                lab.run_in(end.host, || tamper::remove(dev, ingress))??
            };
            found = found.or(r);
        }
        return print(found, if a.show { "tamper" } else { "removed" });
    }
    let toward_server = a.toward.as_deref() != Some("client");
    let ingress = hook_of(toward_server);
    let port = a.port.ok_or_else(|| {
        Exit::usage(anyhow!(
            "give --port PORT (the server's TCP port) to attach"
        ))
    })?;
    let skip = u32::try_from(a.skip_bytes)
        .map_err(|_| Exit::usage(anyhow!("--skip-bytes must be below 4 GiB")))?;
    let cfg = TamperConfig {
        port,
        match_dst: toward_server,
        skip,
        offset: a.offset,
        mask: a.mask,
    };
    for host in [Host::Client, Host::Server] {
        if lab.run_in(host, tamper::mptcp_checksum_enabled)? {
            eprintln!(
                "nena: warning: net.mptcp.checksum_enabled is 1 in the {host}: MPTCP itself will \
                 notice the altered byte"
            );
        }
    }
    lab.run_in(end.host, || tamper::attach(dev, ingress, &cfg))??;
    if !a.json {
        println!(
            "tamper attached on the router's {} interface ({}): the first flow {} port {port} \
             gets byte {} of its first segment after {skip} payload bytes XORed with {:#04x}",
            dev,
            if ingress { "ingress" } else { "egress" },
            if toward_server { "to" } else { "from" },
            a.offset,
            a.mask
        );
    }
    Ok(())
}
