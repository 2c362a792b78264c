//! Property tests: permutation equivariance of GcnConv, ChebConv and
//! HdChebConv (both transitions), softmax normalisation, and batches
//! through ChebConv and HdChebConv.

use hdgcn::attention::{MvcAttnConfig, Routing};
use hdgcn::autograd::{Segments, Tape};
use hdgcn::backend::{Axis, Cpu};
use hdgcn::conv::{ChebConv, ChebConvConfig, DeviceGraph, GcnConv, GraphConv, HdChebConfig};
use hdgcn::graph::{Batch, Graph, LambdaMax, Normalization};
use ndarray::Array2;
use proptest::prelude::*;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng, rngs::StdRng};

mod common;
use common::{max_abs_diff, rand_mat};

type C = Cpu<f64>;

/// Random weighted graph (symmetric or directed), self-loops allowed.
fn random_edges(rng: &mut StdRng, n: usize, p: f64, symmetric: bool) -> Vec<(usize, usize, f64)> {
    let mut edges = Vec::new();
    for i in 0..n {
        for j in 0..n {
            if (symmetric && j < i) || !rng.random_bool(p) {
                continue;
            }
            let w = rng.random_range(0.25..2.0);
            edges.push((i, j, w));
            if symmetric && i != j {
                edges.push((j, i, w));
            }
        }
    }
    edges
}

/// A graph, the same graph with nodes renamed by `perm` (node `i` becomes
/// `perm[i]`), features and permuted features.
struct Permuted {
    g: Graph,
    pg: Graph,
    perm: Vec<usize>,
    x: Array2<f64>,
    px: Array2<f64>,
}

fn permuted_case(seed: u64, n: usize, p: f64, symmetric: bool, d: usize) -> Permuted {
    let mut rng = StdRng::seed_from_u64(seed);
    let edges = random_edges(&mut rng, n, p, symmetric);
    let mut perm: Vec<usize> = (0..n).collect();
    perm.shuffle(&mut rng);
    let pedges: Vec<_> = edges
        .iter()
        .map(|&(s, t, w)| (perm[s], perm[t], w))
        .collect();
    let x = rand_mat(&mut rng, n, d);
    let mut px = Array2::zeros((n, d));
    for (i, &pi) in perm.iter().enumerate() {
        px.row_mut(pi).assign(&x.row(i));
    }
    Permuted {
        g: Graph::from_weighted_edges(n, &edges).unwrap(),
        pg: Graph::from_weighted_edges(n, &pedges).unwrap(),
        perm,
        x,
        px,
    }
}

/// `max_{i,j} |y[i][j] - py[perm[i]][j]|`.
fn equivariance_error(case: &Permuted, y: &Array2<f64>, py: &Array2<f64>) -> f64 {
    assert_eq!(y.dim(), py.dim());
    ndarray::indices(y.dim())
        .into_iter()
        .map(|(i, j)| (y[[i, j]] - py[[case.perm[i], j]]).abs())
        .fold(0.0, f64::max)
}

fn run<M: GraphConv<C> + ?Sized>(conv: &M, cpu: &C, g: &Graph, x: &Array2<f64>) -> Array2<f64> {
    let dg = DeviceGraph::new(cpu, g.clone());
    let tape = Tape::inference(cpu);
    conv.forward(&tape, &dg, &tape.constant_array(x).into())
        .unwrap()
        .to_array()
}

/// An HD-ChebConv (4 -> 5, K = `k`, no dropout): the dynamic variant
/// with the given routing and score normalisation, or the static one;
/// biases and LayerNorm affine parameters set to random values so that
/// every parameter takes part.
fn hd_conv(
    seed: u64,
    k: usize,
    dynamic: bool,
    votes: bool,
    score_norm: bool,
) -> Box<dyn GraphConv<C>> {
    let cpu = C::new();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut cfg = HdChebConfig::new(4, 5, k);
    cfg.dropout = 0.0;
    cfg.input_dropout = 0.0;
    let conv: Box<dyn GraphConv<C>> = if dynamic {
        let mut attn = MvcAttnConfig::new(5);
        attn.supernodes = 3;
        attn.routing = if votes {
            Routing::Votes
        } else {
            Routing::Attention
        };
        attn.score_norm = score_norm;
        Box::new(cfg.build_dynamic(&cpu, &mut rng, &attn).unwrap())
    } else {
        Box::new(cfg.build_static(&cpu, &mut rng).unwrap())
    };
    for p in conv.params() {
        let (r, c) = p.shape();
        if r == 1 {
            p.set(rand_mat(&mut rng, r, c)).unwrap();
        }
    }
    conv
}

fn norm_of(i: usize) -> Normalization {
    [Normalization::Sym, Normalization::Rw, Normalization::None][i]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn gcn_conv_is_permutation_equivariant(
        seed in any::<u64>(), n in 1usize..14, p in 0.0f64..0.6, symmetric in any::<bool>(),
    ) {
        let cpu = C::new();
        let case = permuted_case(seed, n, p, symmetric, 4);
        let conv = GcnConv::new(&cpu, 4, 3, &mut StdRng::seed_from_u64(seed ^ 1)).unwrap();
        conv.bias.as_ref().unwrap().set(Array2::from_shape_fn((1, 3), |(_, j)| j as f64 - 0.5)).unwrap();
        let y = run(&conv, &cpu, &case.g, &case.x);
        let py = run(&conv, &cpu, &case.pg, &case.px);
        let err = equivariance_error(&case, &y, &py);
        prop_assert!(err <= 1e-10, "error {:e}", err);
    }

    #[test]
    fn cheb_conv_is_permutation_equivariant(
        seed in any::<u64>(), n in 1usize..14, p in 0.0f64..0.6, symmetric in any::<bool>(),
        k in 1usize..7, norm in 0usize..3,
    ) {
        let cpu = C::new();
        let case = permuted_case(seed, n, p, symmetric, 4);
        let norm = norm_of(norm);
        let mut cfg = ChebConvConfig::new(4, 3, k);
        cfg.normalization = norm;
        // A permutation-invariant λ_max: 2 for sym/rw, the Gershgorin bound
        // 2 max(out-degree) (at least 1) for D - A.
        let lambda = match norm {
            Normalization::None => {
                let a = case.g.adjacency();
                let max_out = (0..n)
                    .map(|i| a.outer_view(i).map_or(0.0, |r| r.iter().filter(|&(j, _)| j != i).map(|(_, w)| *w).sum()))
                    .fold(0.0f64, f64::max);
                (2.0 * max_out).max(1.0)
            }
            _ => 2.0,
        };
        cfg.lambda_max = LambdaMax::Fixed(lambda);
        let conv: ChebConv<C> = cfg.build(&cpu, &mut StdRng::seed_from_u64(seed ^ 2)).unwrap();
        conv.bias.as_ref().unwrap().set(Array2::from_shape_fn((1, 3), |(_, j)| 0.3 * j as f64)).unwrap();
        let y = run(&conv, &cpu, &case.g, &case.x);
        let py = run(&conv, &cpu, &case.pg, &case.px);
        let err = equivariance_error(&case, &y, &py);
        prop_assert!(err <= 1e-10, "error {:e}", err);
    }

    #[test]
    fn softmax_rows_sum_to_one(
        seed in any::<u64>(), r in 1usize..8, c in 1usize..8, scale in 0.1f64..60.0,
    ) {
        let cpu = C::new();
        let mut rng = StdRng::seed_from_u64(seed);
        let x = rand_mat(&mut rng, r, c) * scale;
        let tape = Tape::inference(&cpu);
        let y = tape.constant_array(&x).softmax(Axis::Cols).to_array();
        for row in y.rows() {
            prop_assert!(row.iter().all(|&v| (0.0..=1.0).contains(&v)));
            prop_assert!((row.sum() - 1.0).abs() <= 1e-12, "row sums to {}", row.sum());
        }
        let y = tape.constant_array(&x).softmax(Axis::Rows).to_array();
        for col in y.columns() {
            prop_assert!((col.sum() - 1.0).abs() <= 1e-12, "column sums to {}", col.sum());
        }
    }

    #[test]
    fn segment_softmax_columns_sum_to_one_per_segment(
        seed in any::<u64>(), sizes in prop::collection::vec(0usize..5, 1..6), c in 1usize..4,
        scale in 0.1f64..60.0,
    ) {
        let rows: usize = sizes.iter().sum();
        prop_assume!(rows > 0);
        let cpu = C::new();
        let mut rng = StdRng::seed_from_u64(seed);
        let mut ptr = vec![0];
        for s in &sizes {
            ptr.push(ptr.last().unwrap() + s);
        }
        let seg = Segments::new(&cpu, &ptr).unwrap();
        let x = rand_mat(&mut rng, rows, c) * scale;
        let tape = Tape::inference(&cpu);
        let y = tape.constant_array(&x).segment_softmax(&seg).unwrap().to_array();
        prop_assert_eq!(y.dim(), (rows, c));
        for w in ptr.windows(2) {
            if w[0] == w[1] {
                continue;
            }
            for j in 0..c {
                let s: f64 = (w[0]..w[1]).map(|i| y[[i, j]]).sum();
                prop_assert!((s - 1.0).abs() <= 1e-12, "segment {:?} column {} sums to {}", w, j, s);
            }
        }
    }

    #[test]
    fn cheb_conv_batch_equals_graphs_alone(
        seed in any::<u64>(), sizes in prop::collection::vec(0usize..9, 1..5),
        k in 1usize..6, norm in 0usize..3, symmetric in any::<bool>(),
    ) {
        prop_assume!(sizes.iter().sum::<usize>() > 0);
        let cpu = C::new();
        let mut rng = StdRng::seed_from_u64(seed);
        let norm = norm_of(norm);
        let graphs: Vec<Graph> = sizes
            .iter()
            .map(|&n| {
                if n == 0 {
                    Graph::empty()
                } else {
                    Graph::from_weighted_edges(n, &random_edges(&mut rng, n, 0.4, symmetric)).unwrap()
                }
            })
            .collect();
        let xs: Vec<Array2<f64>> = sizes.iter().map(|&n| rand_mat(&mut rng, n, 3)).collect();
        let lambdas: Vec<f64> = sizes.iter().map(|_| rng.random_range(1.0..4.0)).collect();
        let batch = Batch::new(&graphs).unwrap();
        let dg = DeviceGraph::from_batch(&cpu, &batch).unwrap();
        let views: Vec<_> = xs.iter().map(|x| x.view()).collect();
        let x_all = ndarray::concatenate(ndarray::Axis(0), &views).unwrap();

        let mut cfg = ChebConvConfig::new(3, 2, k);
        cfg.normalization = norm;
        cfg.lambda_max = LambdaMax::Estimate { tol: 1e-8, max_iter: 50, seed: 3 };
        let conv: ChebConv<C> = cfg.build(&cpu, &mut StdRng::seed_from_u64(seed ^ 5)).unwrap();
        conv.bias.as_ref().unwrap().set(Array2::from_shape_fn((1, 2), |(_, j)| j as f64 - 0.2)).unwrap();

        let tape = Tape::inference(&cpu);
        let xv = tape.constant_array(&x_all).into();
        // Explicit per-graph λ, and the configured rule evaluated per graph.
        let y_explicit = conv.forward_with_lambda(&tape, &dg, &xv, &lambdas).unwrap().to_array();
        // `D - A` of a graph without (non-loop) edges is 0, so its λ_max is 0
        // and the rule cannot scale it: that is an error, never a panic.
        let rule_lambdas = dg.lambda_max(norm, &conv.config().lambda_max).unwrap();
        let degenerate = graphs
            .iter()
            .zip(&rule_lambdas)
            .any(|(g, &l)| g.num_nodes() > 0 && l <= 0.0);
        let y_rule = match conv.forward(&tape, &dg, &xv) {
            Ok(y) => {
                prop_assert!(!degenerate || k == 1);
                Some(y.to_array())
            }
            Err(e) => {
                prop_assert!(degenerate && norm == Normalization::None, "{}", e);
                prop_assert!(matches!(e, hdgcn::Error::InvalidConfig(_)));
                None
            }
        };
        let ptr = batch.ptr();
        for (gi, g) in graphs.iter().enumerate() {
            if g.num_nodes() == 0 {
                continue;
            }
            let rows = |y: &Array2<f64>| y.slice(ndarray::s![ptr[gi]..ptr[gi + 1], ..]).to_owned();
            let alone = DeviceGraph::new(&cpu, g.clone());
            let xg = tape.constant_array(&xs[gi]).into();
            let want = conv.forward_with_lambda(&tape, &alone, &xg, &[lambdas[gi]]).unwrap().to_array();
            let err = max_abs_diff(&rows(&y_explicit), &want);
            prop_assert!(err <= 1e-10, "graph {} (explicit λ): {:e}", gi, err);
            if let Some(y_rule) = &y_rule {
                let want = conv.forward(&tape, &alone, &xg).unwrap().to_array();
                let err = max_abs_diff(&rows(y_rule), &want);
                prop_assert!(err <= 1e-10, "graph {} (estimated λ): {:e}", gi, err);
            }
        }
    }

    #[test]
    fn hd_cheb_conv_is_permutation_equivariant(
        seed in any::<u64>(), n in 1usize..12, p in 0.0f64..0.6, k in 1usize..4,
        dynamic in any::<bool>(), votes in any::<bool>(), score_norm in any::<bool>(),
    ) {
        let cpu = C::new();
        let case = permuted_case(seed, n, p, true, 4);
        let conv = hd_conv(seed ^ 3, 2 * k, dynamic, votes, score_norm);
        let y = run(conv.as_ref(), &cpu, &case.g, &case.x);
        let py = run(conv.as_ref(), &cpu, &case.pg, &case.px);
        prop_assert!(y.iter().all(|v| v.is_finite()));
        let err = equivariance_error(&case, &y, &py);
        prop_assert!(err <= 1e-10, "error {:e}", err);
    }

    #[test]
    fn hd_cheb_conv_batch_equals_graphs_alone(
        seed in any::<u64>(), sizes in prop::collection::vec(1usize..9, 1..5), k in 1usize..4,
        dynamic in any::<bool>(), votes in any::<bool>(), score_norm in any::<bool>(),
    ) {
        let cpu = C::new();
        let mut rng = StdRng::seed_from_u64(seed);
        let graphs: Vec<Graph> = sizes
            .iter()
            .map(|&n| Graph::from_weighted_edges(n, &random_edges(&mut rng, n, 0.4, true)).unwrap())
            .collect();
        let xs: Vec<Array2<f64>> = sizes.iter().map(|&n| rand_mat(&mut rng, n, 4)).collect();
        let batch = Batch::new(&graphs).unwrap();
        let views: Vec<_> = xs.iter().map(|x| x.view()).collect();
        let x_all = ndarray::concatenate(ndarray::Axis(0), &views).unwrap();
        let conv = hd_conv(seed ^ 4, 2 * k, dynamic, votes, score_norm);
        let dg = DeviceGraph::from_batch(&cpu, &batch).unwrap();
        let tape = Tape::inference(&cpu);
        let y = conv.forward(&tape, &dg, &tape.constant_array(&x_all).into()).unwrap().to_array();
        let ptr = batch.ptr();
        for (gi, g) in graphs.iter().enumerate() {
            let want = run(conv.as_ref(), &cpu, g, &xs[gi]);
            let got = y.slice(ndarray::s![ptr[gi]..ptr[gi + 1], ..]).to_owned();
            let err = max_abs_diff(&got, &want);
            prop_assert!(err <= 1e-10, "graph {}: {:e}", gi, err);
        }
    }
}
