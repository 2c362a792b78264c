//! One training step (forward, backward, Adam) of 2-layer GCN and ChebConv
//! (K = 3), hidden 16, on Cora (vendored) and PubMed (from `HDGCN_DATA`),
//! and SpMM alone on Cora's GCN operator at h = 16 and 64.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use hdgcn::autograd::{Index, SparseMatrix, Tape};
use hdgcn::backend::{Backend, Cpu};
use hdgcn::conv::DeviceGraph;
use hdgcn::data::{Planetoid, data_root, planetoid_dir};
use hdgcn::graph::Graph;
use hdgcn::models::NodeClassifier;
use hdgcn::nn::{Features, Module};
use hdgcn::optim::{Adam, AdamConfig, Optimizer};
use ndarray::Array2;
use rand::SeedableRng;

fn load(name: &str) -> Option<Planetoid> {
    let roots = [data_root(None), "data".into(), "../shared/data".into()];
    for r in roots {
        if let Ok(p) = Planetoid::load(&planetoid_dir(&r), name) {
            return Some(p);
        }
    }
    eprintln!(
        "skipping {name}: ind.{name}.* not found under $HDGCN_DATA, ./data or ../shared/data"
    );
    None
}

fn step_bench(c: &mut Criterion, data: &Planetoid, model_name: &str) {
    let cpu = Cpu::<f32>::new();
    let graph = Graph::from_edges(data.num_nodes(), &data.edges).unwrap();
    let dg = DeviceGraph::new(&cpu, graph);
    let x = Features::Sparse(SparseMatrix::from_csmat(&cpu, &data.features).unwrap());
    let mut rng = rand::rngs::StdRng::seed_from_u64(0);
    let (d, k) = (data.num_features(), data.num_classes);
    let model = match model_name {
        "gcn" => NodeClassifier::gcn(&cpu, d, 16, k, 0.5, &mut rng).unwrap(),
        _ => NodeClassifier::cheb(&cpu, d, 16, k, 3, 0.5, &mut rng).unwrap(),
    };
    let train = &data.public_split.train;
    let idx = Index::new(&cpu, train).unwrap();
    let y: Vec<usize> = train.iter().map(|&i| data.labels[i].unwrap()).collect();
    let y = Index::new(&cpu, &y).unwrap();
    let params = model.params();
    let mut opt: Adam<Cpu<f32>> = AdamConfig::default()
        .lr(0.01)
        .weight_decay(5e-4)
        .build()
        .unwrap();
    // Warm the operator caches (built once per graph, as PyG's cached=True).
    let _ = model.forward(&Tape::inference(&cpu), &dg, &x).unwrap();
    let mut seed = 0u64;
    c.bench_function(&format!("train_step/{}/{model_name}", data.name), |b| {
        b.iter(|| {
            seed += 1;
            let tape = Tape::with_seed(&cpu, seed);
            let logits = model.forward(&tape, &dg, &x).unwrap();
            let loss = logits.cross_entropy_masked(&idx, &y).unwrap();
            let grads = loss.backward().unwrap();
            opt.step(&params, &grads).unwrap();
            black_box(&grads);
        })
    });
}

fn bench_steps(c: &mut Criterion) {
    for name in ["cora", "pubmed"] {
        if let Some(data) = load(name) {
            step_bench(c, &data, "gcn");
            step_bench(c, &data, "cheb");
        }
    }
}

fn bench_spmm(c: &mut Criterion) {
    let Some(data) = load("cora") else { return };
    let cpu = Cpu::<f32>::new();
    let graph = Graph::from_edges(data.num_nodes(), &data.edges).unwrap();
    let op = graph.gcn_operator().unwrap();
    let s = SparseMatrix::from_csmat(&cpu, &op).unwrap();
    for h in [16usize, 64] {
        let x = cpu.upload(
            Array2::from_shape_fn((data.num_nodes(), h), |(i, j)| ((i * 7 + j) % 13) as f32).view(),
        );
        c.bench_function(&format!("spmm/cora_gcn_operator/h{h}"), |b| {
            b.iter(|| black_box(cpu.spmm(s.raw(), &x, false)))
        });
    }
}

// Plots are off: the examples enable plotters' `ab_glyph` text backend,
// which needs a registered font, so criterion's PDF plots would fail.
criterion_group! {
    name = benches;
    config = Criterion::default().without_plots();
    targets = bench_steps, bench_spmm
}
criterion_main!(benches);
