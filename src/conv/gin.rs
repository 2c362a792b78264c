//! `GinConv`: the graph isomorphism network layer with PyG's numerics.

use super::{DeviceGraph, GraphConv, check_input};
use crate::autograd::{Param, Tape, Var};
use crate::backend::Backend;
use crate::error::{Error, Result};
use crate::nn::{Features, Linear, Mlp, Module, ParamVisitor, init};

/// The network inside a [`GinConv`] (PyG's `nn` argument): any module
/// mapping dense node states `N x in` to `N x out`. Implemented for
/// [`Mlp`] (PyG's `MLP(channel_list, norm=None)`) and [`Linear`];
/// implement it for a module of your own to use that.
pub trait GinNn<B: Backend>: Module<B> {
    /// Input width.
    fn in_features(&self) -> usize;
    /// Output width.
    fn out_features(&self) -> usize;
    /// Applies the network, recording on `tape`.
    ///
    /// # Errors
    /// Whatever the network's forward pass returns.
    fn forward(&self, tape: &Tape<B>, x: &Var<B>) -> Result<Var<B>>;
}

impl<B: Backend> GinNn<B> for Mlp<B> {
    fn in_features(&self) -> usize {
        self.lins.first().map_or(0, Linear::in_features)
    }

    fn out_features(&self) -> usize {
        self.lins.last().map_or(0, Linear::out_features)
    }

    fn forward(&self, tape: &Tape<B>, x: &Var<B>) -> Result<Var<B>> {
        Mlp::forward(self, tape, &Features::Dense(x.clone()))
    }
}

impl<B: Backend> GinNn<B> for Linear<B> {
    fn in_features(&self) -> usize {
        Linear::in_features(self)
    }

    fn out_features(&self) -> usize {
        Linear::out_features(self)
    }

    fn forward(&self, tape: &Tape<B>, x: &Var<B>) -> Result<Var<B>> {
        self.forward_on(tape, &Features::Dense(x.clone()))
    }
}

/// The graph isomorphism operator (Xu et al. 2019), exactly PyG's
/// `GINConv(nn, eps, train_eps)`:
///
/// `out_i = nn((1 + ε) x_i + Σ_{j → i} x_j)`.
///
/// The sum runs over every stored edge into `i` (existing self-loops
/// included, none added); edge weights are ignored, as PyG's `GINConv`
/// ignores them ([`Graph::sum_operator`](crate::graph::Graph::sum_operator)).
/// Input features must be dense (the sum is taken on the input width).
///
/// Parameters (PyG's names): the network's under `nn.` (an [`Mlp`] gives
/// `nn.lins.0.weight`, ...) and `eps` (`1 x 1`). `eps` is trained only
/// with `train_eps`; otherwise it is PyG's buffer: reported (so that a PyG
/// `state_dict` loads) but constant, so it never receives a gradient.
///
/// ```
/// use hdgcn::autograd::Tape;
/// use hdgcn::backend::Cpu;
/// use hdgcn::conv::{DeviceGraph, GinConv, GraphConv};
/// use hdgcn::graph::Graph;
/// use hdgcn::nn::{Activation, Mlp, Module};
/// use rand::SeedableRng;
/// let cpu = Cpu::<f64>::new();
/// let mut rng = rand::rngs::StdRng::seed_from_u64(0);
/// let g = DeviceGraph::new(&cpu, Graph::from_edges(3, &[(0, 1), (1, 0), (1, 2), (2, 1)])?);
/// let mlp = Mlp::new(&cpu, &[4, 8, 2], Activation::Relu, 0.0, &mut rng)?;
/// let conv = GinConv::new(&cpu, mlp, 0.0, true)?;
/// let names: Vec<String> = conv.named_params().into_iter().map(|(n, _)| n).collect();
/// assert_eq!(names[0], "nn.lins.0.weight");
/// assert_eq!(names.last().unwrap(), "eps");
/// let tape = Tape::inference(&cpu);
/// let y = conv.forward(&tape, &g, &tape.constant_array(&ndarray::Array2::ones((3, 4))).into())?;
/// assert_eq!(y.shape(), (3, 2));
/// # Ok::<(), hdgcn::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct GinConv<B: Backend, M: GinNn<B> = Mlp<B>> {
    /// The network applied after aggregation.
    pub nn: M,
    /// `ε`, `1 x 1`.
    pub eps: Param<B>,
    train_eps: bool,
}

impl<B: Backend, M: GinNn<B>> GinConv<B, M> {
    /// A layer around `nn` with `ε = eps`, trained when `train_eps`.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for a non-finite `eps` or a network with a
    /// zero width.
    pub fn new(backend: &B, nn: M, eps: f64, train_eps: bool) -> Result<Self> {
        if !eps.is_finite() {
            return Err(Error::InvalidConfig(format!(
                "GinConv eps must be finite, got {eps}"
            )));
        }
        crate::nn::check_dims(nn.in_features(), nn.out_features())?;
        Ok(GinConv {
            nn,
            eps: init::constant(backend, 1, 1, eps)?,
            train_eps,
        })
    }

    /// Whether `ε` is trained.
    pub fn train_eps(&self) -> bool {
        self.train_eps
    }
}

impl<B: Backend, M: GinNn<B>> GraphConv<B> for GinConv<B, M> {
    fn in_channels(&self) -> usize {
        self.nn.in_features()
    }

    fn out_channels(&self) -> usize {
        self.nn.out_features()
    }

    fn forward(&self, tape: &Tape<B>, graph: &DeviceGraph<B>, x: &Features<B>) -> Result<Var<B>> {
        check_input("GinConv", graph, x, self.in_channels())?;
        if self.eps.shape() != (1, 1) {
            return Err(Error::shape(
                "GinConv eps",
                "(1, 1)",
                format!("{:?}", self.eps.shape()),
            ));
        }
        let x = x.dense()?;
        let sum = graph.operator("sum", |g| g.sum_operator())?;
        let eps = if self.train_eps {
            tape.param(&self.eps)
        } else {
            tape.constant(self.eps.value().clone())
        };
        let h = sum.matmul(x)?.add(&x.mul(&eps.affine(1.0, 1.0))?)?;
        self.nn.forward(tape, &h)
    }
}

impl<B: Backend, M: GinNn<B>> Module<B> for GinConv<B, M> {
    fn visit_params(&self, v: &mut ParamVisitor<'_, B>) {
        v.child("nn", &self.nn);
        v.param("eps", &self.eps);
    }

    fn set_training(&mut self, training: bool) {
        self.nn.set_training(training);
    }
}
