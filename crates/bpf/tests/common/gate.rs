//! The gate's tests with the first-flight hold: a recognisable hello, the policy, and the
//! pair set up so that a connection's first flight is never acknowledged.

use super::{NetExt, CLIENT2, SERVER2};
use nena_lab::DirectHosts as Net;
use std::time::Duration;

/// The hello of the gate tests: a pattern that shows in a capture wherever it crosses.
pub const HELLO_MARK: &[u8] = b"nena-hold-hello-key-shares-and-r_c:";

pub fn hello() -> Vec<u8> {
    HELLO_MARK.iter().copied().cycle().take(1200).collect()
}

/// Whether any frame of `frames` carries a piece of the hello.
pub fn carries_hello(frames: &[Vec<u8>]) -> bool {
    frames
        .iter()
        .any(|f| f.windows(HELLO_MARK.len()).any(|w| w == HELLO_MARK))
}

/// `--trusted c1 --untrusted c2` (by interface name, as a user would).
pub fn gate_opts(timeout: Duration) -> nena_mptcp::ConnectOptions {
    nena_mptcp::ConnectOptions {
        policy: nena_mptcp::PathPolicy {
            trusted: vec!["c1".parse().unwrap()],
            untrusted: vec!["c2".parse().unwrap()],
        },
        allow_fallback: false,
        timeout,
        congestion: None,
        metered: Vec::new(),
    }
}

/// The pair with the in-kernel path manager on both ends: the client's `subflow` endpoint
/// on c2, the server announcing its second address (so the client's path manager joins over
/// c2 before the first flight, and that subflow stays open, idle, during the hold), and the
/// server dropping every data segment to `ports` that reaches it over the trusted path s1
/// (so the first flight is never acknowledged). All of it inside the pair's namespaces.
pub fn unacknowledged_first_flight(net: &Net, ports: &str) {
    net.sh_c(&format!("ip mptcp endpoint add {CLIENT2} dev c2 subflow"));
    net.sh_s(&format!("ip mptcp endpoint add {SERVER2} dev s2 signal"));
    net.sh_s(&format!(
        "nft add table inet nena_hold_test && \
         nft add chain inet nena_hold_test input '{{ type filter hook input priority 0; policy accept; }}' && \
         nft add rule inet nena_hold_test input iifname s1 tcp dport '{{ {ports} }}' meta length '>' 400 counter drop"
    ));
}
