//! Fuzz target `sql_analysis`: see [`harness::sql_analysis`] for what the input means.
#![no_main]

#[path = "../harness.rs"]
#[allow(dead_code)]
mod harness;

libfuzzer_sys::fuzz_target!(|data: &[u8]| harness::sql_analysis(data));
