//! ABSA end to end in the library: samples of each format (DualGCN JSON,
//! ASGCN `.raw` + `.raw.graph`) through the §9 graph into a small HDGCN
//! graph classifier, with the gated readout over every node and the
//! aspect-mean readout over the aspect's tokens; the training loss falls.
//! Synthetic files in a temp folder (no data needed), and the first
//! samples of the real LAP14 and REST15 files where the data are present.

mod common;

use common::pickle::{binint, nd_frag_protocol3};

use std::path::{Path, PathBuf};

use hdgcn::attention::MvcAttnConfig;
use hdgcn::autograd::Tape;
use hdgcn::backend::Cpu;
use hdgcn::conv::{DeviceGraph, HdChebConfig};
use hdgcn::data::absa::{self, AbsaSample, AbsaSplit, Polarity, aspect_graph, build_vocab};
use hdgcn::data::text::Vocab;
use hdgcn::graph::Batch;
use hdgcn::models::{GraphClassifier, GraphInput, InputLayer};
use hdgcn::nn::{Activation, Embedding, Linear};
use hdgcn::optim::OptimizerKind;
use hdgcn::readout::{GatedReadout, MeanReadout, NodeSet, Readout};
use hdgcn::train::{
    GraphBatch, GraphFeatures, GraphSample, GraphTrainConfig, train_graph_classifier,
};
use rand::SeedableRng;
use rand::rngs::StdRng;

type C = Cpu<f32>;

fn tmpdir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("hdgcn-absa-train-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Twelve synthetic reviews: `the <aspect> was <opinion> .` (or `<opinion>
/// <aspect> here`), the opinion word deciding the polarity.
fn reviews() -> Vec<(Vec<&'static str>, std::ops::Range<usize>, Polarity)> {
    let aspects: [&[&str]; 4] = [&["food"], &["battery", "life"], &["staff"], &["screen"]];
    let opinions = [
        ("great", Polarity::Positive),
        ("awful", Polarity::Negative),
        ("average", Polarity::Neutral),
    ];
    let mut out = Vec::new();
    for (i, a) in aspects.iter().enumerate() {
        for (j, &(o, p)) in opinions.iter().enumerate() {
            let (tokens, span) = if (i + j) % 2 == 0 {
                let mut t = vec!["the"];
                t.extend_from_slice(a);
                t.extend(["was", o, "."]);
                (t, 1..1 + a.len())
            } else {
                let mut t = vec![o];
                t.extend_from_slice(a);
                t.push("here");
                (t, 1..1 + a.len())
            };
            out.push((tokens, span, p));
        }
    }
    out
}

/// The reviews as a DualGCN JSON file: heads chain every token to the next
/// (the last is the root), one aspect per sentence, capitalised first word.
fn dualgcn_json() -> String {
    let sentences: Vec<String> = reviews()
        .into_iter()
        .map(|(t, span, p)| {
            let n = t.len();
            let mut words: Vec<String> = t.iter().map(|w| w.to_string()).collect();
            words[0] = words[0][..1].to_uppercase() + &words[0][1..];
            let heads: Vec<usize> = (0..n).map(|i| if i + 1 < n { i + 2 } else { 0 }).collect();
            serde_json::json!({
                "token": words, "pos": [], "head": heads, "deprel": [],
                "aspects": [{"term": t[span.clone()], "from": span.start, "to": span.end,
                             "polarity": Polarity::NAMES[p.label()]}],
            })
            .to_string()
        })
        .collect();
    format!("[{}]", sentences.join(",\n"))
}

/// The reviews as an ASGCN `.raw` file and its `.raw.graph` pickle (a
/// chain over the tokens, with self-loops, as ASGCN's adjacencies).
fn asgcn_files() -> (String, Vec<u8>) {
    let (mut raw, mut pickle) = (String::new(), b"\x80\x03}(".to_vec());
    for (k, (t, span, p)) in reviews().into_iter().enumerate() {
        let left = t[..span.start].join(" ");
        let right = t[span.end..].join(" ");
        let polarity = ["-1", "0", "1"][p.label()];
        raw.push_str(&format!(
            "{left} $T$ {right}\n{}\n{polarity}\n",
            t[span].join(" ")
        ));
        let n = t.len();
        let mut m = vec![0f32; n * n];
        for i in 0..n {
            m[i * n + i] = 1.0;
            if i + 1 < n {
                m[i * n + i + 1] = 1.0;
                m[(i + 1) * n + i] = 1.0;
            }
        }
        binint(&mut pickle, 3 * k as i32);
        let bytes: Vec<u8> = m.iter().flat_map(|x| x.to_le_bytes()).collect();
        nd_frag_protocol3(&mut pickle, &[n as i32, n as i32], "f4", &bytes);
    }
    pickle.extend_from_slice(b"u.");
    (raw, pickle)
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Pool {
    Gated,
    AspectMean,
}

fn graph_samples(samples: &[AbsaSample], vocab: &Vocab, pool: Pool) -> Vec<GraphSample> {
    samples
        .iter()
        .map(|s| {
            let g = GraphSample::new(
                aspect_graph(s).unwrap(),
                GraphFeatures::Tokens(s.lookup_ids(vocab)),
                s.label(),
            )
            .unwrap();
            match pool {
                Pool::Gated => g,
                Pool::AspectMean => g.with_readout_nodes(s.aspect.clone().collect()).unwrap(),
            }
        })
        .collect()
}

/// A small HDGCN (K = 2, M = 2, width 8) over embeddings of `vocab`.
fn small_hdgcn(vocab: usize, pool: Pool, seed: u64) -> GraphClassifier<C> {
    let cpu = C::new();
    let mut rng = StdRng::seed_from_u64(seed);
    let (d, h) = (8, 8);
    let input = Embedding::with_std(&cpu, vocab, d, 1.0, &mut rng).unwrap();
    let cfg = HdChebConfig::in_model(d, h, 2, 0.0);
    let mut attn = MvcAttnConfig::new(h);
    attn.supernodes = 2;
    let conv = cfg.build_dynamic(&cpu, &mut rng, &attn).unwrap();
    let readout: Box<dyn Readout<C>> = match pool {
        Pool::Gated => Box::new(GatedReadout::new(&cpu, h, &mut rng).unwrap()),
        Pool::AspectMean => Box::new(MeanReadout),
    };
    let classifier = Linear::new(&cpu, h, Polarity::NUM_CLASSES, true, &mut rng).unwrap();
    GraphClassifier::new(
        Some(InputLayer::Embedding(input)),
        vec![Box::new(conv)],
        readout,
        classifier,
        0.0,
        Activation::Relu,
    )
    .unwrap()
}

/// Trains on `samples` (also the validation set) and returns the mean
/// training loss of the first and the last epoch.
fn first_and_last_loss(samples: &[AbsaSample], pool: Pool) -> (f64, f64) {
    let vocab = build_vocab(samples, 1);
    let graphs = graph_samples(samples, &vocab, pool);
    let mut model = small_hdgcn(vocab.len(), pool, 1);
    let cfg = GraphTrainConfig {
        epochs: 40,
        batch_size: 4,
        lr: 1e-2,
        optimizer: OptimizerKind::Adam,
        patience: None,
        seed: 3,
        ..GraphTrainConfig::default()
    };
    let rep = train_graph_classifier(&mut model, &graphs, &graphs, &graphs, &cfg).unwrap();
    let loss = |i: usize| rep.history[i].train_loss;
    (loss(0), loss(rep.history.len() - 1))
}

fn assert_loss_falls(what: &str, samples: &[AbsaSample]) {
    for pool in [Pool::Gated, Pool::AspectMean] {
        let (first, last) = first_and_last_loss(samples, pool);
        assert!(
            last.is_finite() && last < 0.5 * first,
            "{what} {pool:?}: loss {first} -> {last}"
        );
    }
}

#[test]
fn a_small_hdgcn_learns_synthetic_dualgcn_samples() {
    let dir = tmpdir("dual");
    let p = write(&dir, "train.json", dualgcn_json().as_bytes());
    let samples = absa::read_dualgcn(&p).unwrap();
    assert_eq!(samples.len(), 12);
    assert_eq!(samples[0].tokens[0], "The", "DualGCN keeps the case");
    assert_loss_falls("DualGCN", &samples);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_small_hdgcn_learns_synthetic_asgcn_samples() {
    let dir = tmpdir("asgcn");
    let (raw, pickle) = asgcn_files();
    let raw = write(&dir, "restaurant_train.raw", raw.as_bytes());
    let graph = write(&dir, "restaurant_train.raw.graph", &pickle);
    let samples = absa::read_asgcn(&raw, &graph).unwrap();
    assert_eq!(samples.len(), 12);
    // Both formats give the same samples (up to case) and graphs.
    let dual = absa::parse_dualgcn(dualgcn_json().as_bytes(), "synthetic").unwrap();
    for (a, d) in samples.iter().zip(&dual) {
        assert_eq!(a.node_tokens(), d.node_tokens());
        assert_eq!(
            (&a.aspect, a.polarity, &a.arcs),
            (&d.aspect, d.polarity, &d.arcs)
        );
    }
    assert_loss_falls("ASGCN", &samples);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The aspect-mean model's logits of a batch are those of each graph
/// alone, through `GraphBatch` and through `GraphClassifier::forward_nodes`.
#[test]
fn the_aspect_mean_model_batches_like_graphs_alone() {
    let samples = absa::parse_dualgcn(dualgcn_json().as_bytes(), "synthetic").unwrap();
    let vocab = build_vocab(&samples, 1);
    let graphs = graph_samples(&samples[..5], &vocab, Pool::AspectMean);
    let model = small_hdgcn(vocab.len(), Pool::AspectMean, 2);
    let cpu = C::new();
    let refs: Vec<&GraphSample> = graphs.iter().collect();
    let batch = GraphBatch::new(&cpu, &refs).unwrap();
    let tape = Tape::inference(&cpu);
    let all = batch.forward(&model, &tape).unwrap().to_array();
    for (g, s) in graphs.iter().enumerate() {
        let alone = GraphBatch::new(&cpu, &[s]).unwrap();
        let one = alone.forward(&model, &tape).unwrap().to_array();
        for (a, b) in one.row(0).iter().zip(all.row(g)) {
            assert!((a - b).abs() < 1e-5, "graph {g}: {a} vs {b}");
        }
        // The same through the model's own entry point.
        let GraphFeatures::Tokens(ids) = &s.features else {
            unreachable!()
        };
        let dg =
            DeviceGraph::from_batch(&cpu, &Batch::new(std::slice::from_ref(&s.graph)).unwrap())
                .unwrap();
        let x = GraphInput::Tokens(hdgcn::autograd::Index::new(&cpu, ids).unwrap());
        let set = NodeSet::new(&cpu, &dg.ptr(), &[s.readout_nodes.clone().unwrap()]).unwrap();
        let direct = model
            .forward_nodes(&tape, &dg, &x, None, &set)
            .unwrap()
            .to_array();
        assert_eq!(direct.row(0), one.row(0));
    }
}

/// The first `n` samples of each polarity, so that a handful holds all three.
fn handful(samples: Vec<AbsaSample>, n: usize) -> Vec<AbsaSample> {
    let mut out = Vec::new();
    for p in 0..Polarity::NUM_CLASSES {
        out.extend(samples.iter().filter(|s| s.label() == p).take(n).cloned());
    }
    out
}

#[test]
#[cfg_attr(not(hdgcn_data_tests), ignore = "needs the benchmark data: absa/")]
fn a_small_hdgcn_learns_a_handful_of_real_samples_of_each_format() {
    let root = common::benchmark_root("absa");
    for name in ["lap14", "rest15"] {
        let samples = handful(absa::load(&root, name, AbsaSplit::Train).unwrap(), 4);
        assert_eq!(samples.len(), 12, "{name}");
        assert_loss_falls(name, &samples);
    }
}
