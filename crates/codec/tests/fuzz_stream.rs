//! Runs the `codec_stream` fuzz target's body on many pseudo-random inputs on stable Rust
//! (the coverage-guided run needs nightly: `cd fuzz && cargo +nightly fuzz run codec_stream`).

use nena_codec::fuzzing;

#[test]
fn fuzz_body_on_random_inputs() {
    let mut rng = nena_testkit::Prng::new(0x1234_5678_9abc_def1);
    let mut next = move || rng.next_u64();
    // Edge cases first: empty, key only, key + impl byte, separator right away.
    fuzzing::stream(&[]);
    fuzzing::stream(&[1, 2, 3]);
    fuzzing::stream(&[1, 2, 3, 4, 5, 6, 7, 8, 2]);
    fuzzing::stream(&[1, 2, 3, 4, 5, 6, 7, 8, 2, 0xFF, 9, 9, 9]);
    fuzzing::stream(&[1, 2, 3, 4, 5, 6, 7, 8, 1, 0, 0, 0xFF, 9, 9, 9]);
    for i in 0..3000 {
        let len = (next() % if i % 10 == 0 { 3000 } else { 400 }) as usize;
        let mut data: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        // Put a separator early most of the time so chunk lists stay short.
        if len > 16 && i % 4 != 0 {
            let at = 9 + (next() % 6) as usize;
            data[at] = 0xFF;
        }
        fuzzing::stream(&data);
    }
}
