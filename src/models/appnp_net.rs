//! APPNP's model for node classification (PyG's `benchmark/citation/appnp.py`).

use rand::Rng;

use crate::autograd::{Tape, Var};
use crate::backend::Backend;
use crate::conv::{Appnp, DeviceGraph, GraphConv};
use crate::error::Result;
use crate::nn::{Dropout, Features, Linear, Module, ParamVisitor};

/// APPNP (Klicpera et al. 2019), "predict then propagate", as PyG's
/// `benchmark/citation/appnp.py` builds it:
///
/// `logits = appnp(lin2(dropout(relu(lin1(dropout(x))))))`
///
/// with [`Appnp`] (`K` steps, teleport `α`). A [`GraphConv`] from the
/// input features to the classes, so it runs as the one convolution of a
/// [`NodeClassifier`](super::NodeClassifier) (give that one no dropout of
/// its own). Parameters: `lin1.*`, `lin2.*` (PyG's names).
///
/// ```
/// use hdgcn::autograd::Tape;
/// use hdgcn::backend::Cpu;
/// use hdgcn::conv::{DeviceGraph, GraphConv};
/// use hdgcn::graph::Graph;
/// use hdgcn::models::AppnpNet;
/// use rand::SeedableRng;
/// let cpu = Cpu::<f32>::new();
/// let net = AppnpNet::new(&cpu, 6, 8, 3, 10, 0.1, 0.5, &mut rand::rngs::StdRng::seed_from_u64(0))?;
/// let g = DeviceGraph::new(&cpu, Graph::from_edges(2, &[(0, 1), (1, 0)])?);
/// let tape = Tape::inference(&cpu);
/// let y = net.forward(&tape, &g, &tape.constant_array(&ndarray::Array2::ones((2, 6))).into())?;
/// assert_eq!(y.shape(), (2, 3));
/// # Ok::<(), hdgcn::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct AppnpNet<B: Backend> {
    /// `in -> hidden`.
    pub lin1: Linear<B>,
    /// `hidden -> classes`.
    pub lin2: Linear<B>,
    /// The propagation.
    pub prop: Appnp,
    /// Dropout before each linear layer.
    pub dropout: Dropout,
}

impl<B: Backend> AppnpNet<B> {
    /// Two linear layers (`torch.nn.Linear` initialisation) and `K` steps
    /// of propagation with teleport `α`.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`](crate::Error::InvalidConfig) for a zero
    /// width, a non-finite `α` or dropout outside `[0, 1)`.
    #[allow(clippy::too_many_arguments)]
    pub fn new<R: Rng + ?Sized>(
        backend: &B,
        d_in: usize,
        hidden: usize,
        classes: usize,
        k: usize,
        alpha: f64,
        dropout: f64,
        rng: &mut R,
    ) -> Result<Self> {
        Ok(AppnpNet {
            lin1: Linear::new(backend, d_in, hidden, true, rng)?,
            lin2: Linear::new(backend, hidden, classes, true, rng)?,
            prop: Appnp::new(classes, k, alpha)?,
            dropout: Dropout::new(dropout)?,
        })
    }
}

impl<B: Backend> GraphConv<B> for AppnpNet<B> {
    fn in_channels(&self) -> usize {
        self.lin1.in_features()
    }

    fn out_channels(&self) -> usize {
        self.lin2.out_features()
    }

    fn forward(&self, tape: &Tape<B>, graph: &DeviceGraph<B>, x: &Features<B>) -> Result<Var<B>> {
        let x = self.dropout.forward_features(tape, x)?;
        let h = self.lin1.forward_on(tape, &x)?.relu();
        let h = self.dropout.forward(&h)?;
        let h = self.lin2.forward_on(tape, &Features::Dense(h))?;
        GraphConv::<B>::forward(&self.prop, tape, graph, &Features::Dense(h))
    }
}

impl<B: Backend> Module<B> for AppnpNet<B> {
    fn visit_params(&self, v: &mut ParamVisitor<'_, B>) {
        v.child("lin1", &self.lin1);
        v.child("lin2", &self.lin2);
    }

    fn set_training(&mut self, training: bool) {
        self.dropout.set_training(training);
        Module::<B>::set_training(&mut self.prop, training);
    }
}
