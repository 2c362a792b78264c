//! Helpers shared by integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use ndarray::Array2;

/// The benchmark data root: `$HDGCN_DATA` if it exists, else
/// `../shared/data` beside the repository. Returns `None` (and says why)
/// when `sub` is absent there, so the test can skip; under CI (`CI` set)
/// a missing folder is a failure, since nothing may skip in CI.
pub fn data_root_or_skip(sub: &str) -> Option<PathBuf> {
    let mut candidates = Vec::new();
    if let Some(env) = std::env::var_os("HDGCN_DATA") {
        candidates.push(PathBuf::from(env));
    }
    candidates.push(Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data"));
    for root in &candidates {
        if root.join(sub).exists() {
            return Some(root.clone());
        }
    }
    let msg = format!("benchmark data '{sub}' not found under $HDGCN_DATA or ../shared/data");
    if std::env::var_os("CI").is_some() {
        panic!("{msg} (CI must not skip data tests)");
    }
    eprintln!("skipping: {msg}");
    None
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
