#![no_main]
//! Reads arbitrary bytes as a text_gcn corpus (label file and text file, joined by hdgcn::fuzzing::FILE_SEPARATOR), its vocabulary and document graphs.
//! The entry function is shared with `tests/fuzz_replay.rs`, which replays
//! `tests/fuzz_regressions/text_corpus/` (and `fuzz/corpus/text_corpus/`) in CI.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = hdgcn::fuzzing::text_corpus(data);
});
