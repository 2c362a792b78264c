//! `GatConv`: the graph attention layer of Veličković et al. (2018) with
//! PyG's numerics and parameter names (`GATConv`).

use rand::Rng;

use super::message_passing::{MessagePassing, SelfLoops};
use super::{DeviceGraph, GraphConv, check_input};
use crate::autograd::{Param, Tape, Var};
use crate::backend::{Backend, SegmentReduce};
use crate::error::{Error, Result};
use crate::nn::{Dropout, Features, Linear, Module, ParamVisitor, init};

/// Hyper-parameters of [`GatConv`], named as PyG's `GATConv(in_channels,
/// out_channels, heads, concat, negative_slope, dropout, add_self_loops,
/// bias)`.
#[derive(Debug, Clone, PartialEq)]
pub struct GatConvConfig {
    /// Input width.
    pub in_channels: usize,
    /// Width of each head's output.
    pub out_channels: usize,
    /// Number of attention heads (default 1).
    pub heads: usize,
    /// `true` (default): the heads' outputs side by side (`heads ·
    /// out_channels` wide); `false`: their mean (`out_channels` wide).
    pub concat: bool,
    /// Slope of the LeakyReLU on the attention scores (default 0.2).
    pub negative_slope: f64,
    /// Dropout on the normalised attention coefficients, in training mode
    /// only (default 0).
    pub dropout: f64,
    /// Drop existing self-loops and add one per node (default `true`), as
    /// PyG's `remove_self_loops` + `add_self_loops`.
    pub add_self_loops: bool,
    /// Whether to add a bias (default `true`).
    pub bias: bool,
}

impl GatConvConfig {
    /// PyG's defaults: 1 head, concat, slope 0.2, no dropout, self-loops,
    /// bias.
    pub fn new(in_channels: usize, out_channels: usize) -> Self {
        GatConvConfig {
            in_channels,
            out_channels,
            heads: 1,
            concat: true,
            negative_slope: 0.2,
            dropout: 0.0,
            add_self_loops: true,
            bias: true,
        }
    }

    /// Checks the configuration.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for a zero width or head count, a dropout
    /// outside `[0, 1)` or a non-finite slope.
    pub fn validate(&self) -> Result<()> {
        check_attention("GatConv", self.in_channels, self.out_channels, self.heads)?;
        check_scalars("GatConv", self.negative_slope, self.dropout)
    }

    /// Width of the output: `heads · out_channels` with `concat`, else
    /// `out_channels`.
    pub fn output_width(&self) -> usize {
        output_width(self.out_channels, self.heads, self.concat)
    }

    /// Builds the layer with PyG's initialisation: Glorot `lin.weight`,
    /// `att_src`, `att_dst`, zero bias.
    ///
    /// # Errors
    /// As [`GatConvConfig::validate`]; [`Error::OverBudget`] for weights the
    /// memory budget cannot hold.
    pub fn build<B: Backend, R: Rng + ?Sized>(
        self,
        backend: &B,
        rng: &mut R,
    ) -> Result<GatConv<B>> {
        self.validate()?;
        let hc = self.heads * self.out_channels;
        let lin = Linear::glorot(backend, self.in_channels, hc, false, rng)?;
        let att_src = init::glorot(backend, self.heads, self.out_channels, rng);
        let att_dst = init::glorot(backend, self.heads, self.out_channels, rng);
        let bias = self
            .bias
            .then(|| init::constant(backend, 1, self.output_width(), 0.0))
            .transpose()?;
        let attention_dropout = Dropout::new(self.dropout)?;
        Ok(GatConv {
            config: self,
            lin,
            att_src,
            att_dst,
            bias,
            attention_dropout,
        })
    }
}

/// Graph attention (GAT), exactly PyG's `GATConv` without edge features
/// (`edge_dim`), bipartite inputs or `residual` (PyG's defaults):
///
/// `h = X Θ` (`heads` blocks of `out_channels` columns), per head `k` and
/// edge `j → i` (self-loops added as configured)
/// `e_ij = LeakyReLU(a_srcᵏ · h_jᵏ + a_dstᵏ · h_iᵏ)`,
/// `α_ij = softmax_j(e_ij)` over the incoming edges of `i`,
/// `out_iᵏ = Σ_j α_ij h_jᵏ`; the heads are concatenated (or averaged) and
/// the bias added. Attention dropout applies to `α` in training mode.
/// Edge weights of the graph are ignored, as PyG does: every stored edge
/// attends with the same standing.
///
/// Parameters (PyG's names): `lin.weight` (`in x heads·out`; PyTorch's
/// `[heads·out, in]` transposed), `att_src` and `att_dst` (`heads x out`;
/// PyTorch's `[1, heads, out]`), `bias` (`1 x` output width).
///
/// ```
/// use hdgcn::autograd::Tape;
/// use hdgcn::backend::Cpu;
/// use hdgcn::conv::{DeviceGraph, GatConvConfig, GraphConv};
/// use hdgcn::graph::Graph;
/// use rand::SeedableRng;
/// let cpu = Cpu::<f32>::new();
/// let g = DeviceGraph::new(&cpu, Graph::from_edges(3, &[(0, 1), (1, 0), (1, 2), (2, 1)])?);
/// let mut cfg = GatConvConfig::new(4, 2);
/// cfg.heads = 3;
/// let conv = cfg.build(&cpu, &mut rand::rngs::StdRng::seed_from_u64(0))?;
/// let tape = Tape::inference(&cpu);
/// let x = tape.constant_array(&ndarray::Array2::ones((3, 4)));
/// let y = conv.forward(&tape, &g, &x.into())?;
/// assert_eq!(y.shape(), (3, 6)); // 3 heads of 2, concatenated
/// # Ok::<(), hdgcn::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct GatConv<B: Backend> {
    config: GatConvConfig,
    /// The shared projection `Θ` (no bias).
    pub lin: Linear<B>,
    /// Attention vector of the source nodes, one row per head.
    pub att_src: Param<B>,
    /// Attention vector of the target nodes, one row per head.
    pub att_dst: Param<B>,
    /// The bias added last.
    pub bias: Option<Param<B>>,
    attention_dropout: Dropout,
}

impl<B: Backend> GatConv<B> {
    /// A layer with `heads` heads and PyG's other defaults.
    ///
    /// # Errors
    /// As [`GatConvConfig::build`].
    pub fn new<R: Rng + ?Sized>(
        backend: &B,
        in_channels: usize,
        out_channels: usize,
        heads: usize,
        rng: &mut R,
    ) -> Result<Self> {
        let mut cfg = GatConvConfig::new(in_channels, out_channels);
        cfg.heads = heads;
        cfg.build(backend, rng)
    }

    /// The configuration.
    pub fn config(&self) -> &GatConvConfig {
        &self.config
    }

    /// The attention coefficients `α` (`E x heads`, one row per edge of
    /// `edges`, in its order) and the projected features `h` (`N x
    /// heads·out`), as the forward pass computes them (attention dropout
    /// included in training mode).
    ///
    /// # Errors
    /// [`Error::ShapeMismatch`] for features of the wrong shape.
    pub fn attention(
        &self,
        tape: &Tape<B>,
        graph: &DeviceGraph<B>,
        x: &Features<B>,
    ) -> Result<(MessagePassing<B>, Var<B>, Var<B>)> {
        check_input("GatConv", graph, x, self.in_channels())?;
        let c = &self.config;
        let edges = graph.message_passing(self_loops(c.add_self_loops))?;
        let h = self.lin.forward_on(tape, x)?;
        let a_src = head_dot(&h, &tape.param(&self.att_src), c.heads)?;
        let a_dst = head_dot(&h, &tape.param(&self.att_dst), c.heads)?;
        let scores = edges
            .gather_source(&a_src)?
            .add(&edges.gather_target(&a_dst)?)?
            .leaky_relu(c.negative_slope);
        let alpha = self.attention_dropout.forward(&edges.softmax(&scores)?)?;
        Ok((edges, alpha, h))
    }
}

impl<B: Backend> GraphConv<B> for GatConv<B> {
    fn in_channels(&self) -> usize {
        self.config.in_channels
    }

    fn out_channels(&self) -> usize {
        self.config.output_width()
    }

    fn forward(&self, tape: &Tape<B>, graph: &DeviceGraph<B>, x: &Features<B>) -> Result<Var<B>> {
        let (edges, alpha, h) = self.attention(tape, graph, x)?;
        let c = &self.config;
        let messages = weight_heads(&edges.gather_source(&h)?, &alpha, c.heads)?;
        let out = edges.aggregate(&messages, SegmentReduce::Sum)?;
        finish(tape, out, c.heads, c.concat, self.bias.as_ref())
    }
}

impl<B: Backend> Module<B> for GatConv<B> {
    fn visit_params(&self, v: &mut ParamVisitor<'_, B>) {
        v.child("lin", &self.lin);
        v.param_leading_one("att_src", &self.att_src);
        v.param_leading_one("att_dst", &self.att_dst);
        if let Some(b) = &self.bias {
            v.param("bias", b);
        }
    }

    fn set_training(&mut self, training: bool) {
        self.attention_dropout.set_training(training);
    }
}

// ----- shared by GatConv and GatV2Conv ---------------------------------------

pub(super) fn self_loops(add: bool) -> SelfLoops {
    if add { SelfLoops::Add } else { SelfLoops::Keep }
}

pub(super) fn output_width(out_channels: usize, heads: usize, concat: bool) -> usize {
    if concat {
        heads * out_channels
    } else {
        out_channels
    }
}

pub(super) fn check_attention(
    layer: &str,
    in_channels: usize,
    out_channels: usize,
    heads: usize,
) -> Result<()> {
    crate::nn::check_dims(in_channels, out_channels)?;
    if heads == 0 {
        return Err(Error::InvalidConfig(format!(
            "{layer} needs at least one head"
        )));
    }
    if heads.checked_mul(out_channels).is_none() {
        return Err(Error::InvalidConfig(format!(
            "{layer}: {heads} heads of {out_channels} channels overflow"
        )));
    }
    Ok(())
}

pub(super) fn check_scalars(layer: &str, negative_slope: f64, dropout: f64) -> Result<()> {
    if !negative_slope.is_finite() {
        return Err(Error::InvalidConfig(format!(
            "{layer}: negative_slope must be finite, got {negative_slope}"
        )));
    }
    if !(0.0..1.0).contains(&dropout) {
        return Err(Error::InvalidConfig(format!(
            "{layer}: dropout must be in [0, 1), got {dropout}"
        )));
    }
    Ok(())
}

/// The `heads·C x heads` matrix with a 1 where column `k` meets the rows
/// `k·C..(k+1)·C` of head `k`.
fn head_indicator<B: Backend>(tape: &Tape<B>, heads: usize, c: usize) -> Var<B> {
    let one = <B::Elem as crate::Float>::from_f64_lossy(1.0);
    let zero = <B::Elem as crate::Float>::from_f64_lossy(0.0);
    tape.constant_array(&ndarray::Array2::from_shape_fn(
        (heads * c, heads),
        |(i, k)| if i / c == k { one } else { zero },
    ))
}

/// Per-head dot products: `x` is `R x heads·C` (head `k` in columns
/// `k·C..(k+1)·C`), `att` is `heads x C`; the result is `R x heads` with
/// `out[r, k] = x[r, kC..(k+1)C] · att[k]`, as one product with the
/// block-diagonal `heads·C x heads` matrix of the attention vectors (one
/// pass over `x`, whose gradient is one product back).
pub(super) fn head_dot<B: Backend>(x: &Var<B>, att: &Var<B>, heads: usize) -> Result<Var<B>> {
    let (_, hc) = x.shape();
    let blocks = att
        .reshape(hc, 1)?
        .mul(&head_indicator(x.tape(), heads, hc / heads))?;
    x.matmul(&blocks)
}

/// Scales each head's block of `x` (`E x heads·C`) by that head's column
/// of `alpha` (`E x heads`): `alpha` spread over the heads' columns by a
/// product with the indicator, then one element-wise product.
pub(super) fn weight_heads<B: Backend>(x: &Var<B>, alpha: &Var<B>, heads: usize) -> Result<Var<B>> {
    if heads == 1 {
        return x.mul(alpha);
    }
    let (_, hc) = x.shape();
    let spread = alpha.matmul_t(&head_indicator(x.tape(), heads, hc / heads), false, true)?;
    x.mul(&spread)
}

/// Concatenates (as stored) or averages the heads of `out` (`N x
/// heads·C`), then adds the bias.
pub(super) fn finish<B: Backend>(
    tape: &Tape<B>,
    out: Var<B>,
    heads: usize,
    concat: bool,
    bias: Option<&Param<B>>,
) -> Result<Var<B>> {
    let out = if concat || heads == 1 {
        out
    } else {
        // `mean_k out[:, kC + j]`: a product with `heads` copies of
        // `I / heads` stacked (the indicator of the columns `j`).
        let (_, hc) = out.shape();
        let c = hc / heads;
        let w = <B::Elem as crate::Float>::from_f64_lossy(1.0 / heads as f64);
        let zero = <B::Elem as crate::Float>::from_f64_lossy(0.0);
        let m = ndarray::Array2::from_shape_fn((hc, c), |(i, j)| if i % c == j { w } else { zero });
        out.matmul(&tape.constant_array(&m))?
    };
    match bias {
        Some(b) => out.add(&tape.param(b)),
        None => Ok(out),
    }
}
