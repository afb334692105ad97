//! The `nena` command's integration tests, in one test binary (one link, one harness):
//! each module is one command or concern, driven through the built `nena` executable,
//! most of them in a lab of network namespaces (root). Shared helpers are in [`harness`].
//! Run one module with `cargo test --release -p nena --test cli MODULE::`. The repository's
//! own checks (docs against code, module cycles, the Debian package) are the `meta` binary,
//! `tests/meta/`; `nena run` killed, which no other test's `nena run` may overlap, is the
//! `run_killed` binary, `tests/run_killed/`.

mod harness;

mod analyze_cli;
mod analyze_lab;
mod attack_cli;
mod attack_start;
#[cfg(feature = "openssl")]
mod bench_aggregation;
mod bench_codec_cli;
mod bench_handshake_cli;
mod bench_hostile;
mod bench_metered;
mod bench_page;
mod bench_peers;
mod bench_realtime;
mod bench_sessions;
#[cfg(feature = "cc")]
mod cc_cli;
mod codec_cli;
#[cfg(feature = "policy")]
mod debug_redaction;
mod eavesdrop_cli;
mod first_mistakes;
mod grafana_dashboard;
mod host_cli;
mod lab_cli;
mod lab_emulation_cli;
#[cfg(feature = "policy")]
mod lab_emulation_policy;
mod lab_families_cli;
#[cfg(feature = "policy")]
mod policy_cli;
#[cfg(feature = "policy")]
mod policy_tenants;
mod quickstart;
mod recipes;
mod scenario_cli;
mod status_cli;
mod status_page;
mod transfer_bench;
mod transfer_browser;
mod transfer_capture;
mod transfer_cli;
mod transfer_failures;
mod transfer_families;
mod transfer_files;
mod transfer_fleet;
#[cfg(feature = "policy")]
mod transfer_forge;
mod transfer_gateway;
mod transfer_gateway_hostile;
mod transfer_gateway_switch;
#[cfg(feature = "policy")]
mod transfer_kato_mpc;
mod transfer_limits;
mod transfer_metered;
mod transfer_metrics;
mod transfer_names;
mod transfer_perf_paths;
mod transfer_proxy;
mod transfer_real_hosts;
mod transfer_recovery;
mod transfer_resume;
mod transfer_run;
mod transfer_run_dns_udp;
mod transfer_run_resolvers;
mod transfer_socks_udp;
#[cfg(feature = "policy")]
mod transfer_tamper;
mod transfer_udp_plane;
