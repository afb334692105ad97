//! Criterion benchmark: one 1280-byte message both ways, kato-fast (scramble+descramble)
//! against OpenSSL AES-128-GCM (seal+open). `cargo bench -p nena-bench`.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use nena_bench::ciphers::{self, CipherSubject};
use nena_bench::codec::MSG_LEN;
use nena_bench::kato::KatoSubject;
use nena_bench::subject::Subject;
use nena_codec::Impl;
use std::hint::black_box;

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("msg-1280-both-ways");
    // Bytes processed in each direction.
    group.throughput(Throughput::Bytes(MSG_LEN as u64));
    let mut subjects: Vec<Box<dyn Subject>> = vec![
        Box::new(KatoSubject::new("kato-fast", Impl::Fast)),
        Box::new(
            CipherSubject::new(ciphers::spec("aes-128-gcm").expect("known cipher"), MSG_LEN)
                .expect("OpenSSL AES-128-GCM"),
        ),
    ];
    for s in subjects.iter_mut() {
        s.verify(MSG_LEN).expect("self-check");
        let mut buf = ciphers::test_bytes(1, MSG_LEN);
        let name = s.name().to_string();
        group.bench_function(BenchmarkId::from_parameter(name), |b| {
            b.iter(|| s.round_trip(black_box(&mut buf[..])).expect("round trip"))
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
