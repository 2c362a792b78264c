//! `Gcn2Conv`: GCNII's layer (initial residual and identity mapping) with
//! PyG's numerics.

use rand::Rng;

use super::{DeviceGraph, GraphConv, check_input};
use crate::autograd::{Param, Tape, Var};
use crate::backend::Backend;
use crate::error::{Error, Result};
use crate::float::Float;
use crate::nn::{Features, Module, ParamVisitor, init};

/// Hyper-parameters of [`Gcn2Conv`] (PyG's `GCN2Conv(channels, alpha,
/// theta, layer, shared_weights)`).
#[derive(Debug, Clone, PartialEq)]
pub struct Gcn2ConvConfig {
    /// Width of the input, the initial representation and the output.
    pub channels: usize,
    /// Weight `α` of the initial residual `x_0`.
    pub alpha: f64,
    /// `θ` of the identity mapping's `β = ln(θ / ℓ + 1)`; with `layer`,
    /// or neither (then `β = 1`).
    pub theta: Option<f64>,
    /// The layer's 1-based depth `ℓ`; with `theta`.
    pub layer: Option<usize>,
    /// One weight for the propagated states and `x_0` together (PyG's
    /// default); else a second weight `weight2` for `x_0`.
    pub shared_weights: bool,
}

impl Gcn2ConvConfig {
    /// A layer at depth `layer` with `α` and `θ`, shared weights.
    pub fn new(channels: usize, alpha: f64, theta: f64, layer: usize) -> Self {
        Gcn2ConvConfig {
            channels,
            alpha,
            theta: Some(theta),
            layer: Some(layer),
            shared_weights: true,
        }
    }

    /// `β = ln(θ / ℓ + 1)`, or 1 when neither is given.
    ///
    /// # Errors
    /// As [`Gcn2ConvConfig::validate`].
    pub fn beta(&self) -> Result<f64> {
        self.validate()?;
        Ok(match (self.theta, self.layer) {
            (Some(theta), Some(layer)) => (theta / layer as f64 + 1.0).ln(),
            _ => 1.0,
        })
    }

    /// Checks the configuration.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for zero channels, a non-finite `α`, only
    /// one of `theta` and `layer`, a non-finite or negative `θ`, or layer 0.
    pub fn validate(&self) -> Result<()> {
        crate::nn::check_dims(self.channels, self.channels)?;
        if !self.alpha.is_finite() {
            return Err(Error::InvalidConfig(format!(
                "Gcn2Conv alpha must be finite, got {}",
                self.alpha
            )));
        }
        match (self.theta, self.layer) {
            (None, None) => Ok(()),
            (Some(theta), Some(layer)) => {
                if !theta.is_finite() || theta < 0.0 {
                    return Err(Error::InvalidConfig(format!(
                        "Gcn2Conv theta must be finite and non-negative, got {theta}"
                    )));
                }
                if layer == 0 {
                    return Err(Error::InvalidConfig(
                        "Gcn2Conv layer is 1-based (beta = ln(theta / layer + 1)), got 0".into(),
                    ));
                }
                Ok(())
            }
            _ => Err(Error::InvalidConfig(
                "Gcn2Conv needs theta and layer together (or neither, for beta = 1)".into(),
            )),
        }
    }

    /// Builds the layer with Glorot weights (as PyG).
    ///
    /// # Errors
    /// As [`Gcn2ConvConfig::validate`]; [`Error::OverBudget`] for weights
    /// over the memory budget.
    pub fn build<B: Backend, R: Rng + ?Sized>(
        self,
        backend: &B,
        rng: &mut R,
    ) -> Result<Gcn2Conv<B>> {
        let beta = self.beta()?;
        let c = self.channels;
        init::check_size::<B::Elem>("Gcn2Conv weight", c, c)?;
        let weight1 = init::glorot(backend, c, c, rng);
        let weight2 = (!self.shared_weights).then(|| init::glorot(backend, c, c, rng));
        Ok(Gcn2Conv {
            config: self,
            beta,
            weight1,
            weight2,
        })
    }
}

/// GCNII's graph convolution (Chen et al. 2020), exactly PyG's `GCN2Conv`:
///
/// `P = (1 - α) Â X + α X_0`,
/// `out = (1 - β) P + β P W_1` (shared weights), or
/// `out = (1 - β)(1 - α) Â X + β (1 - α) Â X W_1 + (1 - β) α X_0 + β α X_0 W_2`,
///
/// with `Â` the GCN operator (self-loops added where missing, edge weights
/// used, [`DeviceGraph::gcn_operator`]) and `β = ln(θ / ℓ + 1)`. It is
/// evaluated as `((1 - α) Â) X` (the scaled operator cached per `α`) and
/// `P ((1 - β) I + β W)`, the same value in fewer `N`-row operations.
///
/// The initial representation `X_0` is the second input
/// ([`Gcn2Conv::forward_with_initial`]); [`GraphConv::forward`] uses the
/// input itself as `X_0` (a model's first layer). Inputs must be dense.
///
/// Parameters (PyG's names): `weight1` and, without shared weights,
/// `weight2`, each `channels x channels` and used as `X W` in PyG too (no
/// transpose when loading a PyG `state_dict`). No bias.
///
/// ```
/// use hdgcn::autograd::Tape;
/// use hdgcn::backend::Cpu;
/// use hdgcn::conv::{DeviceGraph, Gcn2ConvConfig};
/// use hdgcn::graph::Graph;
/// use rand::SeedableRng;
/// let cpu = Cpu::<f64>::new();
/// let g = DeviceGraph::new(&cpu, Graph::from_edges(3, &[(0, 1), (1, 0), (1, 2), (2, 1)])?);
/// let conv = Gcn2ConvConfig::new(4, 0.1, 0.5, 1)
///     .build(&cpu, &mut rand::rngs::StdRng::seed_from_u64(0))?;
/// assert!((conv.beta() - 1.5f64.ln()).abs() < 1e-15);
/// let tape = Tape::inference(&cpu);
/// let x0 = tape.constant_array(&ndarray::Array2::ones((3, 4)));
/// let y = conv.forward_with_initial(&tape, &g, &x0, &x0)?;
/// assert_eq!(y.shape(), (3, 4));
/// # Ok::<(), hdgcn::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Gcn2Conv<B: Backend> {
    config: Gcn2ConvConfig,
    beta: f64,
    /// `W_1`, `channels x channels`.
    pub weight1: Param<B>,
    /// `W_2` for `X_0` (`None` with shared weights).
    pub weight2: Option<Param<B>>,
}

impl<B: Backend> Gcn2Conv<B> {
    /// The configuration.
    pub fn config(&self) -> &Gcn2ConvConfig {
        &self.config
    }

    /// `β` of the identity mapping.
    pub fn beta(&self) -> f64 {
        self.beta
    }

    /// The layer on states `x` with initial representation `x0` (PyG's
    /// `forward(x, x_0, edge_index, edge_weight)`).
    ///
    /// # Errors
    /// [`Error::ShapeMismatch`] when `x` or `x0` is not
    /// `num_nodes x channels`, or a weight is not `channels x channels`.
    pub fn forward_with_initial(
        &self,
        tape: &Tape<B>,
        graph: &DeviceGraph<B>,
        x: &Var<B>,
        x0: &Var<B>,
    ) -> Result<Var<B>> {
        let c = self.config.channels;
        check_input("Gcn2Conv", graph, &Features::Dense(x.clone()), c)?;
        check_input("Gcn2Conv x_0", graph, &Features::Dense(x0.clone()), c)?;
        let weights = std::iter::once(("weight1", &self.weight1))
            .chain(self.weight2.as_ref().map(|w| ("weight2", w)));
        for (name, w) in weights {
            if w.shape() != (c, c) {
                return Err(Error::shape(
                    "Gcn2Conv weight",
                    format!("{name} of ({c}, {c})"),
                    format!("{:?}", w.shape()),
                ));
            }
        }
        let (alpha, beta) = (self.config.alpha, self.beta);
        // (1 - α) Â, cached per α: one sparse product gives the scaled term.
        let keep = 1.0 - alpha;
        let op = graph.operator(&format!("gcn*{keep:?}"), |g| {
            Ok(g.gcn_operator()?.map(|v| v * keep))
        })?;
        let h = op.matmul(x)?;
        let h0 = x0.scale(alpha);
        // PyG's `addmm(s, s, W, beta=1-β, alpha=β)`, (1 - β) s + β s W, as
        // one product s ((1 - β) I + β W): the mixing of the weight is on a
        // `channels x channels` matrix instead of the `N x channels` states.
        let diag = B::Elem::from_f64_lossy(1.0 - beta);
        let zero = B::Elem::from_f64_lossy(0.0);
        let identity = tape.constant_array(&ndarray::Array2::from_shape_fn((c, c), |(i, j)| {
            if i == j { diag } else { zero }
        }));
        let mixed = |w: &Param<B>| tape.param(w).scale(beta).add(&identity);
        match &self.weight2 {
            None => h.add(&h0)?.matmul(&mixed(&self.weight1)?),
            Some(w2) => h
                .matmul(&mixed(&self.weight1)?)?
                .add(&h0.matmul(&mixed(w2)?)?),
        }
    }
}

impl<B: Backend> GraphConv<B> for Gcn2Conv<B> {
    fn in_channels(&self) -> usize {
        self.config.channels
    }

    fn out_channels(&self) -> usize {
        self.config.channels
    }

    /// [`Gcn2Conv::forward_with_initial`] with `x` as its own initial
    /// representation.
    fn forward(&self, tape: &Tape<B>, graph: &DeviceGraph<B>, x: &Features<B>) -> Result<Var<B>> {
        let x = x.dense()?;
        self.forward_with_initial(tape, graph, &x, &x)
    }
}

impl<B: Backend> Module<B> for Gcn2Conv<B> {
    fn visit_params(&self, v: &mut ParamVisitor<'_, B>) {
        v.param("weight1", &self.weight1);
        if let Some(w) = &self.weight2 {
            v.param("weight2", w);
        }
    }
}
