//! How fast `rep movsb` (the instruction the kernel copies socket data to and from user
//! memory with on CPUs with FSRM) copies 16 KiB, by where the destination lies against the
//! source modulo 4096: `cargo run --release -p nena-bench --example copy_distance`.
//!
//! Why it is here: on the lab's AMD EPYC (Zen 4) a destination 1-15 bytes past the source
//! copies at about 3 GB/s instead of 35-100, and aead's records put the first payload of every
//! read 3 bytes past an aligned source until the writer's buffer began its records so that
//! the payload is aligned (`stream::writer::lead` in nena-transport; docs/benchmarks-log.md,
//! "The floor").

#[cfg(target_arch = "x86_64")]
fn rep_movsb(dst: *mut u8, src: *const u8, n: usize) {
    // SAFETY: the caller passes two live, non-overlapping buffers of at least `n` bytes.
    unsafe {
        std::arch::asm!(
            "rep movsb",
            inout("rdi") dst => _,
            inout("rsi") src => _,
            inout("rcx") n => _,
            options(nostack, preserves_flags)
        );
    }
}

#[cfg(target_arch = "x86_64")]
fn main() {
    const LEN: usize = 16 * 1024;
    const ROUNDS: usize = 20_000;
    let src = nena_codec::AlignedBuf::new(LEN + 8192);
    let mut dst = nena_codec::AlignedBuf::new(LEN + 8192);
    // The source 4096-aligned, the destination `d` bytes past a 4096 boundary.
    let s_at = src.as_ptr().align_offset(4096);
    let d_base = dst.as_ptr().align_offset(4096);
    println!("rep movsb of {LEN} bytes, source on a 4096-byte boundary:");
    println!("{:>24} {:>8}", "destination - source", "GB/s");
    for d in [
        0usize, 1, 3, 8, 15, 16, 19, 22, 38, 41, 57, 60, 64, 128, 2048,
    ] {
        let gbs = (0..3)
            .map(|_| {
                let t = std::time::Instant::now();
                for _ in 0..ROUNDS {
                    rep_movsb(dst[d_base + d..].as_mut_ptr(), src[s_at..].as_ptr(), LEN);
                }
                (LEN * ROUNDS) as f64 / t.elapsed().as_secs_f64() / 1e9
            })
            .fold(0.0, f64::max);
        println!("{:>24} {:>8.1}", format!("{d} (mod 4096)"), gbs);
        std::hint::black_box(&mut dst);
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn main() {
    println!("rep movsb is an x86-64 instruction");
}
