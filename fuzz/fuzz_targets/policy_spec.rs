//! Fuzz the policy chain file parser behind `nena policy load`: any bytes, no panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| nena_bpf::fuzzing::policy_spec(data));
