//! Multi-layer perceptron.

use rand::Rng;

use super::{Activation, Dropout, Features, Linear, Module, ParamVisitor};
use crate::autograd::{Tape, Var};
use crate::backend::Backend;
use crate::error::{Error, Result};

/// PyG-style `MLP(channel_list)`: `Linear -> activation -> dropout` between
/// layers, no activation after the last. Parameters are named
/// `lins.{i}.weight` / `lins.{i}.bias`.
#[derive(Debug, Clone)]
pub struct Mlp<B: Backend> {
    /// The linear layers.
    pub lins: Vec<Linear<B>>,
    /// Activation between layers.
    pub activation: Activation,
    /// Dropout between layers.
    pub dropout: Dropout,
}

impl<B: Backend> Mlp<B> {
    /// An MLP with widths `channels[0] -> channels[1] -> ...` (at least two entries).
    pub fn new<R: Rng + ?Sized>(
        backend: &B,
        channels: &[usize],
        activation: Activation,
        dropout: f64,
        rng: &mut R,
    ) -> Result<Self> {
        if channels.len() < 2 {
            return Err(Error::InvalidConfig(
                "an MLP needs at least input and output widths".into(),
            ));
        }
        let lins = channels
            .windows(2)
            .map(|w| Linear::new(backend, w[0], w[1], true, rng))
            .collect::<Result<_>>()?;
        Ok(Mlp {
            lins,
            activation,
            dropout: Dropout::new(dropout)?,
        })
    }

    /// Applies the MLP.
    pub fn forward(&self, tape: &Tape<B>, x: &Features<B>) -> Result<Var<B>> {
        let Some((first, rest)) = self.lins.split_first() else {
            return Err(Error::InvalidConfig(
                "an MLP needs at least one layer".into(),
            ));
        };
        let mut h = first.forward_on(tape, x)?;
        for lin in rest {
            h = self.dropout.forward(&self.activation.apply(&h))?;
            h = lin.forward_on(tape, &Features::Dense(h))?;
        }
        Ok(h)
    }
}

impl<B: Backend> Module<B> for Mlp<B> {
    fn visit_params(&self, v: &mut ParamVisitor<'_, B>) {
        for (i, l) in self.lins.iter().enumerate() {
            v.child(&format!("lins.{i}"), l);
        }
    }
    fn set_training(&mut self, training: bool) {
        self.dropout.set_training(training);
    }
}
