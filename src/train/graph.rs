//! Graph classification: mini-batches of block-diagonal graphs, seeded
//! shuffling, early stopping and model selection on the validation graphs,
//! test accuracy at the selected epoch.

use ndarray::Array2;
use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;

use super::loader::Loader;
use super::selection::SelectBy;
use super::step::{StepOutput, TrainStep};
use super::trainer::{EpochRecord, TrainConfig, Trainer, evaluate};
use crate::autograd::{Index, Tape, Var};
use crate::backend::Backend;
use crate::conv::DeviceGraph;
use crate::error::{Error, Result};
use crate::float::Float;
use crate::graph::{Batch, Graph};
use crate::models::{GraphClassifier, GraphInput, InputLayer};
use crate::nn::Features;
use crate::optim::{LrScheduleKind, OptimizerKind};
use crate::readout::NodeSet;

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
    /// Optional nodes the readout pools instead of all of them (set by
    /// [`GraphSample::with_readout_nodes`]; for aspect-based sentiment, the
    /// aspect's tokens): batched into a [`NodeSet`] and handed to
    /// [`GraphClassifier::forward_nodes`]. `None`: the readout pools every
    /// node.
    pub readout_nodes: Option<Vec<usize>>,
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
            readout_nodes: None,
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

    /// The sample whose readout pools the nodes `nodes` only (indices
    /// `0..n`, each once, at least one): see
    /// [`GraphSample::readout_nodes`].
    ///
    /// ```
    /// use hdgcn::graph::Graph;
    /// use hdgcn::train::{GraphFeatures, GraphSample};
    ///
    /// let path = Graph::from_edges(3, &[(0, 1), (1, 0), (1, 2), (2, 1)])?;
    /// let s = GraphSample::new(path, GraphFeatures::Tokens(vec![3, 9, 4]), 0)?;
    /// let s = s.with_readout_nodes(vec![1, 2])?;
    /// assert_eq!(s.readout_nodes, Some(vec![1, 2]));
    /// assert!(s.clone().with_readout_nodes(vec![3]).is_err()); // no node 3
    /// assert!(s.clone().with_readout_nodes(vec![]).is_err()); // nothing to pool
    /// assert!(s.with_readout_nodes(vec![1, 1]).is_err()); // twice
    /// # Ok::<(), hdgcn::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::Empty`] for no nodes; [`Error::NodeOutOfRange`] for a node
    /// past the graph; [`Error::InvalidConfig`] for a node given twice.
    pub fn with_readout_nodes(mut self, nodes: Vec<usize>) -> Result<Self> {
        self.readout_nodes = Some(nodes);
        self.check_shape()?;
        Ok(self)
    }

    /// The sample restricted to `nodes` ([`Graph::subgraph`]): node `i` of
    /// the result is node `nodes[i]`, with its token id or feature row; the
    /// label is kept, and the readout nodes that are kept stay readout
    /// nodes.
    ///
    /// # Errors
    /// As [`Graph::subgraph`]: an empty, out-of-range or repeated node list;
    /// [`Error::Empty`] if the sample has readout nodes and `nodes` keeps
    /// none of them.
    pub fn subgraph(&self, nodes: &[usize]) -> Result<GraphSample> {
        let graph = self.graph.subgraph(nodes)?;
        let features = match &self.features {
            GraphFeatures::Tokens(t) => {
                GraphFeatures::Tokens(nodes.iter().map(|&v| t[v]).collect())
            }
            GraphFeatures::Dense(x) => GraphFeatures::Dense(x.select(ndarray::Axis(0), nodes)),
        };
        let mut sub = GraphSample::new(graph, features, self.label)?;
        if let Some(keep) = &self.readout_nodes {
            let kept: Vec<usize> = nodes
                .iter()
                .enumerate()
                .filter(|(_, v)| keep.contains(v))
                .map(|(i, _)| i)
                .collect();
            if kept.is_empty() {
                return Err(Error::Empty(
                    "the subgraph keeps none of the sample's readout nodes".into(),
                ));
            }
            sub = sub.with_readout_nodes(kept)?;
        }
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
    /// stays; likewise, a sample with readout nodes keeps one of them,
    /// drawn uniformly, when all of them are dropped. `p = 0` returns the
    /// sample unchanged without drawing.
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
        if let Some(r) = &self.readout_nodes
            && !keep.iter().any(|v| r.contains(v))
        {
            let v = r[rng.random_range(0..r.len())];
            let at = keep.partition_point(|&u| u < v);
            keep.insert(at, v);
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
        if let Some(r) = &self.readout_nodes {
            check_readout_nodes(r, n)?;
        }
        Ok(())
    }
}

/// At least one node, each within `0..n` and given once.
fn check_readout_nodes(nodes: &[usize], n: usize) -> Result<()> {
    if nodes.is_empty() {
        return Err(Error::Empty(
            "graph sample readout nodes: the readout would pool nothing".into(),
        ));
    }
    let mut seen = vec![false; n];
    for &v in nodes {
        if v >= n {
            return Err(Error::NodeOutOfRange {
                index: v,
                num_nodes: n,
            });
        }
        if std::mem::replace(&mut seen[v], true) {
            return Err(Error::InvalidConfig(format!(
                "graph sample readout nodes: node {v} is given twice"
            )));
        }
    }
    Ok(())
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

/// Hyper-parameters of [`train_graph_classifier`]: the generic loop's
/// ([`GraphTrainConfig::train_config`]) and the batch size.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
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
    /// Weight decay (L2 for Adam and SGD, decoupled for AdamW and AdaBelief).
    pub weight_decay: f64,
    /// The optimiser.
    pub optimizer: OptimizerKind,
    /// Stop after this many epochs without a better validation score
    /// (by `select_by`; `None`: run all epochs).
    pub patience: Option<usize>,
    /// Which validation score selects the epoch and resets the patience
    /// (default: accuracy, ties broken by the loss).
    pub select_by: SelectBy,
    /// Clip the gradients of every step to this total L2 norm
    /// ([`crate::optim::clip_grad_norm`]); `None` (the default): no clipping.
    pub clip_grad_norm: Option<f64>,
    /// Label smoothing `ε` of the training loss, in `[0, 1]` (PyTorch's
    /// `CrossEntropyLoss(label_smoothing=ε)`); 0 (the default): plain
    /// cross-entropy. The validation loss stays the plain cross-entropy.
    pub label_smoothing: f64,
    /// Evaluate and select with an exponential moving average of the
    /// weights ([`ExponentialMovingAverage`] with this decay, in `[0, 1)`,
    /// and warm-up), updated after every step. `None` (the default): the
    /// weights of the last step.
    ///
    /// [`ExponentialMovingAverage`]: crate::optim::ExponentialMovingAverage
    pub ema_decay: Option<f64>,
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
            optimizer: OptimizerKind::Adam,
            patience: Some(20),
            select_by: SelectBy::Accuracy,
            clip_grad_norm: None,
            label_smoothing: 0.0,
            ema_decay: None,
            seed: 0,
            quiet: true,
        }
    }
}

impl GraphTrainConfig {
    /// The settings of the generic loop.
    pub fn train_config(&self) -> TrainConfig {
        TrainConfig {
            epochs: self.epochs,
            optimizer: self.optimizer,
            lr: self.lr,
            weight_decay: self.weight_decay,
            lr_schedule: self.lr_schedule,
            lr_warmup_epochs: self.lr_warmup_epochs,
            clip_grad_norm: self.clip_grad_norm,
            ema_decay: self.ema_decay,
            label_smoothing: self.label_smoothing,
            patience: self.patience,
            select_by: self.select_by,
            seed: self.seed,
            quiet: self.quiet,
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

/// A mini-batch on the device: the block-diagonal graph of some samples,
/// their node inputs and their labels. The batch type of
/// [`GraphClassifier`]'s [`TrainStep`].
#[derive(Debug, Clone)]
pub struct GraphBatch<B: Backend> {
    graph: std::rc::Rc<DeviceGraph<B>>,
    input: BatchInput<B>,
    /// `N x 1` readout weights, each graph's with mean 1 (`None`: all 1).
    weights: Option<B::Tensor>,
    /// The nodes the readout pools (`None`: all).
    nodes: Option<NodeSet<B>>,
    targets: Index<B>,
}

#[derive(Debug, Clone)]
enum BatchInput<B: Backend> {
    Tokens(Index<B>),
    Dense(B::Tensor),
}

impl<B: Backend> GraphBatch<B> {
    /// The samples as one block-diagonal batch ([`Batch`]) on `backend`.
    ///
    /// # Errors
    /// [`Error::Empty`] for no samples; [`Error::ShapeMismatch`] for dense
    /// features of different widths; [`Error::InvalidConfig`] when some
    /// samples have node weights (or readout nodes) and others not.
    pub fn new(backend: &B, samples: &[&GraphSample]) -> Result<Self> {
        if samples.is_empty() {
            return Err(Error::Empty("a graph batch of no samples".into()));
        }
        let graphs: Vec<Graph> = samples.iter().map(|s| s.graph.clone()).collect();
        let batch = Batch::new(&graphs)?;
        let graph = DeviceGraph::from_batch(backend, &batch)?;
        let input = match samples.first().map(|s| &s.features) {
            Some(GraphFeatures::Tokens(_)) => {
                let mut ids = Vec::with_capacity(batch.graph().num_nodes());
                for s in samples {
                    match &s.features {
                        GraphFeatures::Tokens(t) => ids.extend_from_slice(t),
                        GraphFeatures::Dense(_) => {
                            return Err(Error::InvalidConfig(
                                "a graph batch mixes token ids and dense features".into(),
                            ));
                        }
                    }
                }
                BatchInput::Tokens(Index::new(backend, &ids)?)
            }
            _ => {
                let mut views = Vec::with_capacity(samples.len());
                for s in samples {
                    match &s.features {
                        GraphFeatures::Dense(x) => views.push(x.view()),
                        GraphFeatures::Tokens(_) => {
                            return Err(Error::InvalidConfig(
                                "a graph batch mixes token ids and dense features".into(),
                            ));
                        }
                    }
                }
                let x = ndarray::concatenate(ndarray::Axis(0), &views).map_err(|e| {
                    Error::shape("graph batch features", "equal widths", e.to_string())
                })?;
                let x = x.mapv(|v| B::Elem::from_f64_lossy(f64::from(v)));
                BatchInput::Dense(backend.upload(x.view()))
            }
        };
        let labels: Vec<usize> = samples.iter().map(|s| s.label).collect();
        Ok(GraphBatch {
            graph: std::rc::Rc::new(graph),
            input,
            weights: batch_weights(backend, samples)?,
            nodes: batch_readout_nodes(backend, samples, batch.ptr())?,
            targets: Index::new(backend, &labels)?,
        })
    }

    /// The block-diagonal graph on the device.
    pub fn graph(&self) -> &DeviceGraph<B> {
        &self.graph
    }

    /// The class of every graph of the batch.
    pub fn labels(&self) -> &[usize] {
        self.targets.host()
    }

    /// The logits of every graph of the batch.
    ///
    /// # Errors
    /// As [`GraphClassifier::forward_weighted`].
    pub fn forward(&self, model: &GraphClassifier<B>, tape: &Tape<B>) -> Result<Var<B>> {
        let w = self.weights.as_ref().map(|w| tape.constant(w.clone()));
        let x = self.input(tape);
        match &self.nodes {
            Some(nodes) => model.forward_nodes(tape, &self.graph, &x, w.as_ref(), nodes),
            None => model.forward_weighted(tape, &self.graph, &x, w.as_ref()),
        }
    }

    /// The batch's node inputs on `tape` (token ids, or the features as a
    /// constant), as [`GraphClassifier`]'s methods read them, for example
    /// [`GraphClassifier::conv_input`].
    pub fn input(&self, tape: &Tape<B>) -> GraphInput<B> {
        match &self.input {
            BatchInput::Tokens(idx) => GraphInput::Tokens(idx.clone()),
            BatchInput::Dense(t) => GraphInput::Features(Features::Dense(tape.constant(t.clone()))),
        }
    }

    /// The nodes the readout pools, when the samples name them
    /// ([`GraphSample::readout_nodes`]).
    pub fn readout_nodes(&self) -> Option<&NodeSet<B>> {
        self.nodes.as_ref()
    }
}

impl<B: Backend> TrainStep<B> for GraphClassifier<B> {
    type Batch = GraphBatch<B>;

    fn train_step(&self, tape: &Tape<B>, batch: &GraphBatch<B>) -> Result<StepOutput<B>> {
        StepOutput::new(batch.forward(self, tape)?, batch.targets.clone())
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

/// The batch's readout node set; `None` when no sample names readout nodes.
fn batch_readout_nodes<B: Backend>(
    backend: &B,
    samples: &[&GraphSample],
    ptr: &[usize],
) -> Result<Option<NodeSet<B>>> {
    if samples.iter().all(|s| s.readout_nodes.is_none()) {
        return Ok(None);
    }
    let mut lists = Vec::with_capacity(samples.len());
    for (i, s) in samples.iter().enumerate() {
        let Some(r) = &s.readout_nodes else {
            return Err(Error::InvalidConfig(format!(
                "graph {i} of a batch has no readout nodes but others have: give all or none"
            )));
        };
        lists.push(r.clone());
    }
    NodeSet::new(backend, ptr, &lists).map(Some)
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
    let selected = samples.iter().filter(|s| s.readout_nodes.is_some()).count();
    if selected != 0 && selected != samples.len() {
        return Err(Error::InvalidConfig(format!(
            "{selected} of the {} {what} samples have readout nodes: give all or none",
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

/// `samples` in consecutive batches of `batch_size` graphs, in order.
fn batches<B: Backend>(
    backend: &B,
    samples: &[GraphSample],
    batch_size: usize,
) -> Result<Vec<GraphBatch<B>>> {
    let refs: Vec<&GraphSample> = samples.iter().collect();
    refs.chunks(batch_size.max(1))
        .map(|c| GraphBatch::new(backend, c))
        .collect()
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
    let e = evaluate(model, &batches(&backend, samples, batch_size)?)?;
    Ok((e.accuracy, e.loss))
}

/// Shuffled mini-batches of graph samples, assembled one at a time as the
/// loop asks for them: a fresh order every epoch from a stream seeded
/// once, so a run repeats exactly.
///
/// ```
/// use hdgcn::backend::Cpu;
/// use hdgcn::graph::Graph;
/// use hdgcn::train::{GraphFeatures, GraphLoader, GraphSample, Loader};
///
/// let pair = Graph::from_edges(2, &[(0, 1), (1, 0)])?;
/// let docs: Vec<_> = (0..5)
///     .map(|i| GraphSample::new(pair.clone(), GraphFeatures::Tokens(vec![i, i + 1]), i % 2))
///     .collect::<hdgcn::Result<_>>()?;
/// let mut loader = GraphLoader::new(&Cpu::<f32>::new(), &docs, 2, 7)?;
/// assert_eq!(loader.num_batches(), 3);
/// let sizes: Vec<usize> = loader.epoch(0).map(|b| b.map(|b| b.labels().len())).collect::<hdgcn::Result<_>>()?;
/// assert_eq!(sizes, [2, 2, 1]);
/// # Ok::<(), hdgcn::Error>(())
/// ```
#[derive(Debug)]
pub struct GraphLoader<'a, B: Backend> {
    backend: B,
    samples: &'a [GraphSample],
    batch_size: usize,
    rng: StdRng,
    order: Vec<usize>,
}

impl<'a, B: Backend> GraphLoader<'a, B> {
    /// Batches of `batch_size` graphs of `samples`, shuffled every epoch
    /// by `StdRng::seed_from_u64(seed)`.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for a batch size of 0; [`Error::Empty`]
    /// for no samples.
    pub fn new(
        backend: &B,
        samples: &'a [GraphSample],
        batch_size: usize,
        seed: u64,
    ) -> Result<Self> {
        if batch_size == 0 {
            return Err(Error::InvalidConfig("batch_size must be at least 1".into()));
        }
        if samples.is_empty() {
            return Err(Error::Empty("a graph loader over no samples".into()));
        }
        Ok(GraphLoader {
            backend: backend.clone(),
            samples,
            batch_size,
            rng: StdRng::seed_from_u64(seed),
            order: (0..samples.len()).collect(),
        })
    }
}

impl<B: Backend> Loader<GraphBatch<B>> for GraphLoader<'_, B> {
    fn num_batches(&self) -> usize {
        self.samples.len().div_ceil(self.batch_size)
    }

    fn epoch(&mut self, _epoch: usize) -> Box<dyn Iterator<Item = Result<GraphBatch<B>>> + '_> {
        self.order.shuffle(&mut self.rng);
        let (backend, samples) = (&self.backend, self.samples);
        Box::new(self.order.chunks(self.batch_size).map(move |chunk| {
            let refs: Vec<&GraphSample> = chunk.iter().map(|&i| &samples[i]).collect();
            GraphBatch::new(backend, &refs)
        }))
    }
}

/// Trains `model` on `train` in shuffled mini-batches with the generic
/// loop ([`Trainer::fit`] over a [`GraphLoader`]), selects the epoch
/// with the best validation score ([`GraphTrainConfig::select_by`]; the
/// test graphs are never looked at for selection), restores those
/// parameters and reports test accuracy there.
///
/// Each mini-batch is one block-diagonal [`Batch`] on the device
/// ([`DeviceGraph::from_batch`]); the order is reshuffled every epoch with
/// `StdRng::seed_from_u64(cfg.seed)`, so a run repeats exactly.
///
/// # Errors
/// [`Error::InvalidConfig`] for zero epochs or batch size, a label
/// smoothing outside `[0, 1]`, an EMA decay outside `[0, 1)`, or an
/// invalid optimiser setting or learning-rate schedule; [`Error::Empty`]
/// for an empty set; errors naming the set and sample for samples that do
/// not suit the model; [`Error::Numerical`] if the loss becomes
/// non-finite.
pub fn train_graph_classifier<B: Backend>(
    model: &mut GraphClassifier<B>,
    train: &[GraphSample],
    val: &[GraphSample],
    test: &[GraphSample],
    cfg: &GraphTrainConfig,
) -> Result<GraphTrainReport> {
    let mut trainer = Trainer::new(cfg.train_config())?;
    if cfg.batch_size == 0 {
        return Err(Error::InvalidConfig("batch_size must be at least 1".into()));
    }
    check_samples(model, train, "training")?;
    check_samples(model, val, "validation")?;
    check_samples(model, test, "test")?;
    let backend = model.backend().clone();
    let mut loader = GraphLoader::new(&backend, train, cfg.batch_size, cfg.seed)?;
    let val_batches = batches(&backend, val, cfg.batch_size)?;
    let fit = trainer.fit(model, &mut loader, &val_batches)?;
    let test_acc = evaluate(model, &batches(&backend, test, cfg.batch_size)?)?.accuracy;
    let train_acc = evaluate(model, &batches(&backend, train, cfg.batch_size)?)?.accuracy;
    Ok(GraphTrainReport {
        best_epoch: fit.best_epoch,
        val_acc: fit.val_acc,
        val_loss: fit.val_loss,
        test_acc,
        train_acc,
        epochs_run: fit.epochs_run,
        epoch_secs: fit.epoch_secs,
        final_loss: fit.history.last().map_or(f64::NAN, |r| r.train_loss),
        history: fit.history,
    })
}
