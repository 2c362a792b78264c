#![no_main]
//! Reads arbitrary bytes as a DualGCN ABSA JSON file (LAP14, REST14).
//! The entry function is shared with `tests/fuzz_replay.rs`, which replays
//! `tests/fuzz_regressions/absa_dualgcn/` (and `fuzz/corpus/absa_dualgcn/`) in CI.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = hdgcn::fuzzing::absa_dualgcn(data);
});
