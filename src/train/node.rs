//! Node classification: full-batch training, early stopping and model
//! selection on the validation nodes, test accuracy at the selected epoch.

use super::selection::SelectBy;
use super::step::{StepOutput, TrainStep};
use super::trainer::{EpochRecord, TrainConfig, Trainer, evaluate};
use crate::autograd::{Index, Param, Tape};
use crate::backend::Backend;
use crate::conv::DeviceGraph;
use crate::data::Split;
use crate::error::{Error, Result};
use crate::float::Float;
use crate::models::NodeClassifier;
use crate::nn::{Features, Module, ParamVisitor};
use crate::optim::{LrScheduleKind, OptimizerKind};

/// A node-classification problem on one graph.
#[derive(Debug)]
pub struct NodeTask<B: Backend> {
    /// The graph on the device.
    pub graph: DeviceGraph<B>,
    /// Node features (sparse bag-of-words stays sparse).
    pub features: Features<B>,
    /// Label of every node (`None`: unlabelled).
    pub labels: Vec<Option<usize>>,
    /// Number of classes.
    pub num_classes: usize,
    /// Train / validation / test nodes.
    pub split: Split,
}

/// Hyper-parameters of [`train_node_classifier`].
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NodeTrainConfig {
    /// Maximum number of epochs (full-batch steps).
    pub epochs: usize,
    /// The optimiser (default: Adam, as Kipf & Welling; HDGCN's paper
    /// uses AdaBelief).
    pub optimizer: OptimizerKind,
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
    /// Apply weight decay to the first layer only (Kipf & Welling; PyG's `gcn.py`).
    pub decay_first_layer_only: bool,
    /// Stop after this many epochs without a better validation score
    /// (by `select_by`; `None`: run all epochs).
    pub patience: Option<usize>,
    /// Which validation score selects the epoch and resets the patience
    /// (default: accuracy, ties broken by the loss).
    pub select_by: SelectBy,
    /// Label smoothing `ε` of the training loss, in `[0, 1]`
    /// ([`Var::nll_smoothed`], PyTorch's
    /// `CrossEntropyLoss(label_smoothing=ε)`); 0 (the default): plain
    /// cross-entropy. The reported training loss is the smoothed one;
    /// evaluation reports the plain cross-entropy.
    ///
    /// [`Var::nll_smoothed`]: crate::autograd::Var::nll_smoothed
    pub label_smoothing: f64,
    /// Evaluate and select with an exponential moving average of the
    /// weights ([`ExponentialMovingAverage`](crate::optim::ExponentialMovingAverage)
    /// with this decay, in `[0, 1)`,
    /// and warm-up), updated after every step: validation accuracy, the
    /// selected snapshot and the test accuracy are those of the averaged
    /// weights, while the optimiser trains on its own. `None` (the
    /// default): the weights of the last step.
    pub ema_decay: Option<f64>,
    /// Seed of the dropout streams.
    pub seed: u64,
    /// Hide the progress bar.
    pub quiet: bool,
}

impl Default for NodeTrainConfig {
    fn default() -> Self {
        NodeTrainConfig {
            epochs: 200,
            optimizer: OptimizerKind::Adam,
            lr: 0.01,
            lr_schedule: LrScheduleKind::Constant,
            lr_warmup_epochs: 0,
            weight_decay: 5e-4,
            decay_first_layer_only: true,
            patience: None,
            select_by: SelectBy::Accuracy,
            label_smoothing: 0.0,
            ema_decay: None,
            seed: 0,
            quiet: true,
        }
    }
}

/// Outcome of one training run.
#[derive(Debug, Clone)]
pub struct NodeTrainReport {
    /// Epoch (0-based) selected on validation
    /// ([`NodeTrainConfig::select_by`]).
    pub best_epoch: usize,
    /// Validation accuracy at the selected epoch.
    pub val_acc: f64,
    /// Validation loss (plain cross-entropy) at the selected epoch.
    pub val_loss: f64,
    /// Test accuracy at the selected epoch.
    pub test_acc: f64,
    /// Training accuracy at the selected epoch.
    pub train_acc: f64,
    /// Epochs actually run.
    pub epochs_run: usize,
    /// Milliseconds of every training step (forward, backward, optimiser; no evaluation).
    pub step_ms: Vec<f64>,
    /// Training loss of the last epoch.
    pub final_loss: f64,
    /// Validation accuracy and loss after every epoch run, in order (the
    /// averaged weights' with [`NodeTrainConfig::ema_decay`]).
    pub val_history: Vec<(f64, f64)>,
    /// Everything each epoch measured ([`EpochRecord`]), in order.
    pub history: Vec<EpochRecord>,
}

fn labels_of(task_labels: &[Option<usize>], nodes: &[usize], what: &str) -> Result<Vec<usize>> {
    nodes
        .iter()
        .map(|&i| {
            task_labels
                .get(i)
                .copied()
                .flatten()
                .ok_or_else(|| Error::InvalidConfig(format!("{what} node {i} has no label")))
        })
        .collect()
}

/// Accuracy and mean cross-entropy of `model` on `nodes` (evaluation mode, no recording).
pub fn evaluate_nodes<B: Backend>(
    model: &mut NodeClassifier<B>,
    task: &NodeTask<B>,
    nodes: &[usize],
) -> Result<(f64, f64)> {
    let backend = task.graph.backend();
    model.set_training(false);
    let tape = Tape::inference(backend);
    let logits = model.forward(&tape, &task.graph, &task.features.on_tape(&tape));
    model.set_training(true);
    let logits = logits?;
    if nodes.is_empty() {
        return Err(Error::Empty("evaluation over zero nodes".into()));
    }
    let y = labels_of(&task.labels, nodes, "evaluation")?;
    let idx = Index::new(backend, nodes)?;
    let targets = Index::new(backend, &y)?;
    let loss = logits.cross_entropy_masked(&idx, &targets)?.scalar()?;
    let pred = super::argmax_rows(&logits.gather_rows(&idx)?.to_array());
    let correct = pred.iter().zip(&y).filter(|(p, t)| p == t).count();
    Ok((correct as f64 / nodes.len() as f64, loss))
}

/// Checks `task` before anything is trained: non-empty splits, a label
/// for every validation and test node (a test node without one would
/// otherwise fail only after the last epoch), finite dense features.
fn check_task<B: Backend>(task: &NodeTask<B>) -> Result<()> {
    let split = &task.split;
    if split.train.is_empty() || split.val.is_empty() || split.test.is_empty() {
        return Err(Error::Empty(
            "training, validation and test sets must be non-empty".into(),
        ));
    }
    labels_of(&task.labels, &split.val, "validation")?;
    labels_of(&task.labels, &split.test, "test")?;
    if let Features::Dense(x) = &task.features {
        let host = task.graph.backend().download(x.value());
        if let Some((i, v)) = host
            .iter()
            .enumerate()
            .find(|(_, v)| !v.to_f64_exact().is_finite())
        {
            let (r, c) = (i / host.ncols().max(1), i % host.ncols().max(1));
            return Err(Error::NonFinite {
                what: format!("node features, row {r} column {c}"),
                value: v.to_f64_exact(),
            });
        }
    }
    Ok(())
}

/// The nodes a step scores and their classes: a [`NodeStep`]'s batch.
#[derive(Debug, Clone)]
pub struct NodeBatch<B: Backend> {
    nodes: Index<B>,
    targets: Index<B>,
}

impl<B: Backend> NodeBatch<B> {
    /// The batch of `nodes` of `task`, with their labels.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for a node without a label,
    /// [`Error::IndexOutOfRange`] for a node outside the graph.
    pub fn new(task: &NodeTask<B>, nodes: &[usize]) -> Result<Self> {
        let n = task.graph.num_nodes();
        if let Some(&bad) = nodes.iter().find(|&&i| i >= n) {
            return Err(Error::IndexOutOfRange {
                what: "node of a node batch",
                index: bad,
                len: n,
            });
        }
        let backend = task.graph.backend();
        Ok(NodeBatch {
            nodes: Index::new(backend, nodes)?,
            targets: Index::new(backend, &labels_of(&task.labels, nodes, "batch")?)?,
        })
    }

    /// The nodes of the batch.
    pub fn nodes(&self) -> &[usize] {
        self.nodes.host()
    }
}

/// A [`NodeClassifier`] on one graph as the training loop sees it: a step
/// runs the whole graph (full-batch) and scores the nodes of its
/// [`NodeBatch`]. [`train_node_classifier`] is [`Trainer::fit`] over this
/// step; use it directly to add [`Hook`](super::Hook)s.
pub struct NodeStep<'a, B: Backend> {
    model: &'a mut NodeClassifier<B>,
    task: &'a NodeTask<B>,
    decay_first_layer_only: bool,
}

impl<'a, B: Backend> NodeStep<'a, B> {
    /// `model` on the graph and features of `task`; weight decay applies to
    /// the first layer only when `decay_first_layer_only` is set (Kipf &
    /// Welling), else to every parameter.
    pub fn new(
        model: &'a mut NodeClassifier<B>,
        task: &'a NodeTask<B>,
        decay_first_layer_only: bool,
    ) -> Self {
        NodeStep {
            model,
            task,
            decay_first_layer_only,
        }
    }
}

impl<B: Backend> std::fmt::Debug for NodeStep<'_, B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeStep")
            .field("model", &self.model)
            .field("decay_first_layer_only", &self.decay_first_layer_only)
            .finish()
    }
}

impl<B: Backend> Module<B> for NodeStep<'_, B> {
    fn visit_params(&self, v: &mut ParamVisitor<'_, B>) {
        self.model.visit_params(v);
    }

    fn set_training(&mut self, training: bool) {
        self.model.set_training(training);
    }
}

impl<B: Backend> TrainStep<B> for NodeStep<'_, B> {
    type Batch = NodeBatch<B>;

    fn train_step(&self, tape: &Tape<B>, batch: &NodeBatch<B>) -> Result<StepOutput<B>> {
        let task = self.task;
        let logits = self
            .model
            .forward(tape, &task.graph, &task.features.on_tape(tape))?;
        StepOutput::new(logits.gather_rows(&batch.nodes)?, batch.targets.clone())
    }

    fn decayed_params(&self) -> Vec<Param<B>> {
        if self.decay_first_layer_only {
            self.model.first_layer_params()
        } else {
            self.model.params()
        }
    }
}

impl NodeTrainConfig {
    /// The settings of the generic loop.
    pub fn train_config(&self) -> TrainConfig {
        TrainConfig {
            epochs: self.epochs,
            optimizer: self.optimizer,
            lr: self.lr,
            weight_decay: self.weight_decay,
            lr_schedule: self.lr_schedule,
            lr_warmup_epochs: self.lr_warmup_epochs,
            clip_grad_norm: None,
            ema_decay: self.ema_decay,
            label_smoothing: self.label_smoothing,
            patience: self.patience,
            select_by: self.select_by,
            seed: self.seed,
            quiet: self.quiet,
        }
    }
}

/// Trains `model` full-batch on the training nodes with the generic loop
/// ([`Trainer::fit`] over a [`NodeStep`]), selects the epoch with the best
/// validation score ([`NodeTrainConfig::select_by`]: accuracy or loss; the
/// test nodes are never looked at for selection), restores those
/// parameters and reports test accuracy there.
///
/// Dense features may live on any tape (they are put on each step's tape
/// as a constant).
///
/// # Errors
/// Before training: [`Error::InvalidConfig`] for zero epochs, an invalid
/// learning rate or schedule, a label smoothing outside `[0, 1]`, an EMA
/// decay outside `[0, 1)`, or a validation or test node without a label,
/// [`Error::Empty`] for an empty split, [`Error::NonFinite`] for a NaN or
/// infinite dense feature. During training: [`Error::Numerical`] when the
/// loss or the gradient norm stops being finite; the step that found it
/// updates nothing.
pub fn train_node_classifier<B: Backend>(
    model: &mut NodeClassifier<B>,
    task: &NodeTask<B>,
    cfg: &NodeTrainConfig,
) -> Result<NodeTrainReport> {
    check_task(task)?;
    if model.convs.is_empty() {
        return Err(Error::InvalidConfig(
            "a node classifier needs at least one convolution".into(),
        ));
    }
    let mut trainer = Trainer::new(cfg.train_config())?;
    let train = NodeBatch::new(task, &task.split.train)?;
    let val = NodeBatch::new(task, &task.split.val)?;
    let test = NodeBatch::new(task, &task.split.test)?;
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
