//! [`TrainStep`]: what a model computes from one batch, the one trait a
//! model implements to be trained by [`Trainer`](super::Trainer).

use crate::autograd::{Index, Param, Tape, Var};
use crate::backend::Backend;
use crate::error::{Error, Result};
use crate::nn::Module;

/// What a model computed on one batch: class scores, the classes they
/// should predict and, optionally, a term added to the training loss.
///
/// The loop turns it into the loss (cross-entropy of `logits` against
/// `targets`, with the configured label smoothing, plus `extra_loss`) when
/// training, and into accuracy and cross-entropy when evaluating.
#[derive(Debug, Clone)]
pub struct StepOutput<B: Backend> {
    /// `rows x classes` scores, one row per example scored in the batch.
    pub logits: Var<B>,
    /// The class of every row of `logits`.
    pub targets: Index<B>,
    /// A `1 x 1` term added to the training loss (a regulariser of the
    /// model's own); not part of the evaluation loss. `None`: nothing.
    pub extra_loss: Option<Var<B>>,
}

impl<B: Backend> StepOutput<B> {
    /// Scores and their classes, with no extra loss term.
    ///
    /// # Errors
    /// [`Error::ShapeMismatch`] unless there is one target per row.
    pub fn new(logits: Var<B>, targets: Index<B>) -> Result<Self> {
        let rows = logits.shape().0;
        if targets.len() != rows {
            return Err(Error::shape(
                "step output",
                format!("one target per row of the logits ({rows})"),
                format!("{} targets", targets.len()),
            ));
        }
        Ok(StepOutput {
            logits,
            targets,
            extra_loss: None,
        })
    }

    /// The same output with `term` (`1 x 1`) added to the training loss.
    ///
    /// # Errors
    /// [`Error::ShapeMismatch`] unless `term` is `1 x 1`.
    pub fn with_extra_loss(mut self, term: Var<B>) -> Result<Self> {
        if term.shape() != (1, 1) {
            return Err(Error::shape(
                "extra loss term",
                "1 x 1",
                format!("{} x {}", term.shape().0, term.shape().1),
            ));
        }
        self.extra_loss = Some(term);
        Ok(self)
    }
}

/// A model the generic training loop can train: what one step computes
/// from a batch (compare burn-train's `TrainStep`/`ValidStep` and
/// Lightning's `training_step`/`validation_step`).
///
/// The loop owns everything else: the tape and its dropout seed, the loss
/// (cross-entropy with label smoothing), the backward pass, gradient
/// clipping, the optimiser and its schedule, the weight average, model
/// selection on validation and early stopping. A model only says how a
/// batch becomes scores. [`Module::set_training`] is called before
/// training steps (`true`) and evaluation (`false`), so dropout behaves.
///
/// The crate's own uses are thin: node classification scores the nodes
/// of a batch on one graph, graph classification scores the graphs of a
/// block-diagonal mini-batch. A model written outside the crate is
/// trained the same way (see `tests/custom_model.rs`).
///
/// ```
/// use hdgcn::autograd::{Index, Param, Tape};
/// use hdgcn::backend::Cpu;
/// use hdgcn::nn::{Module, ParamVisitor};
/// use hdgcn::train::{StepOutput, TrainConfig, TrainStep, Trainer};
///
/// /// Logistic regression on fixed inputs: the batch is which rows to score.
/// struct LogReg {
///     w: Param<Cpu<f64>>,
///     x: ndarray::Array2<f64>,
///     y: Vec<usize>,
/// }
/// impl Module<Cpu<f64>> for LogReg {
///     fn visit_params(&self, v: &mut ParamVisitor<'_, Cpu<f64>>) {
///         v.param("w", &self.w);
///     }
/// }
/// impl TrainStep<Cpu<f64>> for LogReg {
///     type Batch = Vec<usize>;
///     fn train_step(&self, tape: &Tape<Cpu<f64>>, rows: &Vec<usize>) -> hdgcn::Result<StepOutput<Cpu<f64>>> {
///         let cpu = tape.backend();
///         let idx = Index::new(cpu, rows)?;
///         let logits = tape.constant_array(&self.x).gather_rows(&idx)?.matmul(&tape.param(&self.w))?;
///         let y: Vec<usize> = rows.iter().map(|&r| self.y[r]).collect();
///         StepOutput::new(logits, Index::new(cpu, &y)?)
///     }
/// }
///
/// let cpu = Cpu::<f64>::new();
/// let x = ndarray::arr2(&[[1.0, 0.0], [0.0, 1.0], [0.9, 0.1], [0.2, 0.8]]);
/// let mut model = LogReg { w: Param::from_array(&cpu, &ndarray::Array2::zeros((2, 2))), x, y: vec![0, 1, 0, 1] };
/// let cfg = TrainConfig { epochs: 30, lr: 0.1, ..TrainConfig::default() };
/// let report = Trainer::new(cfg)?.fit(&mut model, &mut vec![vec![0, 1]], &[vec![2, 3]])?;
/// assert_eq!(report.val_acc, 1.0);
/// # Ok::<(), hdgcn::Error>(())
/// ```
pub trait TrainStep<B: Backend>: Module<B> {
    /// One batch of data, as the model reads it.
    type Batch;

    /// The scores of `batch` in training mode, recorded on `tape` (whose
    /// seed drives the dropout masks).
    ///
    /// # Errors
    /// Whatever the forward pass returns (shape errors and the like).
    fn train_step(&self, tape: &Tape<B>, batch: &Self::Batch) -> Result<StepOutput<B>>;

    /// The scores of `batch` for evaluation, on an inference tape (nothing
    /// recorded). By default the same computation as
    /// [`TrainStep::train_step`]; the loop has already switched the model
    /// to evaluation mode.
    ///
    /// # Errors
    /// As [`TrainStep::train_step`].
    fn valid_step(&self, tape: &Tape<B>, batch: &Self::Batch) -> Result<StepOutput<B>> {
        self.train_step(tape, batch)
    }

    /// The parameters weight decay applies to (default: all of them); the
    /// others are updated with the same optimiser and no decay, as a
    /// PyTorch parameter group with `weight_decay=0`. Kipf & Welling's GCN
    /// decays its first layer only.
    fn decayed_params(&self) -> Vec<Param<B>> {
        self.params()
    }
}
