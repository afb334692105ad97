//! Fuzz `nena analyze`'s trace (capture reader, subflow/connection tracking, RTT, data
//! level): any bytes, no panic, figures that add up.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| nena_analyze::fuzzing::trace(data));
