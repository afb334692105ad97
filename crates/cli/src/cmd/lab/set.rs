//! `nena lab set LINK ...`: change a link of a running lab: its rate limit, its state
//! (down / up), its emulation.
use super::args::{
    parse_direction, parse_dur, parse_ge_arg, parse_link, parse_loss_arg, parse_outage_arg,
    parse_rate, parse_trace_arg, Common,
};
use crate::exit::{CmdResult, Exit};
use clap::Args;
use nena_lab::{Direction, Lab, Link, Loss, Outage, Rate, RateTrace};
use std::time::Duration;

#[derive(Args, Debug)]
#[command(group(clap::ArgGroup::new("change").required(true).multiple(true).args(["rate", "no_rate", "down", "up", "delay", "jitter", "loss", "ge_loss", "trace", "outage", "reorder", "no_reorder"])))]
pub struct SetArgs {
    #[command(flatten)]
    pub common: Common,
    /// trusted, untrusted, server, or lan (a lab built with `--lan`).
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

pub(super) fn set(a: SetArgs) -> CmdResult {
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
