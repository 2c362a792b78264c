//! Replays every fuzz target's inputs through the target's own entry
//! function (`hdgcn::fuzzing`), so that CI keeps what the fuzzer found
//! without cargo-fuzz: the committed `tests/fuzz_regressions/<target>/`
//! and, where one exists locally, `fuzz/corpus/<target>/`.
//!
//! Inputs whose name ends in `.ok` must be accepted, `.err` refused; any
//! other may go either way. None may panic, and each must finish within a
//! time bound (a hang is a failure, not a stuck test run).

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

/// Longest time one input may take (the real readers take milliseconds).
const PER_INPUT: Duration = Duration::from_secs(60);

fn inputs(dir: &Path) -> Vec<PathBuf> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut v: Vec<PathBuf> = rd
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file() && p.extension().is_none_or(|e| e != "md"))
        .collect();
    v.sort();
    v
}

#[test]
fn every_target_replays_its_regressions_and_corpus() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for (name, entry) in hdgcn::fuzzing::TARGETS {
        let target = root.join("fuzz/fuzz_targets").join(format!("{name}.rs"));
        assert!(target.is_file(), "no fuzz target {target:?}");
        let committed = inputs(&root.join("tests/fuzz_regressions").join(name));
        assert!(!committed.is_empty(), "no regression inputs for {name}");
        let local = inputs(&root.join("fuzz/corpus").join(name));
        for path in committed.iter().chain(&local) {
            let bytes = std::fs::read(path).unwrap();
            let (tx, rx) = mpsc::channel();
            std::thread::spawn(move || {
                let accepted = entry(&bytes);
                let _ = tx.send(accepted);
            });
            let accepted = match rx.recv_timeout(PER_INPUT) {
                Ok(a) => a,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    panic!("{name}: {path:?} took more than {PER_INPUT:?}")
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    panic!("{name}: {path:?} panicked")
                }
            };
            match path.extension().and_then(|e| e.to_str()) {
                Some("ok") => assert!(accepted, "{name}: {path:?} should be accepted"),
                Some("err") => assert!(!accepted, "{name}: {path:?} should be refused"),
                _ => {}
            }
        }
    }
}
