//! A text-classification run described by settings: [`TextSettings`]
//! (read from a TOML file with [`TextSettings::from_toml_file`]) and
//! [`run_text`], which runs it. The `text_classification` runner and the
//! `reproduce` tool both go through here.
//!
//! A settings file, keys at their defaults unless given:
//!
//! ```toml
//! runner = "text_classification"   # optional; this value when given
//! dataset = "r8"                   # r8 | r52 | mr | ohsumed
//! model = "hdgcn"                  # hdgcn | hdgcn-static | gcn | cheb
//! k = 6                            # Chebyshev order (hdgcn*: 6, cheb: 3)
//! supernodes = 10                  # MVCAttn (model hdgcn only)
//! readout = "gated"
//! runs = 5
//! seed = 0
//!
//! [train]                          # hdgcn::train::GraphTrainConfig
//! epochs = 40
//! lr = 2e-3
//! lr_schedule = "cosine"
//! clip_grad_norm = 5.0
//! ```

// Every example that includes `common` compiles this module; only the
// text runners use it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use clap::ValueEnum;
use hdgcn::Error;
use hdgcn::attention::Routing;
use hdgcn::autograd::Tape;
use hdgcn::backend::{Backend, Cpu, Device};
use hdgcn::checkpoint::{load_checkpoint, save_checkpoint};
use hdgcn::conv::{ChebConvConfig, GcnConv, GraphConv, HdChebConfig};
use hdgcn::data::data_root;
use hdgcn::data::text::{
    Document, TextCorpus, TfIdf, Vocab, doc_graph, load_glove, text_gcn_dir, validation_split,
};
use hdgcn::models::{GraphClassifier, InputLayer, NodeWeighting};
use hdgcn::nn::{
    Activation, Embedding, Linear, Module, PositionalEncoding, SubwordConfig, SubwordEmbedding,
};
use hdgcn::optim::OptimizerKind;
use hdgcn::readout::{
    AttentionPooling, GatedReadout, MaxReadout, MeanMaxReadout, MeanReadout, Readout, SumReadout,
};
use hdgcn::train::{
    GraphBatch, GraphFeatures, GraphSample, GraphTrainConfig, evaluate_graphs,
    train_graph_classifier,
};
use hdgcn::util::{median, peak_rss_mb};
use rand::SeedableRng;

use super::{
    Accuracies, AttentionStats, AttnFlags, DEFAULT_SUPERNODES, DynamicConv, ModelKind, Report,
    flag_name,
};

/// The value of `runner` in a text-classification settings file.
pub const RUNNER: &str = "text_classification";

/// The graph readouts (`hdgcn::readout`), by their names in settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ReadoutKind {
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

/// The node weights of the word nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum NodeWeights {
    /// Every node weighs 1.
    None,
    /// `TfIdf::node_weights`: sublinear term frequency times smoothed idf,
    /// fitted on the training documents.
    Tfidf,
}

/// Every setting of one text-classification experiment (all its runs).
/// `Default` gives the runner's defaults; a TOML file sets any subset
/// ([`TextSettings::from_toml_file`]), the training loop's settings in a
/// `[train]` table.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TextSettings {
    /// Which runner the file is for: `"text_classification"` when given.
    pub runner: Option<String>,
    /// r8 | r52 | mr | ohsumed.
    pub dataset: String,
    /// hdgcn | hdgcn-static | gcn | cheb.
    #[serde(with = "by_value_enum")]
    pub model: ModelKind,
    /// Chebyshev order K (hdgcn*: even, default 6; cheb: terms, default 3;
    /// not used by gcn).
    pub k: Option<usize>,
    /// Share of the training documents held out (seeded per run) for
    /// validation, in (0, 1); the test documents are never used to select.
    pub split: f64,
    /// Hidden width.
    pub hidden: usize,
    /// Graph convolutions before the readout (the paper uses 1).
    pub layers: usize,
    /// Non-linearity after every convolution and σ inside the HD-ChebConv
    /// (`nn::Activation`: relu | leaky_relu | elu | gelu | tanh | sigmoid
    /// | identity).
    pub activation: String,
    /// Dropout probability of the model.
    pub dropout: f64,
    /// MVCAttn supernodes M (model hdgcn).
    pub supernodes: usize,
    /// MVCAttn routing: attention | votes (model hdgcn).
    pub routing: Routing,
    /// LayerNorm on the node states and on Ŝ in the MVCAttn scores
    /// (model hdgcn; `MvcAttnConfig::score_norm`).
    pub score_norm: bool,
    /// Dropout on MVCAttn's attention maps, in [0, 1) (model hdgcn).
    pub attn_dropout: f64,
    /// GloVe text file (`word v1 v2 ...`) to initialise the embeddings;
    /// its width sets the embedding width. A relative path that does not
    /// exist as given is looked up under the data root
    /// ([`resolve_data_path`]).
    pub embeddings: Option<PathBuf>,
    /// Width of embeddings trained from scratch (default: `hidden`).
    pub embed_dim: Option<usize>,
    /// Standard deviation of the N(0, std²) initialisation of embeddings
    /// trained from scratch.
    pub embed_init_std: f64,
    /// fastText-style subword embeddings, `"MIN:MAX"` n-gram lengths
    /// (`nn::SubwordEmbedding`; not with `embeddings`). None: one row per word.
    pub subwords: Option<String>,
    /// gated | mean-max | mean | max | sum | attention.
    #[serde(with = "by_value_enum")]
    pub readout: ReadoutKind,
    /// none | tfidf: weights of the word nodes.
    #[serde(with = "by_value_enum")]
    pub node_weights: NodeWeights,
    /// Where `node_weights` act: readout | input | both (`models::NodeWeighting`).
    pub node_weights_at: NodeWeighting,
    /// Sinusoidal position encodings of this amplitude added to the word
    /// vectors (`nn::PositionalEncoding`); None: none.
    pub position_encoding: Option<f64>,
    /// Sliding-window width of the word co-occurrence edges.
    pub window: usize,
    /// Minimum count of a word in the training documents to enter the vocabulary.
    pub min_count: usize,
    /// Independent runs (seeds seed, seed + 1, ...).
    pub runs: usize,
    /// Base seed: run r initialises, splits, shuffles and drops out with
    /// seed + r.
    pub seed: u64,
    /// The published number this experiment is compared with
    /// (`[reference]`: `accuracy`, `source`); not read by the run.
    pub reference: Option<super::Reference>,
    /// The training loop (`[train]`): epochs, batch_size, lr, optimizer,
    /// lr_schedule, patience, select_by, clip_grad_norm, label_smoothing,
    /// ema_decay, ... (`seed` and `quiet` are the run's, not set here).
    pub train: GraphTrainConfig,
    /// Save the last run's model (at its selected epoch) here; a command
    /// line setting, not read from files.
    #[serde(skip)]
    pub save: Option<PathBuf>,
    /// Evaluate this checkpoint instead of training; a command line
    /// setting, not read from files.
    #[serde(skip)]
    pub load: Option<PathBuf>,
}

/// The training settings of the hdgcn models when not given: the paper's
/// optimiser and learning rate (AdaBelief at 1e-5, Section 4), no weight
/// decay, batches of 64 documents, at most 100 epochs with patience 10 on
/// validation accuracy (the paper gives no batch size or budget; see
/// `configs/paper/README.md`).
pub fn default_text_train() -> GraphTrainConfig {
    GraphTrainConfig {
        epochs: 100,
        batch_size: 64,
        lr: 1e-5,
        optimizer: OptimizerKind::AdaBelief,
        patience: Some(10),
        ..GraphTrainConfig::default()
    }
}

/// The training settings of gcn and cheb when not given (the runner's
/// earlier defaults): 30 epochs, patience 5, batches of 64 documents,
/// AdaBelief at 1e-3.
pub fn baseline_text_train() -> GraphTrainConfig {
    GraphTrainConfig {
        epochs: 30,
        lr: 1e-3,
        patience: Some(5),
        ..default_text_train()
    }
}

impl Default for TextSettings {
    fn default() -> Self {
        TextSettings {
            runner: None,
            dataset: "r8".into(),
            model: ModelKind::Hdgcn,
            k: None,
            split: 0.1,
            hidden: 64,
            layers: 1,
            activation: "relu".into(),
            dropout: 0.5,
            supernodes: DEFAULT_SUPERNODES,
            routing: Routing::Attention,
            score_norm: false,
            attn_dropout: 0.0,
            embeddings: None,
            embed_dim: None,
            embed_init_std: 1.0,
            subwords: None,
            readout: ReadoutKind::Gated,
            node_weights: NodeWeights::None,
            node_weights_at: NodeWeighting::Readout,
            position_encoding: None,
            window: 3,
            min_count: 1,
            runs: 5,
            seed: 0,
            reference: None,
            train: default_text_train(),
            save: None,
            load: None,
        }
    }
}

/// What the loaded data contributes to a run's memory estimate
/// ([`TextSettings::check_memory`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TextShape {
    /// Rows of the embedding table.
    pub vocab: usize,
    /// Width of the embeddings.
    pub embed_dim: usize,
    /// Classes of the corpus.
    pub classes: usize,
    /// Nodes of the largest batch (the `batch_size` largest documents).
    pub batch_nodes: usize,
}

impl TextSettings {
    /// The runner's defaults for `model`. For hdgcn and hdgcn-static
    /// ([`Default`]) the paper's settings: K = 6, hidden 64, one layer,
    /// M = 10 supernodes, window 3, the gated readout, dropout 0.5, five
    /// runs and [`default_text_train`]; `configs/paper/table1-*.toml` are
    /// these with the GloVe vectors. For gcn and cheb the runner's earlier
    /// defaults: one run and [`baseline_text_train`].
    pub fn for_model(model: ModelKind) -> Self {
        let base = TextSettings {
            model,
            ..TextSettings::default()
        };
        match model {
            ModelKind::Hdgcn | ModelKind::HdgcnStatic => base,
            _ => TextSettings {
                runs: 1,
                train: baseline_text_train(),
                ..base
            },
        }
    }

    /// The runner's defaults for `model` on `dataset`: those of
    /// [`TextSettings::for_model`], except that hdgcn and hdgcn-static take
    /// the learning rate and dropout chosen on validation for the
    /// dataset's row of the paper's Table 1 ([`super::paper_row_point`]:
    /// MR, R8 and R52 lr 1e-3, Ohsumed lr 1e-2, dropout 0.5), so that
    /// `--dataset D --model hdgcn --embeddings glove/glove.6B.50d.subset.txt`
    /// is `configs/paper/table1-D-hdgcn.toml`.
    pub fn for_run(model: ModelKind, dataset: &str) -> Self {
        let mut s = TextSettings {
            dataset: dataset.to_owned(),
            ..TextSettings::for_model(model)
        };
        if matches!(model, ModelKind::Hdgcn | ModelKind::HdgcnStatic)
            && let Some(point) = super::paper_row_point(RUNNER, dataset)
        {
            s.train.lr = point.lr;
            s.dropout = point.dropout;
        }
        s
    }
}

/// `path` where it exists as given (or is absolute); else, for a relative
/// path, `root/path` where that exists, so that a config can name a file of
/// the data root (`embeddings = "glove/glove.6B.50d.subset.txt"`) and run
/// from any folder; else `path` unchanged (the reader then names it).
pub fn resolve_data_path(path: &Path, root: &Path) -> PathBuf {
    if path.is_absolute() || path.exists() {
        return path.to_path_buf();
    }
    let under_root = root.join(path);
    if under_root.exists() {
        under_root
    } else {
        path.to_path_buf()
    }
}

/// serde for the clap `ValueEnum`s of the settings, by their names (the
/// absa runner's settings use it too).
pub mod by_value_enum {
    use clap::ValueEnum;

    pub fn serialize<T: ValueEnum, S: serde::Serializer>(v: &T, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::flag_name(v))
    }

    pub fn deserialize<'de, T: ValueEnum, D: serde::Deserializer<'de>>(
        d: D,
    ) -> Result<T, D::Error> {
        let name = <String as serde::Deserialize>::deserialize(d)?;
        T::from_str(&name, true).map_err(|_| {
            let names: Vec<String> = T::value_variants().iter().map(super::flag_name).collect();
            serde::de::Error::custom(format!(
                "unknown value {name:?} (expected {})",
                names.join(" | ")
            ))
        })
    }
}

/// An `InvalidConfig` error about the setting `key`.
fn bad(key: &str, problem: impl std::fmt::Display) -> Error {
    Error::InvalidConfig(format!("key `{key}`: {problem}"))
}

impl TextSettings {
    /// Reads the settings of a TOML file: keys it omits keep the runner's
    /// defaults (those of `[train]` too), then [`TextSettings::validate`].
    ///
    /// # Errors
    /// [`Error::MissingFile`] or [`Error::Io`] for a file that cannot be
    /// read; [`Error::InvalidConfig`] naming the file, the key and the
    /// problem for an unknown key, a wrong type or an invalid value.
    pub fn from_toml_file(path: &Path) -> hdgcn::Result<Self> {
        Self::from_toml_file_for(path, None, None)
    }

    /// [`TextSettings::from_toml_file`] with the model `model` and the
    /// dataset `dataset` instead of the file's (the runner's `--model` and
    /// `--dataset`): the keys the file leaves out take the defaults of
    /// that model on that dataset ([`TextSettings::for_run`]).
    ///
    /// # Errors
    /// As [`TextSettings::from_toml_file`].
    pub fn from_toml_file_for(
        path: &Path,
        model: Option<ModelKind>,
        dataset: Option<&str>,
    ) -> hdgcn::Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => Error::MissingFile(path.to_path_buf()),
            _ => Error::Io {
                path: path.to_path_buf(),
                source: e,
            },
        })?;
        let in_file = |e: Error| match e {
            Error::InvalidConfig(m) => Error::InvalidConfig(format!("{}: {m}", path.display())),
            Error::OverBudget {
                what,
                needed,
                budget,
            } => Error::OverBudget {
                what: format!("{}: {what}", path.display()),
                needed,
                budget,
            },
            other => other,
        };
        let settings = Self::from_toml_str(&text, model, dataset).map_err(in_file)?;
        settings.validate().map_err(in_file)?;
        Ok(settings)
    }

    /// The settings of a TOML document (not validated), with the model
    /// `model` and the dataset `dataset` when given instead of the
    /// document's.
    fn from_toml_str(
        text: &str,
        model: Option<ModelKind>,
        dataset: Option<&str>,
    ) -> hdgcn::Result<Self> {
        // Read once as it stands, for messages that point into the file.
        let parsed: TextSettings =
            toml::from_str(text).map_err(|e| Error::InvalidConfig(describe(text, &e)))?;
        // The keys the document gives (those of `[train]` one by one) over
        // the runner's defaults for the model, not `GraphTrainConfig::default()`'s.
        let table: toml::Table =
            toml::from_str(text).map_err(|e| Error::InvalidConfig(describe(text, &e)))?;
        let model = model.unwrap_or(parsed.model);
        let dataset = dataset.unwrap_or(&parsed.dataset);
        let mut merged = toml::Table::try_from(TextSettings::for_run(model, dataset))
            .map_err(|e| bad("train", e.to_string()))?;
        super::overlay(&mut merged, &table);
        merged.insert("model".into(), flag_name(&model).into());
        merged
            .try_into()
            .map_err(|e: toml::de::Error| Error::InvalidConfig(e.message().to_owned()))
    }

    /// Checks every setting before anything is loaded or trained.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the key and the problem.
    pub fn validate(&self) -> hdgcn::Result<()> {
        if let Some(r) = &self.runner
            && r != RUNNER
        {
            return Err(bad(
                "runner",
                format!("this file is for {r:?}, not {RUNNER:?}"),
            ));
        }
        if self.runs == 0 {
            return Err(bad("runs", "must be at least 1"));
        }
        if self.seed.checked_add(self.runs as u64 - 1).is_none() {
            return Err(bad(
                "seed",
                format!(
                    "{} runs use seeds {} to seed + {}, past the largest seed",
                    self.runs,
                    self.seed,
                    self.runs - 1
                ),
            ));
        }
        if self.layers == 0 {
            return Err(bad("layers", "must be at least 1"));
        }
        if self.hidden == 0 {
            return Err(bad("hidden", "must be at least 1"));
        }
        if self.k == Some(0) {
            return Err(bad("k", "must be at least 1"));
        }
        if self.model == ModelKind::Gcn && self.k.is_some() {
            return Err(bad("k", "gcn has no Chebyshev order"));
        }
        if self.model.is_node_only() {
            return Err(bad(
                "model",
                format!(
                    "{} is a model of the planetoid runner",
                    flag_name(&self.model)
                ),
            ));
        }
        if self.window == 0 {
            return Err(bad("window", "must be at least 1"));
        }
        if !(self.split > 0.0 && self.split < 1.0) {
            return Err(bad(
                "split",
                format!("the validation share must be in (0, 1), got {}", self.split),
            ));
        }
        if !(0.0..1.0).contains(&self.dropout) {
            return Err(bad(
                "dropout",
                format!("must be in [0, 1), got {}", self.dropout),
            ));
        }
        self.activation()?;
        self.subword_config()?;
        if self.subwords.is_some() && self.embeddings.is_some() {
            return Err(bad(
                "subwords",
                "composes vectors of its own: not with `embeddings`",
            ));
        }
        if self.node_weights == NodeWeights::None && self.node_weights_at != NodeWeighting::Readout
        {
            return Err(bad(
                "node_weights_at",
                format!(
                    "{} needs node weights: set node_weights = \"tfidf\"",
                    self.node_weights_at
                ),
            ));
        }
        if self.train.seed != 0 {
            return Err(bad(
                "train.seed",
                "set `seed` at the top level (run r uses seed + r)",
            ));
        }
        if !self.train.quiet {
            return Err(bad("train.quiet", "set by the runner (--quiet)"));
        }
        if self.train.batch_size == 0 {
            return Err(bad("train.batch_size", "must be at least 1"));
        }
        hdgcn::train::Trainer::<Cpu<f32>, GraphClassifier<Cpu<f32>>>::new(
            self.train.train_config(),
        )
        .map_err(|e| match e {
            Error::InvalidConfig(m) => Error::InvalidConfig(format!("[train]: {m}")),
            other => other,
        })?;
        self.check_memory(None)?;
        if self.save.is_some() && self.load.is_some() {
            return Err(Error::InvalidConfig(
                "--save and --load: a loaded model is evaluated, not trained; give one".into(),
            ));
        }
        Ok(())
    }

    /// Checks the estimate of one run's memory against the memory budget
    /// (`hdgcn::limits`): the parameters of the `layers` convolutions
    /// (`AttnFlags::layer_cost`), of the readout and classifier (counted as
    /// `4h² + 4h + (h + 1)·classes`) and, once the data is loaded (`shape`),
    /// of the embedding table (`vocab x embed_dim`), and the activations of
    /// the largest batch: `nodes x hidden x terms`, terms `layers · layer
    /// terms + 4` (readout) `+ 2 · ceil(embed_dim / hidden)` (the input), in the formula of
    /// `hdgcn::limits::training_bytes`. Without `shape` (in
    /// [`TextSettings::validate`], before any data is read) only the
    /// convolutions, the readout and a two-class classifier are counted.
    ///
    /// # Errors
    /// [`Error::OverBudget`] naming `hidden`, `layers` (and `k`,
    /// `supernodes` where the model has them), the bytes needed and the budget.
    pub fn check_memory(&self, shape: Option<&TextShape>) -> hdgcn::Result<()> {
        let (h, k, layers) = (self.hidden, self.k(), self.layers as u64);
        let d = shape.map_or(self.embed_dim.unwrap_or(h), |s| s.embed_dim);
        let attn = self.attn();
        let first = attn.layer_cost(self.model, d, h, k);
        let rest = attn.layer_cost(self.model, h, h, k);
        let h64 = h as u64;
        let classes = shape.map_or(2, |s| s.classes) as u64;
        let head = h64
            .checked_mul(h64)
            .and_then(|hh| hh.checked_add(h64)?.checked_mul(4))
            .and_then(|r| r.checked_add(h64.checked_add(1)?.checked_mul(classes)?));
        let embed = shape.map_or(Some(0), |s| {
            (s.vocab as u64).checked_mul(s.embed_dim as u64)
        });
        let params = first.zip(rest).and_then(|(f, r)| {
            r.params
                .checked_mul(layers - 1)?
                .checked_add(f.params)?
                .checked_add(head?)?
                .checked_add(embed?)
        });
        // The input's two tensors are `embed_dim` wide, counted in units of `h`.
        let input = 2 * (d as u64).div_ceil(h64);
        let terms = rest.and_then(|r| r.terms.checked_mul(layers)?.checked_add(4 + input));
        let mut settings = format!("hidden {h}, layers {layers}");
        if self.model != ModelKind::Gcn {
            settings.push_str(&format!(", k {k}"));
        }
        if self.model == ModelKind::Hdgcn {
            settings.push_str(&format!(", supernodes {}", self.supernodes));
        }
        let detail = match shape {
            Some(s) => format!(
                "model {} on {}, {} words of {} dimensions",
                flag_name(&self.model),
                self.dataset,
                s.vocab,
                s.embed_dim
            ),
            None => format!(
                "model {} before the data is read: its layers alone",
                flag_name(&self.model)
            ),
        };
        super::check_run_memory(
            &settings,
            &detail,
            params,
            shape.map_or(0, |s| s.batch_nodes as u64),
            h64,
            terms,
            0,
        )
    }

    /// The `activation` setting, parsed.
    pub fn activation(&self) -> hdgcn::Result<Activation> {
        self.activation
            .parse()
            .map_err(|e: Error| bad("activation", e))
    }

    /// The `subwords` setting, parsed.
    pub fn subword_config(&self) -> hdgcn::Result<Option<SubwordConfig>> {
        self.subwords
            .as_deref()
            .map(parse_subwords)
            .transpose()
            .map_err(|e| bad("subwords", e))
    }

    /// The Chebyshev order: `k`, else 3 for cheb and 6 for the others.
    pub fn k(&self) -> usize {
        self.k
            .unwrap_or(if self.model == ModelKind::Cheb { 3 } else { 6 })
    }

    fn attn(&self) -> AttnFlags {
        AttnFlags {
            supernodes: self.supernodes,
            routing: self.routing,
            score_norm: self.score_norm,
            attn_dropout: self.attn_dropout,
        }
    }
}

/// One line for a TOML error: the line, the key it concerns and what is wrong.
fn describe(text: &str, e: &toml::de::Error) -> String {
    let Some(span) = e.span() else {
        return e.message().to_owned();
    };
    let before = &text[..span.start.min(text.len())];
    let line_no = before.matches('\n').count() + 1;
    let line = text.lines().nth(line_no - 1).unwrap_or("").trim();
    // The table the line is in: the last `[header]` above it.
    let table = before
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| l.starts_with('[') && l.ends_with(']'))
        .map(|l| l.trim_matches(['[', ']']).trim());
    let key = line
        .split_once('=')
        .map(|(k, _)| k.trim().trim_matches('"'))
        .filter(|k| !k.is_empty() && !line.starts_with('['));
    let at = match (table, key) {
        (Some(t), Some(k)) => format!("key `{t}.{k}` (line {line_no})"),
        (None, Some(k)) => format!("key `{k}` (line {line_no})"),
        _ => format!("line {line_no}"),
    };
    format!("{at}: {}", e.message())
}

/// `subwords = "MIN:MAX"`: n-gram lengths, kept when shared by two words.
pub fn parse_subwords(s: &str) -> Result<SubwordConfig, String> {
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

/// Runs the experiment `s` (all its runs) on `backend`: loads the corpus
/// from `data_dir` (default `$HDGCN_DATA`, else `./data`), trains (or,
/// with `s.load`, evaluates) and summarises. `quiet` hides the progress
/// bar and the per-run lines.
///
/// # Errors
/// [`Error::InvalidConfig`] for invalid settings (before anything is
/// loaded); data, model and training errors.
pub fn run_text<B: Backend<Elem = f32>>(
    s: &TextSettings,
    backend: &B,
    device: Device,
    data_dir: Option<&Path>,
    quiet: bool,
) -> hdgcn::Result<Report> {
    TextData::load(s, data_dir, quiet)?.run(backend, device, quiet)
}

/// The data of one text experiment, loaded once for all its runs: the
/// corpus, its vocabulary, every document as a graph sample and the
/// vectors the embeddings start from. [`TextData::build_model`] makes a
/// model of the settings on it, [`TextData::run`] runs the experiment.
pub struct TextData {
    /// The settings it was loaded for (validated).
    pub settings: TextSettings,
    /// The corpus.
    pub corpus: TextCorpus,
    /// The training documents' vocabulary: the rows of the embedding table.
    pub vocab: Vocab,
    /// The vocabulary of the graphs: `vocab`, with subwords extended by the
    /// corpus's other words (composed from their n-grams).
    pub graph_vocab: Vocab,
    /// Every document of the corpus as a sample, in corpus order.
    pub samples: Vec<GraphSample>,
    /// The GloVe file, resolved under the data root.
    pub embeddings: Option<PathBuf>,
    /// Width of the embeddings.
    pub embed_dim: usize,
    tfidf: Option<TfIdf>,
    glove: Option<(ndarray::Array2<f32>, usize)>,
    subwords: Option<SubwordConfig>,
    activation: Activation,
    position_encoding: Option<PositionalEncoding>,
}

impl TextData {
    /// Validates `s` and loads its corpus from `data_dir` (default
    /// `$HDGCN_DATA`, else `./data`), builds the vocabulary and every
    /// document's graph, reads the GloVe vectors and checks the memory
    /// budget. `quiet` hides what it found.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for invalid settings (before anything is
    /// loaded); data errors; [`Error::OverBudget`].
    pub fn load(s: &TextSettings, data_dir: Option<&Path>, quiet: bool) -> hdgcn::Result<Self> {
        s.validate()?;
        let activation = s.activation()?;
        let subwords = s.subword_config()?;
        // Keys named as the flags of the MVCAttn settings (`--supernodes` is
        // the key `supernodes`).
        if let Some(warning) = s.attn().ignored_warning(s.model) {
            eprintln!("{warning}");
        }
        let root = data_root(data_dir);
        let corpus = TextCorpus::load(&text_gcn_dir(&root), &s.dataset)?;
        let train_all = corpus.train_indices();
        let vocab = Vocab::try_build(train_all.iter().map(|&i| &corpus.docs[i]), s.min_count)?;
        // With subwords, the test documents' unknown words get ids of their own
        // (vectors composed from the n-grams the table learned), not `<unk>`.
        let graph_vocab = match subwords {
            Some(_) => vocab.extended(&corpus.docs),
            None => vocab.clone(),
        };
        let tfidf = match s.node_weights {
            NodeWeights::None => None,
            NodeWeights::Tfidf => Some(TfIdf::fit(
                train_all.iter().map(|&i| &corpus.docs[i]),
                &graph_vocab,
            )?),
        };
        let embeddings = s.embeddings.as_deref().map(|p| resolve_data_path(p, &root));
        let glove = match &embeddings {
            Some(p) => Some(load_glove(p, &vocab, None)?),
            None => None,
        };
        if let (Some((_, found)), false) = (&glove, quiet) {
            eprintln!("GloVe: {found} of {} vocabulary words found", vocab.len());
        }
        let embed_dim = match &glove {
            Some((table, _)) => table.ncols(),
            None => s.embed_dim.unwrap_or(s.hidden),
        };
        let position_encoding = s
            .position_encoding
            .map(|scale| PositionalEncoding::new(embed_dim)?.with_scale(scale))
            .transpose()?;
        let mut data = TextData {
            settings: s.clone(),
            corpus,
            vocab,
            graph_vocab,
            samples: Vec::new(),
            embeddings,
            embed_dim,
            tfidf,
            glove,
            subwords,
            activation,
            position_encoding,
        };
        data.samples = data
            .corpus
            .docs
            .iter()
            .map(|d| data.sample(d))
            .collect::<hdgcn::Result<_>>()?;
        let mut sizes: Vec<usize> = data.samples.iter().map(|x| x.graph.num_nodes()).collect();
        sizes.sort_unstable_by(|a, b| b.cmp(a));
        s.check_memory(Some(&TextShape {
            vocab: data.graph_vocab.len(),
            embed_dim,
            classes: data.corpus.num_classes(),
            batch_nodes: sizes.iter().take(s.train.batch_size).sum(),
        }))?;
        Ok(data)
    }

    /// `doc` as a sample: its word graph over [`TextData::graph_vocab`]
    /// (words outside it are `<unk>`), with the settings' node weights.
    ///
    /// # Errors
    /// As [`doc_graph`] and [`GraphSample::new`].
    pub fn sample(&self, doc: &Document) -> hdgcn::Result<GraphSample> {
        let g = doc_graph(doc, &self.graph_vocab, self.settings.window)?;
        let w = self
            .tfidf
            .as_ref()
            .map(|t| t.node_weights(&g))
            .transpose()?;
        let sample = GraphSample::new(g.graph, GraphFeatures::Tokens(g.node_tokens), g.label)?;
        match w {
            Some(w) => sample.with_node_weights(w),
            None => Ok(sample),
        }
    }

    /// A freshly initialised model of the settings (initialised from
    /// `seed`), with a handle on its first HD-ChebConv when that is
    /// dynamic (model hdgcn), whose maps are the ones reported. `announce`
    /// prints what the subword table holds (unless quiet).
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for a model of another runner; layer errors.
    pub fn build_model<B: Backend<Elem = f32>>(
        &self,
        backend: &B,
        seed: u64,
        announce: bool,
    ) -> hdgcn::Result<(GraphClassifier<B>, Option<DynamicConv<B>>)> {
        let s = &self.settings;
        let (vocab, graph_vocab) = (&self.vocab, &self.graph_vocab);
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let input = match (&self.glove, self.subwords) {
            (Some((table, _)), _) => InputLayer::Embedding(Embedding::from_array(backend, table)?),
            (None, Some(sw)) => {
                let words = |ids: std::ops::Range<usize>| -> Vec<&str> {
                    ids.filter_map(|i| graph_vocab.token(i)).collect()
                };
                let mut e = SubwordEmbedding::new(
                    backend,
                    &words(0..vocab.len()),
                    sw,
                    self.embed_dim,
                    s.embed_init_std,
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
                self.embed_dim,
                s.embed_init_std,
                &mut rng,
            )?),
        };
        let d = input.out_channels();
        let (h, k, activation) = (s.hidden, s.k(), self.activation);
        let attn = s.attn();
        let mut convs: Vec<Box<dyn GraphConv<B>>> = Vec::with_capacity(s.layers);
        let mut probe = None;
        for layer in 0..s.layers {
            let d_in = if layer == 0 { d } else { h };
            convs.push(match s.model {
                ModelKind::Gcn => Box::new(GcnConv::new(backend, d_in, h, &mut rng)?),
                ModelKind::Cheb => {
                    Box::new(ChebConvConfig::new(d_in, h, k).build(backend, &mut rng)?)
                }
                m if m.is_node_only() => {
                    return Err(Error::InvalidConfig(format!(
                        "{} is a model of the planetoid runner",
                        flag_name(&s.model)
                    )));
                }
                _ => {
                    let mut cfg = HdChebConfig::in_model(d_in, h, k, s.dropout);
                    cfg.activation = activation;
                    let (conv, dynamic) =
                        attn.hd_cheb_conv_probed(backend, s.model, &cfg, &mut rng)?;
                    // The first layer's maps are the ones reported.
                    if layer == 0 {
                        probe = dynamic;
                    }
                    conv
                }
            });
        }
        let readout = s.readout.build(backend, h, &mut rng)?;
        let classifier = Linear::new(backend, h, self.corpus.num_classes(), true, &mut rng)?;
        let mut model = GraphClassifier::new(
            Some(input),
            convs,
            readout,
            classifier,
            s.dropout,
            activation,
        )?;
        if let Some(pe) = self.position_encoding {
            model = model.with_position_encoding(pe)?;
        }
        Ok((model.with_node_weighting(s.node_weights_at), probe))
    }

    /// Runs the experiment (all its runs) on `backend`: trains (or, with
    /// `load`, evaluates) and summarises. `quiet` hides the progress bar and
    /// the per-run lines.
    ///
    /// # Errors
    /// Model and training errors.
    pub fn run<B: Backend<Elem = f32>>(
        &self,
        backend: &B,
        device: Device,
        quiet: bool,
    ) -> hdgcn::Result<Report> {
        let s = &self.settings;
        let (corpus, samples) = (&self.corpus, &self.samples);
        let (model_kind, activation, k) = (s.model, self.activation, s.k());
        let (embed_dim, embeddings, subwords) = (self.embed_dim, &self.embeddings, self.subwords);
        let train_all = corpus.train_indices();
        let test_idx = corpus.test_indices();
        let (mut acc, mut epochs) = (Accuracies::default(), Vec::new());
        let mut attention = AttentionStats::default();
        for r in 0..s.runs {
            let seed = s.seed + r as u64;
            let (train_idx, val_idx) = validation_split(&train_all, s.split, seed)?;
            let pick = |idx: &[usize]| idx.iter().map(|&i| samples[i].clone()).collect::<Vec<_>>();
            let (tr, va, te) = (pick(&train_idx), pick(&val_idx), pick(&test_idx));
            let (mut model, probe) = self.build_model(backend, seed, r == 0 && !quiet)?;
            if let Some(path) = &s.load {
                load_checkpoint(&model, path)?;
                let v = evaluate_graphs(&mut model, &va, s.train.batch_size)?;
                let (t, _) = evaluate_graphs(&mut model, &te, s.train.batch_size)?;
                acc.push_loaded(path, v, t);
                continue;
            }
            let cfg = GraphTrainConfig {
                seed,
                quiet,
                ..s.train.clone()
            };
            let rep = train_graph_classifier(&mut model, &tr, &va, &te, &cfg)?;
            if let (Some(path), true) = (&s.save, r + 1 == s.runs) {
                save_checkpoint(&model, path)?;
                eprintln!("saved {}", path.display());
            }
            if !quiet {
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
            if let Some(conv) = probe {
                attention_on_docs(&mut model, conv, &te, s.train.batch_size, &mut attention)?;
            }
            acc.push((rep.val_acc, rep.val_loss), rep.test_acc, rep.best_epoch);
            epochs.extend(rep.epoch_secs);
        }
        let (tm, ts, vm) = acc.summary();
        let ep = median(&epochs);
        let rss = peak_rss_mb().unwrap_or(f64::NAN);
        let model_name = flag_name(&model_kind);
        let line = format!(
            "{} {model_name} ({} runs): test accuracy {tm:.2} ± {ts:.2} %, val {vm:.2} %, epoch median {ep:.2} s, peak RSS {rss:.0} MiB",
            corpus.name, s.runs
        );
        let hd = model_kind == ModelKind::Hdgcn;
        let t = &s.train;
        // In three parts: one `json!` of every field would pass the macro
        // recursion limit of the examples that include this module.
        let mut json = serde_json::json!({
            "dataset": corpus.name,
            "model": model_name,
            "runs": s.runs,
            "split": s.split,
            "seed": s.seed,
            "k": (model_kind != ModelKind::Gcn).then_some(k),
            "supernodes": hd.then_some(s.supernodes),
            "routing": hd.then_some(s.routing.as_str()),
            "score_norm": hd.then_some(s.score_norm),
            "attn_dropout": hd.then_some(s.attn_dropout),
            "hidden": s.hidden,
            "layers": s.layers,
            "activation": activation.name(),
            "dropout": s.dropout,
        });
        let model_fields = serde_json::json!({
            "embed_dim": embed_dim,
            "embed_init_std": s.embed_init_std,
            "embeddings": embeddings.as_ref().map(|p| p.display().to_string()),
            "subwords": subwords.map(|c| format!("{}:{}", c.min_n, c.max_n)),
            "window": s.window,
            "readout": flag_name(&s.readout),
            "node_weights": flag_name(&s.node_weights),
            "node_weights_at": s.node_weights_at.to_string(),
            "position_encoding": s.position_encoding,
        });
        let train_fields = serde_json::json!({
            "epochs": t.epochs,
            "batch_size": t.batch_size,
            "optimizer": t.optimizer.to_string(),
            "lr": t.lr,
            "lr_schedule": t.lr_schedule.to_string(),
            "warmup_epochs": t.lr_warmup_epochs,
            "weight_decay": t.weight_decay,
            "patience": t.patience,
            "clip_grad_norm": t.clip_grad_norm,
            "label_smoothing": t.label_smoothing,
            "ema": t.ema_decay,
            "select_by": t.select_by.as_str(),
        });
        let result_fields = serde_json::json!({
            "test_acc_mean": tm,
            "test_acc_std": ts,
            "val_acc_mean": vm,
            "val_accs": acc.val,
            "val_loss_mean": acc.val_loss_mean(),
            "val_losses": acc.val_losses,
            "test_accs": acc.test,
            "best_epochs": acc.best_epochs,
            "epoch_s_median": ep,
            "attention_entropy": attention.to_json(),
            "peak_rss_mb": rss,
            "device": device.as_str(),
            "adapter": backend.name(),
        });
        if let Some(obj) = json.as_object_mut() {
            for part in [model_fields, train_fields, result_fields] {
                if let serde_json::Value::Object(fields) = part {
                    obj.extend(fields);
                }
            }
        }
        Ok(Report { line, json })
    }
}

/// Adds the first HD unit stack's attention maps over `docs` (in batches
/// of `batch_size`, evaluation mode) to `stats`: the trained model's maps
/// over the test documents, as the runner reports them.
///
/// # Errors
/// As [`GraphBatch::new`], [`GraphClassifier::conv_input`] and
/// [`hdgcn::conv::HdChebConv::forward_with_maps`].
pub fn attention_on_docs<B: Backend>(
    model: &mut GraphClassifier<B>,
    mut conv: DynamicConv<B>,
    docs: &[GraphSample],
    batch_size: usize,
    stats: &mut AttentionStats,
) -> hdgcn::Result<()> {
    model.set_training(false);
    conv.set_training(false);
    let backend = model.backend().clone();
    for chunk in docs.chunks(batch_size.max(1)) {
        let chunk: Vec<&GraphSample> = chunk.iter().collect();
        let batch = GraphBatch::new(&backend, &chunk)?;
        let tape = Tape::inference(&backend);
        let h = model.conv_input(&tape, batch.graph(), &batch.input(&tape), 0)?;
        let (_, maps) = conv.forward_with_maps(&tape, batch.graph(), &h)?;
        stats.add(&maps)?;
    }
    Ok(())
}
