//! `nena lab up`: build the lab (or reconcile an existing one) with the rates, path manager
//! link emulation, address families, NAT and MPTCP-option stripping asked for, then show its
//! status.
use super::args::{
    parse_dur, parse_family, parse_ge_arg, parse_loss_arg, parse_outage_arg, parse_pm, parse_rate,
    parse_trace_arg, Common,
};
use super::status::render_status;
use crate::exit::{CmdResult, Exit};
use clap::Args;
use nena_lab::{
    Emulation, Family, Lab, LabConfig, LinkEmulation, Loss, Outage, PmMode, Rate, RateTrace,
};
use std::time::Duration;

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
    /// Servers: 1 (the classic `server` host), or 2 to 8 for a fleet `<prefix>-s1..sN`
    /// sharing 198.18.4.2 behind an nftables balancer on the router (a 4-tuple hash per new
    /// connection; each server announces its own join port, 4460+i, and denies joins to the
    /// shared address). See docs/DEPLOY.md.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=8))]
    pub servers: u8,
    /// Add a LAN host `<prefix>-lan` behind the client (198.18.5.2/24, 2001:2:0:5::2/64 on
    /// its eth0; the client's `lan` is 198.18.5.1, 2001:2:0:5::1), its default routes via
    /// the client, which does not forward: for a gateway on the client. Without it, `up`
    /// removes a LAN host an earlier `up --lan` built.
    #[arg(long)]
    pub lan: bool,
    /// Dual stack: link N (trusted 1, untrusted 2, server 3) also gets 2001:2:0:N::2/64 on
    /// its edge end (client, server) and 2001:2:0:N::1/64 on the router's; the router
    /// forwards IPv6; the client has IPv6 source rules (tables 101/102) and, with
    /// `--pm kernel`, a subflow endpoint for 2001:2:0:2::2. Makes `dual` the default of
    /// `--trusted-family` and `--untrusted-family`. Without it (and without a family with
    /// IPv6), `up` removes the IPv6 an earlier `up --ipv6` set.
    #[arg(long)]
    pub ipv6: bool,
    /// The families the trusted link carries: ipv4, ipv6 or dual (default: dual with
    /// --ipv6, else ipv4). ipv6: no IPv4 address on the link, no IPv4 route via it. Any IPv6
    /// makes the server link and the server dual stack.
    #[arg(long, value_parser = parse_family)]
    pub trusted_family: Option<Family>,
    /// The families the untrusted link carries: ipv4, ipv6 or dual (default as
    /// --trusted-family).
    #[arg(long, value_parser = parse_family)]
    pub untrusted_family: Option<Family>,
    /// The router source-NATs what comes from the untrusted link towards the server
    /// (nftables masquerade, table `inet nena_lab_nat`): the server sees 198.18.3.1
    /// (2001:2:0:3::1) as the untrusted subflow's source, as behind a WLAN's router.
    #[arg(long)]
    pub untrusted_nat: bool,
    /// The router replaces every MPTCP option (TCP option 30) of the segments crossing the
    /// untrusted link, both ways, by NOPs (nftables `reset tcp option mptcp`, table
    /// `inet nena_lab_strip`), as some hotel and captive-portal middleboxes do.
    #[arg(long)]
    pub untrusted_strip_mptcp: bool,
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

pub(super) fn up(a: UpArgs) -> CmdResult {
    let (trusted_family, untrusted_family) =
        LabConfig::families(a.ipv6, a.trusted_family, a.untrusted_family).map_err(Exit::usage)?;
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
        servers: a.servers,
        lan: a.lan,
        trusted_family,
        untrusted_family,
        untrusted_nat: a.untrusted_nat,
        untrusted_strip_mptcp: a.untrusted_strip_mptcp,
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
