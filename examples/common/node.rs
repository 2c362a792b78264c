//! A Planetoid node-classification run as settings ([`NodeSettings`], one
//! TOML file under `configs/planetoid/`) and the run itself
//! ([`run_node`]): what the `planetoid` runner and `reproduce` share.
//!
//! ```toml
//! runner = "planetoid"
//! dataset = "cora"
//! model = "gcn"
//! runs = 10
//!
//! [train]
//! epochs = 200
//! lr = 0.01
//! ```

use std::path::{Path, PathBuf};
use std::str::FromStr;

use clap::ValueEnum;
use hdgcn::attention::Routing;
use hdgcn::autograd::{Gradients, Param, SparseMatrix, Tape};
use hdgcn::backend::{Backend, BinaryOp, Cpu, Device, UnaryOp};
use hdgcn::checkpoint::{load_checkpoint, save_checkpoint};
use hdgcn::conv::{DeviceGraph, GinConv, GraphConv, HdChebConfig, SageConv};
use hdgcn::data::{Planetoid, UnlabelledNodes, data_root, geom_gcn_dir, planetoid_dir};
use hdgcn::graph::Graph;
use hdgcn::models::{AppnpNet, Gcn2Net, NodeClassifier};
use hdgcn::nn::{Activation, Features, Mlp, Module};
use hdgcn::optim::OptimizerKind;
use hdgcn::train::{
    Hook, NodeBatch, NodeStep, NodeTask, NodeTrainConfig, NodeTrainReport, StepContext, Trainer,
    evaluate, evaluate_nodes, train_node_classifier,
};
use hdgcn::util::{median, peak_rss_mb};
use hdgcn::{Error, Result};
use rand::SeedableRng;

use super::{
    Accuracies, AttentionStats, AttnFlags, DEFAULT_SUPERNODES, DynamicConv, ModelKind, Report,
    flag_name,
};

/// The `runner` a planetoid config names.
pub const RUNNER: &str = "planetoid";

/// The datasets a planetoid run reads.
const DATASETS: [&str; 3] = ["cora", "citeseer", "pubmed"];

/// Nodes, features, classes and stored nonzeros (features plus directed
/// edges) of each dataset, for the memory estimate made before any data is
/// read ([`NodeSettings::check_memory`]).
const SIZES: [(&str, [usize; 4]); 3] = [
    ("cora", [2708, 1433, 7, 49_216 + 10_556]),
    ("citeseer", [3327, 3703, 6, 105_165 + 9_104]),
    ("pubmed", [19_717, 500, 3, 988_031 + 88_648]),
];

/// Bytes per stored nonzero of the loaded data: the raw and the normalised
/// features and the device copy (index and value each), and the graph's
/// normalised adjacency.
const BYTES_PER_NONZERO: u64 = 48;

/// How many geom-gcn splits each dataset has.
const GEOM_GCN_SPLITS: usize = 10;

/// Epochs and patience of the geom-gcn splits when the settings give none
/// (GCNII's full-supervised protocol).
const FULL_EPOCHS: usize = 1000;
const FULL_PATIENCE: usize = 100;

/// Which train / validation / test nodes a run uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NodeSplit {
    /// The Planetoid split (20 labels per class, 500 validation, 1000 test).
    #[default]
    Public,
    /// The geom-gcn 60/20/20 splits: run `r` uses split `r mod 10`.
    Full,
    /// One geom-gcn split (`geom-gcn:N`, N in 0..10) for every run.
    GeomGcn(usize),
}

impl NodeSplit {
    /// The geom-gcn split of run `run`; `None` on the public split.
    pub fn geom_gcn_index(self, run: usize) -> Option<usize> {
        match self {
            NodeSplit::Public => None,
            NodeSplit::Full => Some(run % GEOM_GCN_SPLITS),
            NodeSplit::GeomGcn(i) => Some(i),
        }
    }
}

impl FromStr for NodeSplit {
    type Err = Error;

    /// `public`, `full` or `geom-gcn:N` (N in 0..10), in any case.
    fn from_str(s: &str) -> Result<Self> {
        let lower = s.to_ascii_lowercase();
        let bad = || {
            Error::InvalidConfig(format!(
                "unknown split '{s}' (public | full | geom-gcn:N with N in 0..{GEOM_GCN_SPLITS})"
            ))
        };
        match lower.as_str() {
            "public" => Ok(NodeSplit::Public),
            "full" => Ok(NodeSplit::Full),
            other => {
                let n = other.strip_prefix("geom-gcn:").ok_or_else(bad)?;
                match n.parse::<usize>() {
                    Ok(i) if i < GEOM_GCN_SPLITS => Ok(NodeSplit::GeomGcn(i)),
                    _ => Err(bad()),
                }
            }
        }
    }
}

impl std::fmt::Display for NodeSplit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NodeSplit::Public => f.write_str("public"),
            NodeSplit::Full => f.write_str("full"),
            NodeSplit::GeomGcn(i) => write!(f, "geom-gcn:{i}"),
        }
    }
}

impl serde::Serialize for NodeSplit {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for NodeSplit {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let s = <String as serde::Deserialize>::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl serde::Serialize for ModelKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(&flag_name(self))
    }
}

impl<'de> serde::Deserialize<'de> for ModelKind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let s = <String as serde::Deserialize>::deserialize(d)?;
        ModelKind::from_str(&s, true).map_err(|_| {
            let names: Vec<String> = ModelKind::value_variants().iter().map(flag_name).collect();
            serde::de::Error::custom(format!("unknown model '{s}' ({})", names.join(" | ")))
        })
    }
}

/// Output layer of the hdgcn models.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Head {
    /// `Linear(hidden -> classes)` after dropout (the paper's classifier).
    Linear,
    /// `GcnConv(hidden -> classes)` after the activation and dropout
    /// (`NodeClassifier::with_gcn_head`).
    Gcn,
}

/// Which of the split-dependent loop settings were given (by a file or a
/// flag); the others follow the split's protocol.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Given {
    epochs: bool,
    patience: bool,
}

/// The learning rate of the hdgcn models when none is given: the paper's
/// (Section 4: AdaBelief "with a learning rate 1e-5").
pub const HD_LR: f64 = 1e-5;

/// The training loop of the hdgcn models when not given: the paper's
/// optimiser and learning rate (AdaBelief, [`HD_LR`]) and no weight decay
/// (the paper has none); epochs and patience follow the split.
pub fn hd_node_train() -> NodeTrainConfig {
    NodeTrainConfig {
        optimizer: OptimizerKind::AdaBelief,
        lr: HD_LR,
        weight_decay: 0.0,
        ..NodeTrainConfig::default()
    }
}

/// What a runner's flags say of a run before its settings are read: the
/// keys on which the defaults depend ([`NodeSettings::for_run`]); `None`
/// where the flag is not given (the file's value, else the default).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunKey {
    /// `--model`.
    pub model: Option<ModelKind>,
    /// `--dataset`.
    pub dataset: Option<String>,
    /// `--split`.
    pub split: Option<NodeSplit>,
}

/// Every setting of a planetoid run: what a `configs/planetoid/*.toml`
/// file holds (keys as the field names, the loop settings in a `[train]`
/// table) and what the `planetoid` flags override. A key left out keeps
/// its default, the `planetoid` example's default for the model
/// ([`NodeSettings::for_model`]).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NodeSettings {
    /// The runner the file is for: `"planetoid"` when given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runner: Option<String>,
    /// `cora`, `citeseer` or `pubmed`.
    pub dataset: String,
    /// `public`, `full` (geom-gcn splits, run r uses split r mod 10) or
    /// `geom-gcn:N` (split N for every run). On a geom-gcn split
    /// `train.epochs` and `train.patience` default to 1000 and 100
    /// (GCNII's full-supervised protocol) unless given.
    pub split: NodeSplit,
    /// `gcn`, `cheb`, `hdgcn`, `hdgcn-static`, `sage`, `gin`, `gcnii` or
    /// `appnp`.
    pub model: ModelKind,
    /// Chebyshev terms (cheb; default 3), the order K (hdgcn models:
    /// even; default 6) or APPNP's propagation steps K (default 10). Not
    /// used by the other models.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub k: Option<usize>,
    /// Hidden width (default 16; 64 for the hdgcn models, as the paper,
    /// and for gin, gcnii and appnp, as PyG's examples; gat and gatv2: 8
    /// per head, as PyG's examples/gat.py).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hidden: Option<usize>,
    /// Attention heads of the first layer, concatenated (gat and gatv2
    /// only; default 8). The output layer has one head.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub heads: Option<usize>,
    /// GCNII layers (gcnii only; default 64, PyG's `gcn2_cora.py`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub layers: Option<usize>,
    /// GCNII's initial-residual weight or APPNP's teleport probability α
    /// (gcnii and appnp; default 0.1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alpha: Option<f64>,
    /// GCNII's θ of `β_ℓ = ln(θ/ℓ + 1)` (gcnii only; default 0.5).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub theta: Option<f64>,
    /// Weight decay of GCNII's convolutions (gcnii only; default 0.01, PyG's
    /// `gcn2_cora.py`); `train.weight_decay` is then the linear layers'.
    /// Added to the gradient (L2, as PyTorch's Adam): use it with Adam or SGD.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conv_weight_decay: Option<f64>,
    /// Dropout probability, in `[0, 1)`.
    pub dropout: f64,
    /// Independent runs, with seeds `seed`, `seed + 1`, ...
    pub runs: usize,
    /// Seed of the first run.
    pub seed: u64,
    /// Keep the raw bag-of-words features (default: row-normalised, as
    /// PyG's `NormalizeFeatures` and Kipf & Welling).
    pub raw_features: bool,
    /// Nodes the files give no label (CiteSeer's 15 featureless nodes,
    /// which the geom-gcn splits put in their masks): "class-zero" (the
    /// default: class 0, as PyG and geom-gcn) or "drop" (left out of the
    /// masks). A note on stderr says which nodes and what was done.
    pub unlabelled: UnlabelledNodes,
    /// Supernodes M of MVCAttn (hdgcn only; the paper's 10).
    pub supernodes: usize,
    /// MVCAttn routing (hdgcn only): `attention` or `votes`.
    pub routing: Routing,
    /// LayerNorm on the node states and on Ŝ where they enter the MVCAttn
    /// scores (hdgcn only; `MvcAttnConfig::score_norm`).
    pub score_norm: bool,
    /// Dropout on MVCAttn's attention maps, in `[0, 1)` (hdgcn only).
    pub attn_dropout: f64,
    /// Output layer of the hdgcn models: `linear` (default) or `gcn`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub head: Option<Head>,
    /// Non-linearity of the hdgcn models (`nn::Activation` names: relu,
    /// leaky_relu, elu, gelu, tanh, sigmoid, identity; default relu).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub activation: Option<String>,
    /// The training loop (`[train]`). `train.seed` and `train.quiet` are
    /// not settings of a run: seeds come from `seed`, the progress bar
    /// from the runner's `--quiet`.
    pub train: NodeTrainConfig,
    /// The published number this experiment is compared with
    /// (`[reference]`: `accuracy`, `source`); not read by the run.
    pub reference: Option<super::Reference>,
    #[serde(skip)]
    given: Given,
}

impl Default for NodeSettings {
    fn default() -> Self {
        NodeSettings {
            runner: None,
            dataset: "cora".into(),
            split: NodeSplit::Public,
            model: ModelKind::Gcn,
            k: None,
            hidden: None,
            heads: None,
            layers: None,
            alpha: None,
            theta: None,
            conv_weight_decay: None,
            dropout: 0.5,
            runs: 10,
            seed: 0,
            raw_features: false,
            unlabelled: UnlabelledNodes::ClassZero,
            supernodes: DEFAULT_SUPERNODES,
            routing: Routing::Attention,
            score_norm: false,
            attn_dropout: 0.0,
            head: None,
            activation: None,
            train: NodeTrainConfig::default(),
            reference: None,
            given: Given::default(),
        }
    }
}

impl NodeSettings {
    /// The runner's defaults for `model`: those of [`Default`] (Kipf &
    /// Welling's GCN protocol) for gcn and cheb; for hdgcn and
    /// hdgcn-static the paper's training settings ([`hd_node_train`]:
    /// AdaBelief, lr 1e-5, no weight decay), with K = 6, hidden 64 and
    /// M = 10 supernodes. [`NodeSettings::for_run`] adds what depends on
    /// the dataset and split (`configs/paper/table5-*.toml` are its
    /// settings on the full-supervised split).
    pub fn for_model(model: ModelKind) -> Self {
        let mut s = NodeSettings {
            model,
            ..NodeSettings::default()
        };
        if s.is_hd() {
            s.train = hd_node_train();
        }
        match model {
            // PyG's examples/gat.py: dropout 0.6 on the inputs and the
            // attention, Adam at lr 0.005, weight decay 5e-4 on every layer.
            ModelKind::Gat | ModelKind::Gatv2 => {
                s.dropout = 0.6;
                s.train.lr = 0.005;
                s.train.decay_first_layer_only = false;
            }
            // PyG's benchmark/citation/appnp.py: Adam, lr 0.01, weight
            // decay 5e-4 on every parameter, dropout 0.5, 200 epochs.
            ModelKind::Appnp => s.train.decay_first_layer_only = false,
            // No PyG example on Planetoid: GCN's loop, with weight decay on
            // every parameter as PyG's SAGE and GIN scripts pass
            // `model.parameters()`.
            ModelKind::Sage | ModelKind::Gin => s.train.decay_first_layer_only = false,
            // PyG's examples/gcn2_cora.py: dropout 0.6, Adam, lr 0.01, weight
            // decay 5e-4 on the linears (0.01 on the convolutions:
            // `conv_weight_decay`), 1000 epochs.
            ModelKind::Gcnii => {
                s.dropout = 0.6;
                s.train.decay_first_layer_only = false;
                s.train.epochs = 1000;
            }
            _ => {}
        }
        s
    }

    /// The runner's defaults for `model` on `dataset` and `split`: those
    /// of [`NodeSettings::for_model`], except that on the geom-gcn splits
    /// hdgcn and hdgcn-static take the learning rate and dropout chosen on
    /// validation for the dataset's row of the paper's Table 5
    /// ([`super::paper_row_point`]: Cora lr 1e-3, PubMed lr 1e-2 and
    /// dropout 0.3), so that `--dataset D --model hdgcn --split full` is
    /// `configs/paper/table5-D-hdgcn.toml`. CiteSeer, which has no run
    /// here, keeps the paper's settings.
    pub fn for_run(model: ModelKind, dataset: &str, split: NodeSplit) -> Self {
        let mut s = NodeSettings {
            dataset: dataset.to_owned(),
            split,
            ..NodeSettings::for_model(model)
        };
        if s.is_hd()
            && split != NodeSplit::Public
            && let Some(point) = super::paper_row_point("planetoid", dataset)
        {
            s.train.lr = point.lr;
            s.dropout = point.dropout;
        }
        s
    }
}

/// `what: problem` as [`Error::InvalidConfig`].
fn invalid(key: &str, problem: impl std::fmt::Display) -> Error {
    Error::InvalidConfig(format!("{key}: {problem}"))
}

/// The message of an [`Error::InvalidConfig`], else the error's text.
fn message(e: Error) -> String {
    match e {
        Error::InvalidConfig(m) => m,
        other => other.to_string(),
    }
}

impl NodeSettings {
    /// Reads the settings of `path` (TOML) and checks all of them
    /// ([`NodeSettings::validate`]) before anything is loaded or trained.
    ///
    /// # Errors
    /// [`Error::Io`] when the file cannot be read; [`Error::InvalidConfig`]
    /// naming the file, the key and the problem for a syntax error, an
    /// unknown key, a value of the wrong type or an invalid value.
    pub fn from_toml_file(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        Self::from_toml_str(&text, &path.display().to_string())
    }

    /// [`NodeSettings::from_toml_file`] with what the runner's flags give
    /// instead of the file's (`--model`, `--dataset`, `--split`): the keys
    /// the file leaves out take the defaults of the run's model, dataset
    /// and split ([`NodeSettings::for_run`]).
    ///
    /// # Errors
    /// As [`NodeSettings::from_toml_file`].
    pub fn from_toml_file_for(path: &Path, given: &RunKey) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
        Self::from_toml_str_for(&text, &path.display().to_string(), given)
    }

    /// [`NodeSettings::from_toml_file`] on the text of a file named `file`
    /// (in the messages).
    pub fn from_toml_str(text: &str, file: &str) -> Result<Self> {
        Self::from_toml_str_for(text, file, &RunKey::default())
    }

    /// [`NodeSettings::from_toml_file_for`] on the text of a file named
    /// `file`.
    fn from_toml_str_for(text: &str, file: &str, given: &RunKey) -> Result<Self> {
        // Read once as it stands, for messages that point into the file.
        let parsed: NodeSettings = toml::from_str(text).map_err(|e| {
            let key = e
                .span()
                .and_then(|span| key_at(text, span.start))
                .map(|k| format!("key `{k}`: "))
                .unwrap_or_default();
            let (line, col) = e
                .span()
                .map(|span| line_col(text, span.start))
                .unwrap_or((1, 1));
            Error::InvalidConfig(format!(
                "{file}:{line}:{col}: {key}{}",
                e.message()
                    .trim_end()
                    .trim_start_matches("invalid configuration: ")
            ))
        })?;
        // Which loop keys the file gives (the split's protocol fills the others).
        let table: toml::Table = toml::from_str(text)
            .map_err(|e| Error::InvalidConfig(format!("{file}: {}", e.message())))?;
        // The keys the file gives, over the defaults of the run's model,
        // dataset and split.
        let model = given.model.unwrap_or(parsed.model);
        let dataset = given.dataset.clone().unwrap_or(parsed.dataset);
        let split = given.split.unwrap_or(parsed.split);
        let mut merged = toml::Table::try_from(NodeSettings::for_run(model, &dataset, split))
            .map_err(|e| Error::InvalidConfig(format!("{file}: {e}")))?;
        super::overlay(&mut merged, &table);
        merged.insert("model".into(), flag_name(&model).into());
        let mut s: NodeSettings = merged.try_into().map_err(|e: toml::de::Error| {
            Error::InvalidConfig(format!("{file}: {}", e.message()))
        })?;
        let train = table.get("train").and_then(|t| t.as_table());
        let has = |key: &str| train.is_some_and(|t| t.contains_key(key));
        for (key, instead) in [
            ("seed", "the top-level `seed` (run r uses seed + r)"),
            ("quiet", "the runner's --quiet"),
        ] {
            if has(key) {
                return Err(Error::InvalidConfig(format!(
                    "{file}: key `train.{key}`: not a setting of a run; use {instead}"
                )));
            }
        }
        s.given = Given {
            epochs: has("epochs"),
            patience: has("patience"),
        };
        s.validate().map_err(|e| match e {
            Error::OverBudget {
                what,
                needed,
                budget,
            } => Error::OverBudget {
                what: format!("{file}: {what}"),
                needed,
                budget,
            },
            e => Error::InvalidConfig(format!("{file}: key {}", message(e))),
        })?;
        Ok(s)
    }

    /// Sets `train.epochs` (which then no longer follows the split's protocol).
    pub fn set_epochs(&mut self, epochs: usize) {
        self.train.epochs = epochs;
        self.given.epochs = true;
    }

    /// Whether the model is one of the HD-ChebConv models.
    pub fn is_hd(&self) -> bool {
        matches!(self.model, ModelKind::Hdgcn | ModelKind::HdgcnStatic)
    }

    /// Whether the model reads `k` (cheb and the hdgcn models: the
    /// Chebyshev order; appnp: its propagation steps).
    pub fn has_k(&self) -> bool {
        matches!(
            self.model,
            ModelKind::Cheb | ModelKind::Hdgcn | ModelKind::HdgcnStatic | ModelKind::Appnp
        )
    }

    /// Whether the model is gat or gatv2.
    pub fn is_gat(&self) -> bool {
        matches!(self.model, ModelKind::Gat | ModelKind::Gatv2)
    }

    /// `heads`, or 8 (gat and gatv2; 1 for the other models, which have
    /// no heads).
    pub fn heads(&self) -> usize {
        self.heads.unwrap_or(if self.is_gat() { 8 } else { 1 })
    }

    /// `k`, or the model's default (3 for cheb, 6 for the hdgcn models,
    /// 10 for appnp).
    pub fn k(&self) -> usize {
        self.k.unwrap_or(match self.model {
            ModelKind::Appnp => 10,
            _ if self.is_hd() => 6,
            _ => 3,
        })
    }

    /// `hidden`, or the model's default (16; 64 for the hdgcn models,
    /// gin, gcnii and appnp; 8 per head for gat and gatv2).
    pub fn hidden(&self) -> usize {
        let wide = self.is_hd()
            || matches!(
                self.model,
                ModelKind::Gin | ModelKind::Gcnii | ModelKind::Appnp
            );
        self.hidden.unwrap_or(if wide {
            64
        } else if self.is_gat() {
            8
        } else {
            16
        })
    }

    /// GCNII's layers (default 64).
    pub fn layers(&self) -> usize {
        self.layers.unwrap_or(64)
    }

    /// α of gcnii and appnp (default 0.1).
    pub fn alpha(&self) -> f64 {
        self.alpha.unwrap_or(0.1)
    }

    /// θ of gcnii (default 0.5).
    pub fn theta(&self) -> f64 {
        self.theta.unwrap_or(0.5)
    }

    /// The weight decay of gcnii's convolutions (default 0.01).
    pub fn conv_weight_decay(&self) -> f64 {
        self.conv_weight_decay.unwrap_or(0.01)
    }

    /// The activation of the hdgcn models (relu unless `activation`).
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for an unknown name.
    pub fn activation(&self) -> Result<Activation> {
        match &self.activation {
            None => Ok(Activation::Relu),
            Some(name) => name.parse().map_err(|e| invalid("activation", message(e))),
        }
    }

    /// The loop settings of run `run`: `train` with the split's epochs and
    /// patience where not given, the run's seed and `quiet`.
    pub fn train_config(&self, run: usize, quiet: bool) -> NodeTrainConfig {
        let mut cfg = self.train.clone();
        if self.split != NodeSplit::Public {
            if !self.given.epochs {
                cfg.epochs = FULL_EPOCHS;
            }
            if !self.given.patience {
                cfg.patience = Some(FULL_PATIENCE);
            }
        }
        // `validate` checked that seed + runs - 1 fits.
        cfg.seed = self.seed + run as u64;
        cfg.quiet = quiet;
        cfg
    }

    /// The MVCAttn settings as the shared `AttnFlags`.
    fn attn(&self) -> AttnFlags {
        AttnFlags {
            supernodes: self.supernodes,
            routing: self.routing,
            score_norm: self.score_norm,
            attn_dropout: self.attn_dropout,
        }
    }

    /// Checks every setting, the loop's included, without loading data.
    /// A message starts with the key at fault.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the key and the problem.
    pub fn validate(&self) -> Result<()> {
        if let Some(r) = &self.runner {
            if r != RUNNER {
                return Err(invalid(
                    "runner",
                    format!("this file is for runner '{r}', not '{RUNNER}'"),
                ));
            }
        }
        if self.runs > 0 && self.seed.checked_add(self.runs as u64 - 1).is_none() {
            return Err(invalid(
                "seed",
                format!(
                    "{} runs use seeds {} to seed + {}, past the largest seed",
                    self.runs,
                    self.seed,
                    self.runs - 1
                ),
            ));
        }
        if !DATASETS.contains(&self.dataset.to_lowercase().as_str()) {
            return Err(invalid(
                "dataset",
                format!(
                    "unknown dataset '{}' ({})",
                    self.dataset,
                    DATASETS.join(" | ")
                ),
            ));
        }
        if self.runs == 0 {
            return Err(invalid("runs", "must be at least 1"));
        }
        if self.hidden == Some(0) {
            return Err(invalid("hidden", "must be at least 1"));
        }
        if self.heads.is_some() && !self.is_gat() {
            return Err(invalid(
                "heads",
                format!("applies to gat and gatv2, not {}", flag_name(&self.model)),
            ));
        }
        if self.heads == Some(0) {
            return Err(invalid("heads", "must be at least 1"));
        }
        for (key, p) in [
            ("dropout", self.dropout),
            ("attn_dropout", self.attn_dropout),
        ] {
            if !(0.0..1.0).contains(&p) {
                return Err(invalid(key, format!("must be in [0, 1), got {p}")));
            }
        }
        if self.supernodes == 0 {
            return Err(invalid("supernodes", "must be at least 1"));
        }
        if !self.is_hd() {
            for (key, set) in [
                ("head", self.head.is_some()),
                ("activation", self.activation.is_some()),
            ] {
                if set {
                    return Err(invalid(
                        key,
                        format!(
                            "applies to the hdgcn and hdgcn-static models, not {}",
                            flag_name(&self.model)
                        ),
                    ));
                }
            }
        }
        if !self.has_k() && self.k.is_some() {
            return Err(invalid(
                "k",
                format!("{} has no Chebyshev order", flag_name(&self.model)),
            ));
        }
        let name = flag_name(&self.model);
        if self.k.is_some() && !self.has_k() {
            return Err(invalid("k", format!("{name} has no K")));
        }
        let gcnii = self.model == ModelKind::Gcnii;
        for (key, set, applies) in [
            ("layers", self.layers.is_some(), gcnii),
            ("theta", self.theta.is_some(), gcnii),
            ("conv_weight_decay", self.conv_weight_decay.is_some(), gcnii),
            (
                "alpha",
                self.alpha.is_some(),
                gcnii || self.model == ModelKind::Appnp,
            ),
        ] {
            if set && !applies {
                return Err(invalid(key, format!("model {name} does not use it")));
            }
        }
        if self.layers == Some(0) {
            return Err(invalid("layers", "must be at least 1"));
        }
        let wd = self.conv_weight_decay();
        if !(wd.is_finite() && wd >= 0.0) {
            return Err(invalid(
                "conv_weight_decay",
                format!("must be finite and non-negative, got {wd}"),
            ));
        }
        self.activation()?;
        self.check_memory()?;
        // The model on a tiny problem: K, widths and MVCAttn settings.
        let mut rng = rand::rngs::StdRng::seed_from_u64(0);
        self.build_model(&Cpu::<f32>::new(), 2, 2, &mut rng)
            .map_err(|e| invalid(if self.k.is_some() { "k" } else { "model" }, message(e)))?;
        Trainer::<Cpu<f32>, NodeStep<'static, Cpu<f32>>>::new(
            self.train_config(0, true).train_config(),
        )
        .map_err(|e| invalid("train", message(e)))?;
        Ok(())
    }

    /// Checks the estimate of one run's memory against the memory budget
    /// (`hdgcn::limits`), before any data is read: parameters of the
    /// convolution (`d_in -> hidden`) and of the output layer
    /// (`hidden -> classes`, as a GCN or linear layer), and the whole graph's
    /// activations, `nodes x hidden x terms` with the terms of
    /// `AttnFlags::layer_cost` plus 5 for the output layer, in the formula
    /// of `hdgcn::limits::training_bytes`.
    ///
    /// # Errors
    /// [`Error::OverBudget`] naming `hidden` (and `k`, `supernodes` where
    /// the model has them), the bytes needed and the budget.
    pub fn check_memory(&self) -> Result<()> {
        let dataset = self.dataset.to_lowercase();
        let Some(&(_, [nodes, d_in, classes, nonzeros])) =
            SIZES.iter().find(|(name, _)| *name == dataset)
        else {
            return Ok(());
        };
        let (h, k) = (self.hidden() * self.heads(), self.k());
        // GCNII's cost counts its layers where the others count K.
        let depth = if self.model == ModelKind::Gcnii {
            self.layers()
        } else {
            k
        };
        let conv = self.attn().layer_cost(self.model, d_in, h, depth);
        let head = (h as u64 + 1) * classes as u64;
        let settings = match self.model {
            ModelKind::Gcn | ModelKind::Sage | ModelKind::Gin => format!("hidden {h}"),
            ModelKind::Gat | ModelKind::Gatv2 => {
                format!("hidden {} x heads {}", self.hidden(), self.heads())
            }
            ModelKind::Cheb | ModelKind::HdgcnStatic | ModelKind::Appnp => {
                format!("hidden {h}, k {k}")
            }
            ModelKind::Gcnii => format!("hidden {h}, layers {depth}"),
            ModelKind::Hdgcn => format!("hidden {h}, k {k}, supernodes {}", self.supernodes),
        };
        // Cheb's output layer is a ChebConv too: K times the head.
        let head = if self.model == ModelKind::Cheb {
            head.checked_mul(k as u64)
        } else {
            Some(head)
        };
        super::check_run_memory(
            &settings,
            &format!("model {} on {dataset}", flag_name(&self.model)),
            conv.zip(head).and_then(|(c, hd)| c.params.checked_add(hd)),
            nodes as u64,
            h as u64,
            conv.and_then(|c| c.terms.checked_add(5)),
            BYTES_PER_NONZERO * nonzeros as u64,
        )
    }

    /// A freshly initialised model for `d_in` features and `classes` classes.
    pub fn build_model<B: Backend, R: rand::Rng>(
        &self,
        backend: &B,
        d_in: usize,
        classes: usize,
        rng: &mut R,
    ) -> Result<NodeClassifier<B>> {
        Ok(self.build_model_probed(backend, d_in, classes, rng)?.0)
    }

    /// [`NodeSettings::build_model`], and for `hdgcn` a second handle on
    /// its HD-ChebConv to read the attention maps of the trained model.
    pub fn build_model_probed<B: Backend, R: rand::Rng>(
        &self,
        backend: &B,
        d_in: usize,
        classes: usize,
        rng: &mut R,
    ) -> Result<(NodeClassifier<B>, Option<DynamicConv<B>>)> {
        let (h, k, p) = (self.hidden(), self.k(), self.dropout);
        let mut probe = None;
        let model = match self.model {
            ModelKind::Gcn => NodeClassifier::gcn(backend, d_in, h, classes, p, rng)?,
            ModelKind::Cheb => NodeClassifier::cheb(backend, d_in, h, classes, k, p, rng)?,
            ModelKind::Gat => NodeClassifier::gat(backend, d_in, h, self.heads(), classes, p, rng)?,
            ModelKind::Gatv2 => {
                NodeClassifier::gatv2(backend, d_in, h, self.heads(), classes, p, rng)?
            }
            ModelKind::Sage | ModelKind::Gin | ModelKind::Gcnii | ModelKind::Appnp => {
                self.build_node_only(backend, d_in, classes, rng)?
            }
            ModelKind::Hdgcn | ModelKind::HdgcnStatic => {
                let activation = self.activation()?;
                let mut cfg = HdChebConfig::in_model(d_in, h, k, p);
                cfg.activation = activation;
                let (conv, dynamic) = self
                    .attn()
                    .hd_cheb_conv_probed(backend, self.model, &cfg, rng)?;
                probe = dynamic;
                let model = NodeClassifier::new(vec![conv], p, activation)?;
                match self.head {
                    Some(Head::Gcn) => model.with_gcn_head(backend, classes, rng)?,
                    _ => model.with_head(backend, classes, rng)?,
                }
            }
        };
        Ok((model, probe))
    }

    /// The planetoid-only models: two SAGE or GIN layers (GIN: each
    /// around `MLP([in, hidden, out])`, ε = 0 fixed) with ReLU and dropout
    /// between them, or GCNII's / APPNP's whole model as the one "layer".
    fn build_node_only<B: Backend, R: rand::Rng>(
        &self,
        backend: &B,
        d_in: usize,
        classes: usize,
        rng: &mut R,
    ) -> Result<NodeClassifier<B>> {
        let (h, p, relu) = (self.hidden(), self.dropout, Activation::Relu);
        let two = |a: Box<dyn GraphConv<B>>, b: Box<dyn GraphConv<B>>| {
            NodeClassifier::new(vec![a, b], p, relu)
        };
        match self.model {
            ModelKind::Sage => two(
                Box::new(SageConv::new(backend, d_in, h, rng)?),
                Box::new(SageConv::new(backend, h, classes, rng)?),
            ),
            ModelKind::Gin => {
                let mlp1 = Mlp::new(backend, &[d_in, h, h], relu, 0.0, rng)?;
                let mlp2 = Mlp::new(backend, &[h, h, classes], relu, 0.0, rng)?;
                two(
                    Box::new(GinConv::new(backend, mlp1, 0.0, false)?),
                    Box::new(GinConv::new(backend, mlp2, 0.0, false)?),
                )
            }
            // These models drop their own input: no dropout around them.
            ModelKind::Gcnii => NodeClassifier::new(
                vec![Box::new(Gcn2Net::new(
                    backend,
                    d_in,
                    h,
                    classes,
                    self.layers(),
                    self.alpha(),
                    self.theta(),
                    true,
                    p,
                    rng,
                )?)],
                0.0,
                relu,
            ),
            ModelKind::Appnp => NodeClassifier::new(
                vec![Box::new(AppnpNet::new(
                    backend,
                    d_in,
                    h,
                    classes,
                    self.k(),
                    self.alpha(),
                    p,
                    rng,
                )?)],
                0.0,
                relu,
            ),
            other => Err(Error::InvalidConfig(format!(
                "{} is not a planetoid-only model",
                flag_name(&other)
            ))),
        }
    }

    /// Warnings for settings the run ignores or that are known to fail.
    pub fn warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(w) = lr_width_warning(self.model, self.train.lr, self.hidden()) {
            out.push(w);
        }
        if self.model != ModelKind::Hdgcn {
            // The settings are named as in the file: `--score-norm` is `score_norm`.
            let set: Vec<String> = self
                .attn()
                .set_flags()
                .into_iter()
                .map(|f| f.trim_start_matches("--").replace('-', "_"))
                .collect();
            if !set.is_empty() {
                out.push(format!(
                    "warning: {} configure MVCAttn, which model {} does not have: ignored \
                     (they apply to model hdgcn)",
                    set.join(", "),
                    flag_name(&self.model)
                ));
            }
        }
        out
    }
}

/// 1-based line and column of byte `pos` of `text`.
fn line_col(text: &str, pos: usize) -> (usize, usize) {
    let before = &text[..pos.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
    (line, col)
}

/// The dotted key of the line holding byte `pos` (`train.lr` for `lr = ...`
/// under `[train]`), or the table of a header line.
fn key_at(text: &str, pos: usize) -> Option<String> {
    let pos = pos.min(text.len());
    let start = text[..pos].rfind('\n').map_or(0, |i| i + 1);
    let line = text[start..].lines().next().unwrap_or("").trim();
    let header = |l: &str| {
        l.strip_prefix('[')
            .and_then(|l| l.split(']').next())
            .map(|h| h.trim().to_owned())
    };
    if line.starts_with('[') {
        return header(line);
    }
    let key = line.split('=').next()?.trim().trim_matches('"');
    if key.is_empty() {
        return None;
    }
    let table = text[..start]
        .lines()
        .rev()
        .map(str::trim)
        .find(|l| l.starts_with('['))
        .and_then(header);
    Some(match table {
        Some(t) => format!("{t}.{key}"),
        None => key.to_owned(),
    })
}

/// What a run does with a checkpoint (`planetoid --save / --load`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Checkpoint {
    /// Train every run; save nothing.
    #[default]
    None,
    /// Train, and save the last run's model (at its selected epoch).
    Save(PathBuf),
    /// Evaluate the parameters of this checkpoint (no training).
    Load(PathBuf),
}

/// A whole planetoid run (all `s.runs`) on `backend`: the summary line and
/// the JSON record (`dataset, model, split, runs, test_acc_mean,
/// test_acc_std, val_acc_mean, train_step_ms_median, peak_rss_mb`, the
/// per-run `test_accs` and `val_accs` in percent, and the settings).
/// `data_dir` holds `planetoid/` and `geom-gcn-splits/` (default
/// `$HDGCN_DATA`, else `./data`); `quiet` hides the progress bar and the
/// per-run lines.
///
/// # Errors
/// [`Error::InvalidConfig`] for invalid settings (before any data is
/// read), and whatever loading the data or training returns.
pub fn run_node<B: Backend<Elem = f32>>(
    s: &NodeSettings,
    backend: &B,
    device: Device,
    data_dir: Option<&Path>,
    quiet: bool,
) -> Result<Report> {
    run_node_with(s, backend, device, data_dir, quiet, &Checkpoint::None)
}

/// [`run_node`] that also saves or loads a checkpoint.
///
/// # Errors
/// As [`run_node`], and the checkpoint's errors.
pub fn run_node_with<B: Backend<Elem = f32>>(
    s: &NodeSettings,
    backend: &B,
    device: Device,
    data_dir: Option<&Path>,
    quiet: bool,
    checkpoint: &Checkpoint,
) -> Result<Report> {
    s.validate()?;
    for w in s.warnings() {
        eprintln!("{w}");
    }
    let root = data_root(data_dir);
    let data = Planetoid::load_with(&planetoid_dir(&root), &s.dataset, s.unlabelled)?;
    if !data.unlabelled.is_empty() && !quiet {
        let what = match s.unlabelled {
            UnlabelledNodes::Drop => "left out of every mask (unlabelled = \"drop\")",
            _ => "given class 0, as PyG and geom-gcn do (unlabelled = \"drop\" leaves them out)",
        };
        eprintln!(
            "note: {} {} nodes have no label in the files ({:?}); they are {what}",
            data.name,
            data.unlabelled.len(),
            data.unlabelled
        );
    }
    let graph = Graph::from_edges(data.num_nodes(), &data.edges)?;
    let x = if s.raw_features {
        data.features.clone()
    } else {
        data.row_normalized_features()
    };
    let mut task = NodeTask {
        graph: DeviceGraph::new(backend, graph),
        features: Features::Sparse(SparseMatrix::from_csmat(backend, &x)?),
        labels: data.labels.clone(),
        num_classes: data.num_classes,
        split: data.public_split.clone(),
    };
    let (mut acc, mut steps) = (Accuracies::default(), Vec::new());
    let mut attention = AttentionStats::default();
    for r in 0..s.runs {
        if let Some(i) = s.split.geom_gcn_index(r) {
            task.split = data.geom_gcn_split(&geom_gcn_dir(&root), i)?;
        }
        let cfg = s.train_config(r, quiet);
        let mut rng = rand::rngs::StdRng::seed_from_u64(cfg.seed);
        let (mut model, probe) =
            s.build_model_probed(backend, data.num_features(), data.num_classes, &mut rng)?;
        if let Checkpoint::Load(path) = checkpoint {
            load_checkpoint(&model, path)?;
            let va = evaluate_nodes(&mut model, &task, &task.split.val)?;
            let (te, _) = evaluate_nodes(&mut model, &task, &task.split.test)?;
            acc.push_loaded(path, va, te);
            continue;
        }
        let rep = if s.model == ModelKind::Gcnii {
            let convs = conv_params_of(&model);
            let extra = s.conv_weight_decay() - cfg.weight_decay;
            train_with_extra_decay(&mut model, &task, &cfg, convs, extra)?
        } else {
            train_node_classifier(&mut model, &task, &cfg)?
        };
        if let (Checkpoint::Save(path), true) = (checkpoint, r + 1 == s.runs) {
            save_checkpoint(&model, path)?;
            eprintln!("saved {}", path.display());
        }
        if !quiet {
            eprintln!(
                "run {r}: best epoch {:3}  val {:.2}  test {:.2}  step {:.3} ms",
                rep.best_epoch,
                100.0 * rep.val_acc,
                100.0 * rep.test_acc,
                median(&rep.step_ms)
            );
        }
        if let Some(mut conv) = probe {
            // The selected epoch's weights (restored by the loop), in
            // evaluation mode: the classifier's input dropout is then the
            // identity and the layer reads the features as they are.
            conv.set_training(false);
            let tape = Tape::inference(backend);
            let (_, maps) = conv.forward_with_maps(&tape, &task.graph, &task.features)?;
            attention.add(&maps)?;
        }
        acc.push((rep.val_acc, rep.val_loss), rep.test_acc, rep.best_epoch);
        steps.extend(rep.step_ms);
    }
    let (tm, ts, vm) = acc.summary();
    let (model_name, split) = (flag_name(&s.model), s.split.to_string());
    let step = median(&steps);
    let rss = peak_rss_mb().unwrap_or(f64::NAN);
    let line = format!(
        "{} {model_name} ({split} split, {} runs): test accuracy {tm:.2} ± {ts:.2} %, \
         val {vm:.2} %, train step median {step:.3} ms, peak RSS {rss:.0} MiB",
        data.name, s.runs
    );
    let cfg = s.train_config(0, quiet);
    let hd = s.is_hd();
    let dynamic = s.model == ModelKind::Hdgcn;
    let mut json = serde_json::json!({
        "dataset": data.name,
        "model": model_name,
        "split": split,
        "runs": s.runs,
        "k": s.has_k().then(|| s.k()),
        "layers": (s.model == ModelKind::Gcnii).then(|| s.layers()),
        "alpha": matches!(s.model, ModelKind::Gcnii | ModelKind::Appnp).then(|| s.alpha()),
        "theta": (s.model == ModelKind::Gcnii).then(|| s.theta()),
        "conv_weight_decay": (s.model == ModelKind::Gcnii).then(|| s.conv_weight_decay()),
        "hidden": s.hidden(),
        "heads": s.is_gat().then(|| s.heads()),
        "dropout": s.dropout,
        "seed": s.seed,
        "supernodes": dynamic.then_some(s.supernodes),
        "routing": dynamic.then_some(s.routing.as_str()),
        "score_norm": dynamic.then_some(s.score_norm),
        "attn_dropout": dynamic.then_some(s.attn_dropout),
        "head": hd.then(|| flag_name(&s.head.unwrap_or(Head::Linear))),
        "activation": hd.then(|| s.activation().map(|a| a.name())).transpose()?,
        "optimizer": cfg.optimizer.as_str(),
        "epochs": cfg.epochs,
        "patience": cfg.patience,
        "select_by": cfg.select_by.as_str(),
        "lr": cfg.lr,
        "lr_schedule": cfg.lr_schedule.to_string(),
        "warmup_epochs": cfg.lr_warmup_epochs,
        "weight_decay": cfg.weight_decay,
        "label_smoothing": cfg.label_smoothing,
        "ema": cfg.ema_decay,
        "test_acc_mean": tm,
        "test_acc_std": ts,
        "val_acc_mean": vm,
        "test_accs": acc.test,
        "val_accs": acc.val,
        "val_loss_mean": acc.val_loss_mean(),
        "val_losses": acc.val_losses,
        "best_epochs": acc.best_epochs,
        "train_step_ms_median": step,
        "peak_rss_mb": rss,
        "device": device.as_str(),
        "adapter": backend.name(),
    });
    // Outside the `json!` above, which is at the macro recursion limit.
    if let Some(obj) = json.as_object_mut() {
        obj.insert("attention_entropy".into(), attention.to_json());
        obj.insert("raw_features".into(), s.raw_features.into());
    }
    Ok(Report { line, json })
}

/// The largest `lr × hidden` at which HDGCN (the dynamic variant) trained in
/// every measured 50-epoch run on Cora with Adam (docs/hdgcn.md, "What the experiments so far showed"; the earlier lab
/// notebook, `git show 949970a:docs/results.md`, "Why wide dynamic layers collapse"): the collapse sets in between 0.9 and 1.1.
const HDGCN_MAX_LR_WIDTH: f64 = 0.75;

/// A warning for an HDGCN run whose learning rate times hidden width lies
/// above [`HDGCN_MAX_LR_WIDTH`]. At initialisation the dynamic transition
/// hands every node the same vector, so the gradients of its `h x h`
/// weights are rank one, and Adam's first steps (`lr · sign(G)`) change
/// each of them by `lr · h` in spectral norm.
pub fn lr_width_warning(model: ModelKind, lr: f64, hidden: usize) -> Option<String> {
    let product = lr * hidden as f64;
    (model == ModelKind::Hdgcn && product > HDGCN_MAX_LR_WIDTH).then(|| {
        format!(
            "warning: lr {lr} x hidden {hidden} = {product:.2}. In 50-epoch runs on Cora (K = 6) \
             HDGCN ended at the majority class whenever lr x hidden was 1.1 or more, and \
             trained whenever it was at most {HDGCN_MAX_LR_WIDTH}: use lr {:.2e} or lower \
             (docs/hdgcn.md, \"What the experiments so far showed\")",
            HDGCN_MAX_LR_WIDTH / hidden as f64
        )
    })
}

/// GCNII's convolution weights: a classifier's parameters named `*.convs.*`.
pub fn conv_params_of<B: Backend>(model: &NodeClassifier<B>) -> Vec<Param<B>> {
    model
        .named_params()
        .into_iter()
        .filter(|(name, _)| name.contains(".convs."))
        .map(|(_, p)| p)
        .collect()
}

/// Adds `decay · p` to the gradient of each of `params`: a second
/// PyTorch parameter group's weight decay on top of the loop's (L2, as
/// PyTorch's Adam and SGD add it to the gradient).
struct ExtraDecay<B: Backend> {
    params: Vec<Param<B>>,
    decay: f64,
}

impl<B: Backend, M: hdgcn::train::TrainStep<B>> Hook<B, M> for ExtraDecay<B> {
    fn after_backward(
        &mut self,
        _model: &M,
        _batch: &M::Batch,
        _ctx: &StepContext,
        grads: &mut Gradients<B>,
    ) -> Result<()> {
        for p in &self.params {
            let b = p.backend().clone();
            let scaled = b.unary(UnaryOp::Affine(self.decay, 0.0), &p.value());
            if let Some(g) = grads.get_mut(p) {
                *g = b.binary(BinaryOp::Add, g, &scaled);
            }
        }
        Ok(())
    }
}

/// `train_node_classifier` with `decay` more weight decay on `extra`
/// (GCNII's convolutions: 0.01 where the linears have 5e-4).
pub fn train_with_extra_decay<B: Backend>(
    model: &mut NodeClassifier<B>,
    task: &NodeTask<B>,
    cfg: &NodeTrainConfig,
    extra: Vec<Param<B>>,
    decay: f64,
) -> Result<NodeTrainReport> {
    let train = NodeBatch::new(task, &task.split.train)?;
    let val = NodeBatch::new(task, &task.split.val)?;
    let test = NodeBatch::new(task, &task.split.test)?;
    let mut trainer = Trainer::new(cfg.train_config())?.with_hook(ExtraDecay {
        params: extra,
        decay,
    });
    let mut step = NodeStep::new(model, task, cfg.decay_first_layer_only);
    let fit = trainer.fit(&mut step, &mut vec![train.clone()], &[val])?;
    let test_acc = evaluate(&mut step, &[test])?.accuracy;
    let train_acc = evaluate(&mut step, &[train])?.accuracy;
    Ok(NodeTrainReport {
        best_epoch: fit.best_epoch,
        val_acc: fit.val_acc,
        val_loss: fit.val_loss,
        test_acc,
        train_acc,
        epochs_run: fit.epochs_run,
        step_ms: fit.step_ms,
        final_loss: fit.history.last().map_or(f64::NAN, |r| r.train_loss),
        val_history: fit
            .history
            .iter()
            .map(|r| (r.val_acc, r.val_loss))
            .collect(),
        history: fit.history,
    })
}
