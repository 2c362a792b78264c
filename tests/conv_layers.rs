//! GcnConv and ChebConv: gradient checks and dense reference computations.

mod common;

use common::{dense_gcn, rand_mat, random_weighted_graph};
use hdgcn::autograd::gradcheck::check_params;
use hdgcn::autograd::{SparseMatrix, Tape};
use hdgcn::backend::Cpu;
use hdgcn::conv::{ChebConv, ChebConvConfig, DeviceGraph, GcnConv, GraphConv};
use hdgcn::graph::{Graph, LambdaMax, Normalization};
use hdgcn::nn::{Features, Module};
use ndarray::Array2;
use rand::{Rng, SeedableRng, rngs::StdRng};

type C = Cpu<f64>;

fn dense(g: &Graph) -> Array2<f64> {
    g.adjacency().to_dense()
}

/// Scaled sym Laplacian 2L/λ - I written out densely.
fn dense_scaled_sym(a: &Array2<f64>, lambda: f64) -> Array2<f64> {
    let n = a.nrows();
    let d: Vec<f64> = (0..n).map(|i| a.row(i).sum()).collect();
    let l = Array2::from_shape_fn((n, n), |(i, j)| {
        let inv = |x: f64| if x > 0.0 { 1.0 / x.sqrt() } else { 0.0 };
        let off = a[[i, j]] * inv(d[i]) * inv(d[j]);
        if i == j { 1.0 - off } else { -off }
    });
    l * (2.0 / lambda) - Array2::<f64>::eye(n)
}

#[test]
fn gcn_conv_equals_dense_formula() {
    let mut rng = StdRng::seed_from_u64(11);
    let cpu = C::new();
    for n in [1, 5, 17] {
        let g = random_weighted_graph(&mut rng, n, 0.3, false);
        let a = dense(&g);
        let conv = GcnConv::new(&cpu, 4, 3, &mut rng).unwrap();
        conv.bias
            .as_ref()
            .unwrap()
            .set(rand_mat(&mut rng, 1, 3))
            .unwrap();
        let x = rand_mat(&mut rng, n, 4);
        let dg = DeviceGraph::new(&cpu, g);
        let tape = Tape::inference(&cpu);
        let y = conv
            .forward(&tape, &dg, &tape.constant(x.clone()).into())
            .unwrap()
            .to_array();
        let expect = dense_gcn(&a).dot(&x).dot(&conv.lin.weight.to_array())
            + &conv.bias.as_ref().unwrap().to_array();
        let err = (&y - &expect).mapv(f64::abs).fold(0.0f64, |m, &v| m.max(v));
        assert!(err < 1e-12, "n={n}: max error {err}");
    }
}

#[test]
fn cheb_conv_equals_dense_chebyshev_recurrence_for_k_1_to_10() {
    let mut rng = StdRng::seed_from_u64(12);
    let cpu = C::new();
    for k in 1..=10 {
        let n = 9;
        let g = random_weighted_graph(&mut rng, n, 0.35, false);
        let a = dense(&g);
        let lambda = rng.random_range(1.2..2.0);
        let mut cfg = ChebConvConfig::new(3, 2, k);
        cfg.lambda_max = LambdaMax::Fixed(lambda);
        let conv = cfg.build(&cpu, &mut rng).unwrap();
        conv.bias
            .as_ref()
            .unwrap()
            .set(rand_mat(&mut rng, 1, 2))
            .unwrap();
        let x = rand_mat(&mut rng, n, 3);
        let dg = DeviceGraph::new(&cpu, g);
        let tape = Tape::inference(&cpu);
        let y = conv
            .forward(&tape, &dg, &tape.constant(x.clone()).into())
            .unwrap()
            .to_array();
        // Dense forward recurrence on node signals.
        let lt = dense_scaled_sym(&a, lambda);
        let mut t_prev = x.clone();
        let mut t_cur = lt.dot(&x);
        let mut expect = t_prev.dot(&conv.lins[0].weight.to_array());
        for i in 1..k {
            if i > 1 {
                let next = lt.dot(&t_cur) * 2.0 - &t_prev;
                t_prev = t_cur;
                t_cur = next;
            }
            expect = expect + t_cur.dot(&conv.lins[i].weight.to_array());
        }
        expect += &conv.bias.as_ref().unwrap().to_array();
        let err = (&y - &expect).mapv(f64::abs).fold(0.0f64, |m, &v| m.max(v));
        assert!(err < 1e-10, "K={k}: max error {err}");
    }
}

#[test]
fn gradcheck_gcn_and_cheb_layers_dense_and_sparse_input() {
    let mut rng = StdRng::seed_from_u64(13);
    let cpu = C::new();
    let g = random_weighted_graph(&mut rng, 6, 0.5, false);
    let dg = DeviceGraph::new(&cpu, g);
    let x = rand_mat(&mut rng, 6, 4).mapv(|v| if v.abs() < 0.4 { 0.0 } else { v });
    let xs = SparseMatrix::from_csmat(&cpu, &sprs::CsMat::csr_from_dense(x.view(), 0.0)).unwrap();
    let target = rand_mat(&mut rng, 6, 3);
    let gcn = GcnConv::new(&cpu, 4, 3, &mut rng).unwrap();
    for k in [1, 2, 3, 5] {
        let cheb = ChebConv::new(&cpu, 4, 3, k, &mut rng).unwrap();
        for sparse in [false, true] {
            let feats = |t: &Tape<C>| -> Features<C> {
                if sparse {
                    Features::Sparse(xs.clone())
                } else {
                    Features::Dense(t.constant(x.clone()))
                }
            };
            let loss = |t: &Tape<C>, conv: &dyn GraphConv<C>| {
                let y = conv.forward(t, &dg, &feats(t))?.tanh();
                y.mul(&t.constant(target.clone()))?
                    .sum_all()
                    .add(&y.square().mean_all())
            };
            let r = check_params(&cheb.named_params(), |t| loss(t, &cheb), 1e-6).unwrap();
            assert!(r.max_error < 1e-7, "cheb K={k} sparse={sparse}: {r:?}");
            let r = check_params(&gcn.named_params(), |t| loss(t, &gcn), 1e-6).unwrap();
            assert!(r.max_error < 1e-7, "gcn sparse={sparse}: {r:?}");
        }
    }
}

#[test]
fn parameter_names_follow_pyg() {
    let cpu = C::new();
    let mut rng = StdRng::seed_from_u64(0);
    let gcn = GcnConv::new(&cpu, 4, 3, &mut rng).unwrap();
    let names: Vec<String> = gcn.named_params().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["lin.weight", "bias"]);
    let cheb = ChebConv::new(&cpu, 4, 3, 3, &mut rng).unwrap();
    let names: Vec<String> = cheb.named_params().into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        names,
        ["lins.0.weight", "lins.1.weight", "lins.2.weight", "bias"]
    );
}

#[test]
fn invalid_configurations_and_inputs_are_errors() {
    let cpu = C::new();
    let mut rng = StdRng::seed_from_u64(0);
    assert!(ChebConv::new(&cpu, 4, 3, 0, &mut rng).is_err());
    assert!(ChebConv::new(&cpu, 0, 3, 2, &mut rng).is_err());
    // A K whose weight list cannot be allocated: an error, not an abort.
    match ChebConv::new(&cpu, 4, 3, usize::MAX, &mut rng) {
        Err(hdgcn::Error::InvalidConfig(m)) => assert!(m.contains("too large"), "{m}"),
        other => panic!("expected InvalidConfig, got {other:?}"),
    }
    let mut cfg = ChebConvConfig::new(4, 3, 2);
    cfg.normalization = Normalization::None;
    assert!(
        cfg.build(&cpu, &mut rng).is_err(),
        "None normalisation without lambda_max"
    );
    let conv = GcnConv::new(&cpu, 4, 3, &mut rng).unwrap();
    let dg = DeviceGraph::new(&cpu, Graph::from_edges(3, &[(0, 1), (1, 0)]).unwrap());
    let tape = Tape::inference(&cpu);
    let bad = tape.constant(Array2::zeros((2, 4)));
    assert!(matches!(
        conv.forward(&tape, &dg, &bad.into()),
        Err(hdgcn::Error::ShapeMismatch { .. })
    ));
    let cheb = ChebConv::new(&cpu, 4, 3, 3, &mut rng).unwrap();
    let x = tape.constant(Array2::zeros((3, 4)));
    assert!(
        cheb.forward_with_lambda(&tape, &dg, &x.clone().into(), &[0.0])
            .is_err()
    );
    assert!(
        cheb.forward_with_lambda(&tape, &dg, &x.into(), &[1.0, 2.0])
            .is_err()
    );
}

#[test]
fn a_cheb_conv_with_missing_weights_is_an_error_not_a_panic() {
    let cpu = Cpu::<f64>::new();
    let mut rng = StdRng::seed_from_u64(8);
    let graph = DeviceGraph::new(&cpu, Graph::from_edges(2, &[(0, 1), (1, 0)]).unwrap());
    for k in [1, 3] {
        let mut cheb = ChebConv::new(&cpu, 2, 2, k, &mut rng).unwrap();
        cheb.lins.pop();
        let t = Tape::new(&cpu);
        let x = Features::Dense(t.constant(ndarray::Array2::zeros((2, 2))));
        let err = cheb.forward(&t, &graph, &x).unwrap_err();
        assert!(
            err.to_string().contains("weight matrices for K"),
            "K = {k}: {err}"
        );
    }
}
