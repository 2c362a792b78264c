//! Training parity: GCN, ChebConv and HDGCN on the vendored Cora (public
//! split) reach the same test accuracy on the wgpu backend as on the CPU,
//! within 1 point, for the same seeds. The tests are ignored unless
//! `HDGCN_WGPU` or `CI` is set, and then a missing adapter fails them (the
//! rule is at the top of `tests/common/mod.rs`).
#![cfg(feature = "wgpu")]

use std::path::Path;
use std::sync::OnceLock;

use hdgcn::autograd::SparseMatrix;
use hdgcn::backend::{Backend, Cpu};
use hdgcn::conv::DeviceGraph;
use hdgcn::data::Planetoid;
use hdgcn::graph::Graph;
use hdgcn::models::NodeClassifier;
use hdgcn::nn::Features;
use hdgcn::optim::OptimizerKind;
use hdgcn::train::{NodeTask, NodeTrainConfig, train_node_classifier};
use rand::SeedableRng;

mod common;

fn cora() -> &'static Planetoid {
    static CORA: OnceLock<Planetoid> = OnceLock::new();
    CORA.get_or_init(|| {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("data/planetoid");
        Planetoid::load(&dir, "cora").expect("vendored Cora")
    })
}

/// Test accuracy of `model` ("gcn", "cheb", "hdgcn") trained with `seed` on
/// `b`, with `optimizer`.
fn train<B: Backend<Elem = f32>>(
    b: &B,
    model: &str,
    seed: u64,
    epochs: usize,
    optimizer: OptimizerKind,
) -> f64 {
    let data = cora();
    let graph = Graph::from_edges(data.num_nodes(), &data.edges).unwrap();
    let x = data.row_normalized_features();
    let task = NodeTask {
        graph: DeviceGraph::new(b, graph),
        features: Features::Sparse(SparseMatrix::from_csmat(b, &x).unwrap()),
        labels: data.labels.clone(),
        num_classes: data.num_classes,
        split: data.public_split.clone(),
    };
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let (d, c) = (data.num_features(), data.num_classes);
    let mut m = match model {
        "gcn" => NodeClassifier::gcn(b, d, 16, c, 0.5, &mut rng),
        "cheb" => NodeClassifier::cheb(b, d, 16, c, 3, 0.5, &mut rng),
        _ => NodeClassifier::hdgcn(b, d, 32, c, 4, 10, 0.5, &mut rng),
    }
    .unwrap();
    let cfg = NodeTrainConfig {
        epochs,
        seed,
        optimizer,
        quiet: true,
        ..NodeTrainConfig::default()
    };
    let rep = train_node_classifier(&mut m, &task, &cfg).unwrap();
    100.0 * rep.test_acc
}

fn parity(model: &str, epochs: usize) {
    parity_with(model, epochs, OptimizerKind::Adam);
}

fn parity_with(model: &str, epochs: usize, optimizer: OptimizerKind) {
    let gpu = common::wgpu::shared_wgpu();
    let cpu = Cpu::<f32>::new();
    for seed in [0, 1] {
        let a = train(&cpu, model, seed, epochs, optimizer);
        let g = train(&gpu, model, seed, epochs, optimizer);
        eprintln!("{model} seed {seed}: cpu {a:.2} %, wgpu {g:.2} %");
        assert!(
            (a - g).abs() <= 1.0,
            "{model} seed {seed}: wgpu test accuracy {g:.2} % vs cpu {a:.2} %"
        );
        assert!(
            g > 70.0,
            "{model} seed {seed}: wgpu did not learn ({g:.2} %)"
        );
    }
}

#[test]
#[cfg_attr(
    not(hdgcn_wgpu_tests),
    ignore = "needs a wgpu adapter: set HDGCN_WGPU=1 (see tests/common/mod.rs)"
)]
fn gcn_trains_like_the_cpu() {
    parity("gcn", 200);
}

#[test]
#[cfg_attr(
    not(hdgcn_wgpu_tests),
    ignore = "needs a wgpu adapter: set HDGCN_WGPU=1 (see tests/common/mod.rs)"
)]
fn gcn_with_adabelief_trains_like_the_cpu() {
    // AdaBelief's update kernel (rectified, decoupled decay) on the device,
    // through the generic loop's two parameter groups.
    parity_with("gcn", 200, OptimizerKind::AdaBelief);
}

#[test]
#[cfg_attr(
    not(hdgcn_wgpu_tests),
    ignore = "needs a wgpu adapter: set HDGCN_WGPU=1 (see tests/common/mod.rs)"
)]
fn cheb_trains_like_the_cpu() {
    parity("cheb", 200);
}

#[test]
#[cfg_attr(
    not(hdgcn_wgpu_tests),
    ignore = "needs a wgpu adapter: set HDGCN_WGPU=1 (see tests/common/mod.rs)"
)]
fn hdgcn_trains_like_the_cpu() {
    // 50 epochs: the two backends round differently in f32, and over longer
    // runs those differences compound through the attention softmaxes and the
    // best-validation epoch selection into a different trajectory (at 100
    // epochs seed 1 gave 75.5 % on the CPU and 76.8 % on lavapipe; at 50
    // epochs 77.8 % and 78.1 %). The point is that the backends train the
    // same model the same way, not how far chaos takes them apart.
    parity("hdgcn", 50);
}
