//! λ_max: the Lanczos estimate bounds the true value (from a dense Jacobi
//! eigen-solver written here) from above within its tolerance.

use hdgcn::Error;
use hdgcn::graph::{Graph, LambdaMax, Normalization};
use ndarray::Array2;
use rand::{Rng, SeedableRng, rngs::StdRng};

/// All eigenvalues of a symmetric matrix by cyclic Jacobi rotations.
fn jacobi_eigenvalues(m: &Array2<f64>) -> Vec<f64> {
    let n = m.nrows();
    let mut a = m.clone();
    let total: f64 = a.iter().map(|v| v * v).sum();
    for _sweep in 0..100 {
        let off: f64 = (0..n)
            .flat_map(|i| (0..n).filter(move |&j| j != i).map(move |j| (i, j)))
            .map(|(i, j)| a[[i, j]] * a[[i, j]])
            .sum();
        if off <= 1e-26 * total {
            break;
        }
        for p in 0..n {
            for q in p + 1..n {
                if a[[p, q]] == 0.0 {
                    continue;
                }
                let theta = (a[[q, q]] - a[[p, p]]) / (2.0 * a[[p, q]]);
                let t = theta.signum() / (theta.abs() + (theta * theta + 1.0).sqrt());
                let t = if theta == 0.0 { 1.0 } else { t };
                let c = 1.0 / (t * t + 1.0).sqrt();
                let s = t * c;
                for k in 0..n {
                    let (akp, akq) = (a[[k, p]], a[[k, q]]);
                    a[[k, p]] = c * akp - s * akq;
                    a[[k, q]] = s * akp + c * akq;
                }
                for k in 0..n {
                    let (apk, aqk) = (a[[p, k]], a[[q, k]]);
                    a[[p, k]] = c * apk - s * aqk;
                    a[[q, k]] = s * apk + c * aqk;
                }
            }
        }
    }
    let mut v: Vec<f64> = (0..n).map(|i| a[[i, i]]).collect();
    v.sort_by(f64::total_cmp);
    v
}

/// Dense symmetric Laplacian written from the textbook formulas
/// (self-loops dropped; isolated node has L_ii = 1 for sym).
fn dense_laplacian(a: &Array2<f64>, norm: Normalization) -> Array2<f64> {
    let n = a.nrows();
    let mut a0 = a.clone();
    for i in 0..n {
        a0[[i, i]] = 0.0;
    }
    let deg: Vec<f64> = (0..n).map(|i| a0.row(i).sum()).collect();
    let dis = |x: f64| if x == 0.0 { 0.0 } else { 1.0 / x.sqrt() };
    Array2::from_shape_fn((n, n), |(i, j)| {
        let delta = if i == j { 1.0 } else { 0.0 };
        match norm {
            Normalization::None => delta * deg[i] - a0[[i, j]],
            // rw has the spectrum of sym.
            _ => delta - dis(deg[i]) * a0[[i, j]] * dis(deg[j]),
        }
    })
}

fn random_symmetric(n: usize, p: f64, seed: u64) -> Array2<f64> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut a = Array2::zeros((n, n));
    for i in 0..n {
        for j in 0..=i {
            if rng.random_bool(p) {
                let w = rng.random_range(0.1..4.0);
                a[[i, j]] = w;
                a[[j, i]] = w;
            }
        }
    }
    a
}

const NORMS: [Normalization; 3] = [Normalization::Sym, Normalization::Rw, Normalization::None];

fn true_lambda_max(a: &Array2<f64>, norm: Normalization) -> f64 {
    *jacobi_eigenvalues(&dense_laplacian(a, norm))
        .last()
        .unwrap()
}

#[test]
fn jacobi_reference_is_correct_on_a_known_spectrum() {
    // Path graph P_n: L = D - A has eigenvalues 2 - 2 cos(kπ/n), k = 0..n-1.
    let n = 9;
    let mut a = Array2::zeros((n, n));
    for i in 0..n - 1 {
        a[[i, i + 1]] = 1.0;
        a[[i + 1, i]] = 1.0;
    }
    let ev = jacobi_eigenvalues(&dense_laplacian(&a, Normalization::None));
    for (k, &e) in ev.iter().enumerate() {
        let want = 2.0 - 2.0 * (k as f64 * std::f64::consts::PI / n as f64).cos();
        assert!((e - want).abs() < 1e-12, "{e} vs {want}");
    }
}

#[test]
fn estimate_is_a_tight_upper_bound_on_many_random_graphs() {
    let tol = 1e-8;
    let mut worst_above: f64 = 0.0;
    let mut count = 0;
    for seed in 0..40u64 {
        let n = 1 + (seed as usize * 7) % 60;
        let p = [0.05, 0.15, 0.4][seed as usize % 3];
        let a = random_symmetric(n, p, seed);
        let g = Graph::from_dense(a.view()).unwrap_or_else(|_| Graph::from_edges(n, &[]).unwrap());
        for norm in NORMS {
            let truth = true_lambda_max(&a, norm);
            let method = LambdaMax::Estimate {
                tol,
                max_iter: 200,
                seed: 1000 + seed,
            };
            let est = g.lambda_max(norm, &method).unwrap();
            assert!(
                est >= truth - tol,
                "n={n} {norm}: estimate {est} < true {truth} - tol"
            );
            assert!(
                est <= truth + tol,
                "n={n} {norm}: estimate {est} too far above true {truth}"
            );
            worst_above = worst_above.max(est - truth);
            count += 1;
            if norm != Normalization::None {
                assert!(est <= 2.0);
            }
        }
    }
    assert_eq!(count, 120);
    assert!(worst_above <= tol);
}

#[test]
fn estimate_with_few_iterations_still_bounds_from_above() {
    // Larger graphs where max_iter < n: the Krylov space is not exhausted.
    for seed in 0..4u64 {
        let n = 70 + 10 * seed as usize;
        let a = random_symmetric(n, 0.06, 500 + seed);
        let g = Graph::from_dense(a.view()).unwrap();
        for norm in NORMS {
            let truth = true_lambda_max(&a, norm);
            let tol = 1e-6;
            let method = LambdaMax::Estimate {
                tol,
                max_iter: 25,
                seed,
            };
            let est = g.lambda_max(norm, &method).unwrap();
            assert!(est >= truth - tol, "n={n} {norm}: {est} < {truth} - tol");
            // Either converged (within tol) or the residual rounds it up a
            // little; never beyond a sensible margin.
            assert!(
                est <= truth + 0.05 * truth.max(1.0),
                "n={n} {norm}: {est} vs {truth}"
            );
        }
    }
}

#[test]
fn estimate_is_deterministic_for_a_seed() {
    let a = random_symmetric(80, 0.08, 42);
    let g = Graph::from_dense(a.view()).unwrap();
    for norm in NORMS {
        let m = |seed| LambdaMax::Estimate {
            tol: 1e-4,
            max_iter: 30,
            seed,
        };
        let x = g.lambda_max(norm, &m(7)).unwrap();
        let y = g.lambda_max(norm, &m(7)).unwrap();
        assert_eq!(x.to_bits(), y.to_bits());
        let z = g.lambda_max(norm, &m(8)).unwrap();
        let truth = true_lambda_max(&a, norm);
        assert!(z >= truth - 1e-4 && x >= truth - 1e-4);
    }
}

#[test]
fn rw_estimate_equals_sym_estimate_on_symmetric_graphs() {
    let a = random_symmetric(30, 0.2, 9);
    let g = Graph::from_dense(a.view()).unwrap();
    let m = LambdaMax::Estimate {
        tol: 1e-10,
        max_iter: 100,
        seed: 1,
    };
    assert_eq!(
        g.lambda_max(Normalization::Rw, &m).unwrap(),
        g.lambda_max(Normalization::Sym, &m).unwrap()
    );
}

#[test]
fn known_values() {
    // Complete bipartite K_{2,3}: L_sym has eigenvalue 2 (bipartite), L = D - A has 5.
    let mut edges = vec![];
    for i in 0..2 {
        for j in 2..5 {
            edges.push((i, j));
            edges.push((j, i));
        }
    }
    let g = Graph::from_edges(5, &edges).unwrap();
    let m = LambdaMax::Estimate {
        tol: 1e-9,
        max_iter: 50,
        seed: 0,
    };
    let sym = g.lambda_max(Normalization::Sym, &m).unwrap();
    assert!((sym - 2.0).abs() <= 1e-9, "{sym}");
    let none = g.lambda_max(Normalization::None, &m).unwrap();
    assert!((none - 5.0).abs() <= 1e-9, "{none}");
    // Edgeless graph: L_sym = I, L = 0.
    let e = Graph::from_edges(4, &[]).unwrap();
    assert!((e.lambda_max(Normalization::Sym, &m).unwrap() - 1.0).abs() <= 1e-12);
    assert_eq!(e.lambda_max(Normalization::None, &m).unwrap(), 0.0);
}

#[test]
fn non_symmetric_estimate_bounds_the_spectral_radius() {
    // Directed cycle 0->1->...->n-1->0 with weight w: L = D - A has
    // eigenvalues w(1 - ω^k), spectral radius 2w for even n.
    for &(n, w) in &[(6usize, 1.0), (10, 0.5)] {
        let edges: Vec<(usize, usize, f64)> = (0..n).map(|i| (i, (i + 1) % n, w)).collect();
        let g = Graph::from_weighted_edges(n, &edges).unwrap();
        assert!(!g.is_symmetric());
        let m = LambdaMax::Estimate {
            tol: 1e-9,
            max_iter: 100,
            seed: 5,
        };
        let est = g.lambda_max(Normalization::None, &m).unwrap();
        assert!(est >= 2.0 * w - 1e-9, "{est}");
        assert!(est <= 2.0 * w + 1e-9, "{est}");
        let sym = g.lambda_max(Normalization::Sym, &m).unwrap();
        assert!((2.0 - 1e-9..=2.0).contains(&sym), "{sym}");
    }
}

#[test]
fn lambda_max_error_paths() {
    let g = Graph::from_edges(3, &[(0, 1), (1, 0)]).unwrap();
    for bad in [0.0, -2.0, f64::NAN, f64::INFINITY] {
        assert!(matches!(
            g.lambda_max(Normalization::Sym, &LambdaMax::Fixed(bad)),
            Err(Error::InvalidConfig(_))
        ));
    }
    assert_eq!(LambdaMax::default(), LambdaMax::Fixed(2.0));
    assert_eq!(
        g.lambda_max(Normalization::Sym, &LambdaMax::default())
            .unwrap(),
        2.0
    );
    for (tol, max_iter) in [(0.0, 10), (-1.0, 10), (f64::NAN, 10), (1e-6, 0)] {
        let m = LambdaMax::Estimate {
            tol,
            max_iter,
            seed: 0,
        };
        assert!(matches!(
            g.lambda_max(Normalization::Sym, &m),
            Err(Error::InvalidConfig(_))
        ));
    }
    let neg = Graph::from_weighted_edges(2, &[(0, 1, -1.0), (1, 0, -1.0)]).unwrap();
    let m = LambdaMax::Estimate {
        tol: 1e-6,
        max_iter: 10,
        seed: 0,
    };
    assert!(matches!(
        neg.lambda_max(Normalization::Sym, &m),
        Err(Error::NegativeWeight { .. })
    ));
    #[cfg(not(feature = "lapack"))]
    match g.lambda_max(Normalization::Sym, &LambdaMax::Exact) {
        Err(Error::InvalidConfig(msg)) => assert!(msg.contains("lapack"), "{msg}"),
        other => panic!("expected InvalidConfig, got {other:?}"),
    }
}
