//! Graph classification: mini-batches of block-diagonal graphs, seeded
//! shuffling, early stopping and model selection on the validation graphs,
//! test accuracy at the selected epoch.

use std::time::Instant;

use ndarray::Array2;
use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;

use super::adversarial;
use super::selection::{SelectBy, Selected, Selection};
use crate::autograd::{Gradients, Index, Param, Tape, Var};
use crate::backend::{Axis, Backend};
use crate::conv::DeviceGraph;
use crate::error::{Error, Result, check_non_negative, check_positive};
use crate::float::Float;
use crate::graph::{Batch, Graph};
use crate::models::{GraphClassifier, GraphInput, InputLayer};
use crate::named::named_enum;
use crate::nn::{Features, Module};
use crate::optim::{
    AdaBeliefConfig, AdamConfig, ExponentialMovingAverage, LrSchedule, LrScheduleKind, Optimizer,
    clip_grad_norm, grad_norm,
};

/// The node inputs of one graph.
#[derive(Debug, Clone, PartialEq)]
pub enum GraphFeatures {
    /// One vocabulary id per node, for a model with an
    /// [`InputLayer::Embedding`]. A text document is a graph whose nodes
    /// are its distinct words: node `i` is word `ids[i]`.
    Tokens(Vec<usize>),
    /// One dense feature row per node.
    Dense(Array2<f32>),
}

impl GraphFeatures {
    /// Number of nodes described.
    pub fn num_nodes(&self) -> usize {
        match self {
            GraphFeatures::Tokens(t) => t.len(),
            GraphFeatures::Dense(x) => x.nrows(),
        }
    }
}

/// One labelled graph.
///
/// ```
/// use hdgcn::graph::Graph;
/// use hdgcn::train::{GraphFeatures, GraphSample};
///
/// // "the cat sat on the mat": distinct words as nodes, window-2 co-occurrence edges.
/// let vocab = ["the", "cat", "sat", "on", "mat"];
/// let edges = [(0, 1), (1, 2), (2, 3), (3, 0), (0, 4)];
/// let both: Vec<_> = edges.iter().flat_map(|&(a, b)| [(a, b), (b, a)]).collect();
/// let doc = GraphSample::new(
///     Graph::from_edges(vocab.len(), &both)?,
///     GraphFeatures::Tokens(vec![17, 4, 250, 31, 902]), // ids in a global vocabulary
///     1,
/// )?;
/// assert_eq!(doc.features.num_nodes(), 5);
/// # Ok::<(), hdgcn::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct GraphSample {
    /// The graph (at least one node).
    pub graph: Graph,
    /// One token id or feature row per node.
    pub features: GraphFeatures,
    /// The class.
    pub label: usize,
    /// Optional relative weight of each node (set by
    /// [`GraphSample::with_node_weights`]): when batched, each graph's
    /// weights are divided by their mean and handed to
    /// [`GraphClassifier::forward_weighted`]. By default the model's
    /// readout pools `w_v · h_v`, so a mean readout becomes the weighted
    /// mean `Σ_v w_v h_v / Σ_v w_v`; with
    /// [`NodeWeighting::Input`](crate::models::NodeWeighting::Input) the
    /// weights scale the node inputs instead. `None`: every node weighs 1.
    pub node_weights: Option<Vec<f64>>,
}

impl GraphSample {
    /// A sample, checked for one feature entry per node.
    ///
    /// # Errors
    /// [`Error::Empty`] for a graph without nodes; [`Error::ShapeMismatch`]
    /// if the features do not describe every node.
    pub fn new(graph: Graph, features: GraphFeatures, label: usize) -> Result<Self> {
        let s = GraphSample {
            graph,
            features,
            label,
            node_weights: None,
        };
        s.check_shape()?;
        Ok(s)
    }

    /// The sample with readout weights `w`, one per node (for text graphs,
    /// [`TfIdf::node_weights`](crate::data::text::TfIdf::node_weights)).
    /// Only the weights' ratios within the graph matter.
    ///
    /// ```
    /// use hdgcn::graph::Graph;
    /// use hdgcn::train::{GraphFeatures, GraphSample};
    ///
    /// let pair = Graph::from_edges(2, &[(0, 1), (1, 0)])?;
    /// let doc = GraphSample::new(pair, GraphFeatures::Tokens(vec![3, 9]), 0)?;
    /// let doc = doc.with_node_weights(vec![2.0, 0.5])?;
    /// assert_eq!(doc.node_weights, Some(vec![2.0, 0.5]));
    /// assert!(doc.clone().with_node_weights(vec![1.0]).is_err()); // one per node
    /// assert!(doc.with_node_weights(vec![0.0, 0.0]).is_err()); // nothing to pool
    /// # Ok::<(), hdgcn::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::ShapeMismatch`] unless there is one weight per node;
    /// [`Error::NonFinite`] for a NaN or infinite weight;
    /// [`Error::InvalidConfig`] for a negative weight or weights that sum
    /// to 0.
    pub fn with_node_weights(mut self, w: Vec<f64>) -> Result<Self> {
        self.node_weights = Some(w);
        self.check_shape()?;
        Ok(self)
    }

    /// The sample restricted to `nodes` ([`Graph::subgraph`]): node `i` of
    /// the result is node `nodes[i]`, with its token id or feature row; the
    /// label is kept.
    ///
    /// # Errors
    /// As [`Graph::subgraph`]: an empty, out-of-range or repeated node list.
    pub fn subgraph(&self, nodes: &[usize]) -> Result<GraphSample> {
        let graph = self.graph.subgraph(nodes)?;
        let features = match &self.features {
            GraphFeatures::Tokens(t) => {
                GraphFeatures::Tokens(nodes.iter().map(|&v| t[v]).collect())
            }
            GraphFeatures::Dense(x) => GraphFeatures::Dense(x.select(ndarray::Axis(0), nodes)),
        };
        let sub = GraphSample::new(graph, features, self.label)?;
        match &self.node_weights {
            None => Ok(sub),
            Some(w) => {
                let mut w: Vec<f64> = nodes.iter().map(|&v| w[v]).collect();
                // The kept nodes may all weigh 0: pool them evenly.
                if w.iter().all(|&x| x == 0.0) {
                    w.fill(1.0);
                }
                sub.with_node_weights(w)
            }
        }
    }

    /// Node dropout (DropNode; PyG's `dropout_node`): keeps each node
    /// independently with probability `1 - p` and returns the subgraph they
    /// induce, so a dropped node takes its edges with it. A graph must keep
    /// a node, so when every node is dropped one node, drawn uniformly,
    /// stays. `p = 0` returns the sample unchanged without drawing.
    ///
    /// ```
    /// use hdgcn::graph::Graph;
    /// use hdgcn::train::{GraphFeatures, GraphSample};
    /// use rand::SeedableRng;
    ///
    /// let path = Graph::from_edges(3, &[(0, 1), (1, 0), (1, 2), (2, 1)])?;
    /// let doc = GraphSample::new(path, GraphFeatures::Tokens(vec![7, 8, 9]), 0)?;
    /// let mut rng = rand::rngs::StdRng::seed_from_u64(0);
    /// let dropped = doc.drop_nodes(0.5, &mut rng)?;
    /// assert!((1..=3).contains(&dropped.graph.num_nodes()));
    /// # Ok::<(), hdgcn::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] unless `0 <= p < 1`.
    pub fn drop_nodes<R: rand::Rng + ?Sized>(&self, p: f64, rng: &mut R) -> Result<GraphSample> {
        check_node_dropout(p)?;
        if p == 0.0 {
            return Ok(self.clone());
        }
        let n = self.graph.num_nodes();
        let mut keep: Vec<usize> = (0..n).filter(|_| !rng.random_bool(p)).collect();
        if keep.is_empty() {
            keep.push(rng.random_range(0..n));
        }
        self.subgraph(&keep)
    }

    fn check_shape(&self) -> Result<()> {
        let n = self.graph.num_nodes();
        if n == 0 {
            return Err(Error::Empty("graph sample with no nodes".into()));
        }
        if self.features.num_nodes() != n {
            return Err(Error::shape(
                "graph sample features",
                format!("{n} rows (one per node)"),
                format!("{}", self.features.num_nodes()),
            ));
        }
        if let Some(w) = &self.node_weights {
            check_node_weights(w, n)?;
        }
        Ok(())
    }
}

/// One finite, non-negative weight per node, not all zero.
fn check_node_weights(w: &[f64], n: usize) -> Result<()> {
    if w.len() != n {
        return Err(Error::shape(
            "graph sample node weights",
            format!("{n} weights (one per node)"),
            format!("{}", w.len()),
        ));
    }
    if let Some(&v) = w.iter().find(|v| !v.is_finite()) {
        return Err(Error::NonFinite {
            what: "node weight of a graph sample".into(),
            value: v,
        });
    }
    if let Some(&v) = w.iter().find(|&&v| v < 0.0) {
        return Err(Error::InvalidConfig(format!(
            "node weights must be non-negative, got {v}"
        )));
    }
    if w.iter().sum::<f64>() <= 0.0 {
        return Err(Error::InvalidConfig(
            "node weights sum to 0: the readout would pool nothing".into(),
        ));
    }
    Ok(())
}

fn check_node_dropout(p: f64) -> Result<()> {
    if (0.0..1.0).contains(&p) {
        Ok(())
    } else {
        Err(Error::InvalidConfig(format!(
            "node dropout must be in [0, 1), got {p}"
        )))
    }
}

/// The optimiser of [`train_graph_classifier`].
///
/// ```
/// use hdgcn::train::GraphOptimizer;
///
/// assert_eq!("AdaBelief".parse::<GraphOptimizer>()?, GraphOptimizer::AdaBelief);
/// assert_eq!(GraphOptimizer::Adam.as_str().parse::<GraphOptimizer>()?, GraphOptimizer::Adam);
/// assert!("sgd".parse::<GraphOptimizer>().unwrap_err().to_string().contains("'sgd'"));
/// # Ok::<(), hdgcn::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum GraphOptimizer {
    /// [`crate::optim::Adam`] (L2 weight decay).
    #[default]
    Adam,
    /// [`crate::optim::AdaBelief`] (decoupled weight decay, rectified), as
    /// used by HDGCN.
    AdaBelief,
}

named_enum!(GraphOptimizer, "optimizer", {
    Adam => "adam",
    AdaBelief => "adabelief",
});

/// How the adversarial step of [`GraphTrainConfig::adversarial_epsilon`]
/// is taken and normalised.
///
/// ```
/// use hdgcn::train::AdversarialNorm;
///
/// assert_eq!("Graph".parse::<AdversarialNorm>()?, AdversarialNorm::Graph);
/// assert_eq!(AdversarialNorm::Table.as_str().parse::<AdversarialNorm>()?, AdversarialNorm::Table);
/// assert!("node".parse::<AdversarialNorm>().unwrap_err().to_string().contains("'node'"));
/// # Ok::<(), hdgcn::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AdversarialNorm {
    /// On the parameters of the input layer (`input.*`: the embedding
    /// table), `r = ε g / ‖g‖` with `‖g‖` the L2 norm of their whole
    /// gradient: the fast gradient method as PyTorch recipes apply it to
    /// an embedding weight. The step goes mostly to the rows of the
    /// words with the largest gradients in the batch.
    #[default]
    Table,
    /// On each graph's node input vectors (what the input layer gives,
    /// or the features without one), `r_G = ε g_G / ‖g_G‖` with `g_G`
    /// the gradient of the loss with respect to graph `G`'s node inputs
    /// and `‖g_G‖` its L2 norm: one step of length `ε` per graph, as
    /// Miyato et al. (ICLR 2017) normalise per example. Works with any
    /// input layer; the parameters are not moved. Costs one read-back of
    /// that gradient per step on a GPU backend.
    Graph,
}

named_enum!(AdversarialNorm, "adversarial norm", {
    Table => "table",
    Graph => "graph",
});

/// Hyper-parameters of [`train_graph_classifier`].
#[derive(Debug, Clone, PartialEq)]
pub struct GraphTrainConfig {
    /// Maximum number of epochs (passes over the training graphs).
    pub epochs: usize,
    /// Graphs per mini-batch (training and evaluation).
    pub batch_size: usize,
    /// Learning rate (the base rate of `lr_schedule`).
    pub lr: f64,
    /// How the learning rate changes from epoch to epoch (default: constant).
    pub lr_schedule: LrScheduleKind,
    /// Epochs of linear learning-rate warm-up before `lr_schedule`
    /// ([`LrScheduleKind::schedule_with_warmup`]): the rate climbs to `lr`
    /// in equal steps, and the schedule runs over the epochs left. Must be
    /// below `epochs`; 0 (the default): no warm-up.
    pub lr_warmup_epochs: usize,
    /// Weight decay.
    pub weight_decay: f64,
    /// The optimiser.
    pub optimizer: GraphOptimizer,
    /// Stop after this many epochs without a better validation score
    /// (by `select_by`; `None`: run all epochs).
    pub patience: Option<usize>,
    /// Which validation score selects the epoch and resets the patience
    /// (default: accuracy, ties broken by the loss).
    pub select_by: SelectBy,
    /// Clip the gradients of every step to this total L2 norm
    /// ([`crate::optim::clip_grad_norm`]); `None` (the default): no clipping.
    pub clip_grad_norm: Option<f64>,
    /// Label smoothing `ε` of the training loss ([`Var::nll_smoothed`],
    /// PyTorch's `CrossEntropyLoss(label_smoothing=ε)`), in `[0, 1]`;
    /// 0 (the default): plain cross-entropy. The reported training loss is
    /// the smoothed one; the validation loss that breaks ties in model
    /// selection stays the plain cross-entropy.
    ///
    /// [`Var::nll_smoothed`]: crate::autograd::Var::nll_smoothed
    pub label_smoothing: f64,
    /// Node dropout of the training graphs, in `[0, 1)`: every epoch each
    /// training graph is replaced by `drop_nodes(node_dropout, ..)`
    /// ([`GraphSample::drop_nodes`]), a fresh draw per graph and epoch from
    /// its own seeded stream, so the shuffling and the dropout masks are
    /// the same as without it. Validation and test graphs are never
    /// dropped. 0 (the default): off.
    pub node_dropout: f64,
    /// Evaluate and select with an exponential moving average of the
    /// weights ([`ExponentialMovingAverage`] with this decay, in `[0, 1)`,
    /// and warm-up), updated after every step: validation accuracy, the
    /// selected snapshot and the test accuracy are those of the averaged
    /// weights, while the optimiser trains on its own. `None` (the
    /// default): the weights of the last step.
    ///
    /// [`ExponentialMovingAverage`]: crate::optim::ExponentialMovingAverage
    pub ema_decay: Option<f64>,
    /// Weight `α` of R-Drop's consistency term (Liang et al., NeurIPS
    /// 2021): each training batch runs through the model twice, with
    /// independent dropout masks, and the loss is the mean of the two
    /// (smoothed) cross-entropies plus `α` times the symmetric KL
    /// divergence between the two predictions ([`Var::symmetric_kl`]).
    /// A step costs about twice as much. Finite and non-negative; 0 (the
    /// default): one pass, the plain loss.
    ///
    /// [`Var::symmetric_kl`]: crate::autograd::Var::symmetric_kl
    pub rdrop_alpha: f64,
    /// Adversarial training of the input layer (the fast gradient method of
    /// Goodfellow et al., 2015, on word embeddings as in Miyato et al.,
    /// ICLR 2017): after each step's backward pass, the inputs are moved
    /// by a step of length `ε` along their gradient, as
    /// [`GraphTrainConfig::adversarial_norm`] says (by default the
    /// parameters named `input.*`, the embedding table, by `r = ε g /
    /// ‖g‖`, `‖g‖` the L2 norm over the whole input layer); the batch
    /// runs again there with the same dropout masks, the gradients of that
    /// loss are added to the step's, and the parameters go back before
    /// the optimiser steps. A step costs about twice as much; the reported
    /// training loss stays the unperturbed one. Finite and positive;
    /// `None` (the default): off.
    pub adversarial_epsilon: Option<f64>,
    /// Where the step of [`GraphTrainConfig::adversarial_epsilon`] is
    /// taken and how it is normalised: over the whole embedding table
    /// ([`AdversarialNorm::Table`], the default) or per graph on its node
    /// inputs ([`AdversarialNorm::Graph`]). Read only with
    /// `adversarial_epsilon`.
    pub adversarial_norm: AdversarialNorm,
    /// Epochs trained without the step of
    /// [`GraphTrainConfig::adversarial_epsilon`] before it starts, so that
    /// the model has learned features for the step to push against
    /// (epochs `0..adversarial_warmup_epochs` are plain; a refit counts
    /// the same epochs). Must be below `epochs` when `adversarial_epsilon`
    /// is set; read only with it. 0 (the default): from the first epoch.
    pub adversarial_warmup_epochs: usize,
    /// Multiplier of the learning rate of the model's input layer (the
    /// parameters named `input.*`: an embedding table or an input
    /// projection), as a PyTorch parameter group with its own `lr`; it
    /// follows the schedule like the rest. An embedding row gets a
    /// gradient only in the batches whose graphs hold its token, so with
    /// the learning rate the rest of a model needs the table can stay
    /// under-trained. Finite and positive; 1 (the default): one learning
    /// rate for all.
    pub input_lr_scale: f64,
    /// Seed of the shuffling and of the dropout streams.
    pub seed: u64,
    /// Hide the progress bar.
    pub quiet: bool,
}

impl Default for GraphTrainConfig {
    fn default() -> Self {
        GraphTrainConfig {
            epochs: 100,
            batch_size: 32,
            lr: 1e-3,
            lr_schedule: LrScheduleKind::Constant,
            lr_warmup_epochs: 0,
            weight_decay: 0.0,
            optimizer: GraphOptimizer::Adam,
            patience: Some(20),
            select_by: SelectBy::Accuracy,
            clip_grad_norm: None,
            label_smoothing: 0.0,
            node_dropout: 0.0,
            ema_decay: None,
            rdrop_alpha: 0.0,
            adversarial_epsilon: None,
            adversarial_norm: AdversarialNorm::Table,
            adversarial_warmup_epochs: 0,
            input_lr_scale: 1.0,
            seed: 0,
            quiet: true,
        }
    }
}

/// Outcome of [`train_graph_classifier`].
#[derive(Debug, Clone)]
pub struct GraphTrainReport {
    /// Epoch (0-based) selected on validation
    /// ([`GraphTrainConfig::select_by`]).
    pub best_epoch: usize,
    /// Validation accuracy at the selected epoch.
    pub val_acc: f64,
    /// Validation loss at the selected epoch.
    pub val_loss: f64,
    /// Test accuracy at the selected epoch.
    pub test_acc: f64,
    /// Training accuracy at the selected epoch.
    pub train_acc: f64,
    /// Epochs actually run.
    pub epochs_run: usize,
    /// Seconds of training per epoch (all mini-batch steps; no evaluation).
    pub epoch_secs: Vec<f64>,
    /// Mean training loss of the last epoch.
    pub final_loss: f64,
    /// One record per epoch run, in order.
    pub history: Vec<EpochRecord>,
}

/// What one epoch of [`train_graph_classifier`] measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EpochRecord {
    /// The learning rate of the epoch's steps (from the schedule).
    pub lr: f64,
    /// Mean training loss over the epoch's mini-batches (weighted by graphs).
    pub train_loss: f64,
    /// Mean total gradient norm ([`crate::optim::grad_norm`], before any
    /// clipping) over the epoch's steps.
    pub grad_norm: f64,
    /// Validation accuracy after the epoch.
    pub val_acc: f64,
    /// Validation loss after the epoch.
    pub val_loss: f64,
}

/// A mini-batch on the device: the block-diagonal graph, the node inputs
/// (tape-independent) and the labels.
struct Prepared<B: Backend> {
    graph: DeviceGraph<B>,
    input: PreparedInput<B>,
    /// `N x 1` readout weights, each graph's with mean 1 (`None`: all 1).
    weights: Option<B::Tensor>,
    targets: Index<B>,
    labels: Vec<usize>,
}

enum PreparedInput<B: Backend> {
    Tokens(Index<B>),
    Dense(B::Tensor),
}

impl<B: Backend> Prepared<B> {
    fn input(&self, tape: &Tape<B>) -> GraphInput<B> {
        match &self.input {
            PreparedInput::Tokens(idx) => GraphInput::Tokens(idx.clone()),
            PreparedInput::Dense(t) => {
                GraphInput::Features(Features::Dense(tape.constant(t.clone())))
            }
        }
    }

    fn forward(&self, model: &GraphClassifier<B>, tape: &Tape<B>) -> Result<Var<B>> {
        self.forward_with(model, tape, None)
    }

    /// The logits, with `offset` added to the node inputs when given.
    fn forward_with(
        &self,
        model: &GraphClassifier<B>,
        tape: &Tape<B>,
        offset: Option<&Var<B>>,
    ) -> Result<Var<B>> {
        let w = self.weights.as_ref().map(|w| tape.constant(w.clone()));
        let x = self.input(tape);
        match offset {
            Some(r) => model.forward_perturbed(tape, &self.graph, &x, w.as_ref(), r),
            None => model.forward_weighted(tape, &self.graph, &x, w.as_ref()),
        }
    }
}

/// The batch's readout weights, `N x 1`, each graph's divided by their
/// mean; `None` when no sample has weights.
fn batch_weights<B: Backend>(backend: &B, samples: &[&GraphSample]) -> Result<Option<B::Tensor>> {
    if samples.iter().all(|s| s.node_weights.is_none()) {
        return Ok(None);
    }
    let mut all = Vec::new();
    for (i, s) in samples.iter().enumerate() {
        let Some(w) = &s.node_weights else {
            return Err(Error::InvalidConfig(format!(
                "graph {i} of a batch has no node weights but others have: give all or none"
            )));
        };
        let mean = w.iter().sum::<f64>() / w.len() as f64;
        all.extend(w.iter().map(|&v| B::Elem::from_f64_lossy(v / mean)));
    }
    let n = all.len();
    let w = Array2::from_shape_vec((n, 1), all).map_err(|e| {
        Error::shape(
            "graph batch node weights",
            format!("{n} x 1"),
            e.to_string(),
        )
    })?;
    Ok(Some(backend.upload(w.view())))
}

fn prepare<B: Backend>(backend: &B, samples: &[&GraphSample]) -> Result<Prepared<B>> {
    let graphs: Vec<Graph> = samples.iter().map(|s| s.graph.clone()).collect();
    let batch = Batch::new(&graphs)?;
    let graph = DeviceGraph::from_batch(backend, &batch)?;
    let input = match samples.first().map(|s| &s.features) {
        Some(GraphFeatures::Tokens(_)) => {
            let mut ids = Vec::with_capacity(batch.graph().num_nodes());
            for s in samples {
                if let GraphFeatures::Tokens(t) = &s.features {
                    ids.extend_from_slice(t);
                }
            }
            PreparedInput::Tokens(Index::new(backend, &ids)?)
        }
        _ => {
            let views: Vec<_> = samples
                .iter()
                .filter_map(|s| match &s.features {
                    GraphFeatures::Dense(x) => Some(x.view()),
                    GraphFeatures::Tokens(_) => None,
                })
                .collect();
            let x = ndarray::concatenate(ndarray::Axis(0), &views)
                .map_err(|e| Error::shape("graph batch features", "equal widths", e.to_string()))?;
            let x = x.mapv(|v| B::Elem::from_f64_lossy(f64::from(v)));
            PreparedInput::Dense(backend.upload(x.view()))
        }
    };
    let labels: Vec<usize> = samples.iter().map(|s| s.label).collect();
    Ok(Prepared {
        graph,
        input,
        weights: batch_weights(backend, samples)?,
        targets: Index::new(backend, &labels)?,
        labels,
    })
}

/// Checks every sample against the model: shapes, the kind of features the
/// input layer reads, token ids within the vocabulary, labels within the
/// classes. Errors name the set and the sample.
fn check_samples<B: Backend>(
    model: &GraphClassifier<B>,
    samples: &[GraphSample],
    what: &str,
) -> Result<()> {
    if samples.is_empty() {
        return Err(Error::Empty(format!("{what} set has no graphs")));
    }
    let classes = model.num_classes();
    let dense_width = match &model.input {
        Some(InputLayer::Linear(l)) => l.in_features(),
        _ => model.first_conv()?.in_channels(),
    };
    let weighted = samples.iter().filter(|s| s.node_weights.is_some()).count();
    if weighted != 0 && weighted != samples.len() {
        return Err(Error::InvalidConfig(format!(
            "{weighted} of the {} {what} samples have node weights: give all or none",
            samples.len()
        )));
    }
    for (i, s) in samples.iter().enumerate() {
        let named = |e: Error| match e {
            Error::Empty(m) => Error::Empty(format!("{what} sample {i}: {m}")),
            Error::ShapeMismatch { expected, got, .. } => Error::ShapeMismatch {
                op: "graph sample features",
                expected: format!("{what} sample {i}: {expected}"),
                got,
            },
            other => other,
        };
        s.check_shape().map_err(named)?;
        if s.label >= classes {
            return Err(Error::IndexOutOfRange {
                what: "class label of a graph sample",
                index: s.label,
                len: classes,
            });
        }
        let vocab = model.input.as_ref().and_then(InputLayer::num_tokens);
        match (&s.features, vocab) {
            (GraphFeatures::Tokens(ids), Some(vocab)) => {
                if let Some(&bad) = ids.iter().find(|&&t| t >= vocab) {
                    return Err(Error::IndexOutOfRange {
                        what: "token id of a graph sample",
                        index: bad,
                        len: vocab,
                    });
                }
            }
            (GraphFeatures::Tokens(_), _) => {
                return Err(Error::InvalidConfig(format!(
                    "{what} sample {i} has token ids but the model has no embedding"
                )));
            }
            (GraphFeatures::Dense(_), Some(_)) => {
                return Err(Error::InvalidConfig(format!(
                    "{what} sample {i} has dense features but the model embeds token ids"
                )));
            }
            (GraphFeatures::Dense(x), _) => {
                if x.ncols() != dense_width {
                    return Err(Error::shape(
                        "graph sample features",
                        format!("{what} sample {i}: {dense_width} columns"),
                        format!("{} columns", x.ncols()),
                    ));
                }
                if let Some(v) = x.iter().find(|v| !v.is_finite()) {
                    return Err(Error::NonFinite {
                        what: format!("features of {what} sample {i}"),
                        value: f64::from(*v),
                    });
                }
            }
        }
    }
    Ok(())
}

fn prepare_all<B: Backend>(
    backend: &B,
    samples: &[GraphSample],
    batch_size: usize,
) -> Result<Vec<Prepared<B>>> {
    let refs: Vec<&GraphSample> = samples.iter().collect();
    refs.chunks(batch_size.max(1))
        .map(|c| prepare(backend, c))
        .collect()
}

/// Accuracy and mean cross-entropy over prepared batches (evaluation mode).
fn evaluate_prepared<B: Backend>(
    model: &mut GraphClassifier<B>,
    batches: &[Prepared<B>],
) -> Result<(f64, f64)> {
    model.set_training(false);
    let result = (|| {
        let backend = model.backend().clone();
        let (mut correct, mut loss, mut n) = (0usize, 0.0, 0usize);
        for b in batches {
            let tape = Tape::inference(&backend);
            let logits = b.forward(model, &tape)?;
            let logp = logits.log_softmax(Axis::Cols);
            loss += logp.nll(&b.targets)?.scalar()? * b.labels.len() as f64;
            let pred = super::argmax_rows(&logits.to_array());
            correct += pred.iter().zip(&b.labels).filter(|(p, t)| p == t).count();
            n += b.labels.len();
        }
        if n == 0 {
            return Err(Error::Empty("evaluation over zero graphs".into()));
        }
        Ok((correct as f64 / n as f64, loss / n as f64))
    })();
    model.set_training(true);
    result
}

/// Accuracy and mean cross-entropy of `model` on `samples` (evaluation
/// mode, no recording), in batches of `batch_size` graphs.
///
/// # Errors
/// [`Error::Empty`] for no samples; errors naming the sample for samples
/// that do not suit the model.
pub fn evaluate_graphs<B: Backend>(
    model: &mut GraphClassifier<B>,
    samples: &[GraphSample],
    batch_size: usize,
) -> Result<(f64, f64)> {
    check_samples(model, samples, "evaluation")?;
    let backend = model.backend().clone();
    let batches = prepare_all(&backend, samples, batch_size)?;
    evaluate_prepared(model, &batches)
}

/// Checks the settings of `cfg` that [`train_graph_classifier`] and
/// [`refit_graph_classifier`] read before they build anything.
fn check_config(cfg: &GraphTrainConfig) -> Result<()> {
    if cfg.epochs == 0 {
        return Err(Error::InvalidConfig("epochs must be at least 1".into()));
    }
    if cfg.batch_size == 0 {
        return Err(Error::InvalidConfig("batch_size must be at least 1".into()));
    }
    if let Some(c) = cfg.clip_grad_norm {
        check_positive("clip_grad_norm", c)?;
    }
    crate::autograd::check_label_smoothing(cfg.label_smoothing)?;
    check_node_dropout(cfg.node_dropout)?;
    check_non_negative("rdrop_alpha", cfg.rdrop_alpha)?;
    adversarial::check_settings(
        cfg.adversarial_epsilon,
        cfg.adversarial_warmup_epochs,
        cfg.epochs,
    )?;
    check_positive("input_lr_scale", cfg.input_lr_scale)
}

/// What one epoch of training measured.
struct EpochStats {
    lr: f64,
    train_loss: f64,
    grad_norm: f64,
    secs: f64,
}

/// A training run's state from epoch to epoch: the optimisers of the two
/// parameter groups, the schedule, the shuffling and node-dropout streams
/// and the weight average. [`train_graph_classifier`] and
/// [`refit_graph_classifier`] step the same runner, so a refit repeats a
/// selection run's epochs exactly.
struct EpochRunner<'a, B: Backend> {
    backend: B,
    train: &'a [GraphSample],
    cfg: &'a GraphTrainConfig,
    opt: Box<dyn Optimizer<B>>,
    input_opt: Box<dyn Optimizer<B>>,
    input_params: Vec<Param<B>>,
    other_params: Vec<Param<B>>,
    /// All parameters, in the model's order (selection and the average).
    params: Vec<Param<B>>,
    schedule: Box<dyn LrSchedule>,
    rng: StdRng,
    drop_rng: StdRng,
    order: Vec<usize>,
    ema: Option<ExponentialMovingAverage<B>>,
    step: u64,
}

impl<'a, B: Backend> EpochRunner<'a, B> {
    /// Builds the optimisers, the schedule and the streams of `cfg`
    /// (already checked by [`check_config`]).
    fn new(
        model: &GraphClassifier<B>,
        train: &'a [GraphSample],
        cfg: &'a GraphTrainConfig,
    ) -> Result<Self> {
        let build = |lr: f64| -> Result<Box<dyn Optimizer<B>>> {
            Ok(match cfg.optimizer {
                GraphOptimizer::Adam => Box::new(
                    AdamConfig::default()
                        .lr(lr)
                        .weight_decay(cfg.weight_decay)
                        .build::<B>()?,
                ),
                GraphOptimizer::AdaBelief => Box::new(
                    AdaBeliefConfig::default()
                        .lr(lr)
                        .weight_decay(cfg.weight_decay)
                        .build::<B>()?,
                ),
            })
        };
        // Two parameter groups: the input layer at lr × scale, the rest at lr.
        // The optimisers keep their state per parameter, so at scale 1 the two
        // groups update exactly as one optimiser over all parameters.
        let (input_params, other_params): (Vec<_>, Vec<_>) = model
            .named_params()
            .into_iter()
            .partition(|(name, _)| name.starts_with("input."));
        let params = model.params();
        let ema = cfg
            .ema_decay
            .map(|d| ExponentialMovingAverage::new(&params, d).map(|e| e.with_warmup(true)))
            .transpose()?;
        Ok(EpochRunner {
            backend: model.backend().clone(),
            train,
            cfg,
            opt: build(cfg.lr)?,
            input_opt: build(cfg.lr * cfg.input_lr_scale)?,
            input_params: input_params.into_iter().map(|(_, p)| p).collect(),
            other_params: other_params.into_iter().map(|(_, p)| p).collect(),
            params,
            schedule: cfg.lr_schedule.schedule_with_warmup(
                cfg.lr,
                cfg.epochs,
                cfg.lr_warmup_epochs,
            )?,
            rng: StdRng::seed_from_u64(cfg.seed),
            // Node dropout draws from its own stream: the shuffling stays as without it.
            drop_rng: StdRng::seed_from_u64(cfg.seed ^ 0x646f_6e6f_6465),
            order: (0..train.len()).collect(),
            ema,
            step: 0,
        })
    }

    /// One pass over the training graphs in a fresh shuffled order, at the
    /// schedule's rate for `epoch`.
    fn run_epoch(&mut self, model: &mut GraphClassifier<B>, epoch: usize) -> Result<EpochStats> {
        let (cfg, train, backend) = (self.cfg, self.train, &self.backend);
        let t0 = Instant::now();
        let lr = self.schedule.lr_at(epoch);
        self.opt.set_learning_rate(lr);
        self.input_opt.set_learning_rate(lr * cfg.input_lr_scale);
        self.order.shuffle(&mut self.rng);
        let (mut loss_sum, mut norm_sum, mut steps) = (0.0, 0.0, 0usize);
        for chunk in self.order.chunks(cfg.batch_size) {
            let b = if cfg.node_dropout > 0.0 {
                let dropped = chunk
                    .iter()
                    .map(|&i| train[i].drop_nodes(cfg.node_dropout, &mut self.drop_rng))
                    .collect::<Result<Vec<_>>>()?;
                prepare(backend, &dropped.iter().collect::<Vec<_>>())?
            } else {
                let samples: Vec<&GraphSample> = chunk.iter().map(|&i| &train[i]).collect();
                prepare(backend, &samples)?
            };
            let seed = cfg.seed.wrapping_mul(1_000_003).wrapping_add(self.step);
            let adversarial = cfg
                .adversarial_epsilon
                .filter(|_| epoch >= cfg.adversarial_warmup_epochs);
            let per_graph = adversarial.is_some() && cfg.adversarial_norm == AdversarialNorm::Graph;
            let offset = if per_graph {
                InputOffset::Probe
            } else {
                InputOffset::None
            };
            let (value, mut grads, input_grad) =
                loss_and_grads(backend, model, &b, cfg, seed, epoch, offset)?;
            if let Some(eps) = adversarial {
                match cfg.adversarial_norm {
                    AdversarialNorm::Graph => {
                        let g = input_grad.ok_or_else(|| {
                            Error::Autograd(
                                "the probe pass gave no gradient for the node inputs".into(),
                            )
                        })?;
                        self.add_graph_adversarial_grads(
                            model, &b, eps, seed, epoch, &g, &mut grads,
                        )?
                    }
                    AdversarialNorm::Table => {
                        self.add_adversarial_grads(model, &b, eps, seed, epoch, &mut grads)?
                    }
                }
            }
            self.step += 1;
            let norm = match cfg.clip_grad_norm {
                Some(max_norm) => clip_grad_norm(backend, &mut grads, max_norm)?,
                None => grad_norm(backend, &grads),
            };
            if !norm.is_finite() {
                return Err(Error::Numerical(format!(
                    "gradient norm became {norm} at epoch {epoch}"
                )));
            }
            norm_sum += norm;
            steps += 1;
            self.opt.step(&self.other_params, &grads)?;
            self.input_opt.step(&self.input_params, &grads)?;
            if let Some(ema) = &mut self.ema {
                ema.update(&self.params)?;
            }
            loss_sum += value * chunk.len() as f64;
        }
        Ok(EpochStats {
            lr,
            train_loss: loss_sum / train.len() as f64,
            grad_norm: norm_sum / steps.max(1) as f64,
            secs: t0.elapsed().as_secs_f64(),
        })
    }

    /// The fast gradient method on the input layer
    /// ([`GraphTrainConfig::adversarial_epsilon`]): moves the `input.*`
    /// parameters by `eps g / ‖g‖`, runs the batch again with the same
    /// dropout seed, adds that pass's gradients to `grads` and restores
    /// the parameters. A zero gradient leaves `grads` as it is.
    fn add_adversarial_grads(
        &self,
        model: &GraphClassifier<B>,
        b: &Prepared<B>,
        eps: f64,
        seed: u64,
        epoch: usize,
        grads: &mut Gradients<B>,
    ) -> Result<()> {
        let backend = &self.backend;
        let Some(moved) = adversarial::move_along_gradient(backend, &self.input_params, grads, eps)
        else {
            return Ok(());
        };
        let pass = loss_and_grads(backend, model, b, self.cfg, seed, epoch, InputOffset::None);
        drop(moved);
        let (_, adv, _) = pass?;
        self.accumulate(grads, &adv);
        Ok(())
    }

    /// The per-graph adversarial step ([`AdversarialNorm::Graph`]): with
    /// `input_grad` the gradient of the loss with respect to the batch's
    /// node inputs, runs the batch again with `r_G = eps g_G / ‖g_G‖`
    /// added to each graph's inputs (graphs whose gradient is zero get no
    /// step) and the same dropout seed, and adds that pass's gradients to
    /// `grads`.
    #[allow(clippy::too_many_arguments)]
    fn add_graph_adversarial_grads(
        &self,
        model: &GraphClassifier<B>,
        b: &Prepared<B>,
        eps: f64,
        seed: u64,
        epoch: usize,
        input_grad: &B::Tensor,
        grads: &mut Gradients<B>,
    ) -> Result<()> {
        let r = per_graph_step(&self.backend, input_grad, &b.graph.ptr(), eps);
        let offset = InputOffset::Fixed(r);
        let (_, adv, _) = loss_and_grads(&self.backend, model, b, self.cfg, seed, epoch, offset)?;
        self.accumulate(grads, &adv);
        Ok(())
    }

    /// Adds the gradients of a second pass, `more`, to `grads`.
    fn accumulate(&self, grads: &mut Gradients<B>, more: &Gradients<B>) {
        adversarial::add_gradients(&self.backend, &self.params, grads, more);
    }
}

/// `eps g_G / ‖g_G‖` for each graph `G` of a batch, whose node rows in
/// `g` are `ptr[i]..ptr[i + 1]`; zero for a graph whose gradient is zero
/// (or not finite).
fn per_graph_step<B: Backend>(backend: &B, g: &B::Tensor, ptr: &[usize], eps: f64) -> B::Tensor {
    let mut a = backend.download(g);
    for w in ptr.windows(2) {
        let mut rows = a.slice_mut(ndarray::s![w[0]..w[1], ..]);
        let norm = rows
            .iter()
            .map(|v| v.to_f64_exact().powi(2))
            .sum::<f64>()
            .sqrt();
        let scale = if norm > 0.0 && norm.is_finite() {
            eps / norm
        } else {
            0.0
        };
        rows.mapv_inplace(|v| B::Elem::from_f64_lossy(v.to_f64_exact() * scale));
    }
    backend.upload(a.view())
}

/// What a training pass adds to the batch's node inputs
/// ([`GraphClassifier::forward_perturbed`]).
enum InputOffset<B: Backend> {
    /// Nothing: the plain forward pass.
    None,
    /// Zeros recorded as an input, so that the pass also returns the
    /// gradient of the loss with respect to the node inputs.
    Probe,
    /// A fixed perturbation, `N x` the model's input width (no gradient).
    Fixed(B::Tensor),
}

/// One forward and backward pass of the training loss on `b`, with the
/// dropout streams of `seed` and `offset` added to the node inputs: the
/// (smoothed) cross-entropy, or with [`GraphTrainConfig::rdrop_alpha`]
/// R-Drop's two passes and their KL term. Returns the loss, the gradients
/// of every parameter it used and, for [`InputOffset::Probe`], the
/// gradient with respect to the node inputs.
fn loss_and_grads<B: Backend>(
    backend: &B,
    model: &GraphClassifier<B>,
    b: &Prepared<B>,
    cfg: &GraphTrainConfig,
    seed: u64,
    epoch: usize,
    offset: InputOffset<B>,
) -> Result<(f64, Gradients<B>, Option<B::Tensor>)> {
    // The tape ends with this function, before the optimiser step, so the
    // step updates the parameters in place (no copy-on-write).
    let tape = Tape::with_seed(backend, seed);
    let offset = match offset {
        InputOffset::None => None,
        InputOffset::Probe => {
            let (n, d) = (b.graph.num_nodes(), model.input_channels()?);
            Some(tape.input(backend.full(n, d, B::Elem::from_f64_lossy(0.0))))
        }
        InputOffset::Fixed(r) => Some(tape.constant(r)),
    };
    let offset = offset.as_ref();
    let logp = b
        .forward_with(model, &tape, offset)?
        .log_softmax(Axis::Cols);
    let mut loss = logp.nll_smoothed(&b.targets, cfg.label_smoothing)?;
    if cfg.rdrop_alpha > 0.0 {
        // R-Drop: a second pass draws fresh dropout masks from the tape.
        let logp2 = b
            .forward_with(model, &tape, offset)?
            .log_softmax(Axis::Cols);
        let loss2 = logp2.nll_smoothed(&b.targets, cfg.label_smoothing)?;
        loss = loss
            .add(&loss2)?
            .scale(0.5)
            .add(&logp.symmetric_kl(&logp2)?.scale(cfg.rdrop_alpha))?;
    }
    // Backward first: on a GPU backend the device runs the forward pass
    // while the host records the backward one.
    let grads = loss.backward()?;
    let value = loss.scalar()?;
    if !value.is_finite() {
        return Err(Error::Numerical(format!(
            "training loss became {value} at epoch {epoch}"
        )));
    }
    let input_grad = offset
        .filter(|r| r.requires_grad())
        .and_then(|r| grads.wrt(r).cloned());
    Ok((value, grads, input_grad))
}

/// Trains `model` on `train` in shuffled mini-batches, selects the epoch
/// with the best validation score ([`GraphTrainConfig::select_by`]:
/// accuracy, ties broken by the loss, or the loss; the test graphs are
/// never looked at for selection), restores those parameters and reports
/// test accuracy there.
///
/// Each mini-batch is one block-diagonal [`Batch`] on the device
/// ([`DeviceGraph::from_batch`]); the order is reshuffled every epoch with
/// `StdRng::seed_from_u64(cfg.seed)`, so a run repeats exactly.
///
/// # Errors
/// [`Error::InvalidConfig`] for zero epochs or batch size, a label
/// smoothing outside `[0, 1]`, a node dropout or EMA decay outside
/// `[0, 1)`, an `input_lr_scale` that is not finite and positive, an
/// `rdrop_alpha` that is negative or not finite, or an invalid optimiser
/// setting or learning-rate schedule;
/// [`Error::Empty`]
/// for an empty set; errors naming the set and sample for samples that do
/// not suit the model;
/// [`Error::Numerical`] if the loss becomes non-finite.
pub fn train_graph_classifier<B: Backend>(
    model: &mut GraphClassifier<B>,
    train: &[GraphSample],
    val: &[GraphSample],
    test: &[GraphSample],
    cfg: &GraphTrainConfig,
) -> Result<GraphTrainReport> {
    check_config(cfg)?;
    check_samples(model, train, "training")?;
    check_samples(model, val, "validation")?;
    check_samples(model, test, "test")?;
    let backend = model.backend().clone();
    let mut runner = EpochRunner::new(model, train, cfg)?;
    let val_batches = prepare_all(&backend, val, cfg.batch_size)?;

    let mut selection = Selection::new(cfg.patience, cfg.select_by);
    let mut epoch_secs = Vec::with_capacity(cfg.epochs);
    let mut history = Vec::with_capacity(cfg.epochs);
    let (mut epochs_run, mut final_loss) = (0, f64::NAN);
    model.set_training(true);
    let pb = super::progress_bar(cfg.epochs as u64, cfg.quiet);
    for epoch in 0..cfg.epochs {
        let stats = runner.run_epoch(model, epoch)?;
        epoch_secs.push(stats.secs);
        final_loss = stats.train_loss;
        epochs_run = epoch + 1;

        let (val_acc, val_loss) =
            selection.validate(epoch, &runner.params, runner.ema.as_mut(), || {
                evaluate_prepared(model, &val_batches)
            })?;
        history.push(EpochRecord {
            lr: stats.lr,
            train_loss: final_loss,
            grad_norm: stats.grad_norm,
            val_acc,
            val_loss,
        });
        pb.set_message(format!("loss {final_loss:.4} val {val_acc:.4}"));
        pb.inc(1);
        if selection.should_stop() {
            break;
        }
    }
    pb.finish_and_clear();
    let Selected {
        epoch: best_epoch,
        val_acc,
        val_loss,
    } = selection.restore(&backend, &runner.params)?;
    let (test_acc, _) = evaluate_prepared(model, &prepare_all(&backend, test, cfg.batch_size)?)?;
    let (train_acc, _) = evaluate_prepared(model, &prepare_all(&backend, train, cfg.batch_size)?)?;
    Ok(GraphTrainReport {
        best_epoch,
        val_acc,
        val_loss,
        test_acc,
        train_acc,
        epochs_run,
        epoch_secs,
        final_loss,
        history,
    })
}

/// Outcome of [`refit_graph_classifier`].
#[derive(Debug, Clone)]
pub struct RefitReport {
    /// Test accuracy of the weights after the last epoch (their average,
    /// with [`GraphTrainConfig::ema_decay`]).
    pub test_acc: f64,
    /// Training accuracy of the same weights.
    pub train_acc: f64,
    /// Seconds of training per epoch.
    pub epoch_secs: Vec<f64>,
    /// The learning rate of each epoch (from the schedule).
    pub lrs: Vec<f64>,
    /// Mean training loss of each epoch.
    pub train_losses: Vec<f64>,
}

/// Trains `model` on `train` for exactly `epochs` epochs and reports the
/// test accuracy of the last weights: the refit step of a selection
/// protocol, as scikit-learn's `GridSearchCV(refit=True)`.
///
/// Pick the epoch with [`train_graph_classifier`] on a validation split,
/// then train a freshly initialised model on the training and validation
/// graphs together for `best_epoch + 1` epochs with the same `cfg`. The
/// epochs are exactly those [`train_graph_classifier`] runs with `cfg`
/// (the shuffling seed, the dropout streams and the learning-rate
/// schedule over `cfg.epochs`, so a cosine schedule is cut where the
/// selected epoch was, not compressed), only without validation or early
/// stopping (`cfg.patience` is not read). With `cfg.ema_decay` the model
/// is left holding the averaged weights, as the selection run evaluates
/// them. The test graphs are only evaluated, once, at the end.
///
/// ```
/// use hdgcn::backend::Cpu;
/// use hdgcn::graph::Graph;
/// use hdgcn::models::{GraphClassifier, InputSpec};
/// use hdgcn::train::{
///     GraphFeatures, GraphSample, GraphTrainConfig, refit_graph_classifier, train_graph_classifier,
/// };
/// use rand::SeedableRng;
///
/// // Two classes of 4-node graphs, a path and a star, with constant features.
/// let path = Graph::from_edges(4, &[(0, 1), (1, 0), (1, 2), (2, 1), (2, 3), (3, 2)])?;
/// let star = Graph::from_edges(4, &[(0, 1), (1, 0), (0, 2), (2, 0), (0, 3), (3, 0)])?;
/// let x = GraphFeatures::Dense(ndarray::Array2::ones((4, 1)));
/// let all = (0..12)
///     .map(|i| GraphSample::new(if i % 2 == 0 { path.clone() } else { star.clone() }, x.clone(), i % 2))
///     .collect::<hdgcn::Result<Vec<_>>>()?;
/// let (train, val, test) = (&all[..8], &all[8..10], &all[10..]);
/// let cfg = GraphTrainConfig { epochs: 5, batch_size: 4, lr: 0.01, ..Default::default() };
/// // The same initialisation for both runs.
/// let build = || {
///     let mut rng = rand::rngs::StdRng::seed_from_u64(0);
///     GraphClassifier::gcn(&Cpu::<f32>::new(), InputSpec::Dense(1), 8, 1, 2, 0.0, &mut rng)
/// };
/// let selected = train_graph_classifier(&mut build()?, train, val, test, &cfg)?;
/// // Refit on the training and validation graphs for the selected number of epochs.
/// let both: Vec<_> = train.iter().chain(val).cloned().collect();
/// let refit = refit_graph_classifier(&mut build()?, &both, test, &cfg, selected.best_epoch + 1)?;
/// assert_eq!(refit.train_losses.len(), selected.best_epoch + 1);
/// assert_eq!(refit.lrs, vec![0.01; selected.best_epoch + 1]);
/// # Ok::<(), hdgcn::Error>(())
/// ```
///
/// # Errors
/// As [`train_graph_classifier`], and [`Error::InvalidConfig`] for
/// `epochs` of 0 or above `cfg.epochs`.
pub fn refit_graph_classifier<B: Backend>(
    model: &mut GraphClassifier<B>,
    train: &[GraphSample],
    test: &[GraphSample],
    cfg: &GraphTrainConfig,
    epochs: usize,
) -> Result<RefitReport> {
    check_config(cfg)?;
    super::check_refit_epochs(epochs, cfg.epochs)?;
    check_samples(model, train, "training")?;
    check_samples(model, test, "test")?;
    let backend = model.backend().clone();
    let mut runner = EpochRunner::new(model, train, cfg)?;
    let mut report = RefitReport {
        test_acc: f64::NAN,
        train_acc: f64::NAN,
        epoch_secs: Vec::with_capacity(epochs),
        lrs: Vec::with_capacity(epochs),
        train_losses: Vec::with_capacity(epochs),
    };
    model.set_training(true);
    let pb = super::progress_bar(epochs as u64, cfg.quiet);
    for epoch in 0..epochs {
        let stats = runner.run_epoch(model, epoch)?;
        report.epoch_secs.push(stats.secs);
        report.lrs.push(stats.lr);
        report.train_losses.push(stats.train_loss);
        pb.set_message(format!("loss {:.4}", stats.train_loss));
        pb.inc(1);
    }
    pb.finish_and_clear();
    if let Some(ema) = &runner.ema {
        ema.copy_to(&runner.params)?;
    }
    report.test_acc = evaluate_prepared(model, &prepare_all(&backend, test, cfg.batch_size)?)?.0;
    report.train_acc = evaluate_prepared(model, &prepare_all(&backend, train, cfg.batch_size)?)?.0;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::Cpu;
    use crate::models::InputSpec;

    /// Path graphs over a 12-word vocabulary whose label is whether most
    /// of their words are below 6.
    fn documents() -> Vec<GraphSample> {
        (0..24)
            .map(|d| {
                let words: Vec<usize> = (0..4).map(|i| (d * 5 + i * 7) % 12).collect();
                let mut distinct = words.clone();
                distinct.dedup();
                let n = distinct.len();
                let edges: Vec<(usize, usize)> =
                    (1..n).flat_map(|i| [(i - 1, i), (i, i - 1)]).collect();
                let label = usize::from(distinct.iter().filter(|&&w| w < 6).count() * 2 < n);
                GraphSample::new(
                    Graph::from_edges(n, &edges).unwrap(),
                    GraphFeatures::Tokens(distinct),
                    label,
                )
                .unwrap()
            })
            .collect()
    }

    #[test]
    fn the_adversarial_pass_adds_the_gradients_at_the_perturbed_table_and_restores_it() {
        let cpu = Cpu::<f64>::new();
        let spec = InputSpec::Tokens { vocab: 12, dim: 5 };
        let mut rng = StdRng::seed_from_u64(3);
        let model = GraphClassifier::gcn(&cpu, spec, 6, 1, 2, 0.3, &mut rng).unwrap();
        let train = documents();
        let eps = 0.05;
        let cfg = GraphTrainConfig {
            adversarial_epsilon: Some(eps),
            ..GraphTrainConfig::default()
        };
        let runner = EpochRunner::new(&model, &train, &cfg).unwrap();
        assert_eq!(runner.input_params.len(), 1, "the embedding table");
        let table = runner.input_params[0].clone();
        let samples: Vec<&GraphSample> = train.iter().collect();
        let b = prepare(&cpu, &samples).unwrap();
        let seed = 77;
        let plain_pass = || loss_and_grads(&cpu, &model, &b, &cfg, seed, 0, InputOffset::None);
        let (loss, plain, _) = plain_pass().unwrap();
        let mut grads = plain_pass().unwrap().1;
        let before = table.to_array();
        runner
            .add_adversarial_grads(&model, &b, eps, seed, 0, &mut grads)
            .unwrap();
        assert_eq!(table.to_array(), before, "the table is restored");

        // Independently: move the table by hand, run the pass there.
        let g = cpu.download(plain.get(&table).unwrap());
        let norm = g.mapv(|v| v * v).sum().sqrt();
        assert!(norm > 0.0);
        table.set(cpu.upload((&before + &(&g * (eps / norm))).view()));
        let (adv_loss, adv, _) = plain_pass().unwrap();
        table.set(cpu.upload(before.view()));
        // The step moves up the loss: L(θ + r) − L(θ) ≈ ε‖g‖ to first order.
        let rise = adv_loss - loss;
        assert!(
            rise > 0.0 && (rise - eps * norm).abs() < 0.1 * eps * norm,
            "{rise}"
        );
        for p in &runner.params {
            let want = cpu.download(plain.get(p).unwrap()) + cpu.download(adv.get(p).unwrap());
            let got = cpu.download(grads.get(p).unwrap());
            let diff = (&got - &want).mapv(f64::abs).fold(0.0f64, |m, &v| m.max(v));
            assert!(diff < 1e-12, "gradient differs by {diff}");
        }
    }

    #[test]
    fn the_per_graph_adversarial_pass_steps_each_graphs_inputs_by_eps() {
        let cpu = Cpu::<f64>::new();
        let spec = InputSpec::Tokens { vocab: 12, dim: 5 };
        let mut rng = StdRng::seed_from_u64(4);
        let model = GraphClassifier::gcn(&cpu, spec, 6, 1, 2, 0.3, &mut rng).unwrap();
        let train = documents();
        let eps = 0.05;
        let cfg = GraphTrainConfig {
            adversarial_epsilon: Some(eps),
            adversarial_norm: AdversarialNorm::Graph,
            ..GraphTrainConfig::default()
        };
        let runner = EpochRunner::new(&model, &train, &cfg).unwrap();
        let table = runner.input_params[0].clone();
        let samples: Vec<&GraphSample> = train.iter().collect();
        let b = prepare(&cpu, &samples).unwrap();
        let seed = 78;
        let pass = |offset| loss_and_grads(&cpu, &model, &b, &cfg, seed, 0, offset).unwrap();

        // The probe pass is the plain pass, plus the gradient with respect
        // to the node inputs.
        let (loss, plain, _) = pass(InputOffset::None);
        let (probe_loss, probed, input_grad) = pass(InputOffset::Probe);
        assert_eq!(probe_loss, loss);
        let g = cpu.download(&input_grad.expect("the probe's gradient"));
        let n: usize = train.iter().map(|s| s.graph.num_nodes()).sum();
        assert_eq!(g.dim(), (n, 5));
        // The embedding is a gather, so the table's gradient is that
        // gradient summed over the nodes of each word.
        let mut scattered = Array2::<f64>::zeros((12, 5));
        let ids = train.iter().flat_map(|s| match &s.features {
            GraphFeatures::Tokens(t) => t.clone(),
            GraphFeatures::Dense(_) => unreachable!(),
        });
        for (row, id) in ids.enumerate() {
            let mut dst = scattered.row_mut(id);
            dst += &g.row(row);
        }
        let table_grad = cpu.download(probed.get(&table).unwrap());
        assert_eq!(table_grad, cpu.download(plain.get(&table).unwrap()));
        assert!((&table_grad - &scattered).iter().all(|v| v.abs() < 1e-12));

        // Independently: each graph's step, from the sample sizes.
        let mut r = g.clone();
        let (mut start, mut first_order) = (0, 0.0);
        for s in &train {
            let end = start + s.graph.num_nodes();
            let mut rows = r.slice_mut(ndarray::s![start..end, ..]);
            let norm = rows.iter().map(|v| v * v).sum::<f64>().sqrt();
            assert!(norm > 0.0);
            rows.mapv_inplace(|v| v * eps / norm);
            first_order += eps * norm;
            start = end;
        }
        let (adv_loss, adv, _) = pass(InputOffset::Fixed(cpu.upload(r.view())));
        // L(x + r) − L(x) ≈ Σ_G g_G · r_G = ε Σ_G ‖g_G‖ to first order.
        let rise = adv_loss - loss;
        assert!(
            rise > 0.0 && (rise - first_order).abs() < 0.1 * first_order,
            "{rise} against {first_order}"
        );

        let mut grads = plain;
        let before = table.to_array();
        runner
            .add_graph_adversarial_grads(
                &model,
                &b,
                eps,
                seed,
                0,
                &cpu.upload(g.view()),
                &mut grads,
            )
            .unwrap();
        assert_eq!(table.to_array(), before, "the parameters are not moved");
        let plain = pass(InputOffset::None).1;
        for p in &runner.params {
            let want = cpu.download(plain.get(p).unwrap()) + cpu.download(adv.get(p).unwrap());
            let got = cpu.download(grads.get(p).unwrap());
            let diff = (&got - &want).mapv(f64::abs).fold(0.0f64, |m, &v| m.max(v));
            assert!(diff < 1e-12, "gradient differs by {diff}");
        }
    }

    #[test]
    fn a_graph_with_a_zero_gradient_gets_no_step() {
        let cpu = Cpu::<f64>::new();
        let g = ndarray::arr2(&[[3.0, 4.0], [0.0, 0.0], [0.0, 0.0], [1.0, 0.0]]);
        let r = per_graph_step(&cpu, &cpu.upload(g.view()), &[0, 1, 3, 4], 2.0);
        let want = ndarray::arr2(&[[1.2, 1.6], [0.0, 0.0], [0.0, 0.0], [2.0, 0.0]]);
        assert!((cpu.download(&r) - want).iter().all(|v| v.abs() < 1e-15));
    }

    #[test]
    fn the_adversarial_epsilon_is_checked() {
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            let cfg = GraphTrainConfig {
                adversarial_epsilon: Some(bad),
                ..GraphTrainConfig::default()
            };
            match check_config(&cfg) {
                Err(Error::InvalidConfig(m)) => assert!(m.contains("adversarial_epsilon"), "{m}"),
                other => panic!("{bad}: expected InvalidConfig, got {other:?}"),
            }
        }
    }
}
