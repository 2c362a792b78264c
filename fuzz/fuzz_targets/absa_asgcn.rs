#![no_main]
//! Reads arbitrary bytes as an ASGCN ABSA `.raw` + `.raw.graph` pair joined by `hdgcn::fuzzing::FILE_SEPARATOR`.
//! The entry function is shared with `tests/fuzz_replay.rs`, which replays
//! `tests/fuzz_regressions/absa_asgcn/` (and `fuzz/corpus/absa_asgcn/`) in CI.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = hdgcn::fuzzing::absa_asgcn(data);
});
