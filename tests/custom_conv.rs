//! A graph convolution defined outside the crate, through the public API
//! only: a mean-aggregation layer (GraphSAGE-style, `out = X W_self +
//! mean_{j → i} x_j W_neigh + b`) that caches its own operator with
//! `DeviceGraph::operator`, trained inside a `NodeClassifier` and
//! gradient-checked like the built-in layers.

use hdgcn::autograd::gradcheck::check_params;
use hdgcn::autograd::{SparseMatrix, Tape, Var};
use hdgcn::backend::{Backend, Cpu};
use hdgcn::conv::{DeviceGraph, GraphConv};
use hdgcn::data::Split;
use hdgcn::graph::Graph;
use hdgcn::models::NodeClassifier;
use hdgcn::nn::{Activation, Features, Linear, Module, ParamVisitor};
use hdgcn::train::{NodeTask, NodeTrainConfig, train_node_classifier};
use hdgcn::{Error, Result};
use ndarray::Array2;
use rand::{Rng, SeedableRng, rngs::StdRng};
use rand_distr::{Distribution, Normal};
use sprs::CsMat;

/// Cache key of the mean operator (namespaced so it cannot collide with the
/// crate's own keys).
const MEAN_KEY: &str = "custom_conv::mean";

/// Mean over in-neighbours in propagation form: row `i` holds
/// `w_ji / Σ_j w_ji` for every edge `j → i` (an isolated node gets a zero row).
fn mean_operator(g: &Graph) -> Result<CsMat<f64>> {
    g.validate_non_negative("mean aggregation divides by the in-degree")?;
    let deg = g.degrees();
    let n = g.num_nodes();
    let mut tri = sprs::TriMat::new((n, n));
    for (&w, (s, d)) in g.adjacency().iter() {
        if deg[d] > 0.0 {
            tri.add_triplet(d, s, w / deg[d]);
        }
    }
    Ok(tri.to_csr())
}

/// `out = X W_self + P_mean X W_neigh + b`.
#[derive(Debug, Clone)]
struct MeanConv<B: Backend> {
    lin_self: Linear<B>,
    lin_neigh: Linear<B>,
}

impl<B: Backend> MeanConv<B> {
    fn new<R: Rng + ?Sized>(backend: &B, d_in: usize, d_out: usize, rng: &mut R) -> Result<Self> {
        Ok(MeanConv {
            lin_self: Linear::glorot(backend, d_in, d_out, true, rng)?,
            lin_neigh: Linear::glorot(backend, d_in, d_out, false, rng)?,
        })
    }
}

impl<B: Backend> Module<B> for MeanConv<B> {
    fn visit_params(&self, v: &mut ParamVisitor<'_, B>) {
        v.child("lin_self", &self.lin_self);
        v.child("lin_neigh", &self.lin_neigh);
    }
}

impl<B: Backend> GraphConv<B> for MeanConv<B> {
    fn in_channels(&self) -> usize {
        self.lin_self.in_features()
    }

    fn out_channels(&self) -> usize {
        self.lin_self.out_features()
    }

    fn forward(&self, tape: &Tape<B>, graph: &DeviceGraph<B>, x: &Features<B>) -> Result<Var<B>> {
        let (r, c) = x.shape();
        if r != graph.num_nodes() || c != self.in_channels() {
            return Err(Error::shape(
                "MeanConv",
                format!("({}, {})", graph.num_nodes(), self.in_channels()),
                format!("({r}, {c})"),
            ));
        }
        let mean: SparseMatrix<B> = graph.operator(MEAN_KEY, mean_operator)?;
        let neigh = mean.matmul(&self.lin_neigh.forward_on(tape, x)?)?;
        self.lin_self.forward_on(tape, x)?.add(&neigh)
    }
}

/// Two communities of `per` nodes (dense inside, sparse across) with
/// features whose first two coordinates are shifted by the label.
fn two_communities(rng: &mut StdRng, per: usize, d: usize) -> (Graph, Array2<f64>, Vec<usize>) {
    let n = 2 * per;
    let label = |i: usize| i / per;
    let mut edges = Vec::new();
    for i in 0..n {
        for j in i + 1..n {
            let p = if label(i) == label(j) { 0.15 } else { 0.01 };
            if rng.random_bool(p) {
                edges.push((i, j));
                edges.push((j, i));
            }
        }
    }
    let noise = Normal::new(0.0, 1.0).unwrap();
    let x = Array2::from_shape_fn((n, d), |(i, j)| {
        let shift = if j < 2 {
            if label(i) == 0 { 0.6 } else { -0.6 }
        } else {
            0.0
        };
        shift + noise.sample(rng)
    });
    let labels = (0..n).map(label).collect();
    (Graph::from_edges(n, &edges).unwrap(), x, labels)
}

#[test]
fn custom_conv_trains_in_node_classifier() {
    let mut rng = StdRng::seed_from_u64(42);
    let per = 40;
    let (graph, x, labels) = two_communities(&mut rng, per, 8);
    let cpu = Cpu::<f32>::new();
    let features = SparseMatrix::from_csmat(&cpu, &CsMat::csr_from_dense(x.view(), -1.0)).unwrap();
    // 8 training and 8 validation nodes per class; the rest is test.
    let (mut train, mut val, mut test) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..2 * per {
        match i % per {
            0..8 => train.push(i),
            8..16 => val.push(i),
            _ => test.push(i),
        }
    }
    let task = NodeTask {
        graph: DeviceGraph::new(&cpu, graph),
        features: Features::Sparse(features),
        labels: labels.iter().map(|&l| Some(l)).collect(),
        num_classes: 2,
        split: Split { train, val, test },
    };
    let c1 = MeanConv::new(&cpu, 8, 16, &mut rng).unwrap();
    let c2 = MeanConv::new(&cpu, 16, 2, &mut rng).unwrap();
    let mut model =
        NodeClassifier::new(vec![Box::new(c1), Box::new(c2)], 0.2, Activation::Relu).unwrap();
    let names: Vec<String> = model.named_params().into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        names,
        [
            "conv1.lin_self.weight",
            "conv1.lin_self.bias",
            "conv1.lin_neigh.weight",
            "conv2.lin_self.weight",
            "conv2.lin_self.bias",
            "conv2.lin_neigh.weight",
        ]
    );
    let cfg = NodeTrainConfig {
        epochs: 40,
        lr: 0.02,
        ..NodeTrainConfig::default()
    };
    let report = train_node_classifier(&mut model, &task, &cfg).unwrap();
    eprintln!("{report:?}");
    assert_eq!(report.epochs_run, 40);
    // Chance is 0.5; features alone give about 0.7, the graph pushes it up.
    assert!(report.test_acc >= 0.85, "test accuracy {}", report.test_acc);
    assert!(
        report.train_acc >= 0.85,
        "train accuracy {}",
        report.train_acc
    );
}

#[test]
fn custom_conv_operator_is_cached_and_correct() {
    let cpu = Cpu::<f64>::new();
    let g = Graph::from_weighted_edges(4, &[(0, 1, 1.0), (2, 1, 3.0), (1, 0, 2.0), (3, 3, 1.0)])
        .unwrap();
    let dg = DeviceGraph::new(&cpu, g);
    let mut rng = StdRng::seed_from_u64(1);
    let conv = MeanConv::new(&cpu, 2, 2, &mut rng).unwrap();
    let x = Array2::from_shape_fn((4, 2), |(i, j)| (i * 2 + j) as f64);
    let tape = Tape::inference(&cpu);
    let y = conv
        .forward(&tape, &dg, &tape.constant_array(&x).into())
        .unwrap()
        .to_array();
    // Node 1 averages nodes 0 (w 1) and 2 (w 3); node 0 hears node 1 only;
    // node 2 has no in-edges; node 3 hears itself.
    let mut agg = Array2::zeros((4, 2));
    for j in 0..2 {
        agg[[0, j]] = x[[1, j]];
        agg[[1, j]] = (x[[0, j]] + 3.0 * x[[2, j]]) / 4.0;
        agg[[3, j]] = x[[3, j]];
    }
    let want = x.dot(&conv.lin_self.weight.to_array())
        + conv.lin_self.bias.as_ref().unwrap().to_array()
        + agg.dot(&conv.lin_neigh.weight.to_array());
    let err = y
        .iter()
        .zip(want.iter())
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max);
    assert!(err < 1e-12, "{err:e}");
    // The second call finds the operator in the cache: a builder that would
    // fail is never run.
    let cached = dg
        .operator(MEAN_KEY, |_| Err(Error::InvalidConfig("rebuilt".into())))
        .unwrap();
    assert_eq!(cached.nnz(), 4);
    // Wrong input width is an error, not a panic.
    let bad = tape.constant_array(&Array2::zeros((4, 3)));
    assert!(matches!(
        conv.forward(&tape, &dg, &bad.into()),
        Err(Error::ShapeMismatch { .. })
    ));
}

#[test]
fn custom_conv_gradcheck() {
    let cpu = Cpu::<f64>::new();
    let mut rng = StdRng::seed_from_u64(3);
    let (graph, x, _) = two_communities(&mut rng, 5, 3);
    let dg = DeviceGraph::new(&cpu, graph);
    let conv = MeanConv::new(&cpu, 3, 2, &mut rng).unwrap();
    let r = Array2::from_shape_fn((10, 2), |_| rng.random_range(-1.0..1.0));
    let report = check_params(
        &conv.named_params(),
        |tape| {
            let y = conv.forward(tape, &dg, &tape.constant_array(&x).into())?;
            Ok(y.tanh().mul(&tape.constant_array(&r))?.sum_all())
        },
        1e-6,
    )
    .unwrap();
    assert!(report.max_error < 1e-7, "{report:?}");
    assert_eq!(report.checked, 3 * 2 + 2 + 3 * 2);
}
