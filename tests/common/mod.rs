//! Helpers shared by integration tests (`mod common;` in a test file;
//! `#[path = "../common/mod.rs"] mod common;` in the multi-file
//! `tests/backend_ops`).
//!
//! # Tests that cannot run are ignored, never passed
//!
//! Two kinds of tests need something outside the repository: the benchmark
//! data (PubMed, the geom-gcn splits, the TextGCN corpora) and, with the
//! `wgpu` feature, a GPU adapter. Whether they run is decided once, when
//! the tests are built, by `build.rs`, and written on each such test as
//!
//! ```text
//! #[cfg_attr(not(hdgcn_data_tests), ignore = "needs the benchmark data: ...")]
//! #[cfg_attr(not(hdgcn_wgpu_tests), ignore = "needs a wgpu adapter: ...")]
//! ```
//!
//! so that libtest lists a test that cannot run as `ignored`, with the
//! reason, and never as `ok`:
//!
//! - data tests run when the data root exists: `$HDGCN_DATA` if set
//!   (relative to the crate when relative), else `../shared/data` beside the
//!   crate (no fallback from one to the other);
//! - wgpu tests run when `HDGCN_WGPU` is set (no build script can probe
//!   for an adapter);
//! - under `CI` every one of them runs.
//!
//! (A variable counts as set unless it is absent, empty, `0` or `false`.)
//! A test that runs and finds its data or adapter missing fails, naming
//! what is missing: so under `CI` a missing folder or adapter fails loudly,
//! and `cargo test -- --ignored` runs them all to show why. Changing any of
//! these variables rebuilds the tests; a data root that appears after the
//! build is seen once `HDGCN_DATA` is set (or `build.rs` is touched).
//!
//! `tests/wgpu_no_adapter.rs` needs no adapter (it checks the error for a
//! missing one) and always runs with the `wgpu` feature.
#![allow(dead_code)]

use std::path::PathBuf;

use hdgcn::autograd::Var;
use hdgcn::autograd::gradcheck::GradCheckReport;
use hdgcn::backend::Cpu;
use hdgcn::graph::Graph;
use ndarray::Array2;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

pub mod pickle;
#[cfg(feature = "wgpu")]
pub mod wgpu;

/// The benchmark data root, checked to hold `sub` (a file or folder below
/// it). Only data tests call it, and they run only where the root exists or
/// under `CI` (see the module docs): a missing `sub` is a failure.
pub fn benchmark_root(sub: &str) -> PathBuf {
    let root = PathBuf::from(env!("HDGCN_TEST_DATA_ROOT"));
    let path = root.join(sub);
    assert!(
        path.exists(),
        "benchmark data not found: {} (the data root is $HDGCN_DATA, else ../shared/data; \
         under CI the data tests must not be skipped)",
        path.display()
    );
    root
}

/// `Â = D̂^{-1/2}(A + I)D̂^{-1/2}` written out densely from a dense
/// adjacency `a` without self loops: the independent reference for GCN
/// propagation.
pub fn dense_gcn(a: &Array2<f64>) -> Array2<f64> {
    let n = a.nrows();
    let ai = a + &Array2::<f64>::eye(n);
    let d: Vec<f64> = (0..n).map(|i| ai.row(i).sum()).collect();
    Array2::from_shape_fn((n, n), |(i, j)| ai[[i, j]] / (d[i] * d[j]).sqrt())
}

/// An `r x c` matrix with entries uniform in `[-1, 1)`.
pub fn rand_mat(rng: &mut StdRng, r: usize, c: usize) -> Array2<f64> {
    Array2::from_shape_fn((r, c), |_| rng.random_range(-1.0..1.0))
}

/// An `r x c` matrix with entries uniform in `[-1.5, 1.5)`: the inputs of
/// the gradient checks.
pub fn rand_mat_wide(rng: &mut StdRng, r: usize, c: usize) -> Array2<f64> {
    Array2::from_shape_fn((r, c), |_| rng.random_range(-1.5..1.5))
}

/// The largest entry-wise `|a - b|` (the shapes must agree).
pub fn max_abs_diff(a: &Array2<f64>, b: &Array2<f64>) -> f64 {
    assert_eq!(a.dim(), b.dim());
    a.iter()
        .zip(b.iter())
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max)
}

/// Segment offsets `[0, s0, s0 + s1, ...]` of segments of `sizes`.
pub fn ptr_of(sizes: &[usize]) -> Vec<usize> {
    let mut ptr = vec![0];
    for &s in sizes {
        ptr.push(ptr.last().unwrap() + s);
    }
    ptr
}

/// A symmetric random graph on `n` nodes: each pair is an edge with
/// probability `p`, weighted uniformly in `[0.5, 2)`; with `isolated`, the
/// last node has no edge.
pub fn random_weighted_graph(rng: &mut StdRng, n: usize, p: f64, isolated: bool) -> Graph {
    let m = if isolated { n - 1 } else { n };
    let mut edges = Vec::new();
    for i in 0..m {
        for j in i + 1..m {
            if rng.random_bool(p) {
                let w = rng.random_range(0.5..2.0);
                edges.push((i, j, w));
                edges.push((j, i, w));
            }
        }
    }
    Graph::from_weighted_edges(n, &edges).unwrap()
}

/// The largest error a gradient check may find (f64 central differences).
pub const GRADCHECK_TOL: f64 = 1e-7;

/// A random weighting so that the checked scalar depends on every entry
/// differently: `sum(v ⊙ W)` with `W` from [`rand_mat_wide`] seeded by `seed`.
pub fn weigh(v: &Var<Cpu<f64>>, seed: u64) -> hdgcn::Result<Var<Cpu<f64>>> {
    let (r, c) = v.shape();
    let mut rng = StdRng::seed_from_u64(seed);
    let w = v.tape().constant_array(&rand_mat_wide(&mut rng, r, c));
    Ok(v.mul(&w)?.sum_all())
}

/// Asserts that a gradient check checked something and stayed below
/// [`GRADCHECK_TOL`].
pub fn assert_ok(name: &str, report: GradCheckReport) {
    assert!(report.checked > 0, "{name}: nothing checked");
    assert!(
        report.max_error < GRADCHECK_TOL,
        "{name}: max error {} at {}",
        report.max_error,
        report.worst
    );
}

/// The optimiser fixture `tests/fixtures/optim.json` (made by
/// `tests/fixtures/gen_optim.py`).
pub fn optim_fixture() -> serde_json::Value {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/optim.json");
    serde_json::from_str(&std::fs::read_to_string(path).expect("read optim.json"))
        .expect("parse optim.json")
}
