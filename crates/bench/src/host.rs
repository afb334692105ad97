//! What a benchmark report says about the machine it ran on: the load average at its start
//! and end (other work skews CPU-bound figures), the CPU model and the kernel release; and
//! the CPU time of this process and of others, the clocks the benches' CPU figures read.

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

/// User + system CPU seconds of this process (every thread, ended ones included).
pub fn self_cpu_seconds() -> f64 {
    // SAFETY: getrusage fills the struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return 0.0;
    }
    let t = |tv: libc::timeval| tv.tv_sec as f64 + tv.tv_usec as f64 / 1e6;
    t(ru.ru_utime) + t(ru.ru_stime)
}

/// CPU seconds process `pid` has used so far (every thread, ended ones included; its
/// CPU-time clock, in nanoseconds, not /proc's 10 ms ticks), or None when it is gone.
pub fn process_cpu_seconds(pid: u32) -> Option<f64> {
    let mut clock: libc::clockid_t = 0;
    // SAFETY: `clock` is a valid place for the clock id.
    if unsafe { libc::clock_getcpuclockid(pid as libc::pid_t, &mut clock) } != 0 {
        return None;
    }
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write.
    if unsafe { libc::clock_gettime(clock, &mut ts) } != 0 {
        return None;
    }
    Some(ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9)
}
