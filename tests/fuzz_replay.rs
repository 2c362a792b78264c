//! Replays every fuzz target's inputs through the target's own entry
//! function (`hdgcn::fuzzing`), so that CI keeps what the fuzzer found
//! without cargo-fuzz: the committed `tests/fuzz_regressions/<target>/`
//! and, where one exists locally, `fuzz/corpus/<target>/`.
//!
//! Inputs whose name ends in `.ok` must be accepted, `.err` refused; any
//! other may go either way. None may panic, and each must finish within a
//! time bound (a hang is a failure, not a stuck test run).
//!
//! A second test runs each target for a bounded number of seeded
//! mutations of its committed inputs (byte flips, truncations, repeated
//! and inserted slices, boundary bytes), the in-CI stand-in for `cargo
//! fuzz run`: none may panic or hang. A failing mutant is written under
//! the target directory so that it can be committed as a regression.

use std::path::{Path, PathBuf};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
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

/// Runs `entry` on `bytes` in a thread: `Ok(accepted)`, or why not
/// (a panic, or longer than [`PER_INPUT`]).
fn run_bounded(entry: hdgcn::fuzzing::Entry, bytes: Vec<u8>) -> Result<bool, &'static str> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let accepted = entry(&bytes);
        let _ = tx.send(accepted);
    });
    match rx.recv_timeout(PER_INPUT) {
        Ok(a) => Ok(a),
        Err(mpsc::RecvTimeoutError::Timeout) => Err("took too long"),
        Err(mpsc::RecvTimeoutError::Disconnected) => Err("panicked"),
    }
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
            let accepted = run_bounded(entry, bytes)
                .unwrap_or_else(|why| panic!("{name}: {path:?} {why} (limit {PER_INPUT:?})"));
            match path.extension().and_then(|e| e.to_str()) {
                Some("ok") => assert!(accepted, "{name}: {path:?} should be accepted"),
                Some("err") => assert!(!accepted, "{name}: {path:?} should be refused"),
                _ => {}
            }
        }
    }
}

/// Mutations per target in [`seeded_mutations_never_panic_or_hang`].
const MUTANTS_PER_TARGET: usize = 3000;

/// One random mutation of `base` (never longer than twice its length
/// plus 64 bytes).
fn mutate(base: &[u8], rng: &mut StdRng) -> Vec<u8> {
    let mut v = base.to_vec();
    for _ in 0..rng.random_range(1..=4) {
        let len = v.len();
        match rng.random_range(0..6) {
            0 if len > 0 => {
                let i = rng.random_range(0..len);
                v[i] ^= 1 << rng.random_range(0..8);
            }
            1 if len > 0 => {
                let i = rng.random_range(0..len);
                v[i] = [0x00, 0xff, 0x7f, 0x80, b'9', b'-'][rng.random_range(0..6)];
            }
            2 => v.truncate(rng.random_range(0..=len)),
            3 if len > 0 && len < 2 * base.len() + 64 => {
                let a = rng.random_range(0..len);
                let b = rng.random_range(a..=len.min(a + 64));
                let at = rng.random_range(0..=len);
                let piece = v[a..b].to_vec();
                v.splice(at..at, piece);
            }
            4 if len > 0 => {
                let a = rng.random_range(0..len);
                let b = rng.random_range(a..=len.min(a + 16));
                v.drain(a..b);
            }
            _ => {
                let at = rng.random_range(0..=len);
                let n = rng.random_range(1..=8);
                let piece: Vec<u8> = (0..n).map(|_| rng.random()).collect();
                v.splice(at..at, piece);
            }
        }
    }
    v
}

#[test]
fn seeded_mutations_never_panic_or_hang() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    for (t, (name, entry)) in hdgcn::fuzzing::TARGETS.into_iter().enumerate() {
        let seeds: Vec<Vec<u8>> = inputs(&root.join("tests/fuzz_regressions").join(name))
            .iter()
            .map(|p| std::fs::read(p).unwrap())
            .collect();
        assert!(!seeds.is_empty(), "no regression inputs for {name}");
        let mut rng = StdRng::seed_from_u64(0x5eed_0000 + t as u64);
        for i in 0..MUTANTS_PER_TARGET {
            let base = &seeds[rng.random_range(0..seeds.len())];
            let mutant = mutate(base, &mut rng);
            if let Err(why) = run_bounded(entry, mutant.clone()) {
                let dir = root.join("target/fuzz-mutants");
                std::fs::create_dir_all(&dir).unwrap();
                let path = dir.join(format!("{name}-{i}"));
                std::fs::write(&path, &mutant).unwrap();
                panic!("{name}: mutant {i} {why}; saved as {path:?}");
            }
        }
    }
}
