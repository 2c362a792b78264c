//! Exact spectral tools (feature `lapack`).
#![cfg(feature = "lapack")]

use hdgcn::Error;
use hdgcn::graph::spectral::{
    chebyshev_coefficients, chebyshev_filter_fn, laplacian_eigen, spectral_filter_matrix,
};
use hdgcn::graph::{Graph, LambdaMax, Normalization};
use ndarray::Array2;
use rand::{Rng, SeedableRng, rngs::StdRng};

fn random_graph(n: usize, p: f64, symmetric: bool, seed: u64) -> Graph {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut a = Array2::zeros((n, n));
    for i in 0..n {
        for j in 0..n {
            if (symmetric && j < i) || !rng.random_bool(p) {
                continue;
            }
            let w = rng.random_range(0.1..3.0);
            a[[i, j]] = w;
            if symmetric {
                a[[j, i]] = w;
            }
        }
    }
    Graph::from_dense(a.view()).unwrap()
}

fn max_abs(m: &Array2<f64>) -> f64 {
    m.iter().fold(0.0, |acc, v| acc.max(v.abs()))
}

/// expm by scaling and squaring with a Taylor series (independent of eigh).
fn expm(m: &Array2<f64>) -> Array2<f64> {
    let n = m.nrows();
    let norm = max_abs(m) * n as f64;
    let s = (norm.max(1.0).log2().ceil() as i32 + 1).max(0);
    let a = m / 2f64.powi(s);
    let mut term = Array2::<f64>::eye(n);
    let mut sum = term.clone();
    for k in 1..30 {
        term = term.dot(&a) / k as f64;
        sum += &term;
    }
    for _ in 0..s {
        sum = sum.dot(&sum);
    }
    sum
}

#[test]
fn eigen_reconstructs_the_laplacian() {
    for (seed, n) in [(1u64, 1usize), (2, 5), (3, 20), (4, 45)] {
        let g = random_graph(n, 0.2, true, seed);
        for norm in [Normalization::Sym, Normalization::None] {
            let eig = laplacian_eigen(&g, norm).unwrap();
            let l = g.laplacian(norm).unwrap().to_dense();
            let u = &eig.vectors;
            let rec = spectral_filter_matrix(&eig, |x| x);
            assert!(max_abs(&(&rec - &l)) < 1e-10, "n={n} {norm}");
            assert!(max_abs(&(u.t().dot(u) - Array2::<f64>::eye(n))) < 1e-10);
            assert!(eig.values.windows(2).into_iter().all(|w| w[0] <= w[1]));
            // λ_max exact agrees with the top eigenvalue and bounds the estimate.
            let exact = g.lambda_max(norm, &LambdaMax::Exact).unwrap();
            assert!((exact - eig.values[n - 1]).abs() < 1e-12);
            let est = g
                .lambda_max(
                    norm,
                    &LambdaMax::Estimate {
                        tol: 1e-8,
                        max_iter: 100,
                        seed,
                    },
                )
                .unwrap();
            assert!(
                est >= exact - 1e-8 && est <= exact + 1e-8,
                "{est} vs {exact}"
            );
        }
    }
}

#[test]
fn chebyshev_series_of_heat_kernel_converges_to_expm() {
    let g = random_graph(25, 0.2, true, 11);
    let t = 1.5;
    for norm in [Normalization::Sym, Normalization::None] {
        let l = g.laplacian(norm).unwrap().to_dense();
        let heat = expm(&(&l * -t));
        let eig = laplacian_eigen(&g, norm).unwrap();
        // Independent check of the eigen route itself.
        assert!(max_abs(&(spectral_filter_matrix(&eig, |x| (-t * x).exp()) - &heat)) < 1e-10);
        let lmax = g.lambda_max(norm, &LambdaMax::Exact).unwrap();
        let mut errs = vec![];
        for k in [2usize, 4, 6, 8, 12, 16, 20, 30] {
            let theta = chebyshev_coefficients(|x| (-t * x).exp(), k, lmax);
            let approx = spectral_filter_matrix(&eig, chebyshev_filter_fn(&theta, lmax));
            errs.push(max_abs(&(&approx - &heat)));
        }
        for w in errs.windows(2) {
            assert!(
                w[1] < w[0] || w[1] < 1e-12,
                "{norm}: errors not decreasing {errs:?}"
            );
        }
        // Terms needed grow with t·λ_max/2: λ_max <= 2 for sym (K = 20
        // suffices), much larger for the unnormalised Laplacian (K = 30).
        let at = if norm == Normalization::Sym { 6 } else { 7 };
        assert!(errs[at] < 1e-8, "{norm}: error {errs:?}");
    }
}

#[test]
fn chebyshev_recurrence_on_scaled_laplacian_equals_spectral_filter() {
    let g = random_graph(18, 0.25, true, 21);
    let n = g.num_nodes();
    let mut rng = StdRng::seed_from_u64(0);
    for norm in [Normalization::Sym, Normalization::None] {
        let lmax = g.lambda_max(norm, &LambdaMax::Exact).unwrap();
        let lt = g.scaled_laplacian(norm, lmax).unwrap().to_dense();
        let eig = laplacian_eigen(&g, norm).unwrap();
        for k in 1..=10 {
            let theta: Vec<f64> = (0..k).map(|_| rng.random_range(-1.0..1.0)).collect();
            // Σ θ_k T_k(L̃) by the matrix recurrence.
            let mut t0 = Array2::<f64>::eye(n);
            let mut t1 = lt.clone();
            let mut sum = &t0 * theta[0];
            for (i, &c) in theta.iter().enumerate().skip(1) {
                if i > 1 {
                    let t2 = lt.dot(&t1) * 2.0 - &t0;
                    t0 = t1;
                    t1 = t2;
                }
                sum = sum + &t1 * c;
            }
            let spectral = spectral_filter_matrix(&eig, chebyshev_filter_fn(&theta, lmax));
            assert!(max_abs(&(&sum - &spectral)) < 1e-10, "{norm} K={k}");
        }
    }
}

#[test]
fn chebyshev_coefficients_interpolate_polynomials_exactly() {
    // f(λ) = λ² on [0, 4]: x = λ/2 - 1, λ = 2(x + 1), λ² = 4(x² + 2x + 1)
    // = 4(T2/2 + 1/2 + 2 T1 + 1) → θ = [6, 8, 2].
    let th = chebyshev_coefficients(|l| l * l, 3, 4.0);
    for (a, b) in th.iter().zip([6.0, 8.0, 2.0]) {
        assert!((a - b).abs() < 1e-12, "{th:?}");
    }
    let f = chebyshev_filter_fn(&th, 4.0);
    assert!((f(3.0) - 9.0).abs() < 1e-12);
    assert_eq!(chebyshev_filter_fn(&[], 2.0)(1.0), 0.0);
}

#[test]
fn non_symmetric_and_rw_are_rejected_and_estimate_bounds_exact() {
    let g = random_graph(12, 0.3, false, 5);
    assert!(!g.is_symmetric());
    assert!(matches!(
        laplacian_eigen(&g, Normalization::Sym),
        Err(Error::InvalidConfig(_))
    ));
    let s = random_graph(12, 0.3, true, 5);
    assert!(matches!(
        laplacian_eigen(&s, Normalization::Rw),
        Err(Error::InvalidConfig(_))
    ));
    for seed in 0..10u64 {
        let g = random_graph(8 + seed as usize * 3, 0.25, false, 40 + seed);
        for norm in [Normalization::Sym, Normalization::Rw, Normalization::None] {
            let exact = g.lambda_max(norm, &LambdaMax::Exact).unwrap();
            let m = LambdaMax::Estimate {
                tol: 1e-8,
                max_iter: 100,
                seed,
            };
            let est = g.lambda_max(norm, &m).unwrap();
            assert!(
                est >= exact - 1e-8,
                "{norm}: estimate {est} below spectral radius {exact}"
            );
        }
    }
}
