#![no_main]
//! Reads arbitrary bytes as a Planetoid test.index file.
//! The entry function is shared with `tests/fuzz_replay.rs`, which replays
//! `tests/fuzz_regressions/test_index/` (and `fuzz/corpus/test_index/`) in CI.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = hdgcn::fuzzing::test_index(data);
});
