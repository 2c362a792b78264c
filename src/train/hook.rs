//! [`Hook`]: opt-in pieces that plug into the training loop.

use crate::autograd::Gradients;
use crate::backend::Backend;
use crate::error::Result;

use super::step::TrainStep;
use super::trainer::EpochRecord;

/// Where the loop is when it calls a hook.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepContext {
    /// The epoch (0-based).
    pub epoch: usize,
    /// Steps taken before this one, over the whole run.
    pub step: u64,
    /// The seed of this step's tape: a second pass on
    /// `Tape::with_seed(backend, seed)` draws the same dropout masks.
    pub seed: u64,
    /// The learning rate of this step.
    pub lr: f64,
}

/// An opt-in addition to the training loop, for what is not the loop's
/// own business: an adversarial pass, gradient noise, logging, a custom
/// stopping rule. Every method has a default that does nothing.
///
/// Hooks are given to [`Trainer::with_hook`](super::Trainer::with_hook)
/// and called in the order they were added.
///
/// ```
/// use hdgcn::backend::Backend;
/// use hdgcn::train::{EpochRecord, Hook, TrainStep};
///
/// /// Keeps the training loss of every epoch.
/// #[derive(Default)]
/// struct LossLog(Vec<f64>);
/// impl<B: Backend, M: TrainStep<B>> Hook<B, M> for LossLog {
///     fn on_epoch_end(&mut self, record: &EpochRecord) -> hdgcn::Result<bool> {
///         self.0.push(record.train_loss);
///         Ok(true)
///     }
/// }
/// ```
pub trait Hook<B: Backend, M: TrainStep<B>> {
    /// After the backward pass of a step, before gradient clipping and the
    /// optimiser: may change `grads` (add a second pass's gradients, add
    /// noise). The model still holds the weights the step started from.
    ///
    /// # Errors
    /// An error stops training and is returned by `fit`.
    fn after_backward(
        &mut self,
        _model: &M,
        _batch: &M::Batch,
        _ctx: &StepContext,
        _grads: &mut Gradients<B>,
    ) -> Result<()> {
        Ok(())
    }

    /// After each epoch's validation, with what the epoch measured. Return
    /// `Ok(false)` to stop training after this epoch (the best epoch so
    /// far is still restored).
    ///
    /// # Errors
    /// An error stops training and is returned by `fit`.
    fn on_epoch_end(&mut self, _record: &EpochRecord) -> Result<bool> {
        Ok(true)
    }
}

/// A hook lent to the loop: the caller keeps it and reads what it
/// gathered after `fit`.
impl<B: Backend, M: TrainStep<B>, H: Hook<B, M> + ?Sized> Hook<B, M> for &mut H {
    fn after_backward(
        &mut self,
        model: &M,
        batch: &M::Batch,
        ctx: &StepContext,
        grads: &mut Gradients<B>,
    ) -> Result<()> {
        (**self).after_backward(model, batch, ctx, grads)
    }

    fn on_epoch_end(&mut self, record: &EpochRecord) -> Result<bool> {
        (**self).on_epoch_end(record)
    }
}
