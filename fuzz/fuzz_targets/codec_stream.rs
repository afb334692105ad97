//! Fuzz the codec's streaming API: key, implementation and chunking come from the input;
//! chunked output must equal one-shot output and every other implementation's, and
//! descrambling must give the plaintext back. The body lives in `nena_codec::fuzzing`, so
//! stable `cargo test` runs it too.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    nena_codec::fuzzing::stream(data);
});
