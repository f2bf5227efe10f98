//! Fuzz target `client_packets`: see [`harness::client_packets`] for what the input means.
#![no_main]

#[path = "../harness.rs"]
#[allow(dead_code)]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::client_packets(data));
