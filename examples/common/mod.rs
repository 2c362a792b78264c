//! What the training examples (`planetoid`, `text_classification`) share:
//! running on the backend `--device` picks, the `--model` names, the
//! HD-ChebConv of the hdgcn models, `--runs` validation and the accuracy
//! summary of the runs.
//!
//! Not an example itself: cargo builds only `examples/*.rs` and
//! `examples/*/main.rs`; each example includes this file with `mod common;`.

use std::path::Path;

use clap::{Parser, ValueEnum};
use hdgcn::attention::{AttentionMaps, MvcAttn, MvcAttnConfig, Routing, normalized_entropy};
use hdgcn::backend::{Backend, Device, WithBackend};
use hdgcn::conv::{GraphConv, HdChebConfig, HdChebConv};
use hdgcn::util::mean_std;

// `text_classification` includes this module too and uses none of it.
pub mod absa;
#[allow(dead_code)]
pub mod node;
pub mod text;

/// `--malloc`: how the process allocates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Malloc {
    /// glibc's malloc keeps freed memory for reuse (the default).
    ///
    /// [`configure_malloc`] says what it changes; clap shows only the
    /// first paragraph in `--help`.
    Reuse,
    /// glibc's defaults.
    System,
}

impl Malloc {
    /// Whether [`configure_malloc`] changes anything: `Reuse`, on glibc,
    /// with no `GLIBC_TUNABLES` in the environment (which then wins).
    fn applies(self) -> bool {
        cfg!(all(target_os = "linux", target_env = "gnu"))
            && self == Malloc::Reuse
            && std::env::var_os("GLIBC_TUNABLES").is_none()
    }

    /// The JSON `malloc` field: `"reuse"` where [`configure_malloc`]
    /// raised glibc's thresholds, `"system"` where the allocator runs as
    /// configured outside the example.
    pub fn in_effect(self) -> &'static str {
        if self.applies() { "reuse" } else { "system" }
    }
}

/// With [`Malloc::Reuse`], tells glibc's malloc to keep freed memory for
/// reuse; a no-op on other C libraries, with [`Malloc::System`], and when
/// the user set `GLIBC_TUNABLES`.
///
/// By default glibc serves blocks above its mmap threshold with `mmap` and
/// hands the freed top of its heap back to the kernel (`M_TRIM_THRESHOLD`),
/// so a training step, which allocates and frees op outputs of the same
/// large sizes over and over, page-faults on fresh memory for most of them:
/// on Ohsumed a third of an HDGCN epoch went to the kernel. Raising both
/// thresholds keeps the memory in the heap; results are unchanged and the
/// peak RSS stays the same (`docs/performance.md`, "The allocator").
pub fn configure_malloc(malloc: Malloc) {
    if !malloc.applies() {
        return;
    }
    // 32 MiB is the largest mmap threshold glibc accepts on 64-bit
    // targets; a trim threshold of i32::MAX never trims in practice.
    // SAFETY: mallopt only changes allocator parameters; it runs before
    // the examples start any thread.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, i32::MAX);
    }
}

/// A published number a config is compared with (its `[reference]`
/// table): what the results tables print beside the run's own.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reference {
    /// Test accuracy in percent.
    pub accuracy: f64,
    /// Where it was published (paper, table, row).
    pub source: String,
}

/// A grid point of `configs/paper`: the learning rate and dropout that
/// the validation choice of a paper row committed to its two files.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RowPoint {
    /// AdaBelief's learning rate (`train.lr`).
    pub lr: f64,
    /// Dropout probability (`dropout`).
    pub dropout: f64,
}

/// The point chosen on validation for the paper's row of the `runner`
/// (`"planetoid"` or `"text_classification"`) on `dataset`
/// (`configs/paper/README.md`, "Progress"), which `--model hdgcn` and
/// `--model hdgcn-static` take by default there, so that the plain
/// commands run the table's files (`the_paper_configs_are_the_plain_commands`
/// checks every file against them). `None` where the grid has not been
/// run (CiteSeer: its data are not in `../shared/data`) or the runner has
/// no row for the dataset: the paper's settings then (lr 1e-5, dropout
/// 0.5). The absa runner needs no table: every ABSA file chose the same
/// point, which is its default ([`absa::default_absa_train`]).
pub fn paper_row_point(runner: &str, dataset: &str) -> Option<RowPoint> {
    let point = |lr, dropout| Some(RowPoint { lr, dropout });
    match (runner, dataset.to_ascii_lowercase().as_str()) {
        ("planetoid", "cora") => point(1e-3, 0.5),
        ("planetoid", "pubmed") => point(1e-2, 0.3),
        ("text_classification", "mr" | "r8" | "r52") => point(1e-3, 0.5),
        ("text_classification", "ohsumed") => point(1e-2, 0.5),
        _ => None,
    }
}

/// `given` laid over `base`: a key of `given` replaces the same key of
/// `base`, except that two tables are merged key by key. How a settings
/// file is read over the runner's defaults for its model, `[train]`
/// included.
pub fn overlay(base: &mut toml::Table, given: &toml::Table) {
    for (key, value) in given {
        match (base.get_mut(key), value) {
            (Some(toml::Value::Table(b)), toml::Value::Table(g)) => overlay(b, g),
            _ => {
                base.insert(key.clone(), value.clone());
            }
        }
    }
}

/// What a training example reports when it is done.
#[derive(Debug, Clone)]
pub struct Report {
    /// One human-readable summary line.
    pub line: String,
    /// The `--json` summary (its fields are a contract other tools read).
    pub json: serde_json::Value,
}

/// The flags every training example takes: where it runs, how it
/// allocates and whether it prints the JSON summary
/// (`#[command(flatten)]` into the example's arguments).
#[derive(clap::Args, Debug, Clone)]
pub struct RunFlags {
    /// reuse (glibc keeps freed memory for the next step: faster, same
    /// results and peak RSS) | system (glibc's defaults).
    #[arg(long, value_enum, ignore_case = true, default_value = "reuse")]
    pub malloc: Malloc,
    /// cpu | wgpu (the wgpu backend needs `--features wgpu`; the adapter is
    /// chosen by WGPU_BACKEND / WGPU_ADAPTER_NAME).
    #[arg(long, default_value = "cpu")]
    pub device: Device,
    /// Print one JSON summary as the last stdout line.
    #[arg(long)]
    pub json: bool,
}

/// An example's parsed arguments, which know how to run on any backend.
pub trait Example: Parser {
    /// The `--malloc`, `--device` and `--json` flags.
    fn flags(&self) -> &RunFlags;
    /// The whole example on `backend`.
    fn run<B: Backend<Elem = f32>>(&self, backend: &B, device: Device) -> hdgcn::Result<Report>;
}

/// Parses the arguments, runs the example on the chosen device and prints
/// its summary line, then, with `--json`, the JSON summary as the last
/// stdout line; exits with status 1 after printing the error, if any.
pub fn main<A: Example>() {
    let args = A::parse();
    configure_malloc(args.flags().malloc);
    let device = args.flags().device;
    match device
        .run(Job {
            args: &args,
            device,
        })
        .and_then(|r| r)
    {
        Ok(report) => {
            println!("{}", report.line);
            if args.flags().json {
                println!("{}", report.json);
            }
        }
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    }
}

/// Runs the example on the CPU backend (for the examples' tests).
#[cfg(test)]
pub fn run_on_cpu<A: Example>(args: &A) -> Report {
    args.run(&hdgcn::backend::Cpu::<f32>::new(), Device::Cpu)
        .unwrap()
}

/// [`Example::run`] as a [`WithBackend`] task.
struct Job<'a, A> {
    args: &'a A,
    device: Device,
}

impl<A: Example> WithBackend for Job<'_, A> {
    type Output = hdgcn::Result<Report>;
    fn run<B: Backend<Elem = f32>>(self, backend: B) -> hdgcn::Result<Report> {
        self.args.run(&backend, self.device)
    }
}

/// The `--model` of the training examples.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ModelKind {
    /// Kipf & Welling's GCN.
    Gcn,
    /// ChebNet (`ChebConv`).
    Cheb,
    /// HD-ChebConv with the MVCAttn transition.
    Hdgcn,
    /// HD-ChebConv with the static `Â²` transition.
    HdgcnStatic,
    /// GAT (`GatConv`; planetoid only).
    Gat,
    /// GATv2 (`GatV2Conv`; planetoid only).
    Gatv2,
    /// GraphSAGE (`SageConv`, mean aggregation; planetoid only).
    Sage,
    /// GIN (`GinConv` around a two-layer MLP; planetoid only).
    Gin,
    /// GCNII (`models::Gcn2Net`; planetoid only).
    Gcnii,
    /// APPNP (`models::AppnpNet`; planetoid only).
    Appnp,
}

impl ModelKind {
    /// The models only the planetoid runner builds.
    pub fn is_node_only(self) -> bool {
        matches!(
            self,
            ModelKind::Gat
                | ModelKind::Gatv2
                | ModelKind::Sage
                | ModelKind::Gin
                | ModelKind::Gcnii
                | ModelKind::Appnp
        )
    }
}

/// `--supernodes` when not given (the paper's M = 10).
pub const DEFAULT_SUPERNODES: usize = 10;

/// The MVCAttn flags of the dynamic HDGCN (`#[command(flatten)]` into an
/// example's arguments).
#[derive(clap::Args, Debug)]
pub struct AttnFlags {
    /// Supernodes M of MVCAttn (dynamic HDGCN).
    #[arg(long, default_value_t = DEFAULT_SUPERNODES)]
    pub supernodes: usize,
    /// MVCAttn routing of the dynamic HDGCN: attention | votes (math.md §4).
    #[arg(long, default_value = "attention")]
    pub routing: Routing,
    /// Scale-invariant MVCAttn scores (dynamic HDGCN): LayerNorm on the node
    /// states and on Ŝ where they enter the scores (`MvcAttnConfig::score_norm`).
    #[arg(long)]
    pub score_norm: bool,
    /// Dropout on MVCAttn's attention maps `A_f` and `A_b` after their
    /// softmax, in [0, 1) (dynamic HDGCN; `MvcAttnConfig::dropout`, as
    /// GAT's attention dropout; default 0: none).
    #[arg(long, default_value_t = 0.0)]
    pub attn_dropout: f64,
}

impl AttnFlags {
    /// The flags of this group set away from their defaults, by their
    /// command-line names (`--supernodes`, `--routing`, `--score-norm`,
    /// `--attn-dropout`).
    pub fn set_flags(&self) -> Vec<&'static str> {
        let mut set = Vec::new();
        if self.supernodes != DEFAULT_SUPERNODES {
            set.push("--supernodes");
        }
        if self.routing != Routing::Attention {
            set.push("--routing");
        }
        if self.score_norm {
            set.push("--score-norm");
        }
        if self.attn_dropout != 0.0 {
            set.push("--attn-dropout");
        }
        set
    }

    /// A warning for flags of this group given with a `model` that has no
    /// MVCAttn (every model but `hdgcn`), which then ignores them; `None`
    /// when there are none or the model is `hdgcn`. A warning, not an
    /// error: the static ablation is run as the dynamic command with
    /// `--model hdgcn-static`, and the earlier text protocols relied on
    /// that.
    #[allow(dead_code)] // text_classification's; planetoid names config keys (node.rs)
    pub fn ignored_warning(&self, model: ModelKind) -> Option<String> {
        let set = self.set_flags();
        (model != ModelKind::Hdgcn && !set.is_empty()).then(|| {
            let (verb, pronoun) = if set.len() == 1 {
                ("configures", "it applies")
            } else {
                ("configure", "they apply")
            };
            format!(
                "warning: {} {verb} MVCAttn, which --model {} does not have: ignored \
                 ({pronoun} to --model hdgcn)",
                set.join(", "),
                flag_name(&model)
            )
        })
    }

    /// The HD-ChebConv of `--model hdgcn` (MVCAttn transitions configured
    /// by these flags) or `--model hdgcn-static` (`Â²`), built from `cfg`;
    /// any other model is an error.
    pub fn hd_cheb_conv<B: Backend, R: rand::Rng>(
        &self,
        backend: &B,
        model: ModelKind,
        cfg: &HdChebConfig,
        rng: &mut R,
    ) -> hdgcn::Result<Box<dyn GraphConv<B>>> {
        Ok(self.hd_cheb_conv_probed(backend, model, cfg, rng)?.0)
    }

    /// [`AttnFlags::hd_cheb_conv`], and for `--model hdgcn` a second
    /// handle on the same layer (parameters are shared handles, so it sees
    /// every update of training) to read its attention maps with
    /// [`HdChebConv::forward_with_maps`].
    pub fn hd_cheb_conv_probed<B: Backend, R: rand::Rng>(
        &self,
        backend: &B,
        model: ModelKind,
        cfg: &HdChebConfig,
        rng: &mut R,
    ) -> hdgcn::Result<ProbedConv<B>> {
        match model {
            ModelKind::Hdgcn => {
                let mut attn = MvcAttnConfig::new(cfg.hidden);
                attn.supernodes = self.supernodes;
                attn.routing = self.routing;
                attn.score_norm = self.score_norm;
                attn.dropout = self.attn_dropout;
                let conv = cfg.build_dynamic(backend, rng, &attn)?;
                Ok((Box::new(conv.clone()), Some(conv)))
            }
            ModelKind::HdgcnStatic => Ok((Box::new(cfg.build_static(backend, rng)?), None)),
            other => Err(hdgcn::Error::InvalidConfig(format!(
                "{} is not an HD-ChebConv model",
                flag_name(&other)
            ))),
        }
    }
}

/// The dynamic HD-ChebConv (MVCAttn transitions).
pub type DynamicConv<B> = HdChebConv<B, MvcAttn<B>>;

/// A convolution to train, and for the dynamic model a handle on the same
/// layer to read its attention maps.
pub type ProbedConv<B> = (Box<dyn GraphConv<B>>, Option<DynamicConv<B>>);

/// How far a trained model's MVCAttn maps are from uniform, per HD unit
/// (issue 67, item 6): the normalised row entropy
/// ([`normalized_entropy`]; 1 = uniform) of `A_f` and of `A_b`, averaged
/// over the graphs seen (a graph of one node has no spread and is left
/// out), and the largest `|A_b - 1/M|` of any entry.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AttentionStats {
    units: Vec<UnitStats>,
}

#[derive(Debug, Clone, Default, PartialEq)]
struct UnitStats {
    forward_entropy: f64,
    backward_entropy: f64,
    backward_max_dev: f64,
    graphs: usize,
}

impl AttentionStats {
    /// Adds the maps of one forward pass (one [`AttentionMaps`] per unit).
    ///
    /// # Errors
    /// As [`normalized_entropy`] for a map that is not row-stochastic
    /// (votes routing: use attention routing).
    pub fn add(&mut self, maps: &[AttentionMaps]) -> hdgcn::Result<()> {
        if self.units.len() < maps.len() {
            self.units.resize(maps.len(), UnitStats::default());
        }
        for (u, m) in self.units.iter_mut().zip(maps) {
            for (af, ab) in m.forward.iter().zip(&m.backward) {
                if af.ncols() < 2 || ab.ncols() < 2 {
                    continue;
                }
                u.forward_entropy += normalized_entropy(af.view())?;
                u.backward_entropy += normalized_entropy(ab.view())?;
                let m_inv = 1.0 / ab.ncols() as f64;
                let dev = ab.iter().fold(0.0_f64, |d, &p| d.max((p - m_inv).abs()));
                u.backward_max_dev = u.backward_max_dev.max(dev);
                u.graphs += 1;
            }
        }
        Ok(())
    }

    /// The `attention_entropy` field of a runner's JSON: one object per
    /// unit (`unit` from 1, `a_f`, `a_b`, `a_b_max_dev`, `graphs`), or
    /// `null` when nothing was added.
    pub fn to_json(&self) -> serde_json::Value {
        if self.units.iter().all(|u| u.graphs == 0) {
            return serde_json::Value::Null;
        }
        self.units
            .iter()
            .enumerate()
            .map(|(i, u)| {
                let n = u.graphs.max(1) as f64;
                serde_json::json!({
                    "unit": i + 1,
                    "a_f": u.forward_entropy / n,
                    "a_b": u.backward_entropy / n,
                    "a_b_max_dev": u.backward_max_dev,
                    "graphs": u.graphs,
                })
            })
            .collect()
    }
}

/// Recorded `nodes x width` tensors per step of a GCN layer: `X W`, `Â X W`,
/// the bias, the activation and the dropout.
const GCN_TERMS: u64 = 5;
/// A GAT layer's recorded tensors in `nodes x width` units: `X W`, two
/// `edges x width` tensors (gathered sources, weighted messages) at about
/// five edges per node with self-loops, the aggregate, bias, activation
/// and dropout.
const GAT_TERMS: u64 = 16;
/// Per Chebyshev term of a ChebConv: `X W_k` and the recurrence's `L̃ b`,
/// `2 L̃ b` and difference.
const CHEB_TERMS_PER_K: u64 = 4;
/// Per HD unit: 3 (`Wd`, the GCN's output and the activation; the CPU
/// backend reuses the rest), plus the transition (`Â²`: 1; MVCAttn: 2).
/// Calibrated against the peak RSS of Cora and PubMed runs (K = 6 and
/// K = 40): the estimate lies 1.4 to 1.8 times above it.
const HD_UNIT_TERMS: u64 = 3;
const STATIC_TRANSITION_TERMS: u64 = 1;
const MVCATTN_TERMS: u64 = 2;
/// `nodes x width` tensors per GCNII layer: it records 7 (the dropout's mask
/// and output, `(1 - α) Â H`, `α X_0`, their sum, the product with the mixed
/// weight and the ReLU); 2 more are counted for the transients of the
/// backward pass.
const GCNII_TERMS_PER_LAYER: u64 = 9;

/// What one convolution `d_in -> h` costs in a training step: its
/// parameters, and the `nodes x h` tensors it records (`terms`; the memory
/// estimate of a run, `hdgcn::limits::training_bytes`, multiplies them by
/// the nodes, the width and the copies kept for the backward pass).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LayerCost {
    /// Parameters of the layer.
    pub params: u64,
    /// Recorded `nodes x h` tensors per step.
    pub terms: u64,
}

impl AttnFlags {
    /// The [`LayerCost`] of one convolution `d_in -> h` of `model` with
    /// order `k`: GCN `d_in·h + h`, 5 terms; ChebConv `k·d_in·h + h`,
    /// `4k + 5` terms; HD-ChebConv its `num_params` (with MVCAttn for
    /// hdgcn), `9 + (k/2)·(3 + 1 or 2)` terms. `None` when a count
    /// overflows.
    pub fn layer_cost(
        &self,
        model: ModelKind,
        d_in: usize,
        h: usize,
        k: usize,
    ) -> Option<LayerCost> {
        let u = |v: usize| v as u64;
        let gcn = u(d_in).checked_add(1)?.checked_mul(u(h))?;
        Some(match model {
            ModelKind::Gcn => LayerCost {
                params: gcn,
                terms: GCN_TERMS,
            },
            ModelKind::Cheb => LayerCost {
                params: u(k)
                    .checked_mul(u(d_in))?
                    .checked_mul(u(h))?
                    .checked_add(u(h))?,
                terms: u(k).checked_mul(CHEB_TERMS_PER_K)?.checked_add(GCN_TERMS)?,
            },
            // `h` is the width of all heads together; per-edge tensors
            // (about four edges per node on Planetoid) as nodes x h terms.
            ModelKind::Gat | ModelKind::Gatv2 => LayerCost {
                params: u(d_in)
                    .checked_add(2)?
                    .checked_mul(if model == ModelKind::Gat { 1 } else { 2 })?
                    .checked_add(1)?
                    .checked_mul(u(h))?,
                terms: GAT_TERMS,
            },
            ModelKind::Hdgcn | ModelKind::HdgcnStatic => {
                let cfg = HdChebConfig::new(d_in, h, k);
                let (params, transition) = if model == ModelKind::Hdgcn {
                    let mut attn = MvcAttnConfig::new(h);
                    attn.supernodes = self.supernodes;
                    attn.score_norm = self.score_norm;
                    (cfg.num_params_dynamic(&attn)?, MVCATTN_TERMS)
                } else {
                    (cfg.num_params()?, STATIC_TRANSITION_TERMS)
                };
                LayerCost {
                    params: u(params),
                    terms: u(k / 2)
                        .checked_mul(HD_UNIT_TERMS + transition)?
                        .checked_add(GCN_TERMS + 4)?,
                }
            }
            // Two layers of `d_in -> h` width (GIN: with its MLP's second
            // linear layer); APPNP's K steps and GCNII's `k` layers (`k` is
            // the number of layers there) each record a few `N x h` tensors.
            ModelKind::Sage => LayerCost {
                params: gcn.checked_add(u(d_in).checked_mul(u(h))?)?,
                terms: GCN_TERMS + 2,
            },
            ModelKind::Gin => LayerCost {
                params: gcn.checked_add(u(h).checked_add(1)?.checked_mul(u(h))?)?,
                terms: GCN_TERMS + 4,
            },
            ModelKind::Appnp => LayerCost {
                params: gcn,
                terms: u(k).checked_mul(3)?.checked_add(GCN_TERMS)?,
            },
            ModelKind::Gcnii => LayerCost {
                params: gcn.checked_add(u(k).checked_mul(u(h))?.checked_mul(u(h))?)?,
                terms: u(k)
                    .checked_mul(GCNII_TERMS_PER_LAYER)?
                    .checked_add(GCN_TERMS)?,
            },
        })
    }
}

/// Checks a run's memory estimate, `hdgcn::limits::training_bytes` over
/// `f32` values, against the memory budget before anything is loaded or
/// built: [`hdgcn::Error::OverBudget`] whose text starts with `settings`
/// (the size settings and their values) and says what was counted.
pub fn check_run_memory(
    settings: &str,
    detail: &str,
    params: Option<u64>,
    nodes: u64,
    width: u64,
    terms: Option<u64>,
    data_bytes: u64,
) -> hdgcn::Result<()> {
    let bytes = params
        .zip(terms)
        .and_then(|(p, t)| hdgcn::limits::training_bytes(4, p, nodes, width, t, data_bytes));
    let what = match (params, terms) {
        (Some(p), Some(_)) if nodes == 0 => format!("{settings} ({detail}: {p} parameters)"),
        (Some(p), Some(t)) => format!(
            "{settings} ({detail}: {p} parameters, activations of {nodes} nodes x {width} x {t} tensors)"
        ),
        _ => format!("{settings} ({detail})"),
    };
    hdgcn::limits::check_bytes(&what, bytes)?;
    if let Some(note) = large_run_note(&what, bytes) {
        // Settings are validated more than once on the way to a run (after
        // the flags, and again when the run starts): say it once.
        static SAID: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
        let mut said = SAID.lock().unwrap_or_else(|e| e.into_inner());
        if !said.contains(&note) {
            eprintln!("{note}");
            said.push(note);
        }
    }
    Ok(())
}

/// Runs whose estimate is above this many bytes are announced on stderr
/// even when they fit the budget (issue 70: a ChebConv of order 1000 took
/// 2.2 GB "without a word").
pub const LARGE_RUN_BYTES: u64 = 1 << 30;

/// The note printed for a run estimated above [`LARGE_RUN_BYTES`] that
/// fits the memory budget: what it needs, the budget, and how to lower it.
pub fn large_run_note(what: &str, bytes: Option<u64>) -> Option<String> {
    let bytes = bytes.filter(|&b| b > LARGE_RUN_BYTES)?;
    let budget = hdgcn::limits::MemoryBudget::current()
        .map(|b| hdgcn::limits::format_bytes(b.bytes()))
        .unwrap_or_else(|e| format!("unreadable: {e}"));
    Some(format!(
        "note: {what} needs an estimated {} of memory (within the budget of {budget}; \
         set {}=SIZE to refuse runs above SIZE)",
        hdgcn::limits::format_bytes(bytes),
        hdgcn::limits::BUDGET_ENV,
    ))
}

/// The flag value of `v` (clap's name for it), as the summaries report it.
pub fn flag_name<T: ValueEnum>(v: &T) -> String {
    v.to_possible_value()
        .expect("no variant is skipped")
        .get_name()
        .to_owned()
}

/// `--runs`: a count of at least 1.
pub fn parse_runs(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}

/// Validation and test accuracies of the runs, in percent.
#[derive(Debug, Default)]
pub struct Accuracies {
    /// Validation accuracy of each run.
    pub val: Vec<f64>,
    /// Validation loss (cross-entropy) of each run, at its selected epoch.
    pub val_losses: Vec<f64>,
    /// Test accuracy of each run.
    pub test: Vec<f64>,
    /// Selected (best validation) epoch of each trained run.
    pub best_epochs: Vec<usize>,
}

impl Accuracies {
    /// Records one trained run's validation accuracy and loss, its test
    /// accuracy (accuracies given as fractions) and its selected epoch.
    pub fn push(&mut self, (val, val_loss): (f64, f64), test: f64, best_epoch: usize) {
        self.record((val, val_loss), test);
        self.best_epochs.push(best_epoch);
    }

    fn record(&mut self, (val, val_loss): (f64, f64), test: f64) {
        self.val.push(100.0 * val);
        self.val_losses.push(val_loss);
        self.test.push(100.0 * test);
    }

    /// Records the validation accuracy and loss and the test accuracy of a
    /// loaded checkpoint and says what they were.
    pub fn push_loaded(&mut self, path: &Path, val: (f64, f64), test: f64) {
        eprintln!(
            "loaded {}: val {:.2}  test {:.2}",
            path.display(),
            100.0 * val.0,
            100.0 * test
        );
        self.record(val, test);
    }

    /// `(test mean, test std, validation mean)`.
    pub fn summary(&self) -> (f64, f64, f64) {
        let (tm, ts) = mean_std(&self.test);
        let (vm, _) = mean_std(&self.val);
        (tm, ts, vm)
    }

    /// The mean validation loss over the runs.
    pub fn val_loss_mean(&self) -> f64 {
        mean_std(&self.val_losses).0
    }
}
