//! Largest Laplacian eigenvalue: fixed, estimated (Lanczos) or exact (LAPACK).

use super::ops::check_lambda;
use super::{Graph, Normalization};
use crate::error::{Error, Result, check_positive};
use rand::{Rng, SeedableRng, rngs::StdRng};
use sprs::CsMat;

/// How to obtain `λ_max` for the scaled Laplacian `2 L / λ_max - I`.
///
/// For a symmetric graph `λ_max` is the largest eigenvalue of `L` (for `Rw`,
/// of the similar matrix `D^{1/2} L_rw D^{-1/2} = L_sym`, same spectrum). For
/// a non-symmetric graph the spectrum is complex and `λ_max` means the
/// spectral radius `max |λ|`; [`LambdaMax::Estimate`] then returns an upper
/// bound on it (see there).
#[derive(Debug, Clone, PartialEq)]
pub enum LambdaMax {
    /// Use this value (PyG's default is 2.0, a true bound for `Sym` and `Rw`).
    Fixed(f64),
    /// Pure-Rust Lanczos with full reorthogonalisation, deterministic for a
    /// given `seed` (random start vector from `StdRng::seed_from_u64(seed)`).
    ///
    /// Returns `θ + r`, where `θ` is the top Ritz value (Rayleigh quotient of
    /// the top Ritz vector `y`) and `r = ‖M y - θ y‖` its explicitly computed
    /// residual: some eigenvalue of the symmetric `M` lies within `r` of `θ`,
    /// and since `θ ≤ λ_max` always, `θ + r` bounds `λ_max` from above once
    /// the top Ritz pair has converged. Iteration stops when the residual
    /// estimate is below `tol / 2` (after at least `min(20, n, max_iter)`
    /// steps), when the Krylov space becomes invariant (then the result is
    /// exact up to rounding; with `max_iter >= n` this always happens), or
    /// after `max_iter` steps. The result is finally clamped to the
    /// Gershgorin bound and, for `Sym`/`Rw`, to 2 (their spectra lie in
    /// `[0, 2]`). So the estimate is at most `λ_max + tol` after convergence
    /// and not below `λ_max - tol`.
    ///
    /// For a non-symmetric graph, Lanczos runs on `Lᵀ L` and returns an upper
    /// bound `sqrt(θ + r)` on the largest singular value, which bounds the
    /// spectral radius, clamped by `min(‖L‖₁, ‖L‖∞)` and, for `Sym`/`Rw`, 2.
    Estimate {
        /// Tolerance (absolute, `> 0`).
        tol: f64,
        /// Maximum number of Lanczos steps (`>= 1`).
        max_iter: usize,
        /// Seed of the start vector.
        seed: u64,
    },
    /// Exact eigendecomposition of the dense Laplacian (`eigh`, or `eig` and
    /// the largest modulus for a non-symmetric graph). Needs the `lapack`
    /// feature; without it [`Graph::lambda_max`] returns
    /// [`Error::InvalidConfig`].
    Exact,
}

impl Default for LambdaMax {
    /// `Fixed(2.0)`, as PyG's ChebConv.
    fn default() -> Self {
        LambdaMax::Fixed(2.0)
    }
}

impl Graph {
    /// `λ_max` of the Laplacian with normalisation `norm`, by `method`.
    ///
    /// # Errors
    /// [`Error::Empty`] for [`Graph::empty`]; [`Error::InvalidConfig`] for a
    /// `Fixed` value that is not finite and `> 0`, an `Estimate` with
    /// `tol <= 0`, non-finite `tol` or `max_iter == 0`, or `Exact` without the
    /// `lapack` feature; [`Error::NegativeWeight`] as [`Graph::laplacian`].
    pub fn lambda_max(&self, norm: Normalization, method: &LambdaMax) -> Result<f64> {
        self.require_nodes("lambda_max")?;
        match *method {
            LambdaMax::Fixed(v) => {
                check_lambda(v)?;
                Ok(v)
            }
            LambdaMax::Estimate {
                tol,
                max_iter,
                seed,
            } => {
                check_positive("lambda_max estimate: tol", tol)?;
                if max_iter == 0 {
                    return Err(Error::InvalidConfig(
                        "lambda_max estimate: max_iter must be >= 1".into(),
                    ));
                }
                self.estimate_lambda_max(norm, tol, max_iter, seed)
            }
            LambdaMax::Exact => self.exact_lambda_max(norm),
        }
    }

    #[cfg(feature = "lapack")]
    fn exact_lambda_max(&self, norm: Normalization) -> Result<f64> {
        super::spectral::exact_lambda_max(self, norm)
    }

    #[cfg(not(feature = "lapack"))]
    fn exact_lambda_max(&self, _norm: Normalization) -> Result<f64> {
        Err(Error::InvalidConfig(
            "LambdaMax::Exact needs the `lapack` feature (build with --features lapack)".into(),
        ))
    }

    fn estimate_lambda_max(
        &self,
        norm: Normalization,
        tol: f64,
        max_iter: usize,
        seed: u64,
    ) -> Result<f64> {
        let n = self.num_nodes;
        let cap = if norm == Normalization::None {
            f64::INFINITY
        } else {
            2.0
        };
        if self.is_symmetric() {
            // Rw has the spectrum of Sym (similar matrices); Sym is symmetric.
            let m = match norm {
                Normalization::None => self.laplacian(Normalization::None)?,
                _ => self.laplacian(Normalization::Sym)?,
            };
            let gersh = gershgorin_symmetric(&m);
            let (theta, r) = lanczos_top(
                n,
                |x, y| csr_matvec(&m, x, y),
                |_, est| est <= 0.5 * tol,
                max_iter,
                seed,
            );
            Ok((theta + r).min(gersh).min(cap))
        } else {
            let p = self.laplacian(norm)?;
            let norm_bound = abs_norm_bound(&p);
            let mut tmp = vec![0.0; n];
            let (theta, r) = lanczos_top(
                n,
                |x, y| {
                    csr_matvec(&p, x, &mut tmp);
                    csr_matvec_t(&p, &tmp, y);
                },
                // r on σ² ≤ σ·tol gives ≤ tol/2 on σ.
                |theta, est| est <= 0.5 * tol * theta.max(0.0).sqrt(),
                max_iter,
                seed,
            );
            Ok((theta + r).max(0.0).sqrt().min(norm_bound).min(cap))
        }
    }
}

/// `y = M x` for CSR `M`.
fn csr_matvec(m: &CsMat<f64>, x: &[f64], y: &mut [f64]) {
    for (i, row) in m.outer_iterator().enumerate() {
        y[i] = row.iter().map(|(j, &v)| v * x[j]).sum();
    }
}

/// `y = Mᵀ x` for CSR `M`.
fn csr_matvec_t(m: &CsMat<f64>, x: &[f64], y: &mut [f64]) {
    y.iter_mut().for_each(|v| *v = 0.0);
    for (i, row) in m.outer_iterator().enumerate() {
        for (j, &v) in row.iter() {
            y[j] += v * x[i];
        }
    }
}

/// `max_i M_ii + Σ_{j≠i} |M_ij|`, an upper bound on the eigenvalues of a
/// symmetric `M`.
fn gershgorin_symmetric(m: &CsMat<f64>) -> f64 {
    m.outer_iterator()
        .enumerate()
        .map(|(i, row)| {
            row.iter()
                .map(|(j, &v)| if i == j { v } else { v.abs() })
                .sum::<f64>()
        })
        .fold(f64::NEG_INFINITY, f64::max)
}

/// `min(‖M‖₁, ‖M‖∞)`, an upper bound on the spectral radius.
fn abs_norm_bound(m: &CsMat<f64>) -> f64 {
    let mut col = vec![0.0; m.cols()];
    let mut row_max: f64 = 0.0;
    for row in m.outer_iterator() {
        let mut s = 0.0;
        for (j, &v) in row.iter() {
            s += v.abs();
            col[j] += v.abs();
        }
        row_max = row_max.max(s);
    }
    row_max.min(col.into_iter().fold(0.0, f64::max))
}

fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn norm2(a: &[f64]) -> f64 {
    dot(a, a).sqrt()
}

/// Lanczos with full reorthogonalisation for the largest eigenvalue of the
/// symmetric operator `matvec`. Returns `(θ, r)`: the Rayleigh quotient of
/// the top Ritz vector and its explicit residual norm.
fn lanczos_top(
    n: usize,
    mut matvec: impl FnMut(&[f64], &mut [f64]),
    converged: impl Fn(f64, f64) -> bool,
    max_iter: usize,
    seed: u64,
) -> (f64, f64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut v: Vec<f64> = (0..n).map(|_| rng.random_range(-1.0..1.0)).collect();
    let nv = norm2(&v);
    if nv == 0.0 {
        v[0] = 1.0;
    } else {
        v.iter_mut().for_each(|x| *x /= nv);
    }
    let limit = max_iter.min(n);
    let min_iter = limit.min(20);
    let mut basis: Vec<Vec<f64>> = Vec::new();
    let mut alpha: Vec<f64> = Vec::new();
    let mut beta: Vec<f64> = Vec::new();
    let mut w = vec![0.0; n];
    let mut scale: f64 = 0.0;
    loop {
        matvec(&v, &mut w);
        let a = dot(&v, &w);
        alpha.push(a);
        basis.push(v.clone());
        // Full reorthogonalisation, twice ("twice is enough").
        for _ in 0..2 {
            for q in &basis {
                let c = dot(q, &w);
                w.iter_mut().zip(q).for_each(|(wi, qi)| *wi -= c * qi);
            }
        }
        let b = norm2(&w);
        let k = alpha.len();
        scale = scale.max(a.abs()).max(b);
        let (theta, s) = tridiag_top(&alpha, &beta);
        let est = b * s[k - 1].abs();
        let invariant = b <= 1e-12 * scale.max(f64::MIN_POSITIVE);
        if invariant || k >= limit || (k >= min_iter && converged(theta, est)) {
            // Ritz vector y = V s, then Rayleigh quotient and explicit residual.
            let mut y = vec![0.0; n];
            for (q, &c) in basis.iter().zip(&s) {
                y.iter_mut().zip(q).for_each(|(yi, qi)| *yi += c * qi);
            }
            let ny = norm2(&y);
            y.iter_mut().for_each(|x| *x /= ny);
            let mut my = vec![0.0; n];
            matvec(&y, &mut my);
            let rq = dot(&y, &my);
            let r = my
                .iter()
                .zip(&y)
                .map(|(a, b)| (a - rq * b).powi(2))
                .sum::<f64>()
                .sqrt();
            return (rq, r);
        }
        beta.push(b);
        v = w.iter().map(|x| x / b).collect();
    }
}

/// Largest eigenvalue and unit eigenvector of the symmetric tridiagonal
/// matrix with diagonal `a` (len k) and off-diagonal `b` (len k-1): Sturm
/// bisection, then inverse iteration.
fn tridiag_top(a: &[f64], b: &[f64]) -> (f64, Vec<f64>) {
    let k = a.len();
    if k == 1 {
        return (a[0], vec![1.0]);
    }
    let mut lo = f64::INFINITY;
    let mut hi = f64::NEG_INFINITY;
    for i in 0..k {
        let r = if i > 0 { b[i - 1].abs() } else { 0.0 } + if i < k - 1 { b[i].abs() } else { 0.0 };
        lo = lo.min(a[i] - r);
        hi = hi.max(a[i] + r);
    }
    let span = (hi - lo).max(hi.abs()).max(f64::MIN_POSITIVE);
    lo -= 1e-12 * span;
    hi += 1e-12 * span;
    // count(x) = number of eigenvalues < x.
    let tiny = f64::MIN_POSITIVE.sqrt() * span;
    let count = |x: f64| {
        let mut c = 0;
        let mut q = a[0] - x;
        for i in 0..k {
            if i > 0 {
                q = a[i] - x - b[i - 1] * b[i - 1] / q;
            }
            if q == 0.0 {
                q = -tiny;
            }
            if q < 0.0 {
                c += 1;
            }
        }
        c
    };
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if mid <= lo || mid >= hi {
            break;
        }
        if count(mid) < k {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    let theta = 0.5 * (lo + hi);
    // Inverse iteration on (T - σ I), σ just above θ.
    let sigma = theta + 4.0 * f64::EPSILON * span;
    let mut s = vec![1.0; k];
    for _ in 0..3 {
        s = tridiag_solve(a, b, sigma, &s, f64::EPSILON * span);
        let ns = norm2(&s);
        if !(ns.is_finite() && ns > 0.0) {
            s = vec![1.0; k];
            break;
        }
        s.iter_mut().for_each(|x| *x /= ns);
    }
    (theta, s)
}

/// Solves `(T - σ I) x = rhs` by Gaussian elimination with partial pivoting
/// (LAPACK `gttrf`/`gttrs`); zero pivots are replaced by `eps`.
fn tridiag_solve(a: &[f64], b: &[f64], sigma: f64, rhs: &[f64], eps: f64) -> Vec<f64> {
    let k = a.len();
    let mut d: Vec<f64> = a.iter().map(|x| x - sigma).collect();
    let mut dl = b.to_vec();
    let mut du = b.to_vec();
    let mut du2 = vec![0.0; k.saturating_sub(2)];
    let mut piv = vec![false; k.saturating_sub(1)];
    let fix = |x: f64| if x == 0.0 { eps } else { x };
    for i in 0..k - 1 {
        if d[i].abs() >= dl[i].abs() {
            d[i] = fix(d[i]);
            let f = dl[i] / d[i];
            dl[i] = f;
            d[i + 1] -= f * du[i];
        } else {
            let f = d[i] / dl[i];
            d[i] = dl[i];
            dl[i] = f;
            let t = du[i];
            du[i] = d[i + 1];
            d[i + 1] = t - f * d[i + 1];
            if i + 2 < k {
                du2[i] = du[i + 1];
                du[i + 1] *= -f;
            }
            piv[i] = true;
        }
    }
    d[k - 1] = fix(d[k - 1]);
    let mut x = rhs.to_vec();
    for i in 0..k - 1 {
        if piv[i] {
            let t = x[i];
            x[i] = x[i + 1];
            x[i + 1] = t - dl[i] * x[i];
        } else {
            x[i + 1] -= dl[i] * x[i];
        }
    }
    x[k - 1] /= d[k - 1];
    if k >= 2 {
        x[k - 2] = (x[k - 2] - du[k - 2] * x[k - 1]) / d[k - 2];
    }
    for i in (0..k.saturating_sub(2)).rev() {
        x[i] = (x[i] - du[i] * x[i + 1] - du2[i] * x[i + 2]) / d[i];
    }
    x
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tridiag_top_matches_known_spectrum() {
        // T = tridiag(-1, 2, -1) of size k: eigenvalues 2 - 2 cos(jπ/(k+1)).
        let k = 12;
        let a = vec![2.0; k];
        let b = vec![-1.0; k - 1];
        let (theta, s) = tridiag_top(&a, &b);
        let exact = 2.0 - 2.0 * (k as f64 * std::f64::consts::PI / (k as f64 + 1.0)).cos();
        assert!((theta - exact).abs() < 1e-12, "{theta} vs {exact}");
        // Residual of the eigenvector.
        for i in 0..k {
            let mut ts = a[i] * s[i];
            if i > 0 {
                ts += b[i - 1] * s[i - 1];
            }
            if i + 1 < k {
                ts += b[i] * s[i + 1];
            }
            assert!((ts - theta * s[i]).abs() < 1e-10);
        }
    }
}
