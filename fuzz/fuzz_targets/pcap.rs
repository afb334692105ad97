//! Fuzz the capture reader and parser behind `nena eavesdrop`: any bytes, no panic.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| nena_analyze::fuzzing::pcap(data));
