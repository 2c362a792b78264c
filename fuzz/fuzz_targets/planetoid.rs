#![no_main]
//! Reads arbitrary bytes as the eight Planetoid files, joined by hdgcn::fuzzing::FILE_SEPARATOR, assembled as Cora and CiteSeer.
//! The entry function is shared with `tests/fuzz_replay.rs`, which replays
//! `tests/fuzz_regressions/planetoid/` (and `fuzz/corpus/planetoid/`) in CI.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = hdgcn::fuzzing::planetoid(data);
});
