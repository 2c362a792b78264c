#![no_main]
//! Reads arbitrary bytes as a safetensors checkpoint, loaded into a small Linear layer.
//! The entry function is shared with `tests/fuzz_replay.rs`, which replays
//! `tests/fuzz_regressions/checkpoint/` (and `fuzz/corpus/checkpoint/`) in CI.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = hdgcn::fuzzing::checkpoint(data);
});
