//! Quick timing loop for the fast codec (release mode): the best of many short batches, so
//! other load on the machine disturbs the figure less than an average would; revised and
//! fast are timed in alternating rounds and their ratio printed.
//! `cargo run --release -p nena-codec --example timing`
//! (`NENA_CODEC_BACKEND=avx2|portable-u64` times a fallback).

use nena_codec::{fast_backend, AlignedBuf, Descrambler, Impl, Scrambler};
use std::hint::black_box;
use std::time::Instant;

fn best_ns(iters: u32, rounds: u32, mut f: impl FnMut()) -> f64 {
    let mut best = f64::MAX;
    for _ in 0..rounds {
        let t = Instant::now();
        for _ in 0..iters {
            f();
        }
        best = best.min(t.elapsed().as_nanos() as f64 / iters as f64);
    }
    best
}

fn main() {
    let key = *b"\x01\x23\x45\x67\x89\xab\xcd\xef";
    println!("backend: {}", fast_backend());
    // Both implementations in alternating rounds, so that machine load hits both alike and
    // the ratio (the 30x target) is from the same moments.
    // 64-byte aligned buffers, as the transport and `nena bench codec` use
    let mut bufs: Vec<AlignedBuf> = (0..2)
        .map(|_| AlignedBuf::from_slice(&(0..1280u32).map(|i| (i * 7) as u8).collect::<Vec<_>>()))
        .collect();
    let imps = [Impl::Revised, Impl::Fast];
    let mut s: Vec<Scrambler> = imps.iter().map(|&i| Scrambler::with_impl(key, i)).collect();
    let mut d: Vec<Descrambler> = imps
        .iter()
        .map(|&i| Descrambler::with_impl(key, i))
        .collect();
    let mut best = [[f64::MAX; 3]; 2];
    for _ in 0..300 {
        for k in 0..2 {
            let iters = if imps[k] == Impl::Fast { 2000 } else { 50 };
            let (sk, dk, buf) = (&mut s[k], &mut d[k], &mut bufs[k]);
            best[k][0] = best[k][0].min(best_ns(iters, 1, || {
                sk.scramble_in_place(black_box(&mut buf[..]));
                dk.descramble_in_place(black_box(&mut buf[..]));
            }));
            best[k][1] = best[k][1].min(best_ns(iters, 1, || {
                sk.scramble_in_place(black_box(&mut buf[..]))
            }));
            best[k][2] = best[k][2].min(best_ns(iters, 1, || {
                dk.descramble_in_place(black_box(&mut buf[..]))
            }));
        }
    }
    for (k, imp) in imps.iter().enumerate() {
        let [both, scr, des] = best[k];
        println!(
            "{:8} 1280 B: both {both:8.1} ns  scramble {scr:8.1} ns  descramble {des:8.1} ns",
            imp.name()
        );
    }
    println!(
        "revised / fast, both ways, best of alternating rounds: {:.1}x",
        best[0][0] / best[1][0]
    );
    for len in [0usize, 1, 64, 640, 1280, 2560, 12800] {
        let mut buf = AlignedBuf::from_slice(&vec![0x33u8; len]);
        let mut s = Scrambler::new(key);
        let mut d = Descrambler::new(key);
        let scr = best_ns(2000, 200, || s.scramble_in_place(black_box(&mut buf)));
        let des = best_ns(2000, 200, || d.descramble_in_place(black_box(&mut buf)));
        println!("fast {len:6} B: scramble {scr:8.1} ns  descramble {des:8.1} ns");
    }
    let n = 1 << 20;
    let input = AlignedBuf::from_slice(
        &(0..n as u32)
            .map(|i| ((i * 13) >> 3) as u8)
            .collect::<Vec<_>>(),
    );
    let mut out = AlignedBuf::new(n);
    let mut s = Scrambler::new(key);
    let mut d = Descrambler::new(key);
    let scr = best_ns(5, 100, || s.scramble(black_box(&input), &mut out));
    let des = best_ns(5, 100, || d.descramble(black_box(&input), &mut out));
    let inpl = best_ns(5, 100, || s.scramble_in_place(black_box(&mut out)));
    let gbs = |ns: f64| n as f64 / ns;
    println!(
        "bulk 1 MiB: scramble {:.1} GB/s, descramble {:.1} GB/s, scramble in place {:.1} GB/s",
        gbs(scr),
        gbs(des),
        gbs(inpl)
    );
}
