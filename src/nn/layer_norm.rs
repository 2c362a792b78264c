//! Layer normalisation.

use super::{Module, ParamVisitor, init};
use crate::autograd::{Param, Var};
use crate::backend::Backend;
use crate::error::{Error, Result, check_non_negative};

/// `torch.nn.LayerNorm(h)`: each row standardised (biased variance, `eps`
/// inside the square root), then scaled by `weight` and shifted by `bias`.
#[derive(Debug, Clone)]
pub struct LayerNorm<B: Backend> {
    /// Scale, `1 x h`, initialised to ones.
    pub weight: Param<B>,
    /// Shift, `1 x h`, initialised to zeros.
    pub bias: Param<B>,
    /// Variance epsilon (default `1e-5`).
    pub eps: f64,
}

impl<B: Backend> LayerNorm<B> {
    /// A layer norm over rows of width `h`.
    pub fn new(backend: &B, h: usize, eps: f64) -> Result<Self> {
        if h == 0 {
            return Err(Error::InvalidConfig(
                "LayerNorm width must be positive".into(),
            ));
        }
        check_non_negative("LayerNorm eps", eps)?;
        Ok(LayerNorm {
            weight: init::constant(backend, 1, h, 1.0)?,
            bias: init::constant(backend, 1, h, 0.0)?,
            eps,
        })
    }

    /// Normalises the rows of `x`.
    pub fn forward(&self, x: &Var<B>) -> Result<Var<B>> {
        let (_, c) = x.shape();
        let (_, h) = self.weight.shape();
        if c != h {
            return Err(Error::shape(
                "LayerNorm",
                format!("{h} columns"),
                format!("{c} columns"),
            ));
        }
        let t = x.tape();
        x.layer_norm(self.eps)
            .mul(&t.param(&self.weight))?
            .add(&t.param(&self.bias))
    }
}

impl<B: Backend> Module<B> for LayerNorm<B> {
    fn visit_params(&self, v: &mut ParamVisitor<'_, B>) {
        v.param("weight", &self.weight);
        v.param("bias", &self.bias);
    }
}
