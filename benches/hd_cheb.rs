//! One training step (forward, backward, AdaBelief) of HD-ChebConv models:
//! HDGCN and HDGCN-static (K = 6, hidden 64, M = 10) for node
//! classification on Cora (vendored), and graph classification of a batch
//! of 64 MR documents (from `HDGCN_DATA` or ../shared/data), with 64-d
//! embeddings (both variants) and 300-d embeddings (HDGCN).

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use hdgcn::attention::MvcAttnConfig;
use hdgcn::autograd::{Index, SparseMatrix, Tape};
use hdgcn::backend::Cpu;
use hdgcn::conv::{DeviceGraph, GraphConv, HdChebConfig};
use hdgcn::data::text::{TextCorpus, Vocab, doc_graph, text_gcn_dir};
use hdgcn::data::{Planetoid, data_root, planetoid_dir};
use hdgcn::graph::{Batch, Graph};
use hdgcn::models::{GraphClassifier, GraphInput, InputLayer, NodeClassifier};
use hdgcn::nn::{Activation, Embedding, Features, Linear, Module};
use hdgcn::optim::{AdaBelief, AdaBeliefConfig, Optimizer};
use hdgcn::readout::GatedReadout;
use rand::SeedableRng;

type C = Cpu<f32>;

fn bench_cora(c: &mut Criterion) {
    let data = Planetoid::load(&planetoid_dir(std::path::Path::new("data")), "cora").unwrap();
    let cpu = C::new();
    let dg = DeviceGraph::new(
        &cpu,
        Graph::from_edges(data.num_nodes(), &data.edges).unwrap(),
    );
    let x =
        Features::Sparse(SparseMatrix::from_csmat(&cpu, &data.row_normalized_features()).unwrap());
    let train = &data.public_split.train;
    let idx = Index::new(&cpu, train).unwrap();
    let y: Vec<usize> = train.iter().map(|&i| data.labels[i].unwrap()).collect();
    let y = Index::new(&cpu, &y).unwrap();
    for name in ["hdgcn", "hdgcn-static"] {
        let mut rng = rand::rngs::StdRng::seed_from_u64(0);
        let (d, k) = (data.num_features(), data.num_classes);
        let model = if name == "hdgcn" {
            NodeClassifier::hdgcn(&cpu, d, 64, k, 6, 10, 0.5, &mut rng).unwrap()
        } else {
            NodeClassifier::hdgcn_static(&cpu, d, 64, k, 6, 0.5, &mut rng).unwrap()
        };
        let params = model.params();
        let mut opt: AdaBelief<C> = AdaBeliefConfig::default().build().unwrap();
        let mut seed = 0;
        c.bench_function(&format!("hd_cheb_step/cora/{name}"), |b| {
            b.iter(|| {
                seed += 1;
                let tape = Tape::with_seed(&cpu, seed);
                let logits = model.forward(&tape, &dg, &x).unwrap();
                let grads = logits
                    .cross_entropy_masked(&idx, &y)
                    .unwrap()
                    .backward()
                    .unwrap();
                opt.step(&params, &grads).unwrap();
                black_box(&grads);
            })
        });
    }
}

fn bench_mr_batch(c: &mut Criterion) {
    let roots = [data_root(None), "../shared/data".into()];
    let Some(corpus) = roots
        .iter()
        .find_map(|r| TextCorpus::load(&text_gcn_dir(r), "mr").ok())
    else {
        eprintln!(
            "skipping MR batch: text_gcn/mr.txt not found under $HDGCN_DATA or ../shared/data"
        );
        return;
    };
    let train = corpus.train_indices();
    let vocab = Vocab::build(train.iter().map(|&i| &corpus.docs[i]), 1);
    let docs: Vec<_> = train[..64]
        .iter()
        .map(|&i| doc_graph(&corpus.docs[i], &vocab, 3).unwrap())
        .collect();
    let cpu = C::new();
    let graphs: Vec<Graph> = docs.iter().map(|d| d.graph.clone()).collect();
    let dg = DeviceGraph::from_batch(&cpu, &Batch::new(&graphs).unwrap()).unwrap();
    let tokens: Vec<usize> = docs
        .iter()
        .flat_map(|d| d.node_tokens.iter().copied())
        .collect();
    let input = GraphInput::Tokens(Index::new(&cpu, &tokens).unwrap());
    let labels = Index::new(&cpu, &docs.iter().map(|d| d.label).collect::<Vec<_>>()).unwrap();
    let all = Index::new(&cpu, &(0..64).collect::<Vec<_>>()).unwrap();
    // 64-d embeddings (the paper's hidden width), and the 300-d embeddings
    // of the earlier text protocol (`git show 949970a:docs/results.md`), where the embedding table dominates the step.
    for (group, dim, name) in [
        ("mr_batch64", 64, "hdgcn"),
        ("mr_batch64", 64, "hdgcn-static"),
        ("mr_batch64_emb300", 300, "hdgcn"),
    ] {
        let mut rng = rand::rngs::StdRng::seed_from_u64(0);
        let emb = Embedding::new(&cpu, vocab.len(), dim, &mut rng).unwrap();
        let cfg = HdChebConfig::in_model(dim, 64, 6, 0.5);
        let conv: Box<dyn GraphConv<C>> = if name == "hdgcn" {
            Box::new(
                cfg.build_dynamic(&cpu, &mut rng, &MvcAttnConfig::new(64))
                    .unwrap(),
            )
        } else {
            Box::new(cfg.build_static(&cpu, &mut rng).unwrap())
        };
        let model = GraphClassifier::new(
            Some(InputLayer::Embedding(emb)),
            vec![conv],
            Box::new(GatedReadout::new(&cpu, 64, &mut rng).unwrap()),
            Linear::new(&cpu, 64, corpus.num_classes(), true, &mut rng).unwrap(),
            0.5,
            Activation::Relu,
        )
        .unwrap();
        let params = model.params();
        let mut opt: AdaBelief<C> = AdaBeliefConfig::default().build().unwrap();
        let mut seed = 0;
        c.bench_function(&format!("hd_cheb_step/{group}/{name}"), |b| {
            b.iter(|| {
                seed += 1;
                // The tape ends before the step, as in the mini-batch
                // training loop, so the step updates in place.
                let grads = {
                    let tape = Tape::with_seed(&cpu, seed);
                    let logits = model.forward(&tape, &dg, &input).unwrap();
                    logits
                        .cross_entropy_masked(&all, &labels)
                        .unwrap()
                        .backward()
                        .unwrap()
                };
                opt.step(&params, &grads).unwrap();
                black_box(&grads);
            })
        });
    }
}

// Plots are off: the examples enable plotters' `ab_glyph` text backend,
// which needs a registered font, so criterion's PDF plots would fail.
criterion_group! {
    name = benches;
    config = Criterion::default().without_plots();
    targets = bench_cora, bench_mr_batch
}
criterion_main!(benches);
