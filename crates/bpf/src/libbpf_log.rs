//! libbpf's own messages through the `log` crate (target `libbpf`) instead of straight to
//! stderr: a user sees nena's one-line errors, not libbpf's raw lines ("Kernel error
//! message: Parent Qdisc doesn't exists" when a clsact qdisc is created that was there),
//! and `-v` / `-vv` (or `RUST_LOG=libbpf=debug`) brings them back, the verifier's report of
//! a refused program among them (libbpf prints it as a warning: shown at `-v`).

use libbpf_rs::PrintLevel;

/// Sends every libbpf message to `log`: libbpf's warnings at info, its info at debug, its
/// debug at trace.
pub fn route_to_log() {
    libbpf_rs::set_print(Some((PrintLevel::Debug, forward)));
}

fn forward(level: PrintLevel, msg: String) {
    let level = match level {
        PrintLevel::Warn => log::Level::Info,
        PrintLevel::Info => log::Level::Debug,
        PrintLevel::Debug => log::Level::Trace,
    };
    log::log!(target: "libbpf", level, "{}", msg.trim_end());
}
