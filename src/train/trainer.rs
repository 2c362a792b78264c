//! The generic training loop: [`TrainConfig`], [`Trainer`] and
//! [`evaluate`].

use std::time::Instant;

use super::hook::{Hook, StepContext};
use super::loader::Loader;
use super::selection::{SelectBy, Selected, Selection};
use super::step::{StepOutput, TrainStep};
use crate::autograd::{Gradients, Param, Tape};
use crate::backend::{Axis, Backend};
use crate::error::{Error, Result, check_positive};
use crate::optim::{
    ExponentialMovingAverage, LrSchedule, LrScheduleKind, Optimizer, OptimizerKind, clip_grad_norm,
    grad_norm,
};

/// Hyper-parameters of the training loop ([`Trainer`]), whatever the
/// model. [`Trainer::new`] checks them all before anything is built.
///
/// ```
/// use hdgcn::optim::{LrScheduleKind, OptimizerKind};
/// use hdgcn::train::{TrainConfig, Trainer};
///
/// let cfg = TrainConfig {
///     epochs: 200,
///     optimizer: OptimizerKind::AdaBelief,
///     lr: 0.01,
///     lr_schedule: LrScheduleKind::Cosine { eta_min: 0.0 },
///     lr_warmup_epochs: 5,
///     clip_grad_norm: Some(1.0),
///     patience: Some(50),
///     ..TrainConfig::default()
/// };
/// # fn check(cfg: TrainConfig) -> hdgcn::Result<()> {
/// # let _ = Trainer::<hdgcn::backend::Cpu<f32>, hdgcn::models::GraphClassifier<_>>::new(cfg)?; Ok(()) }
/// # check(cfg.clone())?;
/// // A warm-up as long as the run leaves no epoch for the schedule.
/// let bad = TrainConfig { lr_warmup_epochs: 200, ..cfg };
/// # fn fails(cfg: TrainConfig) -> bool {
/// # Trainer::<hdgcn::backend::Cpu<f32>, hdgcn::models::GraphClassifier<_>>::new(cfg).is_err() }
/// assert!(fails(bad));
/// # Ok::<(), hdgcn::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TrainConfig {
    /// Maximum number of epochs (passes over the training batches).
    pub epochs: usize,
    /// The optimiser (its other hyper-parameters at their defaults).
    pub optimizer: OptimizerKind,
    /// Learning rate (the base rate of `lr_schedule`).
    pub lr: f64,
    /// Weight decay of [`TrainStep::decayed_params`] (the optimiser's own
    /// kind: L2 for Adam and SGD, decoupled for AdamW and AdaBelief).
    pub weight_decay: f64,
    /// How the learning rate changes from epoch to epoch (default: constant).
    pub lr_schedule: LrScheduleKind,
    /// Epochs of linear learning-rate warm-up before `lr_schedule`
    /// ([`LrScheduleKind::schedule_with_warmup`]); must be below `epochs`.
    /// 0 (the default): none.
    pub lr_warmup_epochs: usize,
    /// Clip the gradients of every step to this total L2 norm
    /// ([`crate::optim::clip_grad_norm`]); `None` (the default): no clipping.
    pub clip_grad_norm: Option<f64>,
    /// Evaluate and select with an exponential moving average of the
    /// weights ([`ExponentialMovingAverage`] with this decay, in `[0, 1)`,
    /// and warm-up), updated after every step; the optimiser trains on its
    /// own weights. `None` (the default): the weights of the last step.
    pub ema_decay: Option<f64>,
    /// Label smoothing `ε` of the training loss, in `[0, 1]` (PyTorch's
    /// `CrossEntropyLoss(label_smoothing=ε)`); evaluation reports the plain
    /// cross-entropy. 0 (the default): plain cross-entropy.
    pub label_smoothing: f64,
    /// Stop after this many epochs without a better validation score (by
    /// `select_by`); `None` (the default): run every epoch.
    pub patience: Option<usize>,
    /// Which validation score selects the epoch and resets the patience.
    pub select_by: SelectBy,
    /// Seed of the dropout streams (step `s` runs on
    /// `Tape::with_seed(seed · 1000003 + s)`).
    pub seed: u64,
    /// Hide the progress bar.
    pub quiet: bool,
}

impl Default for TrainConfig {
    fn default() -> Self {
        TrainConfig {
            epochs: 100,
            optimizer: OptimizerKind::Adam,
            lr: 1e-3,
            weight_decay: 0.0,
            lr_schedule: LrScheduleKind::Constant,
            lr_warmup_epochs: 0,
            clip_grad_norm: None,
            ema_decay: None,
            label_smoothing: 0.0,
            patience: None,
            select_by: SelectBy::Accuracy,
            seed: 0,
            quiet: true,
        }
    }
}

impl TrainConfig {
    /// Checks every setting: at least one epoch, a learning rate and weight
    /// decay the optimiser accepts, a schedule and warm-up that fit the
    /// epochs, a positive clipping norm, an EMA decay in `[0, 1)`, a label
    /// smoothing in `[0, 1]` and a patience of at least 1.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the setting.
    pub fn validate(&self) -> Result<()> {
        if self.epochs == 0 {
            return Err(Error::InvalidConfig("epochs must be at least 1".into()));
        }
        if self.patience == Some(0) {
            return Err(Error::InvalidConfig(
                "patience must be at least 1 epoch (or none)".into(),
            ));
        }
        // Built once here so that a bad rate or decay fails before training.
        self.optimizer
            .build::<crate::backend::Cpu<f64>>(self.lr, self.weight_decay)?;
        self.lr_schedule
            .schedule_with_warmup(self.lr, self.epochs, self.lr_warmup_epochs)?;
        if let Some(c) = self.clip_grad_norm {
            check_positive("clip_grad_norm", c)?;
        }
        if let Some(d) = self.ema_decay
            && !(0.0..1.0).contains(&d)
        {
            return Err(Error::InvalidConfig(format!(
                "ema_decay must be in [0, 1), got {d}"
            )));
        }
        crate::autograd::check_label_smoothing(self.label_smoothing)
    }
}

/// What one epoch of [`Trainer::fit`] measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EpochRecord {
    /// The epoch (0-based).
    pub epoch: usize,
    /// The learning rate of the epoch's steps (from the schedule).
    pub lr: f64,
    /// Mean training loss over the epoch's batches, weighted by their rows.
    pub train_loss: f64,
    /// Mean total gradient norm ([`crate::optim::grad_norm`], before any
    /// clipping) over the epoch's steps.
    pub grad_norm: f64,
    /// Validation accuracy after the epoch.
    pub val_acc: f64,
    /// Validation loss (plain cross-entropy) after the epoch.
    pub val_loss: f64,
}

/// Outcome of [`Trainer::fit`]: the model holds the weights of `best_epoch`.
#[derive(Debug, Clone)]
pub struct FitReport {
    /// Epoch (0-based) selected on validation ([`TrainConfig::select_by`]).
    pub best_epoch: usize,
    /// Validation accuracy at the selected epoch.
    pub val_acc: f64,
    /// Validation loss at the selected epoch.
    pub val_loss: f64,
    /// Epochs actually run.
    pub epochs_run: usize,
    /// Milliseconds of every training step (forward, backward, hooks,
    /// optimiser; no evaluation).
    pub step_ms: Vec<f64>,
    /// Seconds of every epoch's training steps (no evaluation), in order.
    pub epoch_secs: Vec<f64>,
    /// One record per epoch run, in order.
    pub history: Vec<EpochRecord>,
}

/// Accuracy and loss of a model over some batches ([`evaluate`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Evaluation {
    /// Fraction of rows whose largest score is their target.
    pub accuracy: f64,
    /// Mean cross-entropy over the rows.
    pub loss: f64,
    /// The predicted class of every row, batch after batch.
    pub predictions: Vec<usize>,
    /// The target of every row, in the same order.
    pub targets: Vec<usize>,
}

/// Accuracy and mean cross-entropy of `model` on `batches`
/// ([`TrainStep::valid_step`] in evaluation mode, on inference tapes);
/// the model is back in training mode afterwards.
///
/// # Errors
/// [`Error::Empty`] for no rows at all or a model without parameters;
/// whatever the model's step returns.
pub fn evaluate<B: Backend, M: TrainStep<B> + ?Sized>(
    model: &mut M,
    batches: &[M::Batch],
) -> Result<Evaluation> {
    let backend = backend_of(model)?;
    model.set_training(false);
    let result = (|| {
        let (mut loss, mut predictions, mut targets) = (0.0, Vec::new(), Vec::new());
        for b in batches {
            let tape = Tape::inference(&backend);
            let out = model.valid_step(&tape, b)?;
            let rows = out.targets.len();
            if rows == 0 {
                continue;
            }
            loss += out
                .logits
                .log_softmax(Axis::Cols)
                .nll(&out.targets)?
                .scalar()?
                * rows as f64;
            predictions.extend(super::argmax_rows(&out.logits.to_array()));
            targets.extend_from_slice(out.targets.host());
        }
        let n = targets.len();
        if n == 0 {
            return Err(Error::Empty("evaluation over zero examples".into()));
        }
        let correct = predictions.iter().zip(&targets).filter(|(p, t)| p == t);
        Ok(Evaluation {
            accuracy: correct.count() as f64 / n as f64,
            loss: loss / n as f64,
            predictions,
            targets,
        })
    })();
    model.set_training(true);
    result
}

/// The backend the model's parameters live on.
fn backend_of<B: Backend, M: TrainStep<B> + ?Sized>(model: &M) -> Result<B> {
    model
        .params()
        .first()
        .map(|p| p.backend().clone())
        .ok_or_else(|| Error::Empty("the model has no parameters".into()))
}

/// The generic training loop: mini-batch steps with the configured
/// optimiser, schedule, warm-up, clipping, label smoothing and weight
/// average; validation after every epoch; model selection on validation
/// only and early stopping; a progress bar and a per-epoch history.
/// Anything else plugs in as a [`Hook`].
///
/// See [`TrainStep`] for a complete example with a model of one's own.
pub struct Trainer<'h, B: Backend, M: TrainStep<B>> {
    cfg: TrainConfig,
    hooks: Vec<Box<dyn Hook<B, M> + 'h>>,
}

impl<B: Backend, M: TrainStep<B>> std::fmt::Debug for Trainer<'_, B, M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Trainer")
            .field("cfg", &self.cfg)
            .field("hooks", &self.hooks.len())
            .finish()
    }
}

/// A training run's optimisers, schedule and average.
struct RunState<B: Backend> {
    params: Vec<Param<B>>,
    decayed: Vec<Param<B>>,
    undecayed: Vec<Param<B>>,
    opt_decayed: Box<dyn Optimizer<B>>,
    opt_undecayed: Box<dyn Optimizer<B>>,
    schedule: Box<dyn LrSchedule>,
    ema: Option<ExponentialMovingAverage<B>>,
}

impl<'h, B: Backend, M: TrainStep<B>> Trainer<'h, B, M> {
    /// A loop with the settings of `cfg`, checked by
    /// [`TrainConfig::validate`].
    ///
    /// # Errors
    /// As [`TrainConfig::validate`].
    pub fn new(cfg: TrainConfig) -> Result<Self> {
        cfg.validate()?;
        Ok(Trainer {
            cfg,
            hooks: Vec::new(),
        })
    }

    /// The loop with `hook` added (called after those added before).
    pub fn with_hook(mut self, hook: impl Hook<B, M> + 'h) -> Self {
        self.hooks.push(Box::new(hook));
        self
    }

    /// The settings.
    pub fn config(&self) -> &TrainConfig {
        &self.cfg
    }

    fn run_state(&self, model: &M) -> Result<RunState<B>> {
        let cfg = &self.cfg;
        let params = model.params();
        let decayed = model.decayed_params();
        let ids: std::collections::HashSet<_> = decayed.iter().map(Param::id).collect();
        let undecayed = params
            .iter()
            .filter(|p| !ids.contains(&p.id()))
            .cloned()
            .collect();
        let ema = cfg
            .ema_decay
            .map(|d| ExponentialMovingAverage::new(&params, d).map(|e| e.with_warmup(true)))
            .transpose()?;
        Ok(RunState {
            params,
            decayed,
            undecayed,
            opt_decayed: cfg.optimizer.build(cfg.lr, cfg.weight_decay)?,
            opt_undecayed: cfg.optimizer.build(cfg.lr, 0.0)?,
            schedule: cfg.lr_schedule.schedule_with_warmup(
                cfg.lr,
                cfg.epochs,
                cfg.lr_warmup_epochs,
            )?,
            ema,
        })
    }

    /// Trains `model` on the batches of `train`, validates on `val` after
    /// every epoch, keeps the epoch with the best validation score
    /// ([`TrainConfig::select_by`]) and leaves the model holding its
    /// weights (the averaged ones with [`TrainConfig::ema_decay`]). Test
    /// data is never seen here: evaluate it afterwards with [`evaluate`].
    ///
    /// A step whose loss or gradient norm is not finite stops the run with
    /// [`Error::Numerical`] before it updates anything.
    ///
    /// # Errors
    /// [`Error::Empty`] for a model without parameters, no validation
    /// rows or an epoch without batches; [`Error::Numerical`] as above;
    /// whatever the model, the loader or a hook returns.
    pub fn fit(
        &mut self,
        model: &mut M,
        train: &mut dyn Loader<M::Batch>,
        val: &[M::Batch],
    ) -> Result<FitReport> {
        let backend = backend_of(model)?;
        let mut state = self.run_state(model)?;
        let cfg = self.cfg.clone();
        let mut selection = Selection::new(cfg.patience, cfg.select_by);
        let (mut step_ms, mut epoch_secs, mut history) = (Vec::new(), Vec::new(), Vec::new());
        let mut step: u64 = 0;
        let pb = super::progress_bar(cfg.epochs as u64, cfg.quiet);
        model.set_training(true);
        for epoch in 0..cfg.epochs {
            let t0 = Instant::now();
            let lr = state.schedule.lr_at(epoch);
            state.opt_decayed.set_learning_rate(lr);
            state.opt_undecayed.set_learning_rate(lr);
            let (mut loss_sum, mut rows_sum, mut norm_sum, mut steps) = (0.0, 0usize, 0.0, 0usize);
            for batch in train.epoch(epoch) {
                let batch = batch?;
                let ts = Instant::now();
                let seed = cfg.seed.wrapping_mul(1_000_003).wrapping_add(step);
                let ctx = StepContext {
                    epoch,
                    step,
                    seed,
                    lr,
                };
                let (value, rows, norm) = self.step(&backend, model, &mut state, &batch, &ctx)?;
                step += 1;
                backend.synchronize();
                step_ms.push(ts.elapsed().as_secs_f64() * 1e3);
                loss_sum += value * rows as f64;
                rows_sum += rows;
                norm_sum += norm;
                steps += 1;
            }
            if steps == 0 {
                return Err(Error::Empty(format!(
                    "the training loader gave no batch in epoch {epoch}"
                )));
            }
            epoch_secs.push(t0.elapsed().as_secs_f64());
            let (val_acc, val_loss) =
                selection.validate(epoch, &state.params, state.ema.as_mut(), || {
                    evaluate(model, val).map(|e| (e.accuracy, e.loss))
                })?;
            let record = EpochRecord {
                epoch,
                lr,
                train_loss: loss_sum / rows_sum.max(1) as f64,
                grad_norm: norm_sum / steps as f64,
                val_acc,
                val_loss,
            };
            history.push(record);
            pb.set_message(format!("loss {:.4} val {val_acc:.4}", record.train_loss));
            pb.inc(1);
            let mut go_on = true;
            for h in &mut self.hooks {
                go_on &= h.on_epoch_end(&record)?;
            }
            if !go_on || selection.should_stop() {
                break;
            }
        }
        pb.finish_and_clear();
        let Selected {
            epoch: best_epoch,
            val_acc,
            val_loss,
        } = selection.restore(&backend, &state.params)?;
        Ok(FitReport {
            best_epoch,
            val_acc,
            val_loss,
            epochs_run: history.len(),
            step_ms,
            epoch_secs,
            history,
        })
    }

    /// One step: the loss of `batch` and its gradients, the hooks, the
    /// clipping and the update. Returns the loss, the rows scored and the
    /// gradient norm before clipping.
    fn step(
        &mut self,
        backend: &B,
        model: &mut M,
        state: &mut RunState<B>,
        batch: &M::Batch,
        ctx: &StepContext,
    ) -> Result<(f64, usize, f64)> {
        let (value, rows, mut grads) = self.loss_and_grads(backend, model, batch, ctx)?;
        for h in &mut self.hooks {
            h.after_backward(model, batch, ctx, &mut grads)?;
        }
        let norm = match self.cfg.clip_grad_norm {
            Some(max_norm) => clip_grad_norm(backend, &mut grads, max_norm)?,
            None => grad_norm(backend, &grads),
        };
        if !norm.is_finite() {
            return Err(Error::Numerical(format!(
                "gradient norm became {norm} at epoch {}",
                ctx.epoch
            )));
        }
        state.opt_decayed.step(&state.decayed, &grads)?;
        if !state.undecayed.is_empty() {
            state.opt_undecayed.step(&state.undecayed, &grads)?;
        }
        if let Some(ema) = &mut state.ema {
            ema.update(&state.params)?;
        }
        Ok((value, rows, norm))
    }

    /// The training loss of `batch` on a tape seeded by `ctx.seed`, and its
    /// gradients. The tape ends here, before the optimiser step, so the
    /// step updates the parameters in place.
    fn loss_and_grads(
        &self,
        backend: &B,
        model: &M,
        batch: &M::Batch,
        ctx: &StepContext,
    ) -> Result<(f64, usize, Gradients<B>)> {
        let tape = Tape::with_seed(backend, ctx.seed);
        let StepOutput {
            logits,
            targets,
            extra_loss,
        } = model.train_step(&tape, batch)?;
        let rows = targets.len();
        let mut loss = logits
            .log_softmax(Axis::Cols)
            .nll_smoothed(&targets, self.cfg.label_smoothing)?;
        if let Some(extra) = extra_loss {
            loss = loss.add(&extra)?;
        }
        // Backward first: on a GPU backend the device runs the forward pass
        // while the host records the backward one.
        let grads = loss.backward()?;
        let value = loss.scalar()?;
        if !value.is_finite() {
            return Err(Error::Numerical(format!(
                "training loss became {value} at epoch {}",
                ctx.epoch
            )));
        }
        Ok((value, rows, grads))
    }
}
