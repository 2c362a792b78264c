//! Node classification: full-batch training, early stopping and model
//! selection on the validation nodes, test accuracy at the selected epoch.

use std::time::Instant;

use super::adversarial;
use super::selection::{SelectBy, Selected, Selection};
use crate::autograd::{Gradients, Index, Param, Tape};
use crate::backend::{Axis, Backend};
use crate::conv::DeviceGraph;
use crate::data::Split;
use crate::error::{Error, Result};
use crate::float::Float;
use crate::models::NodeClassifier;
use crate::nn::{Features, Module};
use crate::optim::{
    Adam, AdamConfig, ExponentialMovingAverage, LrSchedule, LrScheduleKind, Optimizer, grad_norm,
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
    /// weights ([`ExponentialMovingAverage`] with this decay, in `[0, 1)`,
    /// and warm-up), updated after every step: validation accuracy, the
    /// selected snapshot and the test accuracy are those of the averaged
    /// weights, while the optimiser trains on its own. `None` (the
    /// default): the weights of the last step.
    pub ema_decay: Option<f64>,
    /// Adversarial training of the input layer (the fast gradient method,
    /// as [`GraphTrainConfig::adversarial_epsilon`] does for the embedding
    /// table): each step also runs the training loss with the first
    /// convolution's input weights ([`NodeClassifier::input_params`])
    /// moved by `ε g / ‖g‖`, `g` their gradient, under the same dropout
    /// masks, and adds that pass's gradients to the plain ones before the
    /// update; the weights are then put back. A step costs about twice as
    /// much. `None` (the default): off. Must be finite and positive.
    ///
    /// [`GraphTrainConfig::adversarial_epsilon`]: super::GraphTrainConfig::adversarial_epsilon
    pub adversarial_epsilon: Option<f64>,
    /// Epochs trained without the step of
    /// [`NodeTrainConfig::adversarial_epsilon`] before it starts (a refit
    /// counts the same epochs). Must be below `epochs` when
    /// `adversarial_epsilon` is set; 0 (the default): from the first epoch.
    pub adversarial_warmup_epochs: usize,
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
            select_by: SelectBy::Accuracy,
            label_smoothing: 0.0,
            ema_decay: None,
            adversarial_epsilon: None,
            adversarial_warmup_epochs: 0,
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

/// A training run's state from epoch to epoch: the two Adam groups, the
/// schedule and the weight average. [`train_node_classifier`] and
/// [`refit_node_classifier`] step the same runner, so a refit repeats a
/// selection run's epochs (dropout masks, learning rates) on more nodes.
struct NodeRunner<'a, B: Backend> {
    task: &'a NodeTask<B>,
    cfg: &'a NodeTrainConfig,
    train_idx: Index<B>,
    train_y: Index<B>,
    opt_first: Adam<B>,
    opt_rest: Adam<B>,
    first: Vec<Param<B>>,
    rest: Vec<Param<B>>,
    /// The input weights that the adversarial step moves.
    input: Vec<Param<B>>,
    /// All parameters, in the model's order (selection and the average).
    params: Vec<Param<B>>,
    schedule: Box<dyn LrSchedule>,
    ema: Option<ExponentialMovingAverage<B>>,
}

impl<'a, B: Backend> NodeRunner<'a, B> {
    /// Builds the optimisers, the schedule and the average of `cfg` for
    /// training on `train` (nodes of `task`).
    fn new(
        model: &NodeClassifier<B>,
        task: &'a NodeTask<B>,
        train: &[usize],
        cfg: &'a NodeTrainConfig,
    ) -> Result<Self> {
        if cfg.epochs == 0 {
            return Err(Error::InvalidConfig("epochs must be at least 1".into()));
        }
        crate::autograd::check_label_smoothing(cfg.label_smoothing)?;
        adversarial::check_settings(
            cfg.adversarial_epsilon,
            cfg.adversarial_warmup_epochs,
            cfg.epochs,
        )?;
        let backend = task.graph.backend();
        let train_idx = Index::new(backend, train)?;
        let train_y = Index::new(backend, &labels_of(&task.labels, train, "training")?)?;
        let base = AdamConfig::default().lr(cfg.lr);
        let (first, rest) = if cfg.decay_first_layer_only {
            (model.first_layer_params(), model.other_params())
        } else {
            (model.params(), Vec::new())
        };
        let params = model.params();
        let ema = cfg
            .ema_decay
            .map(|d| ExponentialMovingAverage::new(&params, d).map(|e| e.with_warmup(true)))
            .transpose()?;
        Ok(NodeRunner {
            task,
            cfg,
            train_idx,
            train_y,
            opt_first: base.weight_decay(cfg.weight_decay).build()?,
            opt_rest: base.weight_decay(0.0).build()?,
            first,
            rest,
            input: model.input_params(),
            params,
            schedule: cfg.lr_schedule.schedule_with_warmup(
                cfg.lr,
                cfg.epochs,
                cfg.lr_warmup_epochs,
            )?,
            ema,
        })
    }

    /// One full-batch step at the schedule's rate for `epoch`, then the
    /// average's update. Returns the (smoothed) training loss and the
    /// step's milliseconds (forward, backward, optimiser).
    fn step(&mut self, model: &mut NodeClassifier<B>, epoch: usize) -> Result<(f64, f64)> {
        let (task, cfg) = (self.task, self.cfg);
        let backend = task.graph.backend();
        let t0 = Instant::now();
        let lr = self.schedule.lr_at(epoch);
        self.opt_first.set_learning_rate(lr);
        self.opt_rest.set_learning_rate(lr);
        let seed = cfg.seed.wrapping_mul(1_000_003).wrapping_add(epoch as u64);
        let tape = Tape::with_seed(backend, seed);
        // Both checks come before any update, so a diverged step leaves the
        // parameters (and the best snapshot) as they were.
        let (value, mut grads) = self.loss_and_grads(model, &tape, epoch)?;
        if let Some(eps) = cfg
            .adversarial_epsilon
            .filter(|_| epoch >= cfg.adversarial_warmup_epochs)
        {
            self.add_adversarial_grads(model, eps, seed, epoch, &mut grads)?;
        }
        let norm = grad_norm(backend, &grads);
        if !norm.is_finite() {
            return Err(Error::Numerical(format!(
                "gradient norm became {norm} at epoch {epoch}"
            )));
        }
        self.opt_first.step(&self.first, &grads)?;
        if !self.rest.is_empty() {
            self.opt_rest.step(&self.rest, &grads)?;
        }
        backend.synchronize();
        let ms = t0.elapsed().as_secs_f64() * 1e3;
        // The tape lives through the optimiser step, which therefore copies
        // each parameter once (copy-on-write, see `Param`). Ending it before
        // the step avoids those small copies but, measured on Cora with
        // HDGCN-static, made glibc hand freed memory back and fault it in
        // again every epoch (1.2 M page faults against 0.25 M in 150
        // epochs, step time 17-21 ms -> 36 ms). The mini-batch loop, whose
        // embedding table is large, ends its tape first.
        drop(tape);
        if let Some(ema) = &mut self.ema {
            ema.update(&self.params)?;
        }
        Ok((value, ms))
    }

    /// The (smoothed) training loss on `tape` and its gradients;
    /// [`Error::Numerical`] if the loss is not finite.
    fn loss_and_grads(
        &self,
        model: &NodeClassifier<B>,
        tape: &Tape<B>,
        epoch: usize,
    ) -> Result<(f64, Gradients<B>)> {
        let task = self.task;
        let logits = model.forward(tape, &task.graph, &task.features.on_tape(tape))?;
        let loss = logits
            .log_softmax(Axis::Cols)
            .gather_rows(&self.train_idx)?
            .nll_smoothed(&self.train_y, self.cfg.label_smoothing)?;
        // The backward pass is recorded before the loss is read, so that on
        // a GPU backend the device runs the forward pass while the host
        // records the backward one (reading the loss waits for the device).
        let grads = loss.backward()?;
        let value = loss.scalar()?;
        if !value.is_finite() {
            return Err(Error::Numerical(format!(
                "training loss became {value} at epoch {epoch}"
            )));
        }
        Ok((value, grads))
    }

    /// The fast gradient method on the input weights
    /// ([`NodeTrainConfig::adversarial_epsilon`]): moves them by
    /// `eps g / ‖g‖` (`g` their gradients in `grads`, one norm over all of
    /// them), runs the loss again with the dropout stream of `seed`, adds
    /// that pass's gradients to `grads` and restores the weights. A zero
    /// (or non-finite) gradient leaves `grads` as it is.
    fn add_adversarial_grads(
        &self,
        model: &NodeClassifier<B>,
        eps: f64,
        seed: u64,
        epoch: usize,
        grads: &mut Gradients<B>,
    ) -> Result<()> {
        let backend = self.task.graph.backend();
        let Some(moved) = adversarial::move_along_gradient(backend, &self.input, grads, eps) else {
            return Ok(());
        };
        let pass = self.loss_and_grads(model, &Tape::with_seed(backend, seed), epoch);
        drop(moved);
        let (_, adv) = pass?;
        adversarial::add_gradients(backend, &self.params, grads, &adv);
        Ok(())
    }
}

/// Trains `model` with Adam on the training nodes, selects the epoch with
/// the best validation score ([`NodeTrainConfig::select_by`]: accuracy or
/// loss; the test nodes are never looked at for selection), restores
/// those parameters and reports test accuracy there.
///
/// Dense features may live on any tape (they are put on each step's tape
/// as a constant).
///
/// # Errors
/// Before training: [`Error::InvalidConfig`] for zero epochs, an invalid
/// learning rate or schedule, a label smoothing outside `[0, 1]`, an EMA
/// decay outside `[0, 1)`, an adversarial ε that is not finite and
/// positive or an adversarial warm-up of `epochs` or more, or a
/// validation or test node without a label, [`Error::Empty`] for an empty
/// split, [`Error::NonFinite`] for a NaN or infinite dense feature. During
/// training: [`Error::Numerical`] when the loss or the gradient norm stops
/// being finite; the step that found it updates nothing.
pub fn train_node_classifier<B: Backend>(
    model: &mut NodeClassifier<B>,
    task: &NodeTask<B>,
    cfg: &NodeTrainConfig,
) -> Result<NodeTrainReport> {
    check_task(task)?;
    let backend = task.graph.backend().clone();
    let mut runner = NodeRunner::new(model, task, &task.split.train, cfg)?;
    let mut selection = Selection::new(cfg.patience, cfg.select_by);
    let mut step_ms = Vec::with_capacity(cfg.epochs);
    let mut final_loss = f64::NAN;
    let mut epochs_run = 0;
    let mut val_history = Vec::with_capacity(cfg.epochs);
    model.set_training(true);
    let pb = super::progress_bar(cfg.epochs as u64, cfg.quiet);
    for epoch in 0..cfg.epochs {
        let (loss, ms) = runner.step(model, epoch)?;
        final_loss = loss;
        step_ms.push(ms);
        epochs_run = epoch + 1;
        let (val_acc, val_loss) =
            selection.validate(epoch, &runner.params, runner.ema.as_mut(), || {
                evaluate_nodes(model, task, &task.split.val)
            })?;
        val_history.push((val_acc, val_loss));
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
    let (test_acc, _) = evaluate_nodes(model, task, &task.split.test)?;
    let (train_acc, _) = evaluate_nodes(model, task, &task.split.train)?;
    Ok(NodeTrainReport {
        best_epoch,
        val_acc,
        val_loss,
        test_acc,
        train_acc,
        epochs_run,
        step_ms,
        final_loss,
        val_history,
    })
}

/// Outcome of [`refit_node_classifier`].
#[derive(Debug, Clone)]
pub struct NodeRefitReport {
    /// Test accuracy of the weights after the last epoch (their average,
    /// with [`NodeTrainConfig::ema_decay`]).
    pub test_acc: f64,
    /// Accuracy of the same weights on the nodes it trained on (the
    /// training and validation nodes).
    pub train_acc: f64,
    /// Milliseconds of every training step.
    pub step_ms: Vec<f64>,
    /// Training loss of every epoch.
    pub train_losses: Vec<f64>,
}

/// Trains `model` on the training **and** validation nodes of `task` for
/// exactly `epochs` epochs and reports the test accuracy of the last
/// weights: the refit step of a selection protocol, as scikit-learn's
/// `GridSearchCV(refit=True)` and [`refit_graph_classifier`] for graphs.
///
/// Pick the epoch with [`train_node_classifier`], then train a freshly
/// initialised model with the same `cfg` for `best_epoch + 1` epochs.
/// The epochs are exactly those [`train_node_classifier`] runs with `cfg`
/// (the dropout stream of each epoch and the learning-rate schedule over
/// `cfg.epochs`, so a cosine schedule is cut where the selected epoch
/// was), only on more labelled nodes, without validation or early
/// stopping (`cfg.patience` is not read). With `cfg.ema_decay` the model
/// is left holding the averaged weights. The test nodes are only
/// evaluated, once, at the end.
///
/// [`refit_graph_classifier`]: super::refit_graph_classifier
///
/// ```
/// use hdgcn::backend::Cpu;
/// use hdgcn::conv::DeviceGraph;
/// use hdgcn::data::Split;
/// use hdgcn::graph::Graph;
/// use hdgcn::models::NodeClassifier;
/// use hdgcn::autograd::Tape;
/// use hdgcn::nn::Features;
/// use hdgcn::train::{NodeTask, NodeTrainConfig, refit_node_classifier, train_node_classifier};
/// use rand::SeedableRng;
///
/// // A ring of 12 nodes; the class is the node's index mod 2, its feature
/// // a one-hot of the class.
/// let cpu = Cpu::<f64>::new();
/// let edges: Vec<(usize, usize)> = (0..12).flat_map(|i| [(i, (i + 1) % 12), ((i + 1) % 12, i)]).collect();
/// let x = ndarray::Array2::from_shape_fn((12, 2), |(i, j)| f64::from(u8::from(i % 2 == j)));
/// let task = NodeTask {
///     graph: DeviceGraph::new(&cpu, Graph::from_edges(12, &edges)?),
///     features: Features::Dense(Tape::new(&cpu).constant_array(&x)),
///     labels: (0..12).map(|i| Some(i % 2)).collect(),
///     num_classes: 2,
///     split: Split { train: (0..6).collect(), val: (6..9).collect(), test: (9..12).collect() },
/// };
/// let cfg = NodeTrainConfig { epochs: 20, ..Default::default() };
/// let build = || NodeClassifier::gcn(&cpu, 2, 8, 2, 0.5, &mut rand::rngs::StdRng::seed_from_u64(0));
/// let selected = train_node_classifier(&mut build()?, &task, &cfg)?;
/// let refit = refit_node_classifier(&mut build()?, &task, &cfg, selected.best_epoch + 1)?;
/// assert_eq!(refit.train_losses.len(), selected.best_epoch + 1);
/// # Ok::<(), hdgcn::Error>(())
/// ```
///
/// # Errors
/// As [`train_node_classifier`], and [`Error::InvalidConfig`] for
/// `epochs` of 0 or above `cfg.epochs`.
pub fn refit_node_classifier<B: Backend>(
    model: &mut NodeClassifier<B>,
    task: &NodeTask<B>,
    cfg: &NodeTrainConfig,
    epochs: usize,
) -> Result<NodeRefitReport> {
    check_task(task)?;
    super::check_refit_epochs(epochs, cfg.epochs)?;
    let both: Vec<usize> = task
        .split
        .train
        .iter()
        .chain(&task.split.val)
        .copied()
        .collect();
    let mut runner = NodeRunner::new(model, task, &both, cfg)?;
    let (mut step_ms, mut train_losses) = (Vec::with_capacity(epochs), Vec::with_capacity(epochs));
    model.set_training(true);
    let pb = super::progress_bar(epochs as u64, cfg.quiet);
    for epoch in 0..epochs {
        let (loss, ms) = runner.step(model, epoch)?;
        step_ms.push(ms);
        train_losses.push(loss);
        pb.set_message(format!("loss {loss:.4}"));
        pb.inc(1);
    }
    pb.finish_and_clear();
    if let Some(ema) = &runner.ema {
        ema.copy_to(&runner.params)?;
    }
    let (test_acc, _) = evaluate_nodes(model, task, &task.split.test)?;
    let (train_acc, _) = evaluate_nodes(model, task, &both)?;
    Ok(NodeRefitReport {
        test_acc,
        train_acc,
        step_ms,
        train_losses,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::MvcAttnConfig;
    use crate::backend::Cpu;
    use crate::conv::HdChebConfig;
    use crate::graph::Graph;
    use crate::nn::Activation;
    use rand::{Rng, SeedableRng, rngs::StdRng};

    /// A 10-node ring with two classes and noisy 6-d features.
    fn ring_task(cpu: &Cpu<f64>) -> NodeTask<Cpu<f64>> {
        let n = 10;
        let edges: Vec<(usize, usize)> = (0..n)
            .flat_map(|i| [(i, (i + 1) % n), ((i + 1) % n, i)])
            .collect();
        let mut rng = StdRng::seed_from_u64(4);
        let x = ndarray::Array2::from_shape_fn((n, 6), |(i, j)| {
            f64::from(u8::from(j == i % 2)) + rng.random_range(-0.5..0.5)
        });
        NodeTask {
            graph: DeviceGraph::new(cpu, Graph::from_edges(n, &edges).unwrap()),
            features: Features::Dense(Tape::new(cpu).constant_array(&x)),
            labels: (0..n).map(|i| Some(i % 2)).collect(),
            num_classes: 2,
            split: Split {
                train: (0..6).collect(),
                val: (6..8).collect(),
                test: (8..10).collect(),
            },
        }
    }

    /// HDGCN (K = 4, dropout 0.3, so that the two passes must share their
    /// dropout masks) with a linear head.
    fn hdgcn(cpu: &Cpu<f64>) -> NodeClassifier<Cpu<f64>> {
        let mut rng = StdRng::seed_from_u64(9);
        let mut attn = MvcAttnConfig::new(5);
        attn.supernodes = 2;
        let conv = HdChebConfig::in_model(6, 5, 4, 0.3)
            .build_dynamic(cpu, &mut rng, &attn)
            .unwrap();
        NodeClassifier::new(vec![Box::new(conv)], 0.3, Activation::Relu)
            .unwrap()
            .with_head(cpu, 2, &mut rng)
            .unwrap()
    }

    #[test]
    fn the_adversarial_pass_adds_the_gradients_at_the_perturbed_input_weights_and_restores_them() {
        let cpu = Cpu::<f64>::new();
        let task = ring_task(&cpu);
        let model = hdgcn(&cpu);
        let eps = 0.05;
        let cfg = NodeTrainConfig {
            adversarial_epsilon: Some(eps),
            ..NodeTrainConfig::default()
        };
        let runner = NodeRunner::new(&model, &task, &task.split.train, &cfg).unwrap();
        assert_eq!(runner.input.len(), 1, "the prime layer's W0 only");
        let w0 = runner.input[0].clone();
        assert_eq!(w0.to_array().dim(), (6, 5));
        let seed = 41;
        let plain_pass = || runner.loss_and_grads(&model, &Tape::with_seed(&cpu, seed), 0);
        let (loss, plain) = plain_pass().unwrap();
        let mut grads = plain_pass().unwrap().1;
        let before: Vec<_> = runner.params.iter().map(|p| p.to_array()).collect();
        runner
            .add_adversarial_grads(&model, eps, seed, 0, &mut grads)
            .unwrap();
        let after: Vec<_> = runner.params.iter().map(|p| p.to_array()).collect();
        assert_eq!(after, before, "every parameter is restored");

        // Independently: move W0 by hand and run the pass there.
        let w = w0.to_array();
        let g = cpu.download(plain.get(&w0).unwrap());
        let norm = g.mapv(|v| v * v).sum().sqrt();
        assert!(norm > 0.0);
        w0.set(cpu.upload((&w + &(&g * (eps / norm))).view()));
        let (adv_loss, adv) = plain_pass().unwrap();
        w0.set(cpu.upload(w.view()));
        // The step moves up the loss: L(θ + r) − L(θ) ≈ ε‖g‖ to first order.
        let rise = adv_loss - loss;
        assert!(
            rise > 0.0 && (rise - eps * norm).abs() < 0.1 * eps * norm,
            "rise {rise} against ε‖g‖ = {}",
            eps * norm
        );
        for p in &runner.params {
            let want = cpu.download(plain.get(p).unwrap()) + cpu.download(adv.get(p).unwrap());
            let got = cpu.download(grads.get(p).unwrap());
            let diff = (&got - &want).mapv(f64::abs).fold(0.0f64, |m, &v| m.max(v));
            assert!(diff < 1e-12, "gradient differs by {diff}");
        }
        // Other parameters' gradients differ from the plain ones (the
        // perturbation reached them through the forward pass).
        let head = runner.params.last().unwrap();
        let (a, b) = (
            cpu.download(grads.get(head).unwrap()),
            cpu.download(plain.get(head).unwrap()),
        );
        assert!((&a - &(&b * 2.0)).mapv(f64::abs).sum() > 1e-9);
    }

    #[test]
    fn a_zero_input_gradient_leaves_the_gradients_as_they_are() {
        let cpu = Cpu::<f64>::new();
        let task = ring_task(&cpu);
        let model = hdgcn(&cpu);
        let cfg = NodeTrainConfig {
            adversarial_epsilon: Some(0.5),
            ..NodeTrainConfig::default()
        };
        let runner = NodeRunner::new(&model, &task, &task.split.train, &cfg).unwrap();
        let pass = || {
            let (_, mut g) = runner
                .loss_and_grads(&model, &Tape::with_seed(&cpu, 1), 0)
                .unwrap();
            let w0 = &runner.input[0];
            let zero = ndarray::Array2::<f64>::zeros(w0.to_array().dim());
            g.insert(w0, cpu.upload(zero.view()));
            g
        };
        let (mut grads, expect) = (pass(), pass());
        runner
            .add_adversarial_grads(&model, 0.5, 1, 0, &mut grads)
            .unwrap();
        for p in &runner.params {
            let (a, b) = (
                cpu.download(grads.get(p).unwrap()),
                cpu.download(expect.get(p).unwrap()),
            );
            assert_eq!(a, b);
        }
    }
}
