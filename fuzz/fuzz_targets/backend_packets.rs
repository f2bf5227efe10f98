//! Fuzz target `backend_packets`: see [`harness::backend_packets`] for what the input means.
#![no_main]

#[path = "../harness.rs"]
#[allow(dead_code)]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::backend_packets(data));
