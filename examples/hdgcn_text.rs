//! HDGCN on a text corpus, written out: the MR movie reviews (Pang & Lee)
//! as one small graph per document, an embedding table (GloVe-initialised
//! when the file is there), one HD-ChebConv with MVCAttn transitions, the
//! gated readout and a linear classifier, trained with the crate's generic
//! loop. Compare PyG's `examples/*.py`; `text_classification` is the
//! runner with every option.
//!
//! ```text
//! cargo run --release --example hdgcn_text                  # data under $HDGCN_DATA
//! cargo run --release --example hdgcn_text -- --epochs 2 --data-dir ../shared/data
//! ```

use std::path::PathBuf;

use clap::Parser;
use hdgcn::attention::MvcAttnConfig;
use hdgcn::backend::Cpu;
use hdgcn::conv::HdChebConfig;
use hdgcn::data::data_root;
use hdgcn::data::text::{TextCorpus, Vocab, doc_graph, load_glove, text_gcn_dir, validation_split};
use hdgcn::models::{GraphClassifier, InputLayer};
use hdgcn::nn::{Activation, Embedding, Linear};
use hdgcn::optim::{LrScheduleKind, OptimizerKind};
use hdgcn::readout::GatedReadout;
use hdgcn::train::{
    GraphBatch, GraphFeatures, GraphLoader, GraphSample, GraphTrainConfig, Trainer, evaluate,
};
use hdgcn::{Error, Result};
use rand::SeedableRng;

#[derive(Parser, Debug)]
#[command(about = "HDGCN on the MR movie reviews, written out")]
struct Args {
    /// Training epochs (the best validation epoch is kept).
    #[arg(long, default_value_t = 20)]
    epochs: usize,
    /// Data root holding text_gcn/ (and glove/); default $HDGCN_DATA, else ./data.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Seed of the split, the initialisation, the shuffling and dropout.
    #[arg(long, default_value_t = 0)]
    seed: u64,
}

const HIDDEN: usize = 64; // width of the HD-ChebConv
const K: usize = 6; // Chebyshev order (even: K/2 HD units)
const WINDOW: usize = 3; // words within 3 positions are linked
const DROPOUT: f64 = 0.5;
const GLOVE: &str = "glove/glove.6B.50d.subset.txt";

fn main() {
    if let Err(e) = run(&Args::parse()) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn run(args: &Args) -> Result<()> {
    let backend = Cpu::<f32>::new();
    let mut rng = rand::rngs::StdRng::seed_from_u64(args.seed);

    // 1. The corpus: documents with a train/test split; a seeded 10% of the
    //    training documents validates, the test documents only test.
    let root = data_root(args.data_dir.as_deref());
    let dir = text_gcn_dir(&root);
    if !dir.join("mr.txt").is_file() {
        return Err(Error::InvalidConfig(format!(
            "the MR corpus is not in {} (mr.txt and corpus/mr.clean.txt from \
             yao8839836/text_gcn): set HDGCN_DATA or --data-dir to the folder holding text_gcn/",
            dir.display()
        )));
    }
    let corpus = TextCorpus::load(&dir, "mr")?;
    let (train_idx, val_idx) = validation_split(&corpus.train_indices(), 0.1, args.seed)?;
    let test_idx = corpus.test_indices();
    // The vocabulary is the training documents' words (validation ones
    // included: they are training documents); the rest map to `<unk>`.
    let vocab = Vocab::build(corpus.train_indices().iter().map(|&i| &corpus.docs[i]), 1);
    println!(
        "MR: {} train / {} val / {} test documents, {} words, {} classes",
        train_idx.len(),
        val_idx.len(),
        test_idx.len(),
        vocab.len(),
        corpus.num_classes()
    );

    // 2. Each document becomes a graph: its distinct words are the nodes
    //    (features: their vocabulary ids), co-occurrence within the window
    //    the edges.
    let to_graphs = |idx: &[usize]| -> Result<Vec<GraphSample>> {
        idx.iter()
            .map(|&i| {
                let g = doc_graph(&corpus.docs[i], &vocab, WINDOW)?;
                GraphSample::new(g.graph, GraphFeatures::Tokens(g.node_tokens), g.label)
            })
            .collect()
    };
    let (train, val, test) = (
        to_graphs(&train_idx)?,
        to_graphs(&val_idx)?,
        to_graphs(&test_idx)?,
    );

    // 3. Word vectors: GloVe where the file is there, else N(0, 0.1²).
    let glove = root.join(GLOVE);
    let embedding = if glove.is_file() {
        let (table, found) = load_glove(&glove, &vocab, None)?;
        println!("GloVe: {found} of {} words found", vocab.len());
        Embedding::from_array(&backend, &table)?
    } else {
        println!("no {}: embeddings trained from scratch", glove.display());
        Embedding::with_std(&backend, vocab.len(), 300, 0.1, &mut rng)?
    };
    let input = InputLayer::Embedding(embedding);
    let dim = input.out_channels();

    // 4. The model: embedding -> HD-ChebConv (MVCAttn transitions, 10
    //    supernodes) -> gated readout -> linear classifier.
    let conv = HdChebConfig::in_model(dim, HIDDEN, K, DROPOUT).build_dynamic(
        &backend,
        &mut rng,
        &MvcAttnConfig::new(HIDDEN),
    )?;
    let mut model = GraphClassifier::new(
        Some(input),
        vec![Box::new(conv)],
        Box::new(GatedReadout::new(&backend, HIDDEN, &mut rng)?),
        Linear::new(&backend, HIDDEN, corpus.num_classes(), true, &mut rng)?,
        DROPOUT,
        Activation::Relu,
    )?;

    // 5. Training: shuffled mini-batches of 64 block-diagonal graphs,
    //    AdaBelief with a cosine schedule and gradient clipping; the loop
    //    validates after every epoch and keeps the best epoch's weights.
    let cfg = GraphTrainConfig {
        epochs: args.epochs,
        batch_size: 64,
        optimizer: OptimizerKind::AdaBelief,
        lr: 2e-3,
        lr_schedule: LrScheduleKind::Cosine { eta_min: 0.0 },
        clip_grad_norm: Some(5.0),
        patience: None,
        seed: args.seed,
        quiet: false,
        ..GraphTrainConfig::default()
    };
    let batches = |set: &[GraphSample]| -> Result<Vec<GraphBatch<Cpu<f32>>>> {
        let refs: Vec<&GraphSample> = set.iter().collect();
        refs.chunks(cfg.batch_size)
            .map(|c| GraphBatch::new(&backend, c))
            .collect()
    };
    let mut loader = GraphLoader::new(&backend, &train, cfg.batch_size, cfg.seed)?;
    let val_batches = batches(&val)?;
    let fit = Trainer::new(cfg.train_config())?.fit(&mut model, &mut loader, &val_batches)?;
    for (r, secs) in fit.history.iter().zip(&fit.epoch_secs) {
        println!(
            "epoch {:3}  lr {:.2e}  loss {:.4}  val acc {:.2}  ({:.1} s)",
            r.epoch + 1,
            r.lr,
            r.train_loss,
            100.0 * r.val_acc,
            secs
        );
    }

    // 6. Test, once, at the selected epoch.
    let test_acc = evaluate(&mut model, &batches(&test)?)?.accuracy;
    println!(
        "best epoch {}: val acc {:.2}, test acc {:.2}",
        fit.best_epoch + 1,
        100.0 * fit.val_acc,
        100.0 * test_acc
    );
    Ok(())
}
