//! Document classification on the TextGCN corpora (R8, R52, MR, Ohsumed):
//! one graph per document (distinct words as nodes, edges within a sliding
//! window), word embeddings trained from scratch or read from a GloVe file,
//! one or more graph convolutions (`--layers`), a readout (`--readout`, the
//! paper's gated one by default) and a linear classifier.
//!
//! ```text
//! cargo run --release --example text_classification -- --dataset r8 --model hdgcn-static --json
//! ```
//!
//! Validation is a seeded 10% of the training documents; the test set is
//! never used for model selection. With `--json` the last stdout line is one
//! JSON object (dataset, model, runs, test_acc_mean, test_acc_std,
//! val_acc_mean, epoch_s_median, peak_rss_mb, ...), accuracies in percent.

// The JSON report (serde_json::json!) has more fields than the default
// macro recursion limit of 128 expands.
#![recursion_limit = "256"]

mod common;
#[cfg(test)]
#[path = "common/testing.rs"]
mod testing;

use std::path::PathBuf;

use clap::Parser;
use common::{Accuracies, AttnFlags, Example, ModelKind, Report, RunFlags, flag_name, parse_runs};
use hdgcn::backend::{Backend, Device};
use hdgcn::checkpoint::{load_checkpoint, save_checkpoint};
use hdgcn::conv::{ChebConvConfig, GcnConv, GraphConv, HdChebConfig};
use hdgcn::data::data_root;
use hdgcn::data::text::{
    TextCorpus, TfIdf, Vocab, doc_graph, load_glove, text_gcn_dir, validation_split,
};
use hdgcn::models::{GraphClassifier, InputLayer, NodeWeighting};
use hdgcn::nn::{
    Activation, Embedding, Linear, PositionalEncoding, SubwordConfig, SubwordEmbedding,
};
use hdgcn::optim::LrScheduleKind;
use hdgcn::readout::{
    AttentionPooling, GatedReadout, MaxReadout, MeanMaxReadout, MeanReadout, Readout, SumReadout,
};
use hdgcn::train::{
    AdversarialNorm, GraphFeatures, GraphOptimizer, GraphSample, GraphTrainConfig, SelectBy,
    evaluate_graphs, refit_graph_classifier, train_graph_classifier,
};
use hdgcn::util::{median, peak_rss_mb};
use rand::SeedableRng;

#[derive(Parser, Debug)]
#[command(about = "HDGCN / GCN / ChebNet document classification on the TextGCN corpora")]
struct Args {
    /// r8 | r52 | mr | ohsumed
    #[arg(long, default_value = "r8")]
    dataset: String,
    /// hdgcn | hdgcn-static | gcn | cheb
    #[arg(long, value_enum, ignore_case = true, default_value = "hdgcn")]
    model: ModelKind,
    /// Chebyshev order K (hdgcn*: even, default 6; cheb: terms, default 3).
    #[arg(long)]
    k: Option<usize>,
    #[command(flatten)]
    attn: AttnFlags,
    /// Hidden width.
    #[arg(long, default_value_t = 64)]
    hidden: usize,
    /// Non-linearity after every convolution and, in the hdgcn models, σ
    /// inside the HD-ChebConv: relu | leaky_relu | elu | gelu | tanh |
    /// sigmoid | identity (`nn::Activation`).
    #[arg(long, default_value = "relu")]
    activation: String,
    /// Graph convolutions stacked before the readout (the first maps the
    /// word vectors to --hidden, the others --hidden to --hidden; the paper
    /// uses 1).
    #[arg(long, default_value_t = 1)]
    layers: usize,
    /// Width of embeddings trained from scratch (default: --hidden); ignored
    /// with --embeddings, whose file sets the width.
    #[arg(long)]
    embed_dim: Option<usize>,
    /// Standard deviation of the N(0, std²) initialisation of embeddings
    /// trained from scratch (1 as torch.nn.Embedding); ignored with --embeddings.
    #[arg(long, default_value_t = 1.0)]
    embed_init_std: f64,
    /// Graph readout: gated (the paper's) | mean-max | mean | max | sum | attention.
    #[arg(long, value_enum, ignore_case = true, default_value = "gated")]
    readout: ReadoutKind,
    /// Readout weights of the word nodes: none (every node 1) | tfidf (the
    /// node's TF-IDF in its document, `data::text::TfIdf`, fitted on the
    /// training documents: with --readout mean a TF-IDF-weighted mean).
    #[arg(long, value_enum, ignore_case = true, default_value = "none")]
    node_weights: NodeWeights,
    /// Where --node-weights act: readout (the readout pools w_v h_v) |
    /// input (each word's embedding is scaled by its weight before the
    /// convolutions) | both (`models::NodeWeighting`).
    #[arg(long, default_value = "readout")]
    node_weights_at: NodeWeighting,
    /// Sliding-window width for word co-occurrence edges.
    #[arg(long, default_value_t = 3)]
    window: usize,
    /// Maximum epochs.
    #[arg(long, default_value_t = 30)]
    epochs: usize,
    /// Early-stopping patience: epochs without a better validation score
    /// (by --select-by).
    #[arg(long, default_value_t = 5)]
    patience: usize,
    /// Which validation score picks each run's epoch and resets
    /// --patience: accuracy (the highest; ties: the lower loss) | loss (the
    /// lowest cross-entropy) (`GraphTrainConfig::select_by`).
    #[arg(long, default_value = "accuracy")]
    select_by: SelectBy,
    /// Documents per mini-batch.
    #[arg(long, default_value_t = 64)]
    batch_size: usize,
    /// Learning rate.
    #[arg(long, default_value_t = 1e-3)]
    lr: f64,
    /// Learning-rate schedule over the --epochs budget: constant | cosine |
    /// cosine:ETA_MIN | step:STEP_SIZE:GAMMA.
    #[arg(long, default_value = "constant")]
    lr_schedule: LrScheduleKind,
    /// Epochs of linear warm-up to --lr before the schedule, which then
    /// runs over the epochs left (must be below --epochs; 0: none).
    #[arg(long, default_value_t = 0)]
    warmup_epochs: usize,
    /// adabelief | adam
    #[arg(long, default_value = "adabelief")]
    optimizer: GraphOptimizer,
    /// Clip each step's gradients to this total L2 norm (default: no clipping).
    #[arg(long)]
    clip: Option<f64>,
    /// Weight decay of the optimiser (decoupled for AdaBelief, L2 for Adam).
    #[arg(long, default_value_t = 0.0)]
    weight_decay: f64,
    /// Label smoothing of the training loss, in [0, 1] (PyTorch's
    /// `CrossEntropyLoss(label_smoothing=...)`; default 0: none).
    #[arg(long, default_value_t = 0.0)]
    label_smoothing: f64,
    /// Evaluates and selects with an exponential moving average of the
    /// weights with this decay, in [0, 1), updated after every step
    /// (`optim::ExponentialMovingAverage`, with warm-up; default: none).
    #[arg(long)]
    ema: Option<f64>,
    /// R-Drop: run each training batch twice with independent dropout
    /// masks and add this weight times the symmetric KL divergence of the
    /// two predictions to the loss (`GraphTrainConfig::rdrop_alpha`;
    /// default 0: off; a step costs about twice as much).
    #[arg(long, default_value_t = 0.0)]
    rdrop: f64,
    /// Adversarial training of the embedding table: each step also trains
    /// on the batch with the table moved by this L2 norm along its
    /// gradient (the fast gradient method; `GraphTrainConfig::adversarial_epsilon`;
    /// default: off; a step costs about twice as much).
    #[arg(long)]
    adversarial: Option<f64>,
    /// Where `--adversarial` steps: `table`, the embedding table by a step
    /// normalised over the whole table (default), or `graph`, each
    /// document's word vectors by a step of that length per document
    /// (Miyato et al.; `train::AdversarialNorm`).
    #[arg(long, default_value = "table")]
    adversarial_norm: AdversarialNorm,
    /// Epochs trained without `--adversarial` before its step starts
    /// (`GraphTrainConfig::adversarial_warmup_epochs`; default 0: from
    /// the first epoch; below `--epochs`). Needs `--adversarial`.
    #[arg(long, default_value_t = 0)]
    adversarial_warmup: usize,
    /// After each run's selection, train a fresh model (same seed and
    /// initialisation) on the training and validation documents together
    /// for the selected number of epochs and report its test accuracy
    /// (`train::refit_graph_classifier`, scikit-learn's `refit=True`);
    /// validation accuracy and the selected epochs stay the selection
    /// run's. `--save` then saves the refit model. Not with `--load`.
    #[arg(long)]
    refit: bool,
    /// How many epochs `--refit` trains: `selected`, each run's selected
    /// number (default), or `all`, the whole `--epochs` budget, so that the
    /// cosine schedule runs to its end and the refit does not depend on
    /// which epoch a noisy validation split picked. Needs `--refit`.
    #[arg(long, value_enum, default_value_t = RefitEpochs::Selected)]
    refit_epochs: RefitEpochs,
    /// Multiplier of the embedding table's learning rate (`--lr` times this;
    /// `GraphTrainConfig::input_lr_scale`; default 1).
    #[arg(long, default_value_t = 1.0)]
    embed_lr_scale: f64,
    /// Dropout probability.
    #[arg(long, default_value_t = 0.5)]
    dropout: f64,
    /// Node dropout of the training documents, in [0, 1): each epoch every
    /// word node of a training graph is dropped with this probability, with
    /// its edges (`GraphTrainConfig::node_dropout`; default 0: off).
    #[arg(long, default_value_t = 0.0)]
    node_dropout: f64,
    /// Adds sinusoidal position encodings of this amplitude to the word
    /// vectors: each node's position is the order in which its word first
    /// occurs in the document (`nn::PositionalEncoding`, PyG's frequencies;
    /// default: none).
    #[arg(long)]
    position_encoding: Option<f64>,
    /// Minimum count of a word in the training documents to enter the vocabulary.
    #[arg(long, default_value_t = 1)]
    min_count: usize,
    /// GloVe text file (`word v1 v2 ...`) to initialise the embeddings.
    #[arg(long, conflicts_with = "subwords")]
    embeddings: Option<PathBuf>,
    /// Compose each word's vector from its own row and the rows of its
    /// character n-grams of MIN to MAX characters, fastText-style
    /// (`nn::SubwordEmbedding`; e.g. `3:6`; default: one row per word). The
    /// test documents' words outside the vocabulary then get vectors
    /// composed from the n-grams the table has (`Vocab::extended`), not
    /// `<unk>`'s.
    #[arg(long, value_name = "MIN:MAX", value_parser = parse_subwords)]
    subwords: Option<SubwordConfig>,
    /// Independent runs (seeds seed, seed+1, ...).
    #[arg(long, default_value_t = 1, value_parser = parse_runs)]
    runs: usize,
    /// Base seed.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Data root (holds text_gcn/); default $HDGCN_DATA, else ./data
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Save the parameters of the last run (at its best validation epoch) as safetensors.
    #[arg(long)]
    save: Option<PathBuf>,
    /// Load parameters from a checkpoint and evaluate them (no training);
    /// the vocabulary options (--min-count, --dataset) must match the saved run.
    #[arg(long)]
    load: Option<PathBuf>,
    #[command(flatten)]
    run: RunFlags,
    /// No progress bar, no per-run lines.
    #[arg(long)]
    quiet: bool,
}

/// The readouts `--readout` offers (`hdgcn::readout`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum ReadoutKind {
    /// `GatedReadout`: sigmoid(f1) ⊙ tanh(f2), then mean + max (HDGCN, TextING).
    Gated,
    /// `MeanMaxReadout`: mean + max.
    MeanMax,
    /// `MeanReadout` (PyG `global_mean_pool`).
    Mean,
    /// `MaxReadout` (PyG `global_max_pool`).
    Max,
    /// `SumReadout` (PyG `global_add_pool`).
    Sum,
    /// `AttentionPooling` with a linear gate (PyG `AttentionalAggregation`).
    Attention,
}

/// How many epochs `--refit` trains.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum RefitEpochs {
    /// The selection run's best epoch + 1.
    Selected,
    /// The whole `--epochs` budget.
    All,
}

/// The readout weights `--node-weights` offers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum NodeWeights {
    /// Every node weighs 1.
    None,
    /// `TfIdf::node_weights`: sublinear term frequency times smoothed idf.
    Tfidf,
}

impl ReadoutKind {
    fn build<B: Backend, R: rand::Rng>(
        self,
        backend: &B,
        channels: usize,
        rng: &mut R,
    ) -> hdgcn::Result<Box<dyn Readout<B>>> {
        Ok(match self {
            ReadoutKind::Gated => Box::new(GatedReadout::new(backend, channels, rng)?),
            ReadoutKind::MeanMax => Box::new(MeanMaxReadout),
            ReadoutKind::Mean => Box::new(MeanReadout),
            ReadoutKind::Max => Box::new(MaxReadout),
            ReadoutKind::Sum => Box::new(SumReadout),
            ReadoutKind::Attention => {
                Box::new(AttentionPooling::linear(backend, channels, None, rng)?)
            }
        })
    }
}

fn main() {
    common::main::<Args>();
}

impl Example for Args {
    fn flags(&self) -> &RunFlags {
        &self.run
    }

    fn run<B: Backend<Elem = f32>>(&self, backend: &B, device: Device) -> hdgcn::Result<Report> {
        run(self, backend, device)
    }
}

fn run<B: Backend<Elem = f32>>(args: &Args, backend: &B, device: Device) -> hdgcn::Result<Report> {
    let model_kind = args.model;
    let activation: Activation = args.activation.parse()?;
    if let Some(warning) = args.attn.ignored_warning(model_kind) {
        eprintln!("{warning}");
    }
    if args.layers == 0 {
        return Err(hdgcn::Error::InvalidConfig(
            "--layers must be at least 1 (graph convolutions before the readout)".into(),
        ));
    }
    if args.node_weights == NodeWeights::None && args.node_weights_at != NodeWeighting::Readout {
        return Err(hdgcn::Error::InvalidConfig(format!(
            "--node-weights-at {} needs node weights: give --node-weights tfidf",
            args.node_weights_at
        )));
    }
    if !args.refit && args.refit_epochs != RefitEpochs::Selected {
        return Err(hdgcn::Error::InvalidConfig(format!(
            "--refit-epochs {} sets how long --refit trains: give --refit",
            flag_name(&args.refit_epochs)
        )));
    }
    if args.adversarial.is_none() && args.adversarial_warmup > 0 {
        return Err(hdgcn::Error::InvalidConfig(format!(
            "--adversarial-warmup {} delays the adversarial step: give --adversarial",
            args.adversarial_warmup
        )));
    }
    if args.refit && args.load.is_some() {
        return Err(hdgcn::Error::InvalidConfig(
            "--refit trains a model; it cannot be combined with --load".into(),
        ));
    }
    let root = data_root(args.data_dir.as_deref());
    let corpus = TextCorpus::load(&text_gcn_dir(&root), &args.dataset)?;
    let train_all = corpus.train_indices();
    let test_idx = corpus.test_indices();
    let vocab = Vocab::build(train_all.iter().map(|&i| &corpus.docs[i]), args.min_count);
    // With subwords, the test documents' unknown words get ids of their own
    // (vectors composed from the n-grams the table learned), not `<unk>`.
    let graph_vocab = match args.subwords {
        Some(_) => vocab.extended(&corpus.docs),
        None => vocab.clone(),
    };
    let tfidf = match args.node_weights {
        NodeWeights::None => None,
        NodeWeights::Tfidf => Some(TfIdf::fit(
            train_all.iter().map(|&i| &corpus.docs[i]),
            &graph_vocab,
        )?),
    };
    let samples: Vec<GraphSample> = corpus
        .docs
        .iter()
        .map(|d| {
            let g = doc_graph(d, &graph_vocab, args.window)?;
            let w = tfidf.as_ref().map(|t| t.node_weights(&g)).transpose()?;
            let s = GraphSample::new(g.graph, GraphFeatures::Tokens(g.node_tokens), g.label)?;
            match w {
                Some(w) => s.with_node_weights(w),
                None => Ok(s),
            }
        })
        .collect::<hdgcn::Result<_>>()?;
    let glove = match &args.embeddings {
        Some(p) => Some(load_glove(p, &vocab, None)?),
        None => None,
    };
    if let Some((_, found)) = &glove {
        eprintln!("GloVe: {found} of {} vocabulary words found", vocab.len());
    }
    let k = args
        .k
        .unwrap_or(if model_kind == ModelKind::Cheb { 3 } else { 6 });
    let embed_dim = match &glove {
        Some((table, _)) => table.ncols(),
        None => args.embed_dim.unwrap_or(args.hidden),
    };
    let position_encoding = args
        .position_encoding
        .map(|scale| PositionalEncoding::new(embed_dim)?.with_scale(scale))
        .transpose()?;
    // A model initialised from `seed` (the same for a selection run and
    // its refit); `announce` prints what the subword table holds.
    let build_model = |seed: u64, announce: bool| -> hdgcn::Result<GraphClassifier<B>> {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let input = match (&glove, args.subwords) {
            (Some((table, _)), _) => InputLayer::Embedding(Embedding::from_array(backend, table)?),
            (None, Some(sw)) => {
                let words = |ids: std::ops::Range<usize>| -> Vec<&str> {
                    ids.filter_map(|i| graph_vocab.token(i)).collect()
                };
                let mut e = SubwordEmbedding::new(
                    backend,
                    &words(0..vocab.len()),
                    sw,
                    embed_dim,
                    args.embed_init_std,
                    &mut rng,
                )?;
                let unseen = e.extend_vocabulary(&words(vocab.len()..graph_vocab.len()));
                if announce {
                    eprintln!(
                        "subwords: {} n-gram rows; {} words outside the vocabulary composed from them",
                        e.num_ngrams(),
                        unseen.len()
                    );
                }
                InputLayer::Subword(e)
            }
            (None, None) => InputLayer::Embedding(Embedding::with_std(
                backend,
                vocab.len(),
                embed_dim,
                args.embed_init_std,
                &mut rng,
            )?),
        };
        let d = input.out_channels();
        let h = args.hidden;
        let mut convs: Vec<Box<dyn GraphConv<B>>> = Vec::with_capacity(args.layers);
        for layer in 0..args.layers {
            let d_in = if layer == 0 { d } else { h };
            convs.push(match model_kind {
                ModelKind::Gcn => Box::new(GcnConv::new(backend, d_in, h, &mut rng)?),
                ModelKind::Cheb => {
                    Box::new(ChebConvConfig::new(d_in, h, k).build(backend, &mut rng)?)
                }
                ModelKind::Hdgcn | ModelKind::HdgcnStatic => {
                    let mut cfg = HdChebConfig::in_model(d_in, h, k, args.dropout);
                    cfg.activation = activation;
                    args.attn
                        .hd_cheb_conv(backend, model_kind, &cfg, &mut rng)?
                }
            });
        }
        let readout = args.readout.build(backend, h, &mut rng)?;
        let classifier = Linear::new(backend, h, corpus.num_classes(), true, &mut rng)?;
        let mut model = GraphClassifier::new(
            Some(input),
            convs,
            readout,
            classifier,
            args.dropout,
            activation,
        )?;
        if let Some(pe) = position_encoding {
            model = model.with_position_encoding(pe)?;
        }
        Ok(model.with_node_weighting(args.node_weights_at))
    };
    let (mut acc, mut epochs) = (Accuracies::default(), Vec::new());
    let mut selected_test = Vec::new();
    let mut refit_epoch_counts = Vec::new();
    for r in 0..args.runs {
        let seed = args.seed + r as u64;
        let (train_idx, val_idx) = validation_split(&train_all, 0.1, seed)?;
        let pick = |idx: &[usize]| idx.iter().map(|&i| samples[i].clone()).collect::<Vec<_>>();
        let (tr, va, te) = (pick(&train_idx), pick(&val_idx), pick(&test_idx));
        let mut model = build_model(seed, r == 0)?;
        let cfg = GraphTrainConfig {
            epochs: args.epochs,
            batch_size: args.batch_size,
            lr: args.lr,
            lr_schedule: args.lr_schedule,
            lr_warmup_epochs: args.warmup_epochs,
            weight_decay: args.weight_decay,
            optimizer: args.optimizer,
            patience: Some(args.patience),
            select_by: args.select_by,
            clip_grad_norm: args.clip,
            label_smoothing: args.label_smoothing,
            ema_decay: args.ema,
            node_dropout: args.node_dropout,
            rdrop_alpha: args.rdrop,
            adversarial_epsilon: args.adversarial,
            adversarial_norm: args.adversarial_norm,
            adversarial_warmup_epochs: args.adversarial_warmup,
            input_lr_scale: args.embed_lr_scale,
            seed,
            quiet: args.quiet,
        };
        if let Some(path) = &args.load {
            load_checkpoint(&model, path)?;
            let v = evaluate_graphs(&mut model, &va, args.batch_size)?;
            let (t, _) = evaluate_graphs(&mut model, &te, args.batch_size)?;
            acc.push_loaded(path, v, t);
            continue;
        }
        let mut rep = train_graph_classifier(&mut model, &tr, &va, &te, &cfg)?;
        if args.refit {
            selected_test.push(100.0 * rep.test_acc);
            let both: Vec<GraphSample> = tr.iter().chain(&va).cloned().collect();
            model = build_model(seed, false)?;
            let epochs = match args.refit_epochs {
                RefitEpochs::Selected => rep.best_epoch + 1,
                RefitEpochs::All => args.epochs,
            };
            refit_epoch_counts.push(epochs);
            let refit = refit_graph_classifier(&mut model, &both, &te, &cfg, epochs)?;
            if !args.quiet {
                eprintln!(
                    "run {r}: refit on {} documents for {} epochs: test {:.2} (selection run {:.2})",
                    both.len(),
                    epochs,
                    100.0 * refit.test_acc,
                    100.0 * rep.test_acc
                );
            }
            rep.test_acc = refit.test_acc;
        }
        if let (Some(path), true) = (&args.save, r + 1 == args.runs) {
            save_checkpoint(&model, path)?;
            eprintln!("saved {}", path.display());
        }
        if !args.quiet {
            for (e, h) in rep.history.iter().enumerate() {
                eprintln!(
                    "run {r} epoch {e}: lr {:.3e}  train loss {:.4}  grad norm {:.3}  val {:.2}  val loss {:.4}",
                    h.lr,
                    h.train_loss,
                    h.grad_norm,
                    100.0 * h.val_acc,
                    h.val_loss
                );
            }
            eprintln!(
                "run {r}: best epoch {}  val {:.2}  test {:.2}  epoch {:.1} s",
                rep.best_epoch,
                100.0 * rep.val_acc,
                100.0 * rep.test_acc,
                median(&rep.epoch_secs)
            );
        }
        acc.push((rep.val_acc, rep.val_loss), rep.test_acc, rep.best_epoch);
        epochs.extend(rep.epoch_secs);
    }
    let (tm, ts, vm) = acc.summary();
    let ep = median(&epochs);
    let rss = peak_rss_mb().unwrap_or(f64::NAN);
    let line = format!(
        "{} {} ({} runs): test accuracy {tm:.2} ± {ts:.2} %, val {vm:.2} %, epoch median {ep:.2} s, peak RSS {rss:.0} MiB",
        corpus.name,
        flag_name(&model_kind),
        args.runs
    );
    let json = serde_json::json!({
            "dataset": corpus.name,
            "model": flag_name(&model_kind),
            "runs": args.runs,
            "k": (model_kind != ModelKind::Gcn).then_some(k),
            "supernodes": (model_kind == ModelKind::Hdgcn).then_some(args.attn.supernodes),
            "routing": (model_kind == ModelKind::Hdgcn).then_some(args.attn.routing.as_str()),
            "score_norm": (model_kind == ModelKind::Hdgcn).then_some(args.attn.score_norm),
            "attn_dropout": (model_kind == ModelKind::Hdgcn).then_some(args.attn.attn_dropout),
            "hidden": args.hidden,
            "layers": args.layers,
            "activation": activation.name(),
            "embed_dim": embed_dim,
            "embed_init_std": args.embed_init_std,
            "subwords": args.subwords.map(|c| format!("{}:{}", c.min_n, c.max_n)),
            "window": args.window,
            "readout": flag_name(&args.readout),
            "node_weights": flag_name(&args.node_weights),
            "node_weights_at": args.node_weights_at.to_string(),
            "lr": args.lr,
            "lr_schedule": args.lr_schedule.to_string(),
            "warmup_epochs": args.warmup_epochs,
            "embed_lr_scale": args.embed_lr_scale,
            "label_smoothing": args.label_smoothing,
            "ema": args.ema,
            "rdrop": args.rdrop,
            "adversarial": args.adversarial,
            "adversarial_norm": args.adversarial.map(|_| args.adversarial_norm.to_string()),
            "adversarial_warmup": args.adversarial.map(|_| args.adversarial_warmup),
            "node_dropout": args.node_dropout,
            "position_encoding": args.position_encoding,
            "refit": args.refit,
            "refit_epochs": args.refit.then(|| flag_name(&args.refit_epochs)),
            "select_by": args.select_by.as_str(),
            "refit_epoch_counts": args.refit.then_some(&refit_epoch_counts),
            "selected_test_accs": args.refit.then_some(&selected_test),
            "test_acc_mean": tm,
            "test_acc_std": ts,
            "val_acc_mean": vm,
            "val_accs": acc.val,
            "val_loss_mean": acc.val_loss_mean(),
            "val_losses": acc.val_losses,
            "test_accs": acc.test,
            "best_epochs": acc.best_epochs,
            "epoch_s_median": ep,
            "peak_rss_mb": rss,
            "malloc": args.run.malloc.in_effect(),
            "device": device.as_str(),
            "adapter": backend.name(),
    });
    Ok(Report { line, json })
}

/// `--subwords MIN:MAX`: n-gram lengths, kept when shared by two words.
fn parse_subwords(s: &str) -> Result<SubwordConfig, String> {
    let (a, b) = s
        .split_once(':')
        .ok_or_else(|| format!("expected MIN:MAX (e.g. 3:6), got {s:?}"))?;
    let parse = |v: &str| {
        v.trim()
            .parse::<usize>()
            .map_err(|e| format!("bad n-gram length {v:?} in {s:?}: {e}"))
    };
    let config = SubwordConfig {
        min_n: parse(a)?,
        max_n: parse(b)?,
        ..SubwordConfig::default()
    };
    config.validate().map_err(|e| e.to_string())?;
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::common::run_on_cpu;
    use super::testing::{assert_runs_average, parse_args, scratch, write_corpus};
    use super::*;
    use std::path::Path;

    fn parse(flags: &[&str]) -> Args {
        parse_args(flags)
    }

    /// The fields issue 3 names for the last `--json` line.
    const CONTRACT_FIELDS: [&str; 8] = [
        "dataset",
        "model",
        "runs",
        "test_acc_mean",
        "test_acc_std",
        "val_acc_mean",
        "epoch_s_median",
        "peak_rss_mb",
    ];

    /// The other fields README.md lists for `text_classification --json`.
    const README_FIELDS: [&str; 40] = [
        "malloc",
        "device",
        "adapter",
        "k",
        "supernodes",
        "routing",
        "score_norm",
        "attn_dropout",
        "hidden",
        "layers",
        "activation",
        "embed_dim",
        "embed_init_std",
        "subwords",
        "window",
        "readout",
        "node_weights",
        "node_weights_at",
        "lr",
        "lr_schedule",
        "warmup_epochs",
        "embed_lr_scale",
        "label_smoothing",
        "ema",
        "rdrop",
        "adversarial",
        "adversarial_norm",
        "adversarial_warmup",
        "node_dropout",
        "position_encoding",
        "refit",
        "refit_epochs",
        "refit_epoch_counts",
        "select_by",
        "val_loss_mean",
        "val_losses",
        "selected_test_accs",
        "val_accs",
        "test_accs",
        "best_epochs",
    ];

    #[test]
    fn the_issue_command_line_parses() {
        let a = parse(&[
            "--dataset",
            "r52",
            "--model",
            "hdgcn-static",
            "--k",
            "4",
            "--supernodes",
            "12",
            "--hidden",
            "32",
            "--window",
            "5",
            "--epochs",
            "7",
            "--batch-size",
            "16",
            "--lr",
            "1e-3",
            "--optimizer",
            "adam",
            "--embeddings",
            "glove.txt",
            "--runs",
            "3",
            "--seed",
            "9",
            "--data-dir",
            "/data",
            "--json",
            "--quiet",
        ]);
        assert_eq!(a.dataset, "r52");
        assert_eq!(a.model, ModelKind::HdgcnStatic);
        assert_eq!((a.k, a.attn.supernodes, a.hidden), (Some(4), 12, 32));
        assert_eq!((a.window, a.epochs, a.batch_size), (5, 7, 16));
        assert_eq!(a.lr, 1e-3);
        assert_eq!(a.optimizer, GraphOptimizer::Adam);
        assert_eq!(a.embeddings.as_deref(), Some(Path::new("glove.txt")));
        assert_eq!((a.runs, a.seed), (3, 9));
        assert_eq!(a.data_dir.as_deref(), Some(Path::new("/data")));
        assert!(a.run.json && a.quiet);
        for (name, kind) in [
            ("hdgcn", ModelKind::Hdgcn),
            ("hdgcn-static", ModelKind::HdgcnStatic),
            ("gcn", ModelKind::Gcn),
            ("cheb", ModelKind::Cheb),
        ] {
            assert_eq!(parse(&["--model", name]).model, kind);
        }
        assert_eq!(
            parse(&["--optimizer", "adabelief"]).optimizer,
            GraphOptimizer::AdaBelief
        );
        // The issue's defaults: K = 6 (resolved in `run`), 10 supernodes,
        // width 64, window 3, batch 64, lr 1e-3, AdaBelief.
        let d = parse(&[]);
        assert_eq!(
            (d.k, d.attn.supernodes, d.hidden, d.window),
            (None, 10, 64, 3)
        );
        assert_eq!((d.batch_size, d.lr), (64, 1e-3));
        assert_eq!(d.optimizer, GraphOptimizer::AdaBelief);
        for bad in [
            &["--model", "gat"][..],
            &["--runs", "0"],
            &["--optimizer", "lbfgs"],
            &["--node-weights-at", "inputs"],
            &["--adversarial-norm", "node"],
        ] {
            let argv = std::iter::once("text_classification").chain(bad.iter().copied());
            assert!(Args::try_parse_from(argv).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn json_summary_has_the_contract_fields_and_a_saved_checkpoint_reloads() {
        let root = scratch("json");
        write_corpus(&root, "R8");
        let ckpt = root.join("model.safetensors");
        let (root_s, ckpt_s) = (root.to_str().unwrap(), ckpt.to_str().unwrap());
        let mut common: Vec<&str> =
            "--dataset r8 --model hdgcn --k 2 --supernodes 2 --hidden 8 --epochs 8 \
             --batch-size 8 --lr 1e-2 --quiet --json"
                .split_whitespace()
                .collect();
        common.extend(["--data-dir", root_s]);
        let trained = run_on_cpu::<Args>(&parse(
            &[&common[..], &["--runs", "2", "--save", ckpt_s]].concat(),
        ));
        let j = &trained.json;
        for field in CONTRACT_FIELDS.iter().chain(&README_FIELDS) {
            assert!(j.get(field).is_some(), "missing {field:?} in {j}");
        }
        assert_eq!(j["dataset"], "r8");
        assert_eq!(j["model"], "hdgcn");
        assert_eq!(j["runs"], 2);
        assert_eq!(
            (j["k"].as_u64(), j["supernodes"].as_u64()),
            (Some(2), Some(2))
        );
        let tests = assert_runs_average(j, "test_accs", "test_acc_mean", 2);
        assert_runs_average(j, "val_accs", "val_acc_mean", 2);
        assert_runs_average(j, "val_losses", "val_loss_mean", 2);
        for field in ["test_acc_std", "val_acc_mean", "epoch_s_median"] {
            let v = j[field]
                .as_f64()
                .unwrap_or_else(|| panic!("{field} in {j}"));
            assert!(v.is_finite() && v >= 0.0, "{field} = {v}");
        }
        assert!(trained.line.contains("test accuracy"), "{}", trained.line);
        // The checkpoint is the last run's (seed 1) at its best epoch:
        // evaluated again it gives that run's test accuracy exactly.
        let loaded = run_on_cpu::<Args>(&parse(
            &[
                &common[..],
                &["--runs", "1", "--seed", "1", "--load", ckpt_s],
            ]
            .concat(),
        ));
        assert_eq!(loaded.json["test_accs"][0].as_f64(), Some(tests[1]));
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn refit_reports_the_refit_models_test_accuracy_and_saves_that_model() {
        let root = scratch("refit");
        write_corpus(&root, "R8");
        let ckpt = root.join("refit.safetensors");
        let (root_s, ckpt_s) = (root.to_str().unwrap(), ckpt.to_str().unwrap());
        let mut common: Vec<&str> =
            "--dataset r8 --model hdgcn --k 2 --supernodes 2 --hidden 8 --epochs 6 \
             --batch-size 8 --lr 1e-2 --lr-schedule cosine --warmup-epochs 2 --quiet --json"
                .split_whitespace()
                .collect();
        common.extend(["--data-dir", root_s]);
        let plain = run_on_cpu::<Args>(&parse(&[&common[..], &["--runs", "2"]].concat())).json;
        assert_eq!(plain["select_by"], "accuracy");
        let by_loss = run_on_cpu::<Args>(&parse(
            &[&common[..], &["--runs", "2", "--select-by", "loss"]].concat(),
        ))
        .json;
        assert_eq!(by_loss["select_by"], "loss");
        assert_ne!(by_loss["best_epochs"], plain["best_epochs"], "{by_loss}");
        assert_eq!(plain["refit"], false);
        assert_eq!(plain["warmup_epochs"], 2);
        assert_eq!(plain["selected_test_accs"], serde_json::Value::Null);
        let refit = run_on_cpu::<Args>(&parse(
            &[&common[..], &["--runs", "2", "--refit", "--save", ckpt_s]].concat(),
        ))
        .json;
        assert_eq!(refit["refit"], true);
        assert_eq!(plain["refit_epochs"], serde_json::Value::Null);
        assert_eq!(plain["refit_epoch_counts"], serde_json::Value::Null);
        assert_eq!(refit["refit_epochs"], "selected");
        // The selection runs are the plain runs: same epochs, validation
        // and (now reported apart) test accuracies.
        assert_eq!(refit["selected_test_accs"], plain["test_accs"], "{refit}");
        assert_eq!(refit["best_epochs"], plain["best_epochs"]);
        assert_eq!(refit["val_acc_mean"], plain["val_acc_mean"]);
        let counts = |j: &serde_json::Value| -> Vec<u64> {
            let a = j["refit_epoch_counts"]
                .as_array()
                .expect("refit_epoch_counts");
            a.iter().map(|c| c.as_u64().unwrap()).collect()
        };
        let selected: Vec<u64> = plain["best_epochs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e.as_u64().unwrap() + 1)
            .collect();
        assert_eq!(counts(&refit), selected);
        // `--refit-epochs all` trains the whole budget, whatever epoch the
        // selection picked. Here run 0 selects an earlier epoch and run 1
        // the last, so only run 0's refit model changes.
        let full = run_on_cpu::<Args>(&parse(
            &[
                &common[..],
                &["--runs", "2", "--refit", "--refit-epochs", "all"],
            ]
            .concat(),
        ))
        .json;
        assert_eq!(full["refit_epochs"], "all");
        assert_eq!(counts(&full), [6, 6]);
        assert_eq!(selected, [4, 6], "the fixture's selected epochs moved");
        assert_eq!(full["selected_test_accs"], plain["test_accs"]);
        assert_eq!(full["test_accs"][1], refit["test_accs"][1]);
        assert_ne!(full["test_accs"][0], refit["test_accs"][0]);
        let err = parse(&[&common[..], &["--refit-epochs", "all"]].concat())
            .run(&hdgcn::backend::Cpu::<f32>::new(), Device::Cpu)
            .unwrap_err();
        assert!(err.to_string().contains("give --refit"), "{err}");
        // The checkpoint is the last run's refit model: evaluated again it
        // gives the reported test accuracy exactly.
        let loaded = run_on_cpu::<Args>(&parse(
            &[
                &common[..],
                &["--runs", "1", "--seed", "1", "--load", ckpt_s],
            ]
            .concat(),
        ));
        assert_eq!(loaded.json["test_accs"][0], refit["test_accs"][1]);
        let err = parse(&[&common[..], &["--refit", "--load", ckpt_s]].concat())
            .run(&hdgcn::backend::Cpu::<f32>::new(), Device::Cpu)
            .unwrap_err();
        assert!(err.to_string().contains("--refit"), "{err}");
        let mut long = common.clone();
        let at = long.iter().position(|&f| f == "--warmup-epochs").unwrap();
        long[at + 1] = "6";
        let err = parse(&long)
            .run(&hdgcn::backend::Cpu::<f32>::new(), Device::Cpu)
            .unwrap_err();
        assert!(err.to_string().contains("warm-up of 6 epochs"), "{err}");
        // The adversarial step's warm-up: reported with --adversarial,
        // refused without it or when it leaves no epoch.
        let adv = run_on_cpu::<Args>(&parse(
            &[
                &common[..],
                &["--adversarial", "0.5", "--adversarial-warmup", "2"],
            ]
            .concat(),
        ))
        .json;
        assert_eq!(adv["adversarial_warmup"], 2);
        assert_eq!(plain["adversarial_warmup"], serde_json::Value::Null);
        assert_ne!(adv["test_accs"], plain["test_accs"]);
        for (extra, says) in [
            (&["--adversarial-warmup", "2"][..], "give --adversarial"),
            (
                &["--adversarial", "0.5", "--adversarial-warmup", "6"],
                "adversarial_warmup_epochs of 6",
            ),
        ] {
            let err = parse(&[&common[..], extra].concat())
                .run(&hdgcn::backend::Cpu::<f32>::new(), Device::Cpu)
                .unwrap_err();
            assert!(err.to_string().contains(says), "{extra:?}: {err}");
        }
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn tfidf_weights_at_the_readout_or_the_input() {
        let root = scratch("tfidf");
        write_corpus(&root, "R8");
        let root_s = root.to_str().unwrap();
        let mut common: Vec<&str> =
            "--dataset r8 --model hdgcn --k 2 --supernodes 2 --hidden 8 --epochs 3 \
             --batch-size 8 --readout mean --quiet --json --node-weights tfidf"
                .split_whitespace()
                .collect();
        common.extend(["--data-dir", root_s]);
        let report = |at: &str| {
            run_on_cpu::<Args>(&parse(&[&common[..], &["--node-weights-at", at]].concat())).json
        };
        let (readout, input) = (report("readout"), report("input"));
        assert_eq!(readout["node_weights"], "tfidf");
        assert_eq!(readout["node_weights_at"], "readout");
        assert_eq!(input["node_weights_at"], "input");
        assert_eq!(report("Both")["node_weights_at"], "both");
        // Without weights there is nothing to place: an error, not a no-op.
        let err = parse(&[
            "--dataset",
            "r8",
            "--node-weights-at",
            "input",
            "--data-dir",
            root_s,
        ])
        .run(&hdgcn::backend::Cpu::<f32>::new(), Device::Cpu)
        .unwrap_err();
        assert!(err.to_string().contains("--node-weights tfidf"), "{err}");
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn glove_vectors_set_the_embedding_width() {
        let root = scratch("glove");
        write_corpus(&root, "R8");
        let glove = root.join("glove.txt");
        std::fs::write(
            &glove,
            "grain 0.1 0.2 0.3 0.4 0.5\noil -0.1 0.0 0.2 0.3 -0.4\n",
        )
        .unwrap();
        let args = parse(&[
            "--dataset",
            "r8",
            "--model",
            "gcn",
            "--hidden",
            "8",
            "--epochs",
            "1",
            "--embeddings",
            glove.to_str().unwrap(),
            "--data-dir",
            root.to_str().unwrap(),
            "--quiet",
        ]);
        let j = run_on_cpu::<Args>(&args).json;
        assert_eq!(j["embed_dim"], 5, "{j}");
        assert_eq!(j["k"], serde_json::Value::Null);
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_missing_corpus_is_an_error_naming_the_file() {
        let root = scratch("missing");
        let args = parse(&["--dataset", "ohsumed", "--data-dir", root.to_str().unwrap()]);
        let err = args
            .run(&hdgcn::backend::Cpu::<f32>::new(), Device::Cpu)
            .unwrap_err();
        assert!(err.to_string().contains("ohsumed.txt"), "{err}");
        std::fs::remove_dir_all(&root).unwrap();
    }
}
