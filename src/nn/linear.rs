//! Fully connected layer.

use rand::Rng;

use super::{Features, Module, ParamVisitor, init};
use crate::autograd::{Param, Var};
use crate::backend::Backend;
use crate::error::{Error, Result};

/// `y = x W + b` with `W: in x out` (the transpose of PyTorch's storage,
/// reported as [`TorchLayout::Transposed`](super::TorchLayout)) and `b: 1 x out`. Initialised like `torch.nn.Linear` by [`Linear::new`]
/// or with Glorot weights and zero bias (PyG) by [`Linear::glorot`].
#[derive(Debug, Clone)]
pub struct Linear<B: Backend> {
    /// Weight, `in x out`.
    pub weight: Param<B>,
    /// Optional bias, `1 x out`.
    pub bias: Option<Param<B>>,
}

impl<B: Backend> Linear<B> {
    /// `torch.nn.Linear` initialisation.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for a zero width or a `d_in x d_out` weight
    /// whose size overflows; [`Error::OverBudget`] for one over the memory
    /// budget ([`crate::limits`]).
    pub fn new<R: Rng + ?Sized>(
        backend: &B,
        d_in: usize,
        d_out: usize,
        bias: bool,
        rng: &mut R,
    ) -> Result<Self> {
        check_dims(d_in, d_out)?;
        init::check_size::<B::Elem>("Linear weight", d_in, d_out)?;
        let weight = init::linear_default(backend, d_in, d_in, d_out, rng);
        let bias = bias.then(|| init::linear_default(backend, d_in, 1, d_out, rng));
        Ok(Linear { weight, bias })
    }

    /// Glorot weight, zero bias (PyG's `Linear(weight_initializer="glorot")`).
    ///
    /// # Errors
    /// As [`Linear::new`].
    pub fn glorot<R: Rng + ?Sized>(
        backend: &B,
        d_in: usize,
        d_out: usize,
        bias: bool,
        rng: &mut R,
    ) -> Result<Self> {
        check_dims(d_in, d_out)?;
        init::check_size::<B::Elem>("Linear weight", d_in, d_out)?;
        let weight = init::glorot(backend, d_in, d_out, rng);
        let bias = bias
            .then(|| init::constant(backend, 1, d_out, 0.0))
            .transpose()?;
        Ok(Linear { weight, bias })
    }

    /// Input width.
    pub fn in_features(&self) -> usize {
        self.weight.shape().0
    }

    /// Output width.
    pub fn out_features(&self) -> usize {
        self.weight.shape().1
    }

    /// `x W + b` on dense or sparse features.
    pub fn forward(&self, x: &Features<B>) -> Result<Var<B>> {
        let tape = match x {
            Features::Dense(v) | Features::DenseDropout { x: v, .. } => v.tape().clone(),
            Features::Sparse(_) => {
                return Err(Error::InvalidConfig(
                    "use Linear::forward_on with sparse input".into(),
                ));
            }
        };
        self.forward_on(&tape, x)
    }

    /// `x W + b` recorded on `tape` (needed for sparse inputs, which are not on a tape).
    pub fn forward_on(&self, tape: &crate::autograd::Tape<B>, x: &Features<B>) -> Result<Var<B>> {
        let y = x.matmul(&tape.param(&self.weight))?;
        match &self.bias {
            Some(b) => y.add(&tape.param(b)),
            None => Ok(y),
        }
    }
}

pub(crate) fn check_dims(d_in: usize, d_out: usize) -> Result<()> {
    if d_in == 0 || d_out == 0 {
        return Err(Error::InvalidConfig(format!(
            "layer widths must be positive, got {d_in} -> {d_out}"
        )));
    }
    Ok(())
}

impl<B: Backend> Module<B> for Linear<B> {
    fn visit_params(&self, v: &mut ParamVisitor<'_, B>) {
        v.param_transposed("weight", &self.weight);
        if let Some(b) = &self.bias {
            v.param("bias", b);
        }
    }
}
