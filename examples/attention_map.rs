//! MVCAttn attention heat maps of one sentence (paper, Figures 5 and 6).
//!
//! Trains a dynamic HDGCN (K = 6, so three HD units, each with its own
//! MVCAttn) briefly on MR, or loads a checkpoint saved by an earlier run,
//! builds the word graph of `--sentence` and writes, for every HD unit `k`,
//! two PNG heat maps with the words as axis labels:
//!
//! * `unit{k}_forward.png`: `A_f`, supernodes (rows) x words (columns);
//!   each row is a supernode's attention over the words.
//! * `unit{k}_backward.png`: `A_b`, words (rows) x supernodes (columns);
//!   each row is a word's attention over the supernodes.
//! * `unit{k}_product.png`: `A_d = A_b A_f`, words x words, the
//!   node-to-node transition the unit applies (row-stochastic; the
//!   quantity of the paper's Figures 4-5, drawn there for units 1 and 2).
//!
//! Each map is also written as a CSV table (`unit{k}_forward.csv`, ...)
//! with the words as header or first column.
//!
//! ```text
//! cargo run --release --example attention_map -- \
//!     --sentence "the film is a charming and often affecting journey" --save out/mr.safetensors
//! cargo run --release --example attention_map -- --load out/mr.safetensors --sentence "a dull , tedious mess"
//! cargo run --release --example attention_map -- --embeddings glove/glove.6B.50d.subset.txt \
//!     --sentence "the film is a charming and often affecting journey"
//! ```
//!
//! With `--embeddings FILE` (GloVe text format; a relative path that does
//! not exist is looked up under the data root) the word embeddings start
//! from those vectors, as the paper's text models do, and their width is
//! the file's (50 for `glove.6B.50d`); words the file lacks start from
//! N(0, 1) rows.
//!
//! Words are lower-cased and split on whitespace, as in the MR corpus; words
//! outside the training vocabulary share one `<unk>` node, labelled `<unk>`.
//! A repeated word is one node. The vocabulary and the shape options
//! (`--hidden`, `--supernodes`, `--window`) are stored next to a saved
//! checkpoint (`CKPT.vocab.txt`) and checked on `--load`.
//!
//! Labels are drawn with plotters' pure-Rust `ab_glyph` text renderer and a
//! TrueType font found on the machine (`--font`, `$HDGCN_FONT`, or DejaVu
//! Sans / Liberation Sans / Arial in the usual places). Without one the maps
//! are drawn unlabelled and the CSV files carry the words.

#[path = "common/font.rs"]
mod font;
#[path = "common/heat_map.rs"]
mod heat_map;
#[cfg(test)]
#[path = "common/testing.rs"]
mod testing;

use std::path::{Path, PathBuf};

use clap::Parser;
use hdgcn::attention::{AttentionMaps, MvcAttnConfig, normalized_entropy};
use hdgcn::autograd::{Index, Tape};
use hdgcn::backend::Cpu;
use hdgcn::checkpoint::{load_checkpoint, save_checkpoint};
use hdgcn::conv::{DeviceGraph, GraphConv, HdChebConfig};
use hdgcn::data::data_root;
use hdgcn::data::text::{
    DocSplit, Document, TextCorpus, Vocab, doc_graph, load_glove, text_gcn_dir, validation_split,
};
use hdgcn::models::{GraphClassifier, GraphInput, InputLayer};
use hdgcn::nn::{Activation, Embedding, Features, Linear, Module};
use hdgcn::optim::{LrScheduleKind, OptimizerKind};
use hdgcn::readout::GatedReadout;
use hdgcn::train::{
    GraphFeatures, GraphSample, GraphTrainConfig, SelectBy, train_graph_classifier,
};
use hdgcn::{Error, Result};
use ndarray::Array2;
use rand::SeedableRng;

#[derive(Parser, Debug)]
#[command(about = "MVCAttn attention heat maps (A_f, A_b of every HD unit) for one sentence")]
struct Args {
    /// The sentence to analyse (lower-cased, split on whitespace).
    #[arg(long)]
    sentence: String,
    /// Data root (holds text_gcn/); default $HDGCN_DATA, else ./data
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Training epochs (ignored with --load).
    #[arg(long, default_value_t = 10)]
    epochs: usize,
    /// Learning rate of AdaBelief (gradients are clipped to total norm 5, as
    /// in the earlier text protocol, `git show 949970a:docs/results.md`).
    #[arg(long, default_value_t = 2e-3)]
    lr: f64,
    /// Load this checkpoint (saved by --save with the same options) instead of training.
    #[arg(long)]
    load: Option<PathBuf>,
    /// Save the trained model here (and its vocabulary to CKPT.vocab.txt).
    #[arg(long)]
    save: Option<PathBuf>,
    /// Folder for the PNG and CSV files.
    #[arg(long, default_value = "out/attention")]
    out_dir: PathBuf,
    /// Supernodes M of MVCAttn.
    #[arg(long, default_value_t = 10)]
    supernodes: usize,
    /// Hidden width (and embedding width).
    #[arg(long, default_value_t = 64)]
    hidden: usize,
    /// Seed (initialisation, validation split, mini-batch order).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Sliding-window width for word co-occurrence edges.
    #[arg(long, default_value_t = 3)]
    window: usize,
    /// Words listed per supernode.
    #[arg(long, default_value_t = 3)]
    top: usize,
    /// TrueType/OpenType font for the labels (default: $HDGCN_FONT, then a system font).
    #[arg(long)]
    font: Option<PathBuf>,
    /// GloVe vectors (`word v1 v2 ...`) to initialise the embeddings.
    #[arg(long)]
    embeddings: Option<PathBuf>,
}

fn main() {
    let args = Args::parse();
    if let Err(e) = run(&args) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

type C = Cpu<f32>;

/// Chebyshev order: K = 6 gives three HD units, as in the paper.
const K: usize = 6;

fn run(args: &Args) -> Result<()> {
    let tokens: Vec<String> = args
        .sentence
        .split_whitespace()
        .map(str::to_lowercase)
        .collect();
    if tokens.is_empty() {
        return Err(Error::InvalidConfig(
            "--sentence is empty: give at least one word".into(),
        ));
    }
    if args.epochs == 0 && args.load.is_none() {
        return Err(Error::InvalidConfig(
            "--epochs must be at least 1 (or --load a checkpoint)".into(),
        ));
    }

    let root = data_root(args.data_dir.as_deref());
    let corpus = TextCorpus::load(&text_gcn_dir(&root), "mr")?;
    let train_all = corpus.train_indices();
    let vocab = Vocab::build(train_all.iter().map(|&i| &corpus.docs[i]), 1);

    // The model; `emb` and `conv` are handles sharing their parameters with
    // the classifier's, so they see the trained (or loaded) values.
    let cpu = C::new();
    let mut rng = rand::rngs::StdRng::seed_from_u64(args.seed);
    let h = args.hidden;
    let (emb, embed_dim) = match &args.embeddings {
        Some(path) => {
            let path = resolve_data_path(path, &root);
            let (table, found) = load_glove(&path, &vocab, None)?;
            eprintln!(
                "GloVe: {found} of {} vocabulary words found in {}",
                vocab.len(),
                path.display()
            );
            (Embedding::from_array(&cpu, &table)?, table.ncols())
        }
        None => (Embedding::new(&cpu, vocab.len(), h, &mut rng)?, h),
    };
    let mut attn = MvcAttnConfig::new(h);
    attn.supernodes = args.supernodes;
    let mut conv =
        HdChebConfig::in_model(embed_dim, h, K, 0.5).build_dynamic(&cpu, &mut rng, &attn)?;
    let readout = Box::new(GatedReadout::new(&cpu, h, &mut rng)?);
    let classifier = Linear::new(&cpu, h, corpus.num_classes(), true, &mut rng)?;
    let mut model = GraphClassifier::new(
        Some(InputLayer::Embedding(emb.clone())),
        vec![Box::new(conv.clone()) as Box<dyn GraphConv<C>>],
        readout,
        classifier,
        0.5,
        Activation::Relu,
    )?;

    if let Some(ckpt) = &args.load {
        check_vocab(&vocab_path(ckpt), &vocab, args, embed_dim)?;
        load_checkpoint(&model, ckpt)?;
        eprintln!("loaded {}", ckpt.display());
    } else {
        let samples: Vec<GraphSample> = corpus
            .docs
            .iter()
            .map(|d| {
                let g = doc_graph(d, &vocab, args.window)?;
                GraphSample::new(g.graph, GraphFeatures::Tokens(g.node_tokens), g.label)
            })
            .collect::<Result<_>>()?;
        let (train_idx, val_idx) = validation_split(&train_all, 0.1, args.seed)?;
        let pick = |idx: &[usize]| idx.iter().map(|&i| samples[i].clone()).collect::<Vec<_>>();
        let (tr, va, te) = (
            pick(&train_idx),
            pick(&val_idx),
            pick(&corpus.test_indices()),
        );
        let cfg = GraphTrainConfig {
            epochs: args.epochs,
            batch_size: 64,
            lr: args.lr,
            lr_schedule: LrScheduleKind::Constant,
            lr_warmup_epochs: 0,
            weight_decay: 0.0,
            optimizer: OptimizerKind::AdaBelief,
            patience: None,
            select_by: SelectBy::Accuracy,
            clip_grad_norm: Some(5.0),
            label_smoothing: 0.0,
            ema_decay: None,
            seed: args.seed,
            quiet: false,
        };
        eprintln!(
            "training hdgcn (K = {K}, M = {}, hidden {h}) on MR for {} epochs ...",
            args.supernodes, args.epochs
        );
        let rep = train_graph_classifier(&mut model, &tr, &va, &te, &cfg)?;
        eprintln!(
            "best epoch {}  val {:.2} %  test {:.2} %",
            rep.best_epoch,
            100.0 * rep.val_acc,
            100.0 * rep.test_acc
        );
    }
    if let Some(ckpt) = &args.save {
        if let Some(dir) = ckpt.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        }
        save_checkpoint(&model, ckpt)?;
        let vp = vocab_path(ckpt);
        write_vocab(&vp, &vocab, args, embed_dim)?;
        println!("saved {} and {}", ckpt.display(), vp.display());
    }
    model.set_training(false);
    conv.set_training(false);

    // The sentence's word graph; node labels are the vocabulary words.
    let doc = Document {
        id: "sentence".into(),
        tokens: tokens.clone(),
        label: 0,
        split: DocSplit::Test,
    };
    let dg = doc_graph(&doc, &vocab, args.window)?;
    let words: Vec<String> = dg
        .node_tokens
        .iter()
        .map(|&t| vocab.token(t).unwrap_or(Vocab::UNK).to_string())
        .collect();
    let unknown: Vec<&str> = tokens
        .iter()
        .filter(|t| !vocab.contains(t))
        .map(String::as_str)
        .collect();
    if !unknown.is_empty() {
        println!("out of vocabulary (<unk>): {}", unknown.join(" "));
    }
    let graph = DeviceGraph::new(&cpu, dg.graph);
    let idx = Index::new(&cpu, &dg.node_tokens)?;
    let tape = Tape::inference(&cpu);
    let logits = model
        .forward(&tape, &graph, &GraphInput::Tokens(idx.clone()))?
        .to_array();
    let pred = (0..logits.ncols())
        .max_by(|&a, &b| logits[[0, a]].total_cmp(&logits[[0, b]]))
        .unwrap_or(0);
    println!(
        "sentence: {} ({} nodes); predicted class {} (logits {:?})",
        tokens.join(" "),
        words.len(),
        corpus.labels[pred],
        logits.row(0).to_vec()
    );
    let x = Features::Dense(emb.forward(&tape, &idx)?);
    let (_, maps) = conv.forward_with_maps(&tape, &graph, &x)?;

    std::fs::create_dir_all(&args.out_dir).map_err(|e| Error::io(&args.out_dir, e))?;
    let font = font::register_font(args.font.as_deref());
    if !font {
        eprintln!(
            "warning: no TrueType font found (use --font FILE); heat maps are drawn without \
             labels, the CSV files carry the words"
        );
    }
    let sup: Vec<String> = (1..=args.supernodes).map(|m| format!("s{m}")).collect();
    for (k, AttentionMaps { forward, backward }) in maps.iter().enumerate() {
        let k = k + 1;
        let (af, ab) = (&forward[0], &backward[0]);
        let product = transition_product(af, ab);
        for (name, mat, rows, cols, title) in [
            (
                "forward",
                af,
                &sup,
                &words,
                format!("HD unit {k}: A_f (supernode attention over words)"),
            ),
            (
                "backward",
                ab,
                &words,
                &sup,
                format!("HD unit {k}: A_b (word attention over supernodes)"),
            ),
            (
                "product",
                &product,
                &words,
                &words,
                format!("HD unit {k}: A_d = A_b A_f (word-to-word transition)"),
            ),
        ] {
            let png = args.out_dir.join(format!("unit{k}_{name}.png"));
            let csv = args.out_dir.join(format!("unit{k}_{name}.csv"));
            heat_map::heat_map(&png, mat, rows, cols, &title, font)?;
            heat_map::write_csv(&csv, mat, rows, cols)?;
            println!("wrote {}", png.display());
            println!("wrote {}", csv.display());
        }
        // How far each map is from uniform: a transition whose A_b rows are
        // all 1/M gives every word the same vector (docs/hdgcn.md).
        if af.ncols() > 1 && ab.ncols() > 1 {
            let m_inv = 1.0 / ab.ncols() as f64;
            let ab_dev = ab.iter().fold(0.0_f64, |d, &p| d.max((p - m_inv).abs()));
            println!(
                "unit {k}: normalised row entropy (1 = uniform): A_f {:.4}, A_b {:.4}; \
                 largest |A_b - 1/M| {ab_dev:.2e}",
                normalized_entropy(af.view())?,
                normalized_entropy(ab.view())?
            );
        }
        println!("unit {k}: top words per supernode (A_f)");
        for (m, row) in af.rows().into_iter().enumerate() {
            let mut order: Vec<usize> = (0..row.len()).collect();
            order.sort_by(|&a, &b| row[b].total_cmp(&row[a]));
            let top: Vec<String> = order
                .iter()
                .take(args.top)
                .map(|&v| format!("{} {:.3}", words[v], row[v]))
                .collect();
            println!("  s{:<3} {}", m + 1, top.join(", "));
        }
    }
    Ok(())
}

/// `CKPT.vocab.txt` next to `CKPT`.
fn vocab_path(ckpt: &Path) -> PathBuf {
    let mut s = ckpt.as_os_str().to_owned();
    s.push(".vocab.txt");
    PathBuf::from(s)
}

/// The options that fix the model's shapes and the graphs, as stored on the
/// first line of `CKPT.vocab.txt`.
fn options_line(args: &Args, embed_dim: usize) -> String {
    format!(
        "# attention_map: k={K} hidden={} supernodes={} window={} embed={embed_dim}",
        args.hidden, args.supernodes, args.window
    )
}

/// `path` as given where it exists (or is absolute), else under the data
/// root where it exists there, else unchanged (the reader then names it).
fn resolve_data_path(path: &Path, root: &Path) -> PathBuf {
    if path.is_absolute() || path.exists() || !root.join(path).exists() {
        path.to_path_buf()
    } else {
        root.join(path)
    }
}

/// `A_d = A_b A_f` (words x words) from `A_f` (`M x N`) and `A_b` (`N x M`).
fn transition_product(af: &Array2<f64>, ab: &Array2<f64>) -> Array2<f64> {
    ab.dot(af)
}

/// Writes the options line, then one vocabulary word per line (id order).
fn write_vocab(path: &Path, vocab: &Vocab, args: &Args, embed_dim: usize) -> Result<()> {
    let mut s = options_line(args, embed_dim);
    s.push('\n');
    for id in 0..vocab.len() {
        s.push_str(vocab.token(id).unwrap_or_default());
        s.push('\n');
    }
    std::fs::write(path, s).map_err(|e| Error::io(path, e))?;
    Ok(())
}

/// Checks that the options and vocabulary saved with a checkpoint are this
/// run's, id for id.
fn check_vocab(path: &Path, vocab: &Vocab, args: &Args, embed_dim: usize) -> Result<()> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        Error::InvalidConfig(format!(
            "cannot read the checkpoint's vocabulary {}: {e}",
            path.display()
        ))
    })?;
    let mut lines = text.lines();
    let (saved_opts, want) = (
        lines.next().unwrap_or_default(),
        options_line(args, embed_dim),
    );
    if saved_opts != want {
        return Err(Error::InvalidConfig(format!(
            "the checkpoint was saved with other options: {} has {saved_opts:?}, this run is {want:?}",
            path.display()
        )));
    }
    let saved: Vec<&str> = lines.collect();
    if saved.len() != vocab.len() {
        return Err(Error::InvalidConfig(format!(
            "vocabulary mismatch: {} has {} words, this corpus gives {}",
            path.display(),
            saved.len(),
            vocab.len()
        )));
    }
    if let Some(id) = (0..vocab.len()).find(|&i| vocab.token(i) != Some(saved[i])) {
        return Err(Error::InvalidConfig(format!(
            "vocabulary mismatch at id {id}: {} has {:?}, this corpus gives {:?}",
            path.display(),
            saved[id],
            vocab.token(id).unwrap_or_default()
        )));
    }
    Ok(())
}

#[cfg(test)]
#[path = "common/attention_map_tests.rs"]
mod tests;
