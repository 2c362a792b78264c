//! Dropout as a module (active only in training mode).

use super::{Features, Module, ParamVisitor};
use crate::autograd::{Tape, Var};
use crate::backend::Backend;
use crate::error::Result;

/// Inverted dropout with probability `p`, active only in training mode
/// (see [`Module::set_training`]); masks come from the tape's seed stream.
#[derive(Debug, Clone, Copy)]
pub struct Dropout {
    p: f64,
    training: bool,
}

impl Dropout {
    /// A dropout layer (`0 <= p < 1`), in training mode.
    pub fn new(p: f64) -> Result<Self> {
        crate::autograd::check_dropout_p(p)?;
        Ok(Dropout { p, training: true })
    }

    /// The drop probability.
    pub fn p(&self) -> f64 {
        self.p
    }

    /// Whether the layer is in training mode.
    pub fn is_training(&self) -> bool {
        self.training
    }

    /// Applies dropout to a dense value.
    pub fn forward<B: Backend>(&self, x: &Var<B>) -> Result<Var<B>> {
        if self.training {
            x.dropout(self.p)
        } else {
            Ok(x.clone())
        }
    }

    /// Applies dropout to dense or sparse features.
    pub fn forward_features<B: Backend>(
        &self,
        tape: &Tape<B>,
        x: &Features<B>,
    ) -> Result<Features<B>> {
        if self.training {
            x.dropout(tape, self.p)
        } else {
            Ok(x.clone())
        }
    }

    /// Sets training mode.
    pub fn set_training(&mut self, training: bool) {
        self.training = training;
    }
}

impl<B: Backend> Module<B> for Dropout {
    fn visit_params(&self, _v: &mut ParamVisitor<'_, B>) {}
    fn set_training(&mut self, training: bool) {
        self.training = training;
    }
}
