//! What every `nena lab` subcommand shares: the lab's name prefix, and the value parsers
//! of links, hosts, rates, address families and emulation settings.
use clap::Args;
use nena_lab::emulate::{parse_duration, parse_ge_loss, parse_loss, parse_outage};
use nena_lab::{Direction, Family, Host, Link, Loss, Outage, PmMode, Rate, RateTrace};
use std::time::Duration;

#[derive(Args, Debug, Clone)]
pub struct Common {
    /// Name prefix of the lab's namespaces (<prefix>-client, -router, -server).
    #[arg(long, default_value = "nena")]
    pub prefix: String,
}

pub(super) fn parse_dur(s: &str) -> Result<Duration, String> {
    parse_duration(s).map_err(|e| e.to_string())
}
pub(super) fn parse_loss_arg(s: &str) -> Result<Loss, String> {
    parse_loss(s).map_err(|e| e.to_string())
}
pub(super) fn parse_ge_arg(s: &str) -> Result<Loss, String> {
    parse_ge_loss(s).map_err(|e| e.to_string())
}
pub(super) fn parse_outage_arg(s: &str) -> Result<Outage, String> {
    parse_outage(s).map_err(|e| e.to_string())
}
pub(super) fn parse_trace_arg(s: &str) -> Result<RateTrace, String> {
    RateTrace::from_file(std::path::Path::new(s)).map_err(|e| e.to_string())
}
pub(super) fn parse_direction(s: &str) -> Result<Direction, String> {
    s.parse()
}

pub(super) fn parse_rate(s: &str) -> Result<Rate, String> {
    s.parse::<Rate>().map_err(|e| e.to_string())
}
pub(super) fn parse_link(s: &str) -> Result<Link, String> {
    s.parse()
}
pub(super) fn parse_host(s: &str) -> Result<Host, String> {
    s.parse()
}
pub(super) fn parse_pm(s: &str) -> Result<PmMode, String> {
    s.parse()
}
pub(super) fn parse_family(s: &str) -> Result<Family, String> {
    s.parse()
}
