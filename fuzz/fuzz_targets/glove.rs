#![no_main]
//! Reads arbitrary bytes as a GloVe word-vector file.
//! The entry function is shared with `tests/fuzz_replay.rs`, which replays
//! `tests/fuzz_regressions/glove/` (and `fuzz/corpus/glove/`) in CI.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = hdgcn::fuzzing::glove(data);
});
