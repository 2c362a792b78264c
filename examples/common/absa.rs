//! An aspect-based sentiment run described by settings: [`AbsaSettings`]
//! (read from a TOML file with [`AbsaSettings::from_toml_file`]) and
//! [`run_absa`], which runs it. The `absa` runner and the `reproduce` tool
//! both go through here.
//!
//! A settings file, keys at their defaults unless given:
//!
//! ```toml
//! runner = "absa"                  # optional; this value when given
//! dataset = "lap14"                # lap14 | rest14 | rest15 | rest16
//! model = "hdgcn"                  # hdgcn | hdgcn-static | gcn
//! readout = "gated"                # gated | aspect-mean
//! embeddings = "glove/glove.6B.50d.subset.txt"
//!
//! [train]                          # hdgcn::train::GraphTrainConfig
//! lr = 1e-3
//! ```

// Every example that includes `common` compiles this module; only the
// absa runner and reproduce use it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use clap::ValueEnum;
use hdgcn::Error;
use hdgcn::attention::Routing;
use hdgcn::backend::{Backend, Cpu, Device};
use hdgcn::conv::{GcnConv, GraphConv, HdChebConfig};
use hdgcn::data::absa::{self, AbsaSample, AbsaSplit, Polarity, aspect_graph};
use hdgcn::data::data_root;
use hdgcn::data::text::{load_glove, validation_split};
use hdgcn::metrics::ClassificationReport;
use hdgcn::models::{GraphClassifier, InputLayer};
use hdgcn::nn::{Activation, Embedding, Linear};
use hdgcn::optim::OptimizerKind;
use hdgcn::readout::{GatedReadout, MeanReadout, Readout};
use hdgcn::train::{
    GraphBatch, GraphFeatures, GraphSample, GraphTrainConfig, evaluate, train_graph_classifier,
};
use hdgcn::util::{mean_std, median, peak_rss_mb};
use rand::SeedableRng;

use super::text::resolve_data_path;
use super::{Accuracies, AttnFlags, DEFAULT_SUPERNODES, ModelKind, Report, flag_name};

/// The value of `runner` in an ABSA settings file.
pub const RUNNER: &str = "absa";

/// The `--dataset` names (`hdgcn::data::absa::load`).
pub const DATASETS: [&str; 4] = ["lap14", "rest14", "rest15", "rest16"];

/// The `--model` of the absa runner: the text runner's models without
/// ChebNet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum AbsaModel {
    /// HD-ChebConv with the MVCAttn transition.
    Hdgcn,
    /// HD-ChebConv with the static `Â²` transition.
    HdgcnStatic,
    /// Kipf & Welling's GCN.
    Gcn,
}

impl AbsaModel {
    /// The shared model kind.
    pub fn kind(self) -> ModelKind {
        match self {
            AbsaModel::Hdgcn => ModelKind::Hdgcn,
            AbsaModel::HdgcnStatic => ModelKind::HdgcnStatic,
            AbsaModel::Gcn => ModelKind::Gcn,
        }
    }
}

/// The readouts of the absa runner.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum AbsaReadout {
    /// The paper's gated readout over every node (`GatedReadout`:
    /// sigmoid(f1) ⊙ tanh(f2), then mean + max).
    Gated,
    /// The mean of the states of the aspect's tokens in the sentence
    /// (ASGCN's aspect mask): `MeanReadout` over a `NodeSet`.
    AspectMean,
}

/// Every setting of one ABSA experiment (all its runs). `Default` gives
/// the runner's defaults (the paper's settings); a TOML file sets any
/// subset ([`AbsaSettings::from_toml_file`]), the training loop's settings
/// in a `[train]` table.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AbsaSettings {
    /// Which runner the file is for: `"absa"` when given.
    pub runner: Option<String>,
    /// lap14 | rest14 | rest15 | rest16.
    pub dataset: String,
    /// hdgcn | hdgcn-static | gcn.
    #[serde(with = "super::text::by_value_enum")]
    pub model: AbsaModel,
    /// Chebyshev order K of the hdgcn models (even; default 6; not used by gcn).
    pub k: Option<usize>,
    /// Share of the training samples held out (seeded per run) for
    /// validation, in (0, 1); the test samples are never used to select.
    pub split: f64,
    /// Hidden width.
    pub hidden: usize,
    /// Graph convolutions before the readout (the paper uses 1).
    pub layers: usize,
    /// Non-linearity after every convolution and σ inside the HD-ChebConv.
    pub activation: String,
    /// Dropout probability of the model.
    pub dropout: f64,
    /// MVCAttn supernodes M (model hdgcn).
    pub supernodes: usize,
    /// MVCAttn routing: attention | votes (model hdgcn).
    pub routing: Routing,
    /// GloVe text file to initialise the embeddings (lower-cased lookup);
    /// its width sets the embedding width. A relative path that does not
    /// exist as given is looked up under the data root.
    pub embeddings: Option<PathBuf>,
    /// Width of embeddings trained from scratch (default: `hidden`).
    pub embed_dim: Option<usize>,
    /// Standard deviation of embeddings trained from scratch.
    pub embed_init_std: f64,
    /// gated | aspect-mean.
    #[serde(with = "super::text::by_value_enum")]
    pub readout: AbsaReadout,
    /// Minimum count of a word in the training samples to enter the vocabulary.
    pub min_count: usize,
    /// Independent runs (seeds seed, seed + 1, ...).
    pub runs: usize,
    /// Base seed: run r initialises, splits, shuffles and drops out with
    /// seed + r.
    pub seed: u64,
    /// The published number this experiment is compared with
    /// (`[reference]`); not read by the run.
    pub reference: Option<super::Reference>,
    /// The training loop (`[train]`; `seed` and `quiet` are the run's).
    pub train: GraphTrainConfig,
}

/// The training settings when not given: the paper's optimiser
/// (AdaBelief) at lr 1e-3, the point that validation chose for every ABSA
/// file of `configs/paper` (the grid of its README: the paper's 1e-5
/// under-trains in this budget), no weight decay, batches of 32 samples
/// (ASGCN's; the paper gives none), at most 100 epochs with patience 10 on
/// validation accuracy (`configs/paper/README.md`).
pub fn default_absa_train() -> GraphTrainConfig {
    GraphTrainConfig {
        epochs: 100,
        batch_size: 32,
        lr: 1e-3,
        optimizer: OptimizerKind::AdaBelief,
        patience: Some(10),
        ..GraphTrainConfig::default()
    }
}

impl Default for AbsaSettings {
    fn default() -> Self {
        AbsaSettings {
            runner: None,
            dataset: "lap14".into(),
            model: AbsaModel::Hdgcn,
            k: None,
            split: 0.1,
            hidden: 64,
            layers: 1,
            activation: "relu".into(),
            dropout: 0.5,
            supernodes: DEFAULT_SUPERNODES,
            routing: Routing::Attention,
            embeddings: None,
            embed_dim: None,
            embed_init_std: 1.0,
            readout: AbsaReadout::Gated,
            min_count: 1,
            runs: 5,
            seed: 0,
            reference: None,
            train: default_absa_train(),
        }
    }
}

/// An `InvalidConfig` error about the setting `key`.
fn bad(key: &str, problem: impl std::fmt::Display) -> Error {
    Error::InvalidConfig(format!("key `{key}`: {problem}"))
}

impl AbsaSettings {
    /// Reads the settings of a TOML file: keys it omits keep the runner's
    /// defaults (those of `[train]` too), then [`AbsaSettings::validate`].
    ///
    /// # Errors
    /// [`Error::MissingFile`] or [`Error::Io`] for a file that cannot be
    /// read; [`Error::InvalidConfig`] naming the file, the key and the
    /// problem for an unknown key, a wrong type or an invalid value.
    pub fn from_toml_file(path: &Path) -> hdgcn::Result<Self> {
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
        let settings = Self::from_toml_str(&text).map_err(in_file)?;
        settings.validate().map_err(in_file)?;
        Ok(settings)
    }

    /// The settings of a TOML document (not validated): its keys, those of
    /// `[train]` one by one, over the runner's defaults.
    fn from_toml_str(text: &str) -> hdgcn::Result<Self> {
        let describe = |e: toml::de::Error| {
            let line = e
                .span()
                .map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1);
            Error::InvalidConfig(match line {
                Some(l) => format!("line {l}: {}", e.message().trim()),
                None => e.message().trim().to_owned(),
            })
        };
        // Read once as it stands, for unknown keys and wrong types.
        let _: AbsaSettings = toml::from_str(text).map_err(describe)?;
        let table: toml::Table = toml::from_str(text).map_err(describe)?;
        let mut merged = toml::Table::try_from(AbsaSettings::default())
            .map_err(|e| bad("train", e.to_string()))?;
        super::overlay(&mut merged, &table);
        merged
            .try_into()
            .map_err(|e: toml::de::Error| Error::InvalidConfig(e.message().to_owned()))
    }

    /// The Chebyshev order: `k`, else 6.
    pub fn k(&self) -> usize {
        self.k.unwrap_or(6)
    }

    /// The `activation` setting, parsed.
    pub fn activation(&self) -> hdgcn::Result<Activation> {
        self.activation
            .parse()
            .map_err(|e: Error| bad("activation", e))
    }

    fn attn(&self) -> AttnFlags {
        AttnFlags {
            supernodes: self.supernodes,
            routing: self.routing,
            score_norm: false,
            attn_dropout: 0.0,
        }
    }

    /// Checks every setting before anything is loaded or trained.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the key and the problem;
    /// [`Error::OverBudget`] for a model whose layers alone pass the
    /// memory budget.
    pub fn validate(&self) -> hdgcn::Result<()> {
        if let Some(r) = &self.runner
            && r != RUNNER
        {
            return Err(bad(
                "runner",
                format!("this file is for {r:?}, not {RUNNER:?}"),
            ));
        }
        if !DATASETS.contains(&self.dataset.as_str()) {
            return Err(bad(
                "dataset",
                format!(
                    "unknown ABSA dataset {:?} (expected {})",
                    self.dataset,
                    DATASETS.join(" | ")
                ),
            ));
        }
        if self.runs == 0 {
            return Err(bad("runs", "must be at least 1"));
        }
        if self.seed.checked_add(self.runs as u64 - 1).is_none() {
            return Err(bad(
                "seed",
                format!(
                    "{} runs from seed {} pass the largest seed",
                    self.runs, self.seed
                ),
            ));
        }
        if self.layers == 0 {
            return Err(bad("layers", "must be at least 1"));
        }
        if self.hidden == 0 {
            return Err(bad("hidden", "must be at least 1"));
        }
        if self.embed_dim == Some(0) {
            return Err(bad("embed_dim", "must be at least 1"));
        }
        match (self.model, self.k) {
            (AbsaModel::Gcn, Some(_)) => return Err(bad("k", "gcn has no Chebyshev order")),
            (_, Some(k)) if k == 0 || k % 2 == 1 => {
                return Err(bad("k", format!("must be even and at least 2, got {k}")));
            }
            _ => {}
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
        self.check_memory(None, 0)
    }

    /// Checks the estimate of one run's memory against the budget, as the
    /// text runner does (`TextSettings::check_memory`): the convolutions,
    /// the readout and classifier, and once the data is read (`vocab` =
    /// `Some((words, width))`) the embedding table and the activations of
    /// the largest batch of `batch_nodes` nodes.
    ///
    /// # Errors
    /// [`Error::OverBudget`] naming the size settings.
    pub fn check_memory(
        &self,
        vocab: Option<(usize, usize)>,
        batch_nodes: usize,
    ) -> hdgcn::Result<()> {
        let (h, k) = (self.hidden, self.k());
        let d = vocab.map_or(self.embed_dim.unwrap_or(h), |(_, d)| d);
        let attn = self.attn();
        let model = self.model.kind();
        let first = attn.layer_cost(model, d, h, k);
        let rest = attn.layer_cost(model, h, h, k);
        let h64 = h as u64;
        let classes = Polarity::NUM_CLASSES as u64;
        let head = h64
            .checked_mul(h64)
            .and_then(|hh| hh.checked_add(h64)?.checked_mul(4))
            .and_then(|r| r.checked_add(h64.checked_add(1)?.checked_mul(classes)?));
        let embed = vocab.map_or(Some(0), |(v, d)| (v as u64).checked_mul(d as u64));
        let layers = self.layers as u64;
        let params = first.zip(rest).and_then(|(f, r)| {
            r.params
                .checked_mul(layers - 1)?
                .checked_add(f.params)?
                .checked_add(head?)?
                .checked_add(embed?)
        });
        let input = 2 * (d as u64).div_ceil(h64);
        let terms = rest.and_then(|r| r.terms.checked_mul(layers)?.checked_add(4 + input));
        let mut settings = format!("hidden {h}, layers {layers}");
        if model != ModelKind::Gcn {
            settings.push_str(&format!(", k {k}"));
        }
        if model == ModelKind::Hdgcn {
            settings.push_str(&format!(", supernodes {}", self.supernodes));
        }
        let detail = match vocab {
            Some((v, d)) => format!(
                "model {} on {}, {v} words of {d} dimensions",
                flag_name(&self.model),
                self.dataset
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
            batch_nodes as u64,
            h64,
            terms,
            0,
        )
    }
}

/// The graph sample of one ABSA sample: the §9 graph
/// (`hdgcn::data::absa::aspect_graph`), the lower-cased vocabulary ids of
/// its nodes and, with `aspect_nodes`, the aspect's tokens in the sentence
/// as the readout's nodes.
pub fn graph_sample(
    s: &AbsaSample,
    vocab: &hdgcn::data::text::Vocab,
    aspect_nodes: bool,
) -> hdgcn::Result<GraphSample> {
    let g = GraphSample::new(
        aspect_graph(s)?,
        GraphFeatures::Tokens(s.lookup_ids(vocab)),
        s.label(),
    )?;
    if aspect_nodes {
        g.with_readout_nodes(s.aspect.clone().collect())
    } else {
        Ok(g)
    }
}

/// Runs the experiment `s` (all its runs) on `backend`: loads the dataset
/// from `data_dir` (default `$HDGCN_DATA`, else `./data`), trains each run
/// with validation-only selection, then reads the test samples once, at
/// the selected epoch, for accuracy and macro-F1.
///
/// # Errors
/// [`Error::InvalidConfig`] for invalid settings (before anything is
/// loaded); data, model and training errors.
pub fn run_absa<B: Backend<Elem = f32>>(
    s: &AbsaSettings,
    backend: &B,
    device: Device,
    data_dir: Option<&Path>,
    quiet: bool,
) -> hdgcn::Result<Report> {
    s.validate()?;
    let activation = s.activation()?;
    let model_kind = s.model.kind();
    let root = data_root(data_dir);
    let train_raw = absa::load(&root, &s.dataset, AbsaSplit::Train)?;
    let test_raw = absa::load(&root, &s.dataset, AbsaSplit::Test)?;
    let vocab = absa::build_vocab(&train_raw, s.min_count);
    let aspect_nodes = s.readout == AbsaReadout::AspectMean;
    let to_graphs = |raw: &[AbsaSample]| -> hdgcn::Result<Vec<GraphSample>> {
        raw.iter()
            .map(|x| graph_sample(x, &vocab, aspect_nodes))
            .collect()
    };
    let (train_all, test) = (to_graphs(&train_raw)?, to_graphs(&test_raw)?);
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
    let mut sizes: Vec<usize> = train_all.iter().map(|x| x.graph.num_nodes()).collect();
    sizes.sort_unstable_by(|a, b| b.cmp(a));
    s.check_memory(
        Some((vocab.len(), embed_dim)),
        sizes.iter().take(s.train.batch_size).sum(),
    )?;
    let k = s.k();
    let attn = s.attn();
    let build_model = |seed: u64| -> hdgcn::Result<GraphClassifier<B>> {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let input = match &glove {
            Some((table, _)) => Embedding::from_array(backend, table)?,
            None => {
                Embedding::with_std(backend, vocab.len(), embed_dim, s.embed_init_std, &mut rng)?
            }
        };
        let h = s.hidden;
        let mut convs: Vec<Box<dyn GraphConv<B>>> = Vec::with_capacity(s.layers);
        for layer in 0..s.layers {
            let d_in = if layer == 0 { embed_dim } else { h };
            convs.push(match model_kind {
                ModelKind::Hdgcn | ModelKind::HdgcnStatic => {
                    let mut cfg = HdChebConfig::in_model(d_in, h, k, s.dropout);
                    cfg.activation = activation;
                    attn.hd_cheb_conv(backend, model_kind, &cfg, &mut rng)?
                }
                _ => Box::new(GcnConv::new(backend, d_in, h, &mut rng)?),
            });
        }
        let readout: Box<dyn Readout<B>> = match s.readout {
            AbsaReadout::Gated => Box::new(GatedReadout::new(backend, h, &mut rng)?),
            AbsaReadout::AspectMean => Box::new(MeanReadout),
        };
        let classifier = Linear::new(backend, h, Polarity::NUM_CLASSES, true, &mut rng)?;
        GraphClassifier::new(
            Some(InputLayer::Embedding(input)),
            convs,
            readout,
            classifier,
            s.dropout,
            activation,
        )
    };
    let train_idx: Vec<usize> = (0..train_all.len()).collect();
    let (mut acc, mut f1s, mut epochs) = (Accuracies::default(), Vec::new(), Vec::new());
    for r in 0..s.runs {
        let seed = s.seed + r as u64;
        let (tr_idx, va_idx) = validation_split(&train_idx, s.split, seed)?;
        let pick = |idx: &[usize]| {
            idx.iter()
                .map(|&i| train_all[i].clone())
                .collect::<Vec<_>>()
        };
        let (tr, va) = (pick(&tr_idx), pick(&va_idx));
        let mut model = build_model(seed)?;
        let cfg = GraphTrainConfig {
            seed,
            quiet,
            ..s.train.clone()
        };
        // Selection sees the validation samples only: the loop's "test"
        // set is the validation set, and the test samples are read once
        // below, at the selected epoch.
        let rep = train_graph_classifier(&mut model, &tr, &va, &va, &cfg)?;
        let scores = test_scores(&mut model, &test, s.train.batch_size)?;
        if !quiet {
            for (e, h) in rep.history.iter().enumerate() {
                eprintln!(
                    "run {r} epoch {e}: train loss {:.4}  val {:.2}  val loss {:.4}",
                    h.train_loss,
                    100.0 * h.val_acc,
                    h.val_loss
                );
            }
            eprintln!(
                "run {r}: best epoch {}  val {:.2}  test {:.2}  macro-F1 {:.2}  epoch {:.1} s",
                rep.best_epoch,
                100.0 * rep.val_acc,
                100.0 * scores.accuracy,
                100.0 * scores.macro_f1,
                median(&rep.epoch_secs)
            );
        }
        acc.push((rep.val_acc, rep.val_loss), scores.accuracy, rep.best_epoch);
        f1s.push(100.0 * scores.macro_f1);
        epochs.extend(rep.epoch_secs);
    }
    let (tm, ts, vm) = acc.summary();
    let (fm, fs) = mean_std(&f1s);
    let ep = median(&epochs);
    let rss = peak_rss_mb().unwrap_or(f64::NAN);
    let model_name = flag_name(&s.model);
    let line = format!(
        "{} {model_name} ({} runs): test accuracy {tm:.2} ± {ts:.2} %, macro-F1 {fm:.2} ± {fs:.2} %, val {vm:.2} %, epoch median {ep:.2} s, peak RSS {rss:.0} MiB",
        s.dataset, s.runs
    );
    let hd = model_kind == ModelKind::Hdgcn;
    let t = &s.train;
    let mut json = serde_json::json!({
        "dataset": s.dataset,
        "model": model_name,
        "runs": s.runs,
        "split": s.split,
        "seed": s.seed,
        "k": (model_kind != ModelKind::Gcn).then_some(k),
        "supernodes": hd.then_some(s.supernodes),
        "routing": hd.then_some(s.routing.as_str()),
        "hidden": s.hidden,
        "layers": s.layers,
        "activation": activation.name(),
        "dropout": s.dropout,
        "readout": flag_name(&s.readout),
    });
    let data_fields = serde_json::json!({
        "embed_dim": embed_dim,
        "embeddings": embeddings.as_ref().map(|p| p.display().to_string()),
        "glove_found": glove.as_ref().map(|(_, f)| *f),
        "vocab": vocab.len(),
        "train_samples": train_all.len(),
        "test_samples": test.len(),
        "epochs": t.epochs,
        "batch_size": t.batch_size,
        "optimizer": t.optimizer.to_string(),
        "lr": t.lr,
        "weight_decay": t.weight_decay,
        "patience": t.patience,
        "select_by": t.select_by.as_str(),
    });
    let result_fields = serde_json::json!({
        "test_acc_mean": tm,
        "test_acc_std": ts,
        "test_f1_mean": fm,
        "test_f1_std": fs,
        "val_acc_mean": vm,
        "val_accs": acc.val,
        "val_loss_mean": acc.val_loss_mean(),
        "test_accs": acc.test,
        "test_f1s": f1s,
        "best_epochs": acc.best_epochs,
        "epoch_s_median": ep,
        "peak_rss_mb": rss,
        "device": device.as_str(),
        "adapter": backend.name(),
    });
    if let Some(obj) = json.as_object_mut() {
        for part in [data_fields, result_fields] {
            if let serde_json::Value::Object(fields) = part {
                obj.extend(fields);
            }
        }
    }
    Ok(Report { line, json })
}

/// Accuracy and macro-F1 of `model` on `samples` (evaluation mode).
fn test_scores<B: Backend>(
    model: &mut GraphClassifier<B>,
    samples: &[GraphSample],
    batch_size: usize,
) -> hdgcn::Result<ClassificationReport> {
    let backend = model.backend().clone();
    let refs: Vec<&GraphSample> = samples.iter().collect();
    let batches = refs
        .chunks(batch_size.max(1))
        .map(|c| GraphBatch::new(&backend, c))
        .collect::<hdgcn::Result<Vec<_>>>()?;
    let e = evaluate(model, &batches)?;
    ClassificationReport::new(&e.predictions, &e.targets, Polarity::NUM_CLASSES)
}
