//! Fuzz the scenario parser behind `nena lab run`: any bytes, no panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| nena_scenario::fuzzing::scenario(data));
