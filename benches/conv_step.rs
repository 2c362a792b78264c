//! One training step (forward, cross-entropy on the public training nodes,
//! backward, Adam) on Cora of the planetoid example's SAGE, GIN, GCNII and
//! APPNP models, with the settings of `configs/planetoid/cora-*.toml`.
//! PyG's reference: `benches/reference/pyg_conv_step.py --layer NAME`.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use hdgcn::autograd::{Index, Param, SparseMatrix, Tape};
use hdgcn::backend::Cpu;
use hdgcn::conv::{DeviceGraph, GinConv, GraphConv, SageConv};
use hdgcn::data::{Planetoid, data_root, planetoid_dir};
use hdgcn::graph::Graph;
use hdgcn::models::{AppnpNet, Gcn2Net, NodeClassifier};
use hdgcn::nn::{Activation, Features, Mlp, Module};
use hdgcn::optim::{Adam, AdamConfig, Optimizer};
use rand::SeedableRng;

type C = Cpu<f32>;

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

fn adam(wd: f64) -> Adam<C> {
    AdamConfig::default()
        .lr(0.01)
        .weight_decay(wd)
        .build()
        .unwrap()
}

/// Parameter groups `(params, weight decay)`, as PyTorch's optimiser takes them.
type Groups = Vec<(Vec<Param<C>>, f64)>;

/// The model and its parameter groups.
fn model(cpu: &C, name: &str, d: usize, c: usize) -> (NodeClassifier<C>, Groups) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(0);
    let relu = Activation::Relu;
    let two = |a: Box<dyn GraphConv<C>>, b: Box<dyn GraphConv<C>>| {
        NodeClassifier::new(vec![a, b], 0.5, relu).unwrap()
    };
    let m = match name {
        "sage" => two(
            Box::new(SageConv::new(cpu, d, 16, &mut rng).unwrap()),
            Box::new(SageConv::new(cpu, 16, c, &mut rng).unwrap()),
        ),
        "gin" => {
            let m1 = Mlp::new(cpu, &[d, 64, 64], relu, 0.0, &mut rng).unwrap();
            let m2 = Mlp::new(cpu, &[64, 64, c], relu, 0.0, &mut rng).unwrap();
            two(
                Box::new(GinConv::new(cpu, m1, 0.0, false).unwrap()),
                Box::new(GinConv::new(cpu, m2, 0.0, false).unwrap()),
            )
        }
        "gcnii" => {
            let net = Gcn2Net::new(cpu, d, 64, c, 64, 0.1, 0.5, true, 0.6, &mut rng).unwrap();
            let groups = vec![(net.conv_params(), 0.01), (net.linear_params(), 5e-4)];
            return (
                NodeClassifier::new(vec![Box::new(net)], 0.0, relu).unwrap(),
                groups,
            );
        }
        _ => {
            let net = AppnpNet::new(cpu, d, 64, c, 10, 0.1, 0.5, &mut rng).unwrap();
            NodeClassifier::new(vec![Box::new(net)], 0.0, relu).unwrap()
        }
    };
    let params = m.params();
    (m, vec![(params, 5e-4)])
}

fn step_bench(c: &mut Criterion, data: &Planetoid, name: &str) {
    let cpu = C::new();
    let graph = Graph::from_edges(data.num_nodes(), &data.edges).unwrap();
    let dg = DeviceGraph::new(&cpu, graph);
    let xs = data.row_normalized_features();
    let x = Features::Sparse(SparseMatrix::from_csmat(&cpu, &xs).unwrap());
    let (m, groups) = model(&cpu, name, data.num_features(), data.num_classes);
    let mut opts: Vec<(Vec<Param<C>>, Adam<C>)> =
        groups.into_iter().map(|(p, wd)| (p, adam(wd))).collect();
    let train = &data.public_split.train;
    let idx = Index::new(&cpu, train).unwrap();
    let y: Vec<usize> = train.iter().map(|&i| data.labels[i].unwrap()).collect();
    let y = Index::new(&cpu, &y).unwrap();
    // Warm the operator caches (built once per graph, as PyG's cached=True).
    let _ = m
        .forward(
            &Tape::inference(&cpu),
            &dg,
            &x.on_tape(&Tape::inference(&cpu)),
        )
        .unwrap();
    let mut seed = 0u64;
    c.bench_function(&format!("conv_step/{}/{name}", data.name), |b| {
        b.iter(|| {
            seed += 1;
            let tape = Tape::with_seed(&cpu, seed);
            let logits = m.forward(&tape, &dg, &x.on_tape(&tape)).unwrap();
            let loss = logits.cross_entropy_masked(&idx, &y).unwrap();
            let grads = loss.backward().unwrap();
            for (params, opt) in &mut opts {
                opt.step(params, &grads).unwrap();
            }
            black_box(&grads);
        })
    });
}

fn bench_steps(c: &mut Criterion) {
    if let Some(data) = load("cora") {
        for name in ["sage", "gin", "gcnii", "appnp"] {
            step_bench(c, &data, name);
        }
    }
}

criterion_group!(benches, bench_steps);
criterion_main!(benches);
