//! Spectral identities, checked against dense eigendecompositions (LAPACK):
//! ChebConv's sparse Clenshaw recurrence is the spectral filter
//! `U g_θ(Λ) Uᵀ`, Chebyshev truncations of the heat kernel converge to it,
//! `SpectralFilter` has correct gradients, and λ_max estimates agree with
//! the exact value.
#![cfg(feature = "lapack")]

use hdgcn::Error;
use hdgcn::autograd::Tape;
use hdgcn::autograd::gradcheck::check_inputs;
use hdgcn::backend::Cpu;
use hdgcn::conv::{
    ChebConv, ChebConvConfig, DeviceGraph, GraphConv, SPECTRAL_FILTER_MAX_NODES, SpectralFilter,
    SpectralResponse,
};
use hdgcn::graph::spectral::{chebyshev_coefficients, laplacian_eigen};
use hdgcn::graph::{Batch, Graph, LambdaMax, Normalization};
use ndarray::Array2;
use rand::{Rng, SeedableRng, rngs::StdRng};

mod common;
use common::{max_abs_diff, rand_mat, random_weighted_graph};

type C = Cpu<f64>;

fn graphs() -> Vec<Graph> {
    let mut rng = StdRng::seed_from_u64(2024);
    vec![
        random_weighted_graph(&mut rng, 6, 0.5, false),
        random_weighted_graph(&mut rng, 13, 0.3, true),
        random_weighted_graph(&mut rng, 30, 0.15, false),
        random_weighted_graph(&mut rng, 24, 0.08, true),
    ]
}

/// `T_k(x) = cos(k arccos x)` on `[-1, 1]` (written independently of the
/// crate's Clenshaw evaluation).
fn cheb_t(k: usize, x: f64) -> f64 {
    (k as f64 * x.clamp(-1.0, 1.0).acos()).cos()
}

/// A bias-free ChebConv whose term `k` has weight `θ_k · W`.
fn cheb_with_theta(
    cpu: &C,
    theta: &[f64],
    w: &Array2<f64>,
    norm: Normalization,
    lambda_max: f64,
) -> ChebConv<C> {
    let mut cfg = ChebConvConfig::new(w.nrows(), w.ncols(), theta.len());
    cfg.normalization = norm;
    cfg.lambda_max = LambdaMax::Fixed(lambda_max);
    cfg.bias = false;
    let conv: ChebConv<C> = cfg.build(cpu, &mut StdRng::seed_from_u64(0)).unwrap();
    for (lin, &t) in conv.lins.iter().zip(theta) {
        lin.weight.set(w * t).unwrap();
    }
    conv
}

fn cheb_forward(conv: &ChebConv<C>, cpu: &C, g: &Graph, x: &Array2<f64>) -> Array2<f64> {
    let dg = DeviceGraph::new(cpu, g.clone());
    let tape = Tape::inference(cpu);
    conv.forward(&tape, &dg, &tape.constant_array(x).into())
        .unwrap()
        .to_array()
}

fn apply(filter: &SpectralFilter<C>, x: &Array2<f64>) -> Array2<f64> {
    let tape = Tape::inference(filter.backend());
    filter
        .filter(&tape, &tape.constant_array(x))
        .unwrap()
        .to_array()
}

/// The three (normalisation, λ_max) settings of the proofs.
fn settings(g: &Graph) -> Vec<(Normalization, f64, &'static str)> {
    vec![
        (Normalization::Sym, 2.0, "sym, λ_max = 2"),
        (
            Normalization::Sym,
            g.lambda_max(Normalization::Sym, &LambdaMax::Exact).unwrap(),
            "sym, exact λ_max",
        ),
        (
            Normalization::None,
            g.lambda_max(Normalization::None, &LambdaMax::Exact)
                .unwrap(),
            "none, exact λ_max",
        ),
    ]
}

// ----- (a) ChebConv = U (Σ θ_k T_k(Λ̃)) Uᵀ X W ---------------------------

#[test]
fn cheb_conv_equals_eigendecomposed_filter() {
    let cpu = C::new();
    let mut rng = StdRng::seed_from_u64(7);
    let mut worst = 0.0f64;
    for g in graphs() {
        let n = g.num_nodes();
        let x = rand_mat(&mut rng, n, 4);
        let w = rand_mat(&mut rng, 4, 3);
        for (norm, lambda_max, what) in settings(&g) {
            let eig = laplacian_eigen(&g, norm).unwrap();
            for k in 1..=10 {
                let theta: Vec<f64> = (0..k).map(|_| rng.random_range(-1.0..1.0)).collect();
                let got = cheb_forward(
                    &cheb_with_theta(&cpu, &theta, &w, norm, lambda_max),
                    &cpu,
                    &g,
                    &x,
                );
                // Reference: g(λ) = Σ θ_k cos(k arccos(2λ/λ_max - 1)) on the
                // eigenvalues, F = U g(Λ) Uᵀ, out = F X W.
                let th = theta.clone();
                let response = SpectralResponse::custom(move |l| {
                    let s = 2.0 * l / lambda_max - 1.0;
                    th.iter().enumerate().map(|(k, t)| t * cheb_t(k, s)).sum()
                });
                let exact = SpectralFilter::from_eigen(&cpu, eig.clone(), response).unwrap();
                let want = apply(&exact, &x).dot(&w);
                let err = max_abs_diff(&got, &want);
                assert!(err <= 1e-10, "n = {n}, {what}, K = {k}: {err:e}");
                // The Chebyshev response of SpectralFilter is the same filter.
                let cheb = SpectralFilter::from_eigen(
                    &cpu,
                    eig.clone(),
                    SpectralResponse::Chebyshev {
                        theta: theta.clone(),
                        lambda_max,
                    },
                )
                .unwrap();
                let err2 = max_abs_diff(&apply(&cheb, &x).dot(&w), &want);
                assert!(
                    err2 <= 1e-10,
                    "n = {n}, {what}, K = {k}: Chebyshev response {err2:e}"
                );
                worst = worst.max(err).max(err2);
            }
        }
    }
    eprintln!("worst |ChebConv - U g(Λ) Uᵀ X W| = {worst:.3e}");
}

/// The spectrum really is where the proofs assume: the exact λ_max is the
/// largest eigenvalue, and `Sym` spectra lie in `[0, 2]`.
#[test]
fn eigendecomposition_reconstructs_laplacian() {
    for g in graphs() {
        for norm in [Normalization::Sym, Normalization::None] {
            let eig = laplacian_eigen(&g, norm).unwrap();
            let l = g.laplacian(norm).unwrap().to_dense();
            let rebuilt = (&eig.vectors * &eig.values.view().insert_axis(ndarray::Axis(0)))
                .dot(&eig.vectors.t());
            assert!(max_abs_diff(&rebuilt, &l) < 1e-12);
            let top = eig.values[eig.values.len() - 1];
            let exact = g.lambda_max(norm, &LambdaMax::Exact).unwrap();
            assert!((top - exact).abs() < 1e-12);
            assert!(eig.values[0] > -1e-12);
            if norm == Normalization::Sym {
                assert!(top <= 2.0 + 1e-12);
            }
        }
    }
}

// ----- (b) Chebyshev truncations of the heat kernel converge ---------------

#[test]
fn chebyshev_heat_kernel_converges() {
    let cpu = C::new();
    let mut rng = StdRng::seed_from_u64(8);
    for g in graphs() {
        let n = g.num_nodes();
        let x = rand_mat(&mut rng, n, 3);
        let eye = Array2::<f64>::eye(3);
        for (norm, lambda_max, what) in settings(&g) {
            for t in [0.5, 2.0, 5.0 / lambda_max] {
                let heat =
                    SpectralFilter::new(&cpu, &g, norm, SpectralResponse::Heat { t }).unwrap();
                let want = apply(&heat, &x);
                let errs: Vec<f64> = (1..=25)
                    .map(|k| {
                        let theta = chebyshev_coefficients(|l| (-t * l).exp(), k, lambda_max);
                        let conv = cheb_with_theta(&cpu, &theta, &eye, norm, lambda_max);
                        let via_conv = max_abs_diff(&cheb_forward(&conv, &cpu, &g, &x), &want);
                        let trunc = SpectralFilter::from_eigen(
                            &cpu,
                            heat.eigen().clone(),
                            SpectralResponse::Chebyshev { theta, lambda_max },
                        )
                        .unwrap();
                        let via_filter = max_abs_diff(&apply(&trunc, &x), &want);
                        assert!(
                            (via_conv - via_filter).abs() < 1e-10,
                            "{what}, t = {t}, K = {k}: conv {via_conv:e} vs filter {via_filter:e}"
                        );
                        via_conv
                    })
                    .collect();
                // Monotone-ish: while `t λ_max / 2` exceeds K the series is
                // still pre-asymptotic and single steps may rise (the
                // interpolant oscillates), so require (i) no step more than
                // doubles the best error so far and (ii) every four more
                // terms strictly improve, until the rounding floor.
                let floor = 1e-12;
                for k in 1..errs.len() {
                    let best = errs[..k].iter().copied().fold(f64::INFINITY, f64::min);
                    assert!(
                        errs[k] <= 2.0 * best || errs[k] < floor,
                        "{what}, t = {t}: K = {} jumps above the best so far: {errs:?}",
                        k + 1
                    );
                }
                for k in 4..errs.len() {
                    assert!(
                        errs[k] < errs[k - 4] || errs[k] < floor,
                        "{what}, t = {t}: no progress from K = {} to K = {}: {errs:?}",
                        k - 3,
                        k + 1
                    );
                }
                assert!(
                    errs[0] > 1e-3,
                    "K = 1 cannot represent the heat kernel: {errs:?}"
                );
                let first = errs.iter().position(|&e| e < 1e-8).map(|i| i + 1);
                eprintln!("n = {n}, {what}, t = {t}: error < 1e-8 from K = {first:?}");
                assert!(first.is_some_and(|k| k <= 25), "{what}, t = {t}: {errs:?}");
            }
        }
    }
}

// ----- (c) gradients and errors of SpectralFilter --------------------------

#[test]
fn spectral_filter_gradients() {
    let cpu = C::new();
    let mut rng = StdRng::seed_from_u64(9);
    for g in graphs().into_iter().take(3) {
        let n = g.num_nodes();
        let responses = [
            SpectralResponse::Heat { t: 1.3 },
            SpectralResponse::Chebyshev {
                theta: vec![0.5, -0.3, 0.2, 0.1],
                lambda_max: 2.0,
            },
            SpectralResponse::custom(|l| 1.0 / (1.0 + l)),
        ];
        for response in responses {
            let f = SpectralFilter::new(&cpu, &g, Normalization::Sym, response).unwrap();
            let x = rand_mat(&mut rng, n, 3);
            let r = rand_mat(&mut rng, n, 3);
            let report = check_inputs(
                &[x],
                |tape, v| {
                    let y = f.filter(tape, &v[0])?;
                    // A non-linear scalar so that every entry of x matters.
                    Ok(y.tanh().mul(&tape.constant_array(&r))?.sum_all())
                },
                1e-6,
            )
            .unwrap();
            assert!(report.max_error < 1e-7, "{:?}: {report:?}", f.response());
            assert_eq!(report.checked, n * 3);
        }
    }
}

#[test]
fn spectral_filter_rejects_bad_input() {
    let cpu = C::new();
    let big = Graph::from_edges(SPECTRAL_FILTER_MAX_NODES + 1, &[(0, 1), (1, 0)]).unwrap();
    let heat = SpectralResponse::Heat { t: 1.0 };
    assert!(matches!(
        SpectralFilter::new(&cpu, &big, Normalization::Sym, heat.clone()),
        Err(Error::InvalidConfig(_))
    ));
    let g = Graph::from_edges(3, &[(0, 1), (1, 0), (1, 2), (2, 1)]).unwrap();
    let directed = Graph::from_edges(3, &[(0, 1), (1, 2)]).unwrap();
    assert!(matches!(
        SpectralFilter::new(&cpu, &directed, Normalization::Sym, heat.clone()),
        Err(Error::InvalidConfig(_))
    ));
    assert!(matches!(
        SpectralFilter::new(&cpu, &g, Normalization::Rw, heat.clone()),
        Err(Error::InvalidConfig(_))
    ));
    for bad in [
        SpectralResponse::Heat { t: f64::NAN },
        SpectralResponse::Heat { t: -1.0 },
        SpectralResponse::Chebyshev {
            theta: vec![1.0],
            lambda_max: 0.0,
        },
        SpectralResponse::Chebyshev {
            theta: vec![1.0, f64::INFINITY],
            lambda_max: 2.0,
        },
    ] {
        assert!(
            matches!(
                SpectralFilter::new(&cpu, &g, Normalization::Sym, bad.clone()),
                Err(Error::InvalidConfig(_))
            ),
            "{bad:?}"
        );
    }
    // √(λ - 1.5) is NaN at the eigenvalues 0 and 1 of the path's L_sym.
    assert!(matches!(
        SpectralFilter::new(
            &cpu,
            &g,
            Normalization::Sym,
            SpectralResponse::custom(|l| (l - 1.5).sqrt())
        ),
        Err(Error::NonFinite { .. })
    ));
    let f = SpectralFilter::new(&cpu, &g, Normalization::Sym, heat).unwrap();
    let tape = Tape::inference(&cpu);
    let x = tape.constant_array(&Array2::zeros((4, 2)));
    assert!(matches!(
        f.filter(&tape, &x),
        Err(Error::ShapeMismatch { .. })
    ));
    // The heat kernel is symmetric, positive definite, and keeps constants on
    // a connected graph's `None` Laplacian (row sums 1).
    let m = f.matrix();
    assert!(max_abs_diff(m, &m.t().to_owned()) < 1e-14);
    let lap = SpectralFilter::new(
        &cpu,
        &g,
        Normalization::None,
        SpectralResponse::Heat { t: 0.7 },
    )
    .unwrap();
    for s in lap.matrix().sum_axis(ndarray::Axis(1)) {
        assert!((s - 1.0).abs() < 1e-12, "{s}");
    }
}

// ----- (d) λ_max: Exact vs Estimate ---------------------------------------

#[test]
fn lambda_max_estimate_agrees_with_exact() {
    let mut rng = StdRng::seed_from_u64(10);
    let tol = 1e-9;
    for (i, g) in graphs().into_iter().enumerate() {
        for norm in [Normalization::Sym, Normalization::Rw, Normalization::None] {
            let exact = g.lambda_max(norm, &LambdaMax::Exact).unwrap();
            for seed in 0..3 {
                let est = g
                    .lambda_max(
                        norm,
                        &LambdaMax::Estimate {
                            tol,
                            max_iter: 200,
                            seed,
                        },
                    )
                    .unwrap();
                assert!(
                    est >= exact - tol && est <= exact + tol,
                    "graph {i}, {norm}, seed {seed}: estimate {est} vs exact {exact}"
                );
            }
        }
    }
    // Directed graph: the estimate bounds the spectral radius from above.
    let mut edges = Vec::new();
    for _ in 0..40 {
        let (s, d) = (rng.random_range(0..12), rng.random_range(0..12));
        edges.push((s, d, rng.random_range(0.5..2.0)));
    }
    let g = Graph::from_weighted_edges(12, &edges).unwrap();
    assert!(!g.is_symmetric());
    for norm in [Normalization::Sym, Normalization::None] {
        let exact = g.lambda_max(norm, &LambdaMax::Exact).unwrap();
        let est = g
            .lambda_max(
                norm,
                &LambdaMax::Estimate {
                    tol,
                    max_iter: 200,
                    seed: 1,
                },
            )
            .unwrap();
        assert!(
            est >= exact - tol,
            "{norm}: estimate {est} below exact {exact}"
        );
    }
    // Per-graph values of a batch are the values of the graphs alone.
    let gs = graphs();
    let batch = Batch::new(&gs).unwrap();
    let cpu = C::new();
    let dg = DeviceGraph::from_batch(&cpu, &batch).unwrap();
    let per = dg
        .lambda_max(Normalization::None, &LambdaMax::Exact)
        .unwrap();
    for (g, l) in gs.iter().zip(per) {
        assert_eq!(
            l,
            g.lambda_max(Normalization::None, &LambdaMax::Exact)
                .unwrap()
        );
    }
}

#[test]
fn exact_spectrum_refuses_graphs_too_large_to_densify() {
    use hdgcn::graph::spectral::EXACT_SPECTRUM_MAX_NODES;
    let n = EXACT_SPECTRUM_MAX_NODES + 1;
    let edges: Vec<(usize, usize)> = (1..n).flat_map(|i| [(i - 1, i), (i, i - 1)]).collect();
    let g = Graph::from_edges(n, &edges).unwrap();
    let err = g
        .lambda_max(Normalization::Sym, &LambdaMax::Exact)
        .unwrap_err();
    assert!(matches!(err, Error::InvalidConfig(_)), "{err:?}");
    assert!(err.to_string().contains("LambdaMax::Estimate"), "{err}");
    assert!(laplacian_eigen(&g, Normalization::Sym).is_err());
    // The estimate still works at this size.
    let estimate = LambdaMax::Estimate {
        tol: 1e-3,
        max_iter: 200,
        seed: 0,
    };
    let est = g.lambda_max(Normalization::Sym, &estimate).unwrap();
    assert!(est > 1.9 && est <= 2.0, "{est}");
}
