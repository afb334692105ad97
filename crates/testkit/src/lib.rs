//! Support shared by nena's tests and benchmarks, so that no crate keeps its own copy:
//!
//! * [`skip!`]: a test that cannot run on this CPU or kernel says so by name, on the real
//!   standard error (past libtest's capture), where `scripts/check-tests-ran.sh` counts it
//!   as skipped rather than passed and fails the run when an unexpected test skips.
//! * [`Prng`]: a small deterministic generator (xorshift64*) for test data; not for secrets.
//! * [`median`], [`percentile`]: order statistics of measurements.
//! * [`hex`] / [`unhex`]: lower-case hex encoding and its strict inverse.
//! * [`assert_debug_hides`]: a `Debug` rendering shows no byte of a key (issue 19).
//! * [`wait_for`] / [`wait_until`]: a test waits for an event (a line, a socket, a file, a
//!   counter), polled against a deadline that fails the test naming what never happened,
//!   instead of sleeping for a time it hopes is long enough; [`wait_settled`] for "nothing
//!   more is coming" (a file that stops growing), [`wait_for_async`] inside async tests.
//!
//! No dependencies: every crate of the workspace may use it, also outside `#[cfg(test)]`
//! (the benchmarks use its medians).

use std::io::Write;
use std::time::{Duration, Instant};

/// The marker `scripts/check-tests-ran.sh` looks for at the start of a line.
pub const SKIP_MARKER: &str = "nena-test: SKIPPED";

/// Ends the current test as skipped: prints `nena-test: SKIPPED <crate> <test>: <reason>`
/// on the process's real standard error and returns from the enclosing function. Use it
/// only where the test cannot run here (a CPU feature, a kernel facility); the names that
/// may skip are listed in `scripts/allowed-skips.txt`, and any other skip fails `make test`.
///
/// ```no_run
/// fn needs_avx512() {
///     if !cfg!(target_feature = "avx512f") {
///         nena_testkit::skip!("no AVX-512 on this CPU");
///     }
///     // ... the test proper
/// }
/// # needs_avx512();
/// ```
#[macro_export]
macro_rules! skip {
    ($($reason:tt)+) => {{
        $crate::report_skip(env!("CARGO_PKG_NAME"), module_path!(), &format!($($reason)+));
        return;
    }};
}

/// What [`skip!`] prints; public for the macro. The test's name is libtest's name of the
/// current thread (`module::test`), or the module path when tests run on the main thread.
#[doc(hidden)]
pub fn report_skip(krate: &str, module: &str, reason: &str) {
    let thread = std::thread::current();
    let name = match thread.name() {
        Some(n) if n != "main" => n.to_string(),
        _ => module.to_string(),
    };
    let line = skip_line(krate, &name, reason);
    // Straight to file descriptor 2: `eprintln!` would be captured by libtest and shown
    // only for failing tests.
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

/// The line [`skip!`] prints (one line, ending in a newline).
fn skip_line(krate: &str, name: &str, reason: &str) -> String {
    format!(
        "{SKIP_MARKER} {krate} {name}: {}\n",
        reason.replace('\n', " ")
    )
}

/// How often [`wait_for`], [`wait_until`] and [`poll_until`] look.
pub const POLL: Duration = Duration::from_millis(10);

/// Polls `f` every [`POLL`] until it gives `Some`, and returns that; panics with
/// `timed out after T waiting for WHAT` once `timeout` has passed (`f` is asked one last
/// time at the deadline). For events a test must wait for: a process's first output line, a
/// socket that listens, a file that appears, a counter that reaches a value.
pub fn wait_for<T>(what: &str, timeout: Duration, f: impl FnMut() -> Option<T>) -> T {
    wait_for_every(what, timeout, POLL, f)
}

/// [`wait_for`], polling every `period` instead of [`POLL`]: for a race the test must win
/// (arm an attacker before the bytes it aims at pass), where 10 ms is too coarse.
pub fn wait_for_every<T>(
    what: &str,
    timeout: Duration,
    period: Duration,
    mut f: impl FnMut() -> Option<T>,
) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return v;
        }
        let now = Instant::now();
        if now >= deadline {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        // sleep: the poll period of the wait helpers themselves
        std::thread::sleep(period.min(deadline - now));
    }
}

/// Polls `f` every [`POLL`] until it is true (returns true) or `timeout` has passed (asks it
/// one last time, returns its answer). For waits whose failure the test reports itself, with
/// what it then finds (a socket table, counters).
pub fn poll_until(timeout: Duration, f: impl FnMut() -> bool) -> bool {
    poll_until_every(timeout, POLL, f)
}

/// [`poll_until`], looking every `period`: for a look that costs (a query to a server that
/// itself updates every `period`).
pub fn poll_until_every(timeout: Duration, period: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if f() {
            return true;
        }
        let now = Instant::now();
        if now >= deadline {
            return f();
        }
        // sleep: the poll period of the wait helpers themselves
        std::thread::sleep(period.min(deadline - now));
    }
}

/// [`wait_for`] with a condition: returns once `f` is true, or panics after `timeout`
/// naming `what`. Returns the time it waited.
pub fn wait_until(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    wait_for(what, timeout, || f().then_some(()));
    start.elapsed()
}

/// Polls `value` every [`POLL`] until it has not changed for `quiet`, and returns it; gives
/// up at `timeout` and returns what it read last (a value that still moves is not a
/// failure: the caller asserts on it). For "nothing more is coming": a capture file that
/// stops growing before tcpdump is stopped, datagrams that stop arriving.
pub fn wait_settled<T: PartialEq>(
    quiet: Duration,
    timeout: Duration,
    mut value: impl FnMut() -> T,
) -> T {
    let deadline = Instant::now() + timeout;
    let mut last = value();
    let mut since = Instant::now();
    loop {
        let now = Instant::now();
        if now >= deadline || now - since >= quiet {
            return last;
        }
        // sleep: the poll period of the wait helpers themselves
        std::thread::sleep(POLL.min(deadline - now));
        let v = value();
        if v != last {
            last = v;
            since = Instant::now();
        }
    }
}

/// [`wait_for`] inside an async test: `nap` is the runtime's sleep (`tokio::time::sleep`),
/// so that the wait does not block the runtime's thread (testkit depends on no runtime).
pub async fn wait_for_async<T, F: std::future::Future<Output = ()>>(
    what: &str,
    timeout: Duration,
    mut f: impl FnMut() -> Option<T>,
    mut nap: impl FnMut(Duration) -> F,
) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = f() {
            return v;
        }
        let now = Instant::now();
        if now >= deadline {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        nap(POLL.min(deadline - now)).await;
    }
}

/// Deterministic test data (xorshift64*). The same seed always gives the same bytes, on
/// every platform.
#[derive(Debug, Clone)]
pub struct Prng(u64);

impl Prng {
    /// A generator from any seed (0 included).
    pub fn new(seed: u64) -> Self {
        Prng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// A value in `0..n` (`n > 0`; slightly biased for huge `n`, fine for tests).
    pub fn below(&mut self, n: u64) -> u64 {
        assert!(n > 0, "below(0)");
        self.next_u64() % n
    }
    /// Fills `buf` with random bytes.
    pub fn fill(&mut self, buf: &mut [u8]) {
        let mut chunks = buf.chunks_exact_mut(8);
        for c in &mut chunks {
            c.copy_from_slice(&self.next_u64().to_le_bytes());
        }
        let rest = chunks.into_remainder();
        if !rest.is_empty() {
            let w = self.next_u64().to_le_bytes();
            rest.copy_from_slice(&w[..rest.len()]);
        }
    }
    /// `n` random bytes.
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut v = vec![0u8; n];
        self.fill(&mut v);
        v
    }
}

/// `n` random bytes from `seed` (shorthand for `Prng::new(seed).bytes(n)`).
pub fn random_bytes(seed: u64, n: usize) -> Vec<u8> {
    Prng::new(seed).bytes(n)
}

/// The median of `v` (mean of the two middle values for an even count); `NaN` for an
/// empty slice. NaN inputs are ordered last. Sorts `v`.
pub fn median(v: &mut [f64]) -> f64 {
    percentile(v, 50.0)
}

/// The `p`-th percentile of `v` (0..=100), linear interpolation between closest ranks;
/// `NaN` for an empty slice. Sorts `v`.
pub fn percentile(v: &mut [f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let rank = (p.clamp(0.0, 100.0) / 100.0) * (v.len() - 1) as f64;
    let lo = rank.floor() as usize;
    let hi = rank.ceil() as usize;
    v[lo] + (v[hi] - v[lo]) * (rank - lo as f64)
}

/// Lower-case hex of `b`.
pub fn hex(b: &[u8]) -> String {
    const D: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(b.len() * 2);
    for &x in b {
        s.push(D[(x >> 4) as usize] as char);
        s.push(D[(x & 15) as usize] as char);
    }
    s
}

/// The bytes of a hex string (either case, no separators, even length); `None` otherwise.
pub fn unhex(s: &str) -> Option<Vec<u8>> {
    let s = s.as_bytes();
    if !s.len().is_multiple_of(2) {
        return None;
    }
    let val = |c: u8| match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    };
    s.chunks_exact(2)
        .map(|p| Some(val(p[0])? << 4 | val(p[1])?))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prng_is_deterministic_and_spreads() {
        assert_eq!(random_bytes(7, 100), random_bytes(7, 100));
        assert_ne!(random_bytes(7, 100), random_bytes(8, 100));
        // every byte value turns up in 64 KiB, and no value more than twice its share
        let mut counts = [0u32; 256];
        for b in random_bytes(1, 65536) {
            counts[b as usize] += 1;
        }
        assert!(counts.iter().all(|&c| c > 0 && c < 512), "{counts:?}");
        // fill() of an odd length is a prefix of the same stream in whole words
        let mut a = vec![0u8; 13];
        Prng::new(3).fill(&mut a);
        assert_eq!(a[..8], random_bytes(3, 16)[..8]);
    }

    #[test]
    fn medians_and_percentiles() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&mut []).is_nan());
        assert_eq!(percentile(&mut [5.0, 1.0, 3.0], 0.0), 1.0);
        assert_eq!(percentile(&mut [5.0, 1.0, 3.0], 100.0), 5.0);
        assert_eq!(percentile(&mut [0.0, 10.0], 25.0), 2.5);
    }

    #[test]
    fn hex_round_trips_and_rejects_junk() {
        assert_eq!(hex(&[0x00, 0xab, 0x7f]), "00ab7f");
        assert_eq!(unhex("00AB7f"), Some(vec![0x00, 0xab, 0x7f]));
        assert_eq!(unhex("abc"), None);
        assert_eq!(unhex("zz"), None);
        assert_eq!(unhex(""), Some(vec![]));
        let b = random_bytes(9, 300);
        assert_eq!(unhex(&hex(&b)).unwrap(), b);
    }

    #[test]
    fn wait_for_returns_the_value_once_it_comes() {
        let mut n = 0;
        let v = wait_for("n to reach 3", Duration::from_secs(5), || {
            n += 1;
            (n >= 3).then_some(n * 10)
        });
        assert_eq!(v, 30);
        assert!(wait_until("true", Duration::ZERO, || true) < Duration::from_secs(1));
    }

    #[test]
    fn wait_settled_returns_once_the_value_stops_moving() {
        let mut n = 0u32;
        let v = wait_settled(Duration::from_millis(50), Duration::from_secs(5), || {
            n += 1;
            n.min(5)
        });
        assert_eq!(v, 5);
        // a value that never settles: the last one at the deadline
        let mut m = 0u32;
        let v = wait_settled(Duration::from_secs(5), Duration::from_millis(50), || {
            m += 1;
            m
        });
        assert!(v > 1);
    }

    #[test]
    fn wait_for_async_polls_with_the_given_nap() {
        use std::future::Future;
        let mut n = 0;
        let fut = wait_for_async(
            "n to reach 3",
            Duration::from_secs(5),
            || {
                n += 1;
                (n >= 3).then_some(n)
            },
            |_| std::future::ready(()),
        );
        // a ready nap: the future completes on its first poll
        let waker = std::task::Waker::noop();
        let mut cx = std::task::Context::from_waker(waker);
        let mut fut = std::pin::pin!(fut);
        assert_eq!(fut.as_mut().poll(&mut cx), std::task::Poll::Ready(3));
    }

    #[test]
    #[should_panic(expected = "waiting for the flag")]
    fn wait_for_fails_naming_the_event_at_the_deadline() {
        wait_until("the flag", Duration::from_millis(30), || false);
    }

    #[test]
    fn the_skip_line_is_what_the_check_script_parses() {
        // scripts/check-tests-ran.sh reads: marker, crate, test name, then the reason.
        assert_eq!(
            skip_line("nena-codec", "fast::tests::t", "no AVX-512\nhere"),
            "nena-test: SKIPPED nena-codec fast::tests::t: no AVX-512 here\n"
        );
    }
}

/// Key bytes for [`assert_debug_hides`]: every byte above 15, so that its hex and decimal
/// renderings have at least two digits and cannot hide in other numbers.
pub const TEST_KEY_BYTES: [u8; 32] = [
    0xa7, 0x3c, 0xe1, 0x5b, 0x92, 0xd4, 0x68, 0xf0, 0x1e, 0xb9, 0x47, 0xc2, 0x85, 0x3f, 0xda, 0x76,
    0x29, 0xee, 0x91, 0x58, 0xcb, 0x34, 0xaf, 0x63, 0xf7, 0x12, 0x8d, 0xb0, 0x4a, 0xe5, 0x9c, 0x71,
];

/// Panics if `rendered` (a `{:?}` or `{:#?}` of a value built from `key`) shows `key`: its
/// hex (lower or upper case, any 3 bytes in a row, with or without separators such as
/// `", 0x"` or `", "`), or its decimal bytes as `Debug` prints arrays (any 3 in a row, on
/// one line or one per line as `{:#?}` puts them). `what` names the value in the message.
pub fn assert_debug_hides(rendered: &str, key: &[u8], what: &str) {
    // Only digits and letters matter: drop every separator, then look for runs.
    let squeezed: String = rendered
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .collect::<String>()
        .to_ascii_lowercase();
    // Decimal: the numbers in the text, in order.
    let numbers: Vec<u64> = rendered
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty() && s.len() <= 3)
        .filter_map(|s| s.parse().ok())
        .collect();
    for w in key.windows(3) {
        let h = hex(w);
        assert!(
            !squeezed.contains(&h),
            "{what}: the Debug output shows key bytes {h} (hex):\n{rendered}"
        );
        // `0xa7, 0x3c` squeezes to "0xa70x3c": look for that shape too.
        let prefixed: String = w.iter().map(|b| format!("0x{b:02x}")).collect();
        assert!(
            !squeezed.contains(&prefixed),
            "{what}: the Debug output shows key bytes {h} (0x hex):\n{rendered}"
        );
        let dec: Vec<u64> = w.iter().map(|&b| b as u64).collect();
        assert!(
            !numbers.windows(3).any(|n| n == dec.as_slice()),
            "{what}: the Debug output shows key bytes {dec:?} (decimal):\n{rendered}"
        );
    }
}

#[cfg(test)]
mod debug_hides_tests {
    use super::*;

    /// The check itself catches every rendering `Debug` gives a key.
    #[test]
    fn catches_every_rendering_of_key_bytes() {
        let k = &TEST_KEY_BYTES[..8];
        let arr: [u8; 8] = k.try_into().unwrap();
        for shown in [
            format!("{arr:?}"),
            format!("{arr:#?}"),
            format!("{arr:x?}"),
            format!("{arr:#x?}"),
            format!("{arr:02X?}"),
            format!("{:?}", Some(arr)),
            format!("key: {}", hex(k)),
            format!("key: {}", hex(k).to_uppercase()),
            format!("{:?}", k.to_vec()),
            format!("{:016x}", u64::from_be_bytes(arr)),
        ] {
            let r = std::panic::catch_unwind(|| assert_debug_hides(&shown, k, "t"));
            assert!(r.is_err(), "not caught: {shown}");
        }
        assert_debug_hides("MpcKeys { .. } [redacted] token 0x1234abcd", k, "t");
    }
}
