//! One training step (forward, backward, Adam) of PyG's `examples/gat.py`
//! model on Cora (vendored), with GatConv and with GatV2Conv:
//! `GAT(1433 -> 8 x 8 heads, ELU, -> 7, 1 head)`, dropout 0.6 on the
//! inputs and the attention, cross-entropy on the 140 training nodes,
//! Adam (lr 0.005, weight decay 5e-4 on every parameter), f32.
//!
//! PyG's step for comparison: `benches/reference/pyg_gat_step.py DATA_ROOT
//! [--model gatv2]` (2 threads, dense features as PyG's loader gives them).
//!
//! glibc's malloc is set up as the runners set it by default (`--malloc
//! reuse`, docs/performance.md "The allocator"): a GAT step allocates and
//! frees `edges x 64` tensors (3.4 MB on Cora) over and over, which glibc's
//! defaults hand back to the kernel and fault in again every step.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use hdgcn::autograd::{Index, SparseMatrix, Tape};
use hdgcn::backend::Cpu;
use hdgcn::conv::DeviceGraph;
use hdgcn::data::{Planetoid, data_root, planetoid_dir};
use hdgcn::graph::Graph;
use hdgcn::models::NodeClassifier;
use hdgcn::nn::{Features, Module};
use hdgcn::optim::{Adam, AdamConfig, Optimizer};
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
        "gat" => NodeClassifier::gat(&cpu, d, 8, 8, k, 0.6, &mut rng).unwrap(),
        _ => NodeClassifier::gatv2(&cpu, d, 8, 8, k, 0.6, &mut rng).unwrap(),
    };
    let train = &data.public_split.train;
    let idx = Index::new(&cpu, train).unwrap();
    let y: Vec<usize> = train.iter().map(|&i| data.labels[i].unwrap()).collect();
    let y = Index::new(&cpu, &y).unwrap();
    let params = model.params();
    let mut opt: Adam<Cpu<f32>> = AdamConfig::default()
        .lr(0.005)
        .weight_decay(5e-4)
        .build()
        .unwrap();
    // Warm the edge cache (built once per graph).
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
    // As the runners' `--malloc reuse` (examples/common/mod.rs): 32 MiB is
    // the largest mmap threshold glibc accepts; never trim the heap.
    // SAFETY: mallopt only changes allocator parameters (under glibc's
    // own lock), before the steps run.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, i32::MAX);
    }
    if let Some(data) = load("cora") {
        step_bench(c, &data, "gat");
        step_bench(c, &data, "gatv2");
    }
}

// Plots are off: the examples enable plotters' `ab_glyph` text backend,
// which needs a registered font, so criterion's PDF plots would fail.
criterion_group! {
    name = benches;
    config = Criterion::default().without_plots();
    targets = bench_steps
}
criterion_main!(benches);
