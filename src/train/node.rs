//! Node classification: full-batch training, early stopping and model
//! selection on the validation nodes, test accuracy at the selected epoch.

use std::time::Instant;

use super::selection::{Selected, Selection};
use crate::autograd::{Index, Tape};
use crate::backend::{Axis, Backend};
use crate::conv::DeviceGraph;
use crate::data::Split;
use crate::error::{Error, Result};
use crate::float::Float;
use crate::models::NodeClassifier;
use crate::nn::{Features, Module};
use crate::optim::{
    Adam, AdamConfig, ExponentialMovingAverage, LrScheduleKind, Optimizer, grad_norm,
};

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
#[derive(Debug, Clone, PartialEq)]
pub struct NodeTrainConfig {
    /// Maximum number of epochs (full-batch steps).
    pub epochs: usize,
    /// Adam learning rate (the base rate of `lr_schedule`).
    pub lr: f64,
    /// How the learning rate changes from epoch to epoch (default: constant).
    pub lr_schedule: LrScheduleKind,
    /// Epochs of linear learning-rate warm-up before `lr_schedule`
    /// ([`LrScheduleKind::schedule_with_warmup`]): the rate climbs to `lr`
    /// in equal steps, and the schedule runs over the epochs left. Must be
    /// below `epochs`; 0 (the default): no warm-up.
    pub lr_warmup_epochs: usize,
    /// L2 weight decay.
    pub weight_decay: f64,
    /// Apply weight decay to the first layer only (Kipf & Welling; PyG's `gcn.py`).
    pub decay_first_layer_only: bool,
    /// Stop after this many epochs without a better validation accuracy
    /// (`None`: run all epochs).
    pub patience: Option<usize>,
    /// Label smoothing `ε` of the training loss, in `[0, 1]`
    /// ([`Var::nll_smoothed`], PyTorch's
    /// `CrossEntropyLoss(label_smoothing=ε)`); 0 (the default): plain
    /// cross-entropy. The reported training loss is the smoothed one;
    /// evaluation reports the plain cross-entropy.
    ///
    /// [`Var::nll_smoothed`]: crate::autograd::Var::nll_smoothed
    pub label_smoothing: f64,
    /// Evaluate and select with an exponential moving average of the
    /// weights ([`ExponentialMovingAverage`] with this decay, in `[0, 1)`,
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
            lr: 0.01,
            lr_schedule: LrScheduleKind::Constant,
            lr_warmup_epochs: 0,
            weight_decay: 5e-4,
            decay_first_layer_only: true,
            patience: None,
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
    /// Epoch (0-based) selected by validation accuracy (ties: lower validation loss).
    pub best_epoch: usize,
    /// Validation accuracy at the selected epoch.
    pub val_acc: f64,
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

/// Trains `model` with Adam on the training nodes, selects the epoch with
/// the best validation accuracy (the test nodes are never looked at for
/// selection), restores those parameters and reports test accuracy there.
///
/// Dense features may live on any tape (they are put on each step's tape
/// as a constant).
///
/// # Errors
/// Before training: [`Error::InvalidConfig`] for zero epochs, an invalid
/// learning rate or schedule, a label smoothing outside `[0, 1]`, an EMA
/// decay outside `[0, 1)`, or a validation or test node without a label, [`Error::Empty`] for an empty
/// split, [`Error::NonFinite`] for a NaN or infinite dense feature. During
/// training: [`Error::Numerical`] when the loss or the gradient norm stops
/// being finite; the step that found it updates nothing.
pub fn train_node_classifier<B: Backend>(
    model: &mut NodeClassifier<B>,
    task: &NodeTask<B>,
    cfg: &NodeTrainConfig,
) -> Result<NodeTrainReport> {
    if cfg.epochs == 0 {
        return Err(Error::InvalidConfig("epochs must be at least 1".into()));
    }
    crate::autograd::check_label_smoothing(cfg.label_smoothing)?;
    let backend = task.graph.backend().clone();
    let train = &task.split.train;
    if train.is_empty() || task.split.val.is_empty() || task.split.test.is_empty() {
        return Err(Error::Empty(
            "training, validation and test sets must be non-empty".into(),
        ));
    }
    // Every split must be usable before anything is trained: a test node
    // without a label would otherwise fail only after the last epoch.
    labels_of(&task.labels, &task.split.val, "validation")?;
    labels_of(&task.labels, &task.split.test, "test")?;
    if let Features::Dense(x) = &task.features {
        let host = backend.download(x.value());
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
    let train_idx = Index::new(&backend, train)?;
    let train_y = Index::new(&backend, &labels_of(&task.labels, train, "training")?)?;
    let base = AdamConfig::default().lr(cfg.lr);
    let (first, rest) = if cfg.decay_first_layer_only {
        (model.first_layer_params(), model.other_params())
    } else {
        (model.params(), Vec::new())
    };
    let mut opt_first: Adam<B> = base.weight_decay(cfg.weight_decay).build()?;
    let mut opt_rest: Adam<B> = base.weight_decay(0.0).build()?;
    let schedule =
        cfg.lr_schedule
            .schedule_with_warmup(cfg.lr, cfg.epochs, cfg.lr_warmup_epochs)?;

    let mut selection = Selection::new(cfg.patience);
    let mut step_ms = Vec::with_capacity(cfg.epochs);
    let mut final_loss = f64::NAN;
    let mut epochs_run = 0;
    model.set_training(true);
    let params = model.params();
    let mut ema = cfg
        .ema_decay
        .map(|d| ExponentialMovingAverage::new(&params, d).map(|e| e.with_warmup(true)))
        .transpose()?;
    let pb = super::progress_bar(cfg.epochs as u64, cfg.quiet);
    for epoch in 0..cfg.epochs {
        let t0 = Instant::now();
        let lr = schedule.lr_at(epoch);
        opt_first.set_learning_rate(lr);
        opt_rest.set_learning_rate(lr);
        let tape = Tape::with_seed(
            &backend,
            cfg.seed.wrapping_mul(1_000_003).wrapping_add(epoch as u64),
        );
        let logits = model.forward(&tape, &task.graph, &task.features.on_tape(&tape))?;
        let loss = logits
            .log_softmax(Axis::Cols)
            .gather_rows(&train_idx)?
            .nll_smoothed(&train_y, cfg.label_smoothing)?;
        // The backward pass is recorded before the loss is read, so that on
        // a GPU backend the device runs the forward pass while the host
        // records the backward one (reading the loss waits for the device).
        // Both checks come before any update, so a diverged step leaves the
        // parameters (and the best snapshot) as they were.
        let grads = loss.backward()?;
        final_loss = loss.scalar()?;
        if !final_loss.is_finite() {
            return Err(Error::Numerical(format!(
                "training loss became {final_loss} at epoch {epoch}"
            )));
        }
        let norm = grad_norm(&backend, &grads);
        if !norm.is_finite() {
            return Err(Error::Numerical(format!(
                "gradient norm became {norm} at epoch {epoch}"
            )));
        }
        opt_first.step(&first, &grads)?;
        if !rest.is_empty() {
            opt_rest.step(&rest, &grads)?;
        }
        backend.synchronize();
        step_ms.push(t0.elapsed().as_secs_f64() * 1e3);
        // The tape lives through the optimiser step, which therefore copies
        // each parameter once (copy-on-write, see `Param`). Ending it before
        // the step avoids those small copies but, measured on Cora with
        // HDGCN-static, made glibc hand freed memory back and fault it in
        // again every epoch (1.2 M page faults against 0.25 M in 150
        // epochs, step time 17-21 ms -> 36 ms). The mini-batch loop, whose
        // embedding table is large, ends its tape first.
        drop(tape);
        epochs_run = epoch + 1;

        if let Some(ema) = &mut ema {
            ema.update(&params)?;
        }
        let (val_acc, _) = selection.validate(epoch, &params, ema.as_mut(), || {
            evaluate_nodes(model, task, &task.split.val)
        })?;
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
        ..
    } = selection.restore(&backend, &params)?;
    let (test_acc, _) = evaluate_nodes(model, task, &task.split.test)?;
    let (train_acc, _) = evaluate_nodes(model, task, train)?;
    Ok(NodeTrainReport {
        best_epoch,
        val_acc,
        test_acc,
        train_acc,
        epochs_run,
        step_ms,
        final_loss,
    })
}
