//! What a benchmark report says about the machine it ran on: the load average at its start
//! and end (other work skews CPU-bound figures), the CPU model and the kernel release.

/// The three load averages of `/proc/loadavg` ("1.73 2.20 3.02"), empty if unreadable.
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// The CPU's model name (`/proc/cpuinfo`), if it says one.
pub fn cpu_model() -> Option<String> {
    std::fs::read_to_string("/proc/cpuinfo").ok().and_then(|s| {
        s.lines()
            .find(|l| l.starts_with("model name"))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
    })
}

/// The kernel release (`/proc/sys/kernel/osrelease`), empty if unreadable.
pub fn kernel() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .unwrap_or_default()
        .trim()
        .to_string()
}
