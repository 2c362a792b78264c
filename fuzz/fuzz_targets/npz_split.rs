#![no_main]
//! Reads arbitrary bytes as a geom-gcn split .npz (the masks' reader, with and without a node count).
//! The entry function is shared with `tests/fuzz_replay.rs`, which replays
//! `tests/fuzz_regressions/npz_split/` (and `fuzz/corpus/npz_split/`) in CI.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = hdgcn::fuzzing::npz_split(data);
});
