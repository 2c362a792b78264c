//! `SageConv`: GraphSAGE's mean aggregator with PyG's numerics.

use rand::Rng;

use super::{DeviceGraph, GraphConv, check_input};
use crate::autograd::{Tape, Var};
use crate::backend::{Axis, Backend};
use crate::error::{Error, Result};
use crate::nn::{Features, Linear, Module, ParamVisitor};

/// The `||·||₂` floor of [`SageConv`]'s output normalisation, squared:
/// rows are divided by `sqrt(Σ out² + 1e-24)`, which is PyG's
/// `max(||out||₂, 1e-12)` for every row whose norm is not within a few
/// units of 1e-12 of zero (a zero row stays zero in both).
const NORM_EPS_SQ: f64 = 1e-24;

/// Hyper-parameters of [`SageConv`] (PyG's `SAGEConv(in, out,
/// aggr="mean", normalize, root_weight, bias)`).
#[derive(Debug, Clone, PartialEq)]
pub struct SageConvConfig {
    /// Input width.
    pub in_channels: usize,
    /// Output width.
    pub out_channels: usize,
    /// L2-normalise every output row (PyG `normalize`, default false).
    pub normalize: bool,
    /// Add the node's own transformed features `x_i W_r` (PyG
    /// `root_weight`, default true).
    pub root_weight: bool,
    /// Bias of `lin_l` (default true).
    pub bias: bool,
}

impl SageConvConfig {
    /// PyG's defaults: no normalisation, root weight, bias.
    pub fn new(in_channels: usize, out_channels: usize) -> Self {
        SageConvConfig {
            in_channels,
            out_channels,
            normalize: false,
            root_weight: true,
            bias: true,
        }
    }

    /// Builds the layer, initialised as PyG's (`torch.nn.Linear`'s
    /// uniform initialisation for `lin_l` and `lin_r`).
    ///
    /// # Errors
    /// As [`Linear::new`]: a zero width, or weights over the memory budget.
    pub fn build<B: Backend, R: Rng + ?Sized>(
        self,
        backend: &B,
        rng: &mut R,
    ) -> Result<SageConv<B>> {
        let lin_l = Linear::new(backend, self.in_channels, self.out_channels, self.bias, rng)?;
        let lin_r = self
            .root_weight
            .then(|| Linear::new(backend, self.in_channels, self.out_channels, false, rng))
            .transpose()?;
        Ok(SageConv {
            config: self,
            lin_l,
            lin_r,
        })
    }
}

/// GraphSAGE (Hamilton et al. 2017) with the mean aggregator, exactly PyG's
/// `SAGEConv`:
///
/// `out_i = W_l · mean_{j → i} x_j + b + W_r x_i`, then optionally
/// `out_i / max(||out_i||₂, ε)`.
///
/// The mean runs over every stored edge into `i` (existing self-loops
/// included, none added; a node without incoming edges gets `b + W_r x_i`);
/// edge weights are ignored, as PyG's `SAGEConv` ignores them
/// ([`Graph::mean_operator`](crate::graph::Graph::mean_operator)). The
/// product is taken on the narrow side, `mean(X W_l)`, so sparse input
/// features stay sparse.
///
/// Parameters (PyG's names): `lin_l.weight`, `lin_l.bias`, `lin_r.weight`.
///
/// ```
/// use hdgcn::autograd::Tape;
/// use hdgcn::backend::Cpu;
/// use hdgcn::conv::{DeviceGraph, GraphConv, SageConvConfig};
/// use hdgcn::graph::Graph;
/// use rand::SeedableRng;
/// let cpu = Cpu::<f64>::new();
/// let g = DeviceGraph::new(&cpu, Graph::from_edges(3, &[(0, 1), (2, 1)])?);
/// let mut cfg = SageConvConfig::new(4, 2);
/// cfg.normalize = true;
/// let conv = cfg.build(&cpu, &mut rand::rngs::StdRng::seed_from_u64(0))?;
/// let tape = Tape::inference(&cpu);
/// let y = conv.forward(&tape, &g, &tape.constant_array(&ndarray::Array2::ones((3, 4))).into())?;
/// // Every row has unit length.
/// for row in y.to_array().rows() {
///     assert!((row.dot(&row) - 1.0).abs() < 1e-12);
/// }
/// # Ok::<(), hdgcn::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct SageConv<B: Backend> {
    config: SageConvConfig,
    /// The projection of the aggregated neighbours (with the bias).
    pub lin_l: Linear<B>,
    /// The projection of the node itself (`None` without root weight).
    pub lin_r: Option<Linear<B>>,
}

impl<B: Backend> SageConv<B> {
    /// A layer with PyG's defaults ([`SageConvConfig::new`]).
    ///
    /// # Errors
    /// As [`SageConvConfig::build`].
    pub fn new<R: Rng + ?Sized>(
        backend: &B,
        d_in: usize,
        d_out: usize,
        rng: &mut R,
    ) -> Result<Self> {
        SageConvConfig::new(d_in, d_out).build(backend, rng)
    }

    /// The configuration.
    pub fn config(&self) -> &SageConvConfig {
        &self.config
    }

    /// The widths of the (public) projections against the configuration.
    fn check_weights(&self) -> Result<()> {
        let want = (self.config.in_channels, self.config.out_channels);
        let lins = std::iter::once(("lin_l", &self.lin_l))
            .chain(self.lin_r.as_ref().map(|l| ("lin_r", l)));
        for (name, l) in lins {
            let got = l.weight.shape();
            if got != want {
                return Err(Error::shape(
                    "SageConv weight",
                    format!("{name} of {want:?}"),
                    format!("{got:?}"),
                ));
            }
        }
        Ok(())
    }
}

/// Divides every row by its Euclidean norm (floored as [`NORM_EPS_SQ`]).
fn l2_normalize_rows<B: Backend>(out: &Var<B>) -> Result<Var<B>> {
    let norm = out
        .square()
        .sum_axis(Axis::Cols)
        .affine(1.0, NORM_EPS_SQ)
        .log()
        .scale(0.5)
        .exp();
    out.div(&norm)
}

impl<B: Backend> GraphConv<B> for SageConv<B> {
    fn in_channels(&self) -> usize {
        self.config.in_channels
    }

    fn out_channels(&self) -> usize {
        self.config.out_channels
    }

    fn forward(&self, tape: &Tape<B>, graph: &DeviceGraph<B>, x: &Features<B>) -> Result<Var<B>> {
        check_input("SageConv", graph, x, self.config.in_channels)?;
        self.check_weights()?;
        let mean = graph.operator("mean", |g| g.mean_operator())?;
        let h = self.config.out_channels;
        let wl = tape.param(&self.lin_l.weight);
        let mut out = match &self.lin_r {
            Some(lin_r) => {
                // One product for both projections: X [W_l | W_r].
                let w = Var::concat(&[&wl, &tape.param(&lin_r.weight)], Axis::Cols)?;
                let y = x.matmul(&w)?;
                let neigh = mean.matmul(&y.slice(Axis::Cols, 0, h)?)?;
                neigh.add(&y.slice(Axis::Cols, h, 2 * h)?)?
            }
            None => mean.matmul(&x.matmul(&wl)?)?,
        };
        if let Some(b) = &self.lin_l.bias {
            out = out.add(&tape.param(b))?;
        }
        if self.config.normalize {
            out = l2_normalize_rows(&out)?;
        }
        Ok(out)
    }
}

impl<B: Backend> Module<B> for SageConv<B> {
    fn visit_params(&self, v: &mut ParamVisitor<'_, B>) {
        v.child("lin_l", &self.lin_l);
        if let Some(l) = &self.lin_r {
            v.child("lin_r", l);
        }
    }
}
