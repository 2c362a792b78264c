//! Exponential moving average of parameters (Polyak–Ruppert averaging).

use crate::autograd::{Param, ParamId};
use crate::backend::{Backend, UnaryOp};
use crate::error::{Error, Result};

/// A running exponential average of a list of parameters, the weights that
/// evaluation uses in place of the last step's (PyTorch's
/// `torch.optim.swa_utils.AveragedModel` with
/// `get_ema_multi_avg_fn(decay)`; TensorFlow's `ExponentialMovingAverage`).
///
/// After each optimiser step, [`update`](Self::update) sets every average to
///
/// ```text
/// avg ← d · avg + (1 − d) · p
/// ```
///
/// with `d` the decay, or, with [`with_warmup`](Self::with_warmup), `d_n =
/// min(d, (1 + n) / (10 + n))` at the `n`-th update (TensorFlow's
/// `num_updates`), so the first updates follow the weights closely. The
/// averages start at the parameters' values when the average is created and
/// live on the parameters' backend.
///
/// To evaluate with the averages, [`swap`](Self::swap) them into the
/// parameters, evaluate, and swap again to continue training from the
/// optimiser's weights. [`copy_to`](Self::copy_to) writes the averages into
/// the parameters for good.
///
/// # Example
///
/// ```
/// use hdgcn::autograd::Param;
/// use hdgcn::backend::{Backend, Cpu};
/// use hdgcn::optim::ExponentialMovingAverage;
/// use ndarray::array;
///
/// let cpu = Cpu::<f64>::new();
/// let w = Param::from_array(&cpu, &array![[0.0, 4.0]]);
/// let mut ema = ExponentialMovingAverage::new(&[w.clone()], 0.75)?;
/// w.set(cpu.upload(array![[4.0, 0.0]].view()))?; // "an optimiser step"
/// ema.update(&[w.clone()])?;
/// assert_eq!(ema.averages()[0], array![[1.0, 3.0]]); // 0.75·old + 0.25·new
///
/// ema.swap(&[w.clone()])?; // evaluate with the average ...
/// assert_eq!(w.to_array(), array![[1.0, 3.0]]);
/// ema.swap(&[w.clone()])?; // ... and train on from the last step
/// assert_eq!(w.to_array(), array![[4.0, 0.0]]);
/// # Ok::<(), hdgcn::Error>(())
/// ```
#[derive(Debug)]
pub struct ExponentialMovingAverage<B: Backend> {
    decay: f64,
    warmup: bool,
    num_updates: u64,
    backend: Option<B>,
    ids: Vec<ParamId>,
    averages: Vec<B::Tensor>,
}

impl<B: Backend> ExponentialMovingAverage<B> {
    /// Starts the averages of `params` at their current values.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] if `decay` is not in `[0, 1)` or a
    /// parameter is listed twice.
    pub fn new(params: &[Param<B>], decay: f64) -> Result<Self> {
        super::check_beta("ExponentialMovingAverage", "decay", decay)?;
        let ids: Vec<ParamId> = params.iter().map(Param::id).collect();
        let mut sorted = ids.clone();
        sorted.sort_unstable();
        if sorted.windows(2).any(|w| w[0] == w[1]) {
            return Err(Error::InvalidConfig(
                "ExponentialMovingAverage: a parameter is listed twice".into(),
            ));
        }
        let averages = params.iter().map(|p| p.value().clone()).collect();
        Ok(ExponentialMovingAverage {
            decay,
            warmup: false,
            num_updates: 0,
            backend: params.first().map(|p| p.backend().clone()),
            ids,
            averages,
        })
    }

    /// Ramps the decay up as `min(decay, (1 + n) / (10 + n))` over the
    /// updates `n = 0, 1, ...` (off by default).
    pub fn with_warmup(mut self, warmup: bool) -> Self {
        self.warmup = warmup;
        self
    }

    /// The configured decay.
    pub fn decay(&self) -> f64 {
        self.decay
    }

    /// Updates made so far.
    pub fn num_updates(&self) -> u64 {
        self.num_updates
    }

    /// The decay the next [`update`](Self::update) uses.
    pub fn effective_decay(&self) -> f64 {
        if self.warmup {
            let n = self.num_updates as f64;
            self.decay.min((1.0 + n) / (10.0 + n))
        } else {
            self.decay
        }
    }

    /// Host copies of the averages, in the order of the parameters.
    pub fn averages(&self) -> Vec<ndarray::Array2<B::Elem>> {
        match &self.backend {
            Some(b) => self.averages.iter().map(|a| b.download(a)).collect(),
            None => Vec::new(),
        }
    }

    /// Checks that `params` are the averaged parameters, in order, with
    /// their shapes.
    fn check(&self, params: &[Param<B>]) -> Result<()> {
        if params.len() != self.ids.len() {
            return Err(Error::ShapeMismatch {
                op: "ExponentialMovingAverage",
                expected: format!("{} parameters", self.ids.len()),
                got: format!("{}", params.len()),
            });
        }
        for (i, (p, (id, a))) in params
            .iter()
            .zip(self.ids.iter().zip(&self.averages))
            .enumerate()
        {
            if p.id() != *id {
                return Err(Error::InvalidConfig(format!(
                    "ExponentialMovingAverage: parameter {i} is not the one averaged"
                )));
            }
            let want = p.backend().shape(a);
            if p.shape() != want {
                return Err(Error::ShapeMismatch {
                    op: "ExponentialMovingAverage",
                    expected: format!("{want:?} for parameter {i}"),
                    got: format!("{:?}", p.shape()),
                });
            }
        }
        Ok(())
    }

    /// Moves every average towards its parameter's current value.
    ///
    /// # Errors
    ///
    /// [`Error::ShapeMismatch`] or [`Error::InvalidConfig`] if `params` are
    /// not the parameters the average was created with, in the same order
    /// and with the same shapes; nothing is updated then.
    pub fn update(&mut self, params: &[Param<B>]) -> Result<()> {
        self.check(params)?;
        let d = self.effective_decay();
        for (p, a) in params.iter().zip(&mut self.averages) {
            let b = p.backend();
            let mut next = b.unary(UnaryOp::Affine(d, 0.0), a);
            b.add_assign(
                &mut next,
                &b.unary(UnaryOp::Affine(1.0 - d, 0.0), &p.value()),
            );
            *a = next;
        }
        self.num_updates += 1;
        Ok(())
    }

    /// Exchanges the averages and the parameters' values: call it once to
    /// evaluate with the averages and once more to restore the weights.
    ///
    /// # Errors
    ///
    /// As [`update`](Self::update).
    pub fn swap(&mut self, params: &[Param<B>]) -> Result<()> {
        self.check(params)?;
        for (p, a) in params.iter().zip(&mut self.averages) {
            std::mem::swap(&mut *p.value_mut(), a);
        }
        Ok(())
    }

    /// Writes the averages into the parameters (the averages stay).
    ///
    /// # Errors
    ///
    /// As [`update`](Self::update).
    pub fn copy_to(&self, params: &[Param<B>]) -> Result<()> {
        self.check(params)?;
        for (p, a) in params.iter().zip(&self.averages) {
            p.set(a.clone())?;
        }
        Ok(())
    }
}
