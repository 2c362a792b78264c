//! Cora with Kipf & Welling's two-layer GCN, the model and the training
//! loop written out (compare PyTorch Geometric's `examples/gcn.py`).
//!
//! ```text
//! cargo run --release --example gcn
//! ```
//!
//! `planetoid` runs the same model through the crate's training loop
//! (`hdgcn::train`), with seeds, configs and a JSON summary.

use std::path::Path;

use hdgcn::autograd::{Index, SparseMatrix, Tape, Var};
use hdgcn::backend::Cpu;
use hdgcn::conv::{DeviceGraph, GcnConv, GraphConv};
use hdgcn::data::Planetoid;
use hdgcn::graph::Graph;
use hdgcn::nn::{Features, Module};
use hdgcn::optim::{AdamConfig, Optimizer};
use hdgcn::train::argmax_rows;
use hdgcn::{Error, Result};
use rand::SeedableRng;

type B = Cpu<f32>;

/// dropout -> GCNConv(d, 16) -> ReLU -> dropout -> GCNConv(16, classes).
struct Gcn {
    conv1: GcnConv<B>,
    conv2: GcnConv<B>,
}

impl Gcn {
    /// Class logits of every node; dropout only when `training`.
    fn forward(
        &self,
        tape: &Tape<B>,
        g: &DeviceGraph<B>,
        x: &Features<B>,
        training: bool,
    ) -> Result<Var<B>> {
        let x = if training {
            x.dropout(tape, 0.5)?
        } else {
            x.clone()
        };
        let h = self.conv1.forward(tape, g, &x)?.relu();
        let h = if training { h.dropout(0.5)? } else { h };
        self.conv2.forward(tape, g, &Features::Dense(h))
    }
}

fn main() -> Result<()> {
    let cpu = B::new();

    // The vendored Cora, public split (140 train / 500 val / 1000 test),
    // bag-of-words features row-normalised (PyG's NormalizeFeatures).
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("data/planetoid");
    let data = Planetoid::load(&dir, "cora")?;
    let graph = DeviceGraph::new(&cpu, Graph::from_edges(data.num_nodes(), &data.edges)?);
    let x = Features::Sparse(SparseMatrix::from_csmat(
        &cpu,
        &data.row_normalized_features(),
    )?);
    let split = &data.public_split;
    let train_y: Option<Vec<usize>> = split.train.iter().map(|&i| data.labels[i]).collect();
    let train_y = train_y.ok_or_else(|| Error::InvalidConfig("unlabelled training node".into()))?;
    let (train_idx, train_y) = (Index::new(&cpu, &split.train)?, Index::new(&cpu, &train_y)?);

    let mut rng = rand::rngs::StdRng::seed_from_u64(0);
    let model = Gcn {
        conv1: GcnConv::new(&cpu, data.num_features(), 16, &mut rng)?,
        conv2: GcnConv::new(&cpu, 16, data.num_classes, &mut rng)?,
    };
    // Weight decay on the first layer only: gcn.py's two parameter groups.
    let mut opt1 = AdamConfig::default()
        .lr(0.01)
        .weight_decay(5e-4)
        .build::<B>()?;
    let mut opt2 = AdamConfig::default().lr(0.01).build::<B>()?;
    let (params1, params2) = (model.conv1.params(), model.conv2.params());

    let (mut best_val, mut test_at_best) = (0.0, 0.0);
    for epoch in 1..=200 {
        // Training step: forward on a fresh tape (its seed draws the dropout
        // masks), cross-entropy on the training nodes, backward, update.
        let (loss, grads) = {
            let tape = Tape::with_seed(&cpu, epoch as u64);
            let logits = model.forward(&tape, &graph, &x.on_tape(&tape), true)?;
            let loss = logits.cross_entropy_masked(&train_idx, &train_y)?;
            let grads = loss.backward()?;
            (loss.scalar()?, grads)
        }; // the tape ends here, so the optimisers update the weights in place
        opt1.step(&params1, &grads)?;
        opt2.step(&params2, &grads)?;

        // Evaluation: no dropout, nothing recorded.
        let tape = Tape::inference(&cpu);
        let logits = model.forward(&tape, &graph, &x.on_tape(&tape), false)?;
        let pred = argmax_rows(&logits.to_array());
        let accuracy = |nodes: &Vec<usize>| {
            let correct = nodes.iter().filter(|&&i| data.labels[i] == Some(pred[i]));
            correct.count() as f64 / nodes.len() as f64
        };
        let [train, val, test] = [&split.train, &split.val, &split.test].map(accuracy);
        if val > best_val {
            (best_val, test_at_best) = (val, test);
        }
        println!(
            "Epoch: {epoch:03}, Loss: {loss:.4}, Train: {train:.4}, Val: {val:.4}, Test: {test:.4}"
        );
    }
    println!(
        "Test accuracy at the best validation epoch: {:.2} % (val {:.2} %)",
        100.0 * test_at_best,
        100.0 * best_val
    );
    Ok(())
}
