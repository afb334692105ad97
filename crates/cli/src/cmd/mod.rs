//! One module per concern; each parses its own arguments and calls its library crate.
pub mod analyze;
pub mod attack;
pub mod bench;
#[cfg(feature = "cc")]
pub mod cc;
pub mod client;
pub mod codec;
pub mod eavesdrop;
pub mod gateway;
pub mod gateway_caps;
pub mod get;
pub mod host;
pub mod keys;
pub mod lab;
pub mod mpc;
pub mod parse;
pub mod perf;
#[cfg(feature = "policy")]
pub mod policy;
pub mod proxy;
pub mod report;
#[cfg(feature = "policy")]
pub mod run;
#[cfg(feature = "policy")]
pub mod run_watchdog;
pub mod send;
pub mod serve;
pub mod server;
pub mod status;

/// A spinner on stderr for long work, only when stderr is a terminal and `show`.
pub fn spinner(show: bool, msg: &'static str) -> Option<indicatif::ProgressBar> {
    use std::io::IsTerminal;
    if !show || !std::io::stderr().is_terminal() {
        return None;
    }
    let pb = indicatif::ProgressBar::new_spinner();
    pb.set_message(msg);
    pb.enable_steady_tick(std::time::Duration::from_millis(120));
    Some(pb)
}
