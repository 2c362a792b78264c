//! `GatV2Conv`: GATv2 (Brody, Alon & Yahav, 2022), "dynamic" graph
//! attention, with PyG's numerics and parameter names (`GATv2Conv`).

use rand::Rng;

use super::gat::{
    check_attention, check_scalars, finish, head_dot, output_width, self_loops, weight_heads,
};
use super::message_passing::MessagePassing;
use super::{DeviceGraph, GraphConv, check_input};
use crate::autograd::{Param, Tape, Var};
use crate::backend::{Backend, SegmentReduce};
use crate::error::Result;
use crate::nn::{Dropout, Features, Linear, Module, ParamVisitor, init};

/// Hyper-parameters of [`GatV2Conv`], named as PyG's `GATv2Conv(in_channels,
/// out_channels, heads, concat, negative_slope, dropout, add_self_loops,
/// bias, share_weights)`.
#[derive(Debug, Clone, PartialEq)]
pub struct GatV2ConvConfig {
    /// Input width.
    pub in_channels: usize,
    /// Width of each head's output.
    pub out_channels: usize,
    /// Number of attention heads (default 1).
    pub heads: usize,
    /// `true` (default): heads side by side; `false`: their mean.
    pub concat: bool,
    /// Slope of the LeakyReLU inside the attention (default 0.2).
    pub negative_slope: f64,
    /// Dropout on the normalised attention coefficients, in training mode
    /// only (default 0).
    pub dropout: f64,
    /// Drop existing self-loops and add one per node (default `true`).
    pub add_self_loops: bool,
    /// Biases on `lin_l`, `lin_r` and the output (default `true`), as PyG's
    /// single `bias` flag.
    pub bias: bool,
    /// One projection for sources and targets (`lin_r` is `lin_l`;
    /// default `false`).
    pub share_weights: bool,
}

impl GatV2ConvConfig {
    /// PyG's defaults: 1 head, concat, slope 0.2, no dropout, self-loops,
    /// bias, separate weights.
    pub fn new(in_channels: usize, out_channels: usize) -> Self {
        GatV2ConvConfig {
            in_channels,
            out_channels,
            heads: 1,
            concat: true,
            negative_slope: 0.2,
            dropout: 0.0,
            add_self_loops: true,
            bias: true,
            share_weights: false,
        }
    }

    /// Checks the configuration.
    ///
    /// # Errors
    /// [`crate::Error::InvalidConfig`] for a zero width or head count, a
    /// dropout outside `[0, 1)` or a non-finite slope.
    pub fn validate(&self) -> Result<()> {
        check_attention("GatV2Conv", self.in_channels, self.out_channels, self.heads)?;
        check_scalars("GatV2Conv", self.negative_slope, self.dropout)
    }

    /// Width of the output: `heads · out_channels` with `concat`, else
    /// `out_channels`.
    pub fn output_width(&self) -> usize {
        output_width(self.out_channels, self.heads, self.concat)
    }

    /// Builds the layer with PyG's initialisation: Glorot weights and
    /// `att`, zero biases.
    ///
    /// # Errors
    /// As [`GatV2ConvConfig::validate`]; [`crate::Error::OverBudget`] for
    /// weights the memory budget cannot hold.
    pub fn build<B: Backend, R: Rng + ?Sized>(
        self,
        backend: &B,
        rng: &mut R,
    ) -> Result<GatV2Conv<B>> {
        self.validate()?;
        let hc = self.heads * self.out_channels;
        let lin_l = Linear::glorot(backend, self.in_channels, hc, self.bias, rng)?;
        let lin_r = if self.share_weights {
            None
        } else {
            Some(Linear::glorot(
                backend,
                self.in_channels,
                hc,
                self.bias,
                rng,
            )?)
        };
        let att = init::glorot(backend, self.heads, self.out_channels, rng);
        let bias = self
            .bias
            .then(|| init::constant(backend, 1, self.output_width(), 0.0))
            .transpose()?;
        let attention_dropout = Dropout::new(self.dropout)?;
        Ok(GatV2Conv {
            config: self,
            lin_l,
            lin_r,
            att,
            bias,
            attention_dropout,
        })
    }
}

/// GATv2, exactly PyG's `GATv2Conv` without edge features (`edge_dim`),
/// bipartite inputs or `residual` (PyG's defaults): per head `k`
/// and edge `j → i` (self-loops added as configured)
///
/// `e_ij = aᵏ · LeakyReLU(W_l x_j + W_r x_i)ᵏ`, `α_ij = softmax_j(e_ij)`,
/// `out_iᵏ = Σ_j α_ij (W_l x_j)ᵏ`,
///
/// heads concatenated or averaged, then the bias. The nonlinearity sits
/// between the projection and `a`, so the ranking of neighbours depends on
/// the query node (GAT's does not). Edge weights are ignored, as PyG does.
///
/// Parameters (PyG's names): `lin_l.weight`, `lin_l.bias`, `lin_r.weight`,
/// `lin_r.bias` (`in x heads·out` weights, PyTorch's `[out, in]`
/// transposed), `att` (`heads x out`; PyTorch's `[1, heads, out]`), `bias`.
/// With `share_weights` only `lin_l` exists (PyG's `lin_r` is the same
/// module).
///
/// ```
/// use hdgcn::autograd::Tape;
/// use hdgcn::backend::Cpu;
/// use hdgcn::conv::{DeviceGraph, GatV2ConvConfig, GraphConv};
/// use hdgcn::graph::Graph;
/// use rand::SeedableRng;
/// let cpu = Cpu::<f32>::new();
/// let g = DeviceGraph::new(&cpu, Graph::from_edges(3, &[(0, 1), (1, 2)])?);
/// let mut cfg = GatV2ConvConfig::new(4, 2);
/// cfg.heads = 2;
/// cfg.concat = false;
/// let conv = cfg.build(&cpu, &mut rand::rngs::StdRng::seed_from_u64(0))?;
/// let tape = Tape::inference(&cpu);
/// let x = tape.constant_array(&ndarray::Array2::ones((3, 4)));
/// assert_eq!(conv.forward(&tape, &g, &x.into())?.shape(), (3, 2)); // heads averaged
/// # Ok::<(), hdgcn::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct GatV2Conv<B: Backend> {
    config: GatV2ConvConfig,
    /// Projection of the source nodes (the messages).
    pub lin_l: Linear<B>,
    /// Projection of the target nodes; `None` with `share_weights`.
    pub lin_r: Option<Linear<B>>,
    /// Attention vector, one row per head.
    pub att: Param<B>,
    /// The bias added last.
    pub bias: Option<Param<B>>,
    attention_dropout: Dropout,
}

impl<B: Backend> GatV2Conv<B> {
    /// A layer with `heads` heads and PyG's other defaults.
    ///
    /// # Errors
    /// As [`GatV2ConvConfig::build`].
    pub fn new<R: Rng + ?Sized>(
        backend: &B,
        in_channels: usize,
        out_channels: usize,
        heads: usize,
        rng: &mut R,
    ) -> Result<Self> {
        let mut cfg = GatV2ConvConfig::new(in_channels, out_channels);
        cfg.heads = heads;
        cfg.build(backend, rng)
    }

    /// The configuration.
    pub fn config(&self) -> &GatV2ConvConfig {
        &self.config
    }

    /// The attention coefficients `α` (`E x heads`, in the order of the
    /// returned edges) and the projected source messages `W_l x_j` (`E x
    /// heads·out`), as the forward pass computes them.
    ///
    /// # Errors
    /// [`crate::Error::ShapeMismatch`] for features of the wrong shape.
    pub fn attention(
        &self,
        tape: &Tape<B>,
        graph: &DeviceGraph<B>,
        x: &Features<B>,
    ) -> Result<(MessagePassing<B>, Var<B>, Var<B>)> {
        check_input("GatV2Conv", graph, x, self.in_channels())?;
        let c = &self.config;
        let edges = graph.message_passing(self_loops(c.add_self_loops))?;
        let xl = self.lin_l.forward_on(tape, x)?;
        let xr = match &self.lin_r {
            Some(lin) => lin.forward_on(tape, x)?,
            None => xl.clone(),
        };
        let xj = edges.gather_source(&xl)?;
        let s = xj
            .add(&edges.gather_target(&xr)?)?
            .leaky_relu(c.negative_slope);
        let scores = head_dot(&s, &tape.param(&self.att), c.heads)?;
        let alpha = self.attention_dropout.forward(&edges.softmax(&scores)?)?;
        Ok((edges, alpha, xj))
    }
}

impl<B: Backend> GraphConv<B> for GatV2Conv<B> {
    fn in_channels(&self) -> usize {
        self.config.in_channels
    }

    fn out_channels(&self) -> usize {
        self.config.output_width()
    }

    fn forward(&self, tape: &Tape<B>, graph: &DeviceGraph<B>, x: &Features<B>) -> Result<Var<B>> {
        let (edges, alpha, xj) = self.attention(tape, graph, x)?;
        let c = &self.config;
        let out = edges.aggregate(&weight_heads(&xj, &alpha, c.heads)?, SegmentReduce::Sum)?;
        finish(tape, out, c.heads, c.concat, self.bias.as_ref())
    }
}

impl<B: Backend> Module<B> for GatV2Conv<B> {
    fn visit_params(&self, v: &mut ParamVisitor<'_, B>) {
        v.child("lin_l", &self.lin_l);
        if let Some(lin) = &self.lin_r {
            v.child("lin_r", lin);
        }
        v.param_leading_one("att", &self.att);
        if let Some(b) = &self.bias {
            v.param("bias", b);
        }
    }

    fn set_training(&mut self, training: bool) {
        self.attention_dropout.set_training(training);
    }
}
