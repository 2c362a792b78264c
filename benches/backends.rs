//! The same inputs on every backend: single ops (dense and sparse products,
//! softmax, layer norm, segment softmax, an Adam update) and one GCN training
//! step on Cora. `backends/cpu/...` always; `backends/wgpu/...` with
//! `--features wgpu` and an adapter. Every wgpu iteration waits for the
//! device, so the times are end to end.
//!
//! On a machine without a GPU, wgpu runs on Mesa's lavapipe (the CPU): its
//! numbers are regression guards only. See docs/performance.md.

use std::hint::black_box;
use std::path::Path;

use criterion::{Criterion, criterion_group, criterion_main};
use hdgcn::autograd::{Index, SparseMatrix, Tape};
use hdgcn::backend::{Axis, Backend, Cpu, UpdateRule};
use hdgcn::conv::DeviceGraph;
use hdgcn::data::Planetoid;
use hdgcn::graph::Graph;
use hdgcn::models::NodeClassifier;
use hdgcn::nn::{Features, Module};
use hdgcn::optim::{AdamConfig, Optimizer};
use ndarray::Array2;
use rand::SeedableRng;

fn cora() -> Planetoid {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("data/planetoid");
    Planetoid::load(&dir, "cora").expect("vendored Cora")
}

fn filled(rows: usize, cols: usize) -> Array2<f32> {
    Array2::from_shape_fn((rows, cols), |(i, j)| {
        ((i * 7 + j * 3) % 17) as f32 / 17.0 - 0.5
    })
}

fn bench_backend<B: Backend<Elem = f32>>(c: &mut Criterion, name: &str, b: &B) {
    let sync = || b.synchronize();
    let data = cora();
    let n = data.num_nodes();
    let graph = Graph::from_edges(n, &data.edges).unwrap();
    let op = SparseMatrix::from_csmat(b, &graph.gcn_operator().unwrap()).unwrap();
    let x64 = b.upload(filled(n, 64).view());
    let w = b.upload(filled(64, 64).view());
    let seg: Vec<u32> = (0..=n as u32).step_by(27).chain([n as u32]).collect();
    let ptr = b.index_from_slice(&seg);
    let mut g = c.benchmark_group(format!("backends/{name}"));
    g.bench_function("matmul_2708x64x64", |it| {
        it.iter(|| {
            black_box(b.matmul(&x64, &w, false, false));
            sync()
        })
    });
    g.bench_function("spmm_cora_h64", |it| {
        it.iter(|| {
            black_box(b.spmm(op.raw(), &x64, false));
            sync()
        })
    });
    g.bench_function("spmm_t_cora_h64", |it| {
        it.iter(|| {
            black_box(b.spmm(op.raw(), &x64, true));
            sync()
        })
    });
    g.bench_function("softmax_rows_2708x64", |it| {
        it.iter(|| {
            black_box(b.softmax(&x64, Axis::Cols, true));
            sync()
        })
    });
    g.bench_function("layer_norm_2708x64", |it| {
        it.iter(|| {
            black_box(b.layer_norm(&x64, 1e-5));
            sync()
        })
    });
    g.bench_function("segment_softmax_2708x64", |it| {
        it.iter(|| {
            black_box(b.segment_softmax(&x64, &ptr));
            sync()
        })
    });
    let rule = UpdateRule::Adam {
        lr: 1e-3,
        beta1: 0.9,
        beta2: 0.999,
        eps: 1e-8,
        weight_decay: 0.0,
        decoupled: false,
    };
    let mut p = b.upload(filled(1433, 64).view());
    let grad = b.upload(filled(1433, 64).view());
    let mut slots = vec![b.full(1433, 64, 0.0), b.full(1433, 64, 0.0)];
    let mut step = 0;
    g.bench_function("adam_update_1433x64", |it| {
        it.iter(|| {
            step += 1;
            b.optim_update(&rule, step, &mut p, &grad, &mut slots);
            sync()
        })
    });

    // One training step of the 2-layer GCN (hidden 16) on Cora.
    let dg = DeviceGraph::new(b, graph);
    let feats = Features::Sparse(SparseMatrix::from_csmat(b, &data.features).unwrap());
    let mut rng = rand::rngs::StdRng::seed_from_u64(0);
    let model =
        NodeClassifier::gcn(b, data.num_features(), 16, data.num_classes, 0.5, &mut rng).unwrap();
    let train = &data.public_split.train;
    let idx = Index::new(b, train).unwrap();
    let y: Vec<usize> = train.iter().map(|&i| data.labels[i].unwrap()).collect();
    let y = Index::new(b, &y).unwrap();
    let params = model.params();
    let mut opt = AdamConfig::default()
        .lr(0.01)
        .weight_decay(5e-4)
        .build::<B>()
        .unwrap();
    let _ = model.forward(&Tape::inference(b), &dg, &feats).unwrap();
    let mut seed = 0u64;
    g.bench_function("train_step_cora_gcn", |it| {
        it.iter(|| {
            seed += 1;
            let tape = Tape::with_seed(b, seed);
            let logits = model.forward(&tape, &dg, &feats).unwrap();
            let loss = logits.cross_entropy_masked(&idx, &y).unwrap();
            let grads = loss.backward().unwrap();
            opt.step(&params, &grads).unwrap();
            sync()
        })
    });
    g.finish();
}

fn benches(c: &mut Criterion) {
    bench_backend(c, "cpu", &Cpu::<f32>::new());
    #[cfg(feature = "wgpu")]
    match hdgcn::backend::Wgpu::new() {
        Ok(gpu) => bench_backend(c, "wgpu", &gpu),
        Err(e) => eprintln!("skipping wgpu benchmarks: {e}"),
    }
}

// Plots are off: the examples enable plotters' `ab_glyph` text backend,
// which needs a registered font, so criterion's PDF plots would fail.
criterion_group! {
    name = group;
    config = Criterion::default().without_plots();
    targets = benches
}
criterion_main!(group);
