//! Criterion benches of the codec itself: one 1280-byte message (the papers' Table II size)
//! scrambled and descrambled, per implementation, and 1 MiB bulk per direction for `fast`.
//! `NENA_CODEC_BACKEND=avx2|portable-u64` measures a fallback backend of `fast`.

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use nena_codec::{fast_backend, AlignedBuf, Descrambler, Impl, Scrambler};

const KEY: [u8; 8] = *b"\x01\x23\x45\x67\x89\xab\xcd\xef";

/// `n` bytes of test data in a 64-byte aligned buffer (as the transport uses).
fn data(n: usize) -> AlignedBuf {
    let v: Vec<u8> = (0..n)
        .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
        .collect();
    AlignedBuf::from_slice(&v)
}

fn message(c: &mut Criterion) {
    let mut g = c.benchmark_group(format!("msg1280/{}", fast_backend()));
    g.throughput(Throughput::Bytes(1280));
    for imp in Impl::ALL {
        let mut buf = data(1280);
        let mut s = Scrambler::with_impl(KEY, imp);
        let mut d = Descrambler::with_impl(KEY, imp);
        g.bench_function(BenchmarkId::new("scramble+descramble", imp.name()), |b| {
            b.iter(|| {
                s.scramble_in_place(black_box(&mut buf));
                d.descramble_in_place(black_box(&mut buf));
            })
        });
        g.bench_function(BenchmarkId::new("scramble", imp.name()), |b| {
            b.iter(|| s.scramble_in_place(black_box(&mut buf)))
        });
        g.bench_function(BenchmarkId::new("descramble", imp.name()), |b| {
            b.iter(|| d.descramble_in_place(black_box(&mut buf)))
        });
    }
    g.finish();
}

fn bulk(c: &mut Criterion) {
    const N: usize = 1 << 20;
    let mut g = c.benchmark_group(format!("bulk1MiB/{}", fast_backend()));
    g.throughput(Throughput::Bytes(N as u64));
    let input = data(N);
    let mut out = AlignedBuf::new(N);
    let mut s = Scrambler::new(KEY);
    let mut d = Descrambler::new(KEY);
    g.bench_function("scramble", |b| {
        b.iter(|| s.scramble(black_box(&input), &mut out))
    });
    g.bench_function("descramble", |b| {
        b.iter(|| d.descramble(black_box(&input), &mut out))
    });
    g.bench_function("scramble_in_place", |b| {
        b.iter(|| s.scramble_in_place(black_box(&mut out)))
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(std::time::Duration::from_millis(500))
        .measurement_time(std::time::Duration::from_secs(2));
    targets = message, bulk
}
criterion_main!(benches);
