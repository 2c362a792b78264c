//! MVCAttn attention heat maps of one sentence (paper, Figures 4 to 6).
//!
//! Trains the dynamic HDGCN of a `text_classification` config (by default
//! `configs/paper/table1-mr-hdgcn.toml`: the paper's Table 1 MR row,
//! GloVe-initialised; its first run, seed `seed`), or loads a checkpoint
//! saved by an earlier run of either example with the same config, builds
//! the word graph of `--sentence` and writes, for every HD unit `k` (K = 6
//! gives three), PNG heat maps with the words as axis labels:
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
//!     --sentence "the film is a charming and often affecting journey"
//! cargo run --release --example attention_map -- --load out/attention/model.safetensors \
//!     --sentence "a dull , tedious mess"
//! cargo run --release --example text_classification -- \
//!     --config configs/paper/table1-mr-hdgcn.toml --runs 1 --save out/mr.safetensors
//! cargo run --release --example attention_map -- --load out/mr.safetensors --sentence "a dull , tedious mess"
//! ```
//!
//! Every model and training setting is the config's (a trained model is
//! saved to `--save`, default `OUT_DIR/model.safetensors`); the config's
//! model must be `hdgcn`, whose HD units have MVCAttn maps. A checkpoint
//! loads into the config's model only if every tensor's name and shape
//! match; the vocabulary is the config's corpus's, rebuilt the same way.
//!
//! Words are lower-cased and split on whitespace, as in the MR corpus; words
//! outside the training vocabulary share one `<unk>` node, labelled `<unk>`.
//! A repeated word is one node.
//!
//! Labels are drawn with plotters' pure-Rust `ab_glyph` text renderer and a
//! TrueType font found on the machine (`--font`, `$HDGCN_FONT`, or DejaVu
//! Sans / Liberation Sans / Arial in the usual places). Without one the maps
//! are drawn unlabelled and the CSV files carry the words.

#[allow(dead_code)]
mod common;
#[path = "common/font.rs"]
mod font;
#[path = "common/heat_map.rs"]
mod heat_map;
#[cfg(test)]
#[path = "common/testing.rs"]
mod testing;

use std::path::PathBuf;

use clap::Parser;
use common::ModelKind;
use common::text::{TextData, TextSettings};
use hdgcn::attention::{AttentionMaps, normalized_entropy};
use hdgcn::autograd::Tape;
use hdgcn::backend::{Cpu, Device};
use hdgcn::checkpoint::load_checkpoint;
use hdgcn::data::text::{DocSplit, Document, Vocab};
use hdgcn::nn::Module;
use hdgcn::train::{GraphBatch, GraphFeatures};
use hdgcn::{Error, Result};
use ndarray::Array2;

#[derive(Parser, Debug)]
#[command(
    about = "MVCAttn attention heat maps (A_f, A_b, A_b A_f of every HD unit) for one sentence"
)]
struct Args {
    /// The sentence to analyse (lower-cased, split on whitespace).
    #[arg(long)]
    sentence: String,
    /// The `text_classification` config of the model (model hdgcn).
    #[arg(long, default_value = "configs/paper/table1-mr-hdgcn.toml")]
    config: PathBuf,
    /// Data root (holds text_gcn/ and glove/); default $HDGCN_DATA, else ./data
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Load this checkpoint (saved with the same config) instead of training.
    #[arg(long)]
    load: Option<PathBuf>,
    /// Save the trained model here [default: OUT_DIR/model.safetensors].
    #[arg(long)]
    save: Option<PathBuf>,
    /// Folder for the PNG and CSV files.
    #[arg(long, default_value = "out/attention")]
    out_dir: PathBuf,
    /// Words listed per supernode.
    #[arg(long, default_value_t = 3)]
    top: usize,
    /// TrueType/OpenType font for the labels (default: $HDGCN_FONT, then a system font).
    #[arg(long)]
    font: Option<PathBuf>,
}

fn main() {
    let args = Args::parse();
    if let Err(e) = run(&args) {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

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
    if args.load.is_some() && args.save.is_some() {
        return Err(Error::InvalidConfig(
            "--load and --save: a loaded model is not trained again; give one".into(),
        ));
    }
    let mut s = TextSettings::from_toml_file(&args.config)?;
    if s.model != ModelKind::Hdgcn {
        return Err(Error::InvalidConfig(format!(
            "{}: model {:?} has no MVCAttn maps; attention_map needs model \"hdgcn\"",
            args.config.display(),
            common::flag_name(&s.model)
        )));
    }
    // The config's first run: seed `seed`.
    s.runs = 1;
    let cpu = Cpu::<f32>::new();
    let ckpt = match &args.load {
        Some(path) => path.clone(),
        None => {
            let path = args
                .save
                .clone()
                .unwrap_or_else(|| args.out_dir.join("model.safetensors"));
            if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
            }
            s.save = Some(path.clone());
            path
        }
    };
    let data = TextData::load(&s, args.data_dir.as_deref(), false)?;
    if args.load.is_none() {
        eprintln!(
            "training {} (its first run, seed {}) ...",
            args.config.display(),
            s.seed
        );
        let report = data.run(&cpu, Device::Cpu, false)?;
        println!("{}", report.line);
    }
    let (mut model, conv) = data.build_model(&cpu, s.seed, false)?;
    let mut conv = conv.ok_or_else(|| {
        Error::InvalidConfig("the model's first convolution is not a dynamic HD-ChebConv".into())
    })?;
    load_checkpoint(&model, &ckpt)?;
    eprintln!("loaded {}", ckpt.display());
    model.set_training(false);
    conv.set_training(false);

    // The sentence's word graph; node labels are the vocabulary words.
    let doc = Document {
        id: "sentence".into(),
        tokens: tokens.clone(),
        label: 0,
        split: DocSplit::Test,
    };
    let sample = data.sample(&doc)?;
    let vocab = &data.graph_vocab;
    let GraphFeatures::Tokens(ids) = &sample.features else {
        return Err(Error::InvalidConfig(
            "a text sample without word ids".into(),
        ));
    };
    let words: Vec<String> = ids
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
    let batch = GraphBatch::new(&cpu, &[&sample])?;
    let tape = Tape::inference(&cpu);
    let logits = batch.forward(&model, &tape)?.to_array();
    let pred = (0..logits.ncols())
        .max_by(|&a, &b| logits[[0, a]].total_cmp(&logits[[0, b]]))
        .unwrap_or(0);
    println!(
        "sentence: {} ({} nodes); predicted class {} (logits {:?})",
        tokens.join(" "),
        words.len(),
        data.corpus.labels[pred],
        logits.row(0).to_vec()
    );
    let x = model.conv_input(&tape, batch.graph(), &batch.input(&tape), 0)?;
    let (_, maps) = conv.forward_with_maps(&tape, batch.graph(), &x)?;

    std::fs::create_dir_all(&args.out_dir).map_err(|e| Error::io(&args.out_dir, e))?;
    let font = font::register_font(args.font.as_deref());
    if !font {
        eprintln!(
            "warning: no TrueType font found (use --font FILE); heat maps are drawn without \
             labels, the CSV files carry the words"
        );
    }
    let sup: Vec<String> = (1..=s.supernodes).map(|m| format!("s{m}")).collect();
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

/// `A_d = A_b A_f` (words x words) from `A_f` (`M x N`) and `A_b` (`N x M`).
fn transition_product(af: &Array2<f64>, ab: &Array2<f64>) -> Array2<f64> {
    ab.dot(af)
}

#[cfg(test)]
#[path = "common/attention_map_tests.rs"]
mod tests;
