//! `Appnp`: approximate personalised PageRank propagation with PyG's numerics.

use super::{DeviceGraph, GraphConv, check_input};
use crate::autograd::{Tape, Var};
use crate::backend::Backend;
use crate::error::{Error, Result};
use crate::nn::{Dropout, Features, Module, ParamVisitor};

/// APPNP's propagation (Klicpera et al. 2019), exactly PyG's
/// `APPNP(K, alpha, dropout)`:
///
/// `H_0 = X`, `H_{k+1} = (1 - α) Â H_k + α X` for `k < K`, output `H_K`,
///
/// with `Â` the GCN operator (self-loops added where missing, edge weights
/// used, [`DeviceGraph::gcn_operator`]). With edge dropout `p > 0`, in
/// training mode every step draws a fresh dropout of `Â`'s stored values
/// (survivors scaled by `1 / (1 - p)`), as PyG drops the normalised edge
/// weights.
///
/// No parameters; input and output width are both `channels`. Input
/// features must be dense.
///
/// ```
/// use hdgcn::autograd::Tape;
/// use hdgcn::backend::Cpu;
/// use hdgcn::conv::{Appnp, DeviceGraph, GraphConv};
/// use hdgcn::graph::Graph;
/// let cpu = Cpu::<f64>::new();
/// let g = DeviceGraph::new(&cpu, Graph::from_edges(2, &[(0, 1), (1, 0)])?);
/// let appnp = Appnp::new(1, 10, 0.1)?;
/// let tape = Tape::inference(&cpu);
/// let x = tape.constant_array(&ndarray::arr2(&[[1.0], [3.0]]));
/// let y = GraphConv::<Cpu<f64>>::forward(&appnp, &tape, &g, &x.into())?.to_array();
/// // Â averages the two nodes (each has degree 2 with its self-loop); the
/// // sum is preserved.
/// assert!((y[[0, 0]] + y[[1, 0]] - 4.0).abs() < 1e-12);
/// # Ok::<(), hdgcn::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Appnp {
    channels: usize,
    k: usize,
    alpha: f64,
    dropout: Dropout,
}

impl Appnp {
    /// `K` propagation steps with teleport `α`, no edge dropout.
    ///
    /// # Errors
    /// As [`Appnp::with_dropout`].
    pub fn new(channels: usize, k: usize, alpha: f64) -> Result<Self> {
        Self::with_dropout(channels, k, alpha, 0.0)
    }

    /// With edge dropout `p` in training mode.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for zero channels, a non-finite `α`, or `p`
    /// outside `[0, 1)`.
    pub fn with_dropout(channels: usize, k: usize, alpha: f64, p: f64) -> Result<Self> {
        crate::nn::check_dims(channels, channels)?;
        if !alpha.is_finite() {
            return Err(Error::InvalidConfig(format!(
                "Appnp alpha must be finite, got {alpha}"
            )));
        }
        Ok(Appnp {
            channels,
            k,
            alpha,
            dropout: Dropout::new(p)?,
        })
    }

    /// Number of propagation steps `K`.
    pub fn k(&self) -> usize {
        self.k
    }

    /// Teleport probability `α`.
    pub fn alpha(&self) -> f64 {
        self.alpha
    }
}

impl<B: Backend> GraphConv<B> for Appnp {
    fn in_channels(&self) -> usize {
        self.channels
    }

    fn out_channels(&self) -> usize {
        self.channels
    }

    fn forward(&self, tape: &Tape<B>, graph: &DeviceGraph<B>, x: &Features<B>) -> Result<Var<B>> {
        check_input("Appnp", graph, x, self.channels)?;
        let x = x.dense()?;
        if self.k == 0 {
            return Ok(x.clone());
        }
        let op = graph.gcn_operator()?;
        let teleport = x.scale(self.alpha);
        let drop = self.dropout.is_training() && self.dropout.p() > 0.0;
        let mut h = x.clone();
        for _ in 0..self.k {
            let step = if drop {
                op.dropout(tape, self.dropout.p())?
            } else {
                op.clone()
            };
            h = step.matmul(&h)?.scale(1.0 - self.alpha).add(&teleport)?;
        }
        Ok(h)
    }
}

impl<B: Backend> Module<B> for Appnp {
    fn visit_params(&self, _v: &mut ParamVisitor<'_, B>) {}

    fn set_training(&mut self, training: bool) {
        self.dropout.set_training(training);
    }
}
