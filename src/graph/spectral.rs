//! Exact spectral tools (feature `lapack`): eigendecomposition of the
//! Laplacian, spectral filters `U g(Λ) Uᵀ`, Chebyshev series.

use super::{Graph, Normalization};
use crate::{Error, Result};
use ndarray::{Array1, Array2};
use ndarray_linalg::{Eig, Eigh, UPLO};

/// Eigendecomposition `L = U diag(λ) Uᵀ` with ascending eigenvalues.
#[derive(Debug, Clone, PartialEq)]
pub struct Eigen {
    /// Eigenvalues `λ`, ascending.
    pub values: Array1<f64>,
    /// Orthonormal eigenvectors `U`, one per column (column `i` for `values[i]`).
    pub vectors: Array2<f64>,
}

/// The most nodes the dense eigensolvers here accept ([`laplacian_eigen`],
/// `LambdaMax::Exact`): the dense `N x N` `f64` Laplacian is 3.2 GB at
/// this size and the solve is `O(N³)`. Use [`LambdaMax::Estimate`](super::LambdaMax::Estimate) above it.
pub const EXACT_SPECTRUM_MAX_NODES: usize = 20_000;

/// The dense Laplacian in propagation form (see [`Graph::laplacian`]).
fn dense_laplacian(g: &Graph, norm: Normalization) -> Result<Array2<f64>> {
    let n = g.num_nodes();
    if n > EXACT_SPECTRUM_MAX_NODES {
        return Err(Error::InvalidConfig(format!(
            "the exact spectrum of a {n}-node graph needs a dense {n} x {n} matrix; \
             the limit is {EXACT_SPECTRUM_MAX_NODES} nodes (use LambdaMax::Estimate)"
        )));
    }
    Ok(g.laplacian(norm)?.to_dense())
}

fn numerical(e: impl std::fmt::Display) -> Error {
    Error::Numerical(format!("LAPACK eigensolver failed: {e}"))
}

/// Eigendecomposition of the `Sym` or `None` Laplacian of a symmetric graph
/// (LAPACK `syevd` on the dense matrix; its lower triangle is used).
///
/// # Errors
/// [`Error::InvalidConfig`] for a non-symmetric graph (no orthogonal
/// eigenbasis) or for `Rw` (`L_rw` is similar to `L_sym` but not symmetric, so
/// its eigenvectors are not orthogonal: use `Sym` and rescale); otherwise as
/// [`Graph::laplacian`]; [`Error::Numerical`] if LAPACK fails.
pub fn laplacian_eigen(g: &Graph, norm: Normalization) -> Result<Eigen> {
    if norm == Normalization::Rw {
        return Err(Error::InvalidConfig(
            "laplacian_eigen: the rw Laplacian is not symmetric (no orthogonal eigenbasis); use sym"
                .into(),
        ));
    }
    if !g.is_symmetric() {
        return Err(Error::InvalidConfig(
            "laplacian_eigen needs a symmetric graph (use Graph::symmetrized)".into(),
        ));
    }
    let l = dense_laplacian(g, norm)?;
    let (values, vectors) = l.eigh(UPLO::Lower).map_err(numerical)?;
    Ok(Eigen { values, vectors })
}

/// Exact `λ_max`: largest eigenvalue (`eigh`) for a symmetric graph (for
/// `Rw`, of the similar `L_sym`), spectral radius (`eig`) otherwise.
pub(crate) fn exact_lambda_max(g: &Graph, norm: Normalization) -> Result<f64> {
    if g.is_symmetric() {
        let norm = if norm == Normalization::None {
            Normalization::None
        } else {
            Normalization::Sym
        };
        let l = dense_laplacian(g, norm)?;
        let (values, _) = l.eigh(UPLO::Lower).map_err(numerical)?;
        Ok(values.iter().copied().fold(f64::NEG_INFINITY, f64::max))
    } else {
        let l = dense_laplacian(g, norm)?;
        let (values, _) = l.eig().map_err(numerical)?;
        Ok(values.iter().map(|z| z.norm()).fold(0.0, f64::max))
    }
}

/// The spectral filter matrix `U g(Λ) Uᵀ`.
pub fn spectral_filter_matrix(eig: &Eigen, g: impl Fn(f64) -> f64) -> Array2<f64> {
    let u = &eig.vectors;
    let gl = eig.values.mapv(&g);
    let ug = u * &gl.view().insert_axis(ndarray::Axis(0));
    ug.dot(&u.t())
}

/// `λ ↦ Σ_k θ_k T_k(2 λ / λ_max - 1)` (Clenshaw recurrence); the empty
/// series is 0.
pub fn chebyshev_filter_fn(theta: &[f64], lambda_max: f64) -> impl Fn(f64) -> f64 {
    let theta = theta.to_vec();
    move |lambda| {
        let x = 2.0 * lambda / lambda_max - 1.0;
        let (mut b1, mut b2) = (0.0, 0.0);
        for &c in theta.iter().skip(1).rev() {
            let b0 = 2.0 * x * b1 - b2 + c;
            b2 = b1;
            b1 = b0;
        }
        match theta.first() {
            Some(&c0) => c0 + x * b1 - b2,
            None => 0.0,
        }
    }
}

/// The `k` Chebyshev interpolation coefficients of `f` on `[0, λ_max]`: with
/// the Chebyshev nodes `x_j = cos(π (j + 1/2) / k)` and
/// `λ_j = (x_j + 1) λ_max / 2`,
/// `θ_m = (2 - δ_{m0}) / k · Σ_j f(λ_j) cos(π m (j + 1/2) / k)`, so that
/// `chebyshev_filter_fn(&θ, λ_max)` interpolates `f` at the nodes and
/// converges to `f` as `k` grows (geometrically for analytic `f`).
/// `k == 0` gives an empty vector.
pub fn chebyshev_coefficients(f: impl Fn(f64) -> f64, k: usize, lambda_max: f64) -> Vec<f64> {
    use std::f64::consts::PI;
    let kf = k as f64;
    let fx: Vec<f64> = (0..k)
        .map(|j| {
            let x = (PI * (j as f64 + 0.5) / kf).cos();
            f((x + 1.0) * lambda_max / 2.0)
        })
        .collect();
    (0..k)
        .map(|m| {
            let s: f64 = fx
                .iter()
                .enumerate()
                .map(|(j, &v)| v * (PI * m as f64 * (j as f64 + 0.5) / kf).cos())
                .sum();
            if m == 0 { s / kf } else { 2.0 * s / kf }
        })
        .collect()
}
