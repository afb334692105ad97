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

/// Busy CPU seconds of the whole host so far, summed over its CPUs: user, nice, system,
/// irq, softirq and steal time of /proc/stat's `cpu` line (10 ms ticks), or None when it
/// cannot be read. Unlike a process's clock it counts the kernel's network work wherever
/// it ran: in the process that caused it, in another one it interrupted, or in ksoftirqd.
pub fn host_busy_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    busy_seconds_of(stat.lines().next()?, clock_ticks())
}

/// The kernel's clock ticks per second (`_SC_CLK_TCK`, the unit of /proc's CPU times).
pub fn clock_ticks() -> f64 {
    // SAFETY: sysconf only reads a constant of the system.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// The busy seconds of one `cpu` line of /proc/stat at `ticks` per second.
fn busy_seconds_of(line: &str, ticks: f64) -> Option<f64> {
    let mut f = line.split_whitespace();
    if f.next()? != "cpu" {
        return None;
    }
    let v: Vec<u64> = f.map(|x| x.parse().ok()).collect::<Option<_>>()?;
    // user nice system idle iowait irq softirq steal [guest guest_nice: inside user/nice]
    if v.len() < 8 {
        return None;
    }
    let busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
    Some(busy as f64 / ticks)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn busy_seconds_leave_out_idle_and_iowait() {
        let line = "cpu  100 20 30 5000 70 4 6 10 50 0";
        // 100 + 20 + 30 + 4 + 6 + 10 ticks at 100 per second.
        assert_eq!(busy_seconds_of(line, 100.0), Some(1.7));
        assert_eq!(busy_seconds_of("cpu0 1 2 3 4 5 6 7 8", 100.0), None);
        assert_eq!(busy_seconds_of("cpu 1 2 x 4 5 6 7 8", 100.0), None);
        assert_eq!(busy_seconds_of("cpu 1 2 3", 100.0), None);
        assert!(host_busy_seconds().is_some_and(|s| s > 0.0));
    }
}
