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

    /// The network's first layer when it is a [`Linear`] (default: none).
    /// [`GinConv`] then aggregates after that layer, `W(Σ x_j) = Σ W x_j`,
    /// on the layer's output width and with sparse input features kept
    /// sparse, and finishes with [`GinNn::forward_after_first`].
    fn first_linear(&self) -> Option<&Linear<B>> {
        None
    }

    /// The rest of the network after [`GinNn::first_linear`], applied to
    /// that layer's output `h`. Called only when `first_linear` is `Some`.
    ///
    /// # Errors
    /// Whatever the network's forward pass returns.
    fn forward_after_first(&self, _tape: &Tape<B>, h: &Var<B>) -> Result<Var<B>> {
        Ok(h.clone())
    }
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

    fn first_linear(&self) -> Option<&Linear<B>> {
        self.lins.first()
    }

    fn forward_after_first(&self, tape: &Tape<B>, h: &Var<B>) -> Result<Var<B>> {
        let mut h = h.clone();
        for lin in self.lins.iter().skip(1) {
            h = self.dropout.forward(&self.activation.apply(&h))?;
            h = lin.forward_on(tape, &Features::Dense(h))?;
        }
        Ok(h)
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

    fn first_linear(&self) -> Option<&Linear<B>> {
        Some(self)
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
/// When the network starts with a [`Linear`] layer ([`GinNn::first_linear`]:
/// [`Mlp`] and [`Linear`] do) the sum is taken after it, `(1 + ε) x_i W +
/// Σ x_j W + b`, equal by linearity and cheaper, and sparse input features
/// stay sparse; otherwise input features must be dense.
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
        let sum = graph.operator("sum", |g| g.sum_operator())?;
        let eps = if self.train_eps {
            tape.param(&self.eps)
        } else {
            tape.constant(self.eps.value().clone())
        };
        // (1 + ε) x_i + Σ_j x_j on rows `y`.
        let combine = |y: &Var<B>| sum.matmul(y)?.add(&y.mul(&eps.affine(1.0, 1.0))?);
        if let Some(lin) = self.nn.first_linear() {
            let (d_in, d_out) = (self.in_channels(), lin.out_features());
            if lin.weight.shape() != (d_in, d_out) {
                return Err(Error::shape(
                    "GinConv first linear layer",
                    format!("({d_in}, {d_out})"),
                    format!("{:?}", lin.weight.shape()),
                ));
            }
            let mut h = combine(&x.matmul(&tape.param(&lin.weight))?)?;
            if let Some(b) = &lin.bias {
                h = h.add(&tape.param(b))?;
            }
            return self.nn.forward_after_first(tape, &h);
        }
        self.nn.forward(tape, &combine(&x.dense()?)?)
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
