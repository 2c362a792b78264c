//! GCNII's deep model for node classification (PyG's `examples/gcn2_cora.py`).

use rand::Rng;

use crate::autograd::{Param, Tape, Var};
use crate::backend::Backend;
use crate::conv::{DeviceGraph, Gcn2Conv, Gcn2ConvConfig, GraphConv};
use crate::error::{Error, Result};
use crate::nn::{Dropout, Features, Linear, Module, ParamVisitor};

/// GCNII (Chen et al. 2020) as PyG's `examples/gcn2_cora.py` builds it:
///
/// `x = dropout(x)`, `x_0 = h = relu(lins.0(x))`, then for every layer
/// `ℓ = 1..L`: `h = relu(convs.{ℓ-1}(dropout(h), x_0))` with
/// [`Gcn2Conv`] (`α`, `θ`, depth `ℓ`), and finally
/// `logits = lins.1(dropout(h))`.
///
/// It is a [`GraphConv`] from the input features to the classes, so it runs
/// as the one convolution of a [`NodeClassifier`](super::NodeClassifier)
/// (give that one no dropout of its own: this model drops its input).
/// Parameters: `lins.0.*`, `convs.{i}.weight1` (and `weight2`), `lins.1.*`,
/// PyG's names; [`Gcn2Net::conv_params`] are the ones PyG's example decays
/// with 0.01 and [`Gcn2Net::linear_params`] those it decays with 5e-4.
///
/// ```
/// use hdgcn::autograd::Tape;
/// use hdgcn::backend::Cpu;
/// use hdgcn::conv::{DeviceGraph, GraphConv};
/// use hdgcn::graph::Graph;
/// use hdgcn::models::Gcn2Net;
/// use rand::SeedableRng;
/// let cpu = Cpu::<f32>::new();
/// let mut rng = rand::rngs::StdRng::seed_from_u64(0);
/// // 6 features, hidden 8, 4 layers, 3 classes.
/// let net = Gcn2Net::new(&cpu, 6, 8, 3, 4, 0.1, 0.5, true, 0.6, &mut rng)?;
/// assert_eq!(net.convs.len(), 4);
/// let g = DeviceGraph::new(&cpu, Graph::from_edges(2, &[(0, 1), (1, 0)])?);
/// let tape = Tape::inference(&cpu);
/// let y = net.forward(&tape, &g, &tape.constant_array(&ndarray::Array2::ones((2, 6))).into())?;
/// assert_eq!(y.shape(), (2, 3));
/// # Ok::<(), hdgcn::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct Gcn2Net<B: Backend> {
    /// Input (`in -> hidden`) and output (`hidden -> classes`) projections.
    pub lins: Vec<Linear<B>>,
    /// The GCNII layers, first to last.
    pub convs: Vec<Gcn2Conv<B>>,
    /// Dropout before every layer.
    pub dropout: Dropout,
}

impl<B: Backend> Gcn2Net<B> {
    /// `layers` GCNII layers of width `hidden` between two linear layers
    /// (`torch.nn.Linear` initialisation, Glorot for the convolutions).
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for zero layers or widths, an invalid `α`
    /// or `θ` ([`Gcn2ConvConfig::validate`]) or dropout outside `[0, 1)`.
    #[allow(clippy::too_many_arguments)]
    pub fn new<R: Rng + ?Sized>(
        backend: &B,
        d_in: usize,
        hidden: usize,
        classes: usize,
        layers: usize,
        alpha: f64,
        theta: f64,
        shared_weights: bool,
        dropout: f64,
        rng: &mut R,
    ) -> Result<Self> {
        if layers == 0 {
            return Err(Error::InvalidConfig(
                "Gcn2Net needs at least one GCNII layer".into(),
            ));
        }
        let lin0 = Linear::new(backend, d_in, hidden, true, rng)?;
        let convs = (1..=layers)
            .map(|l| {
                let mut cfg = Gcn2ConvConfig::new(hidden, alpha, theta, l);
                cfg.shared_weights = shared_weights;
                cfg.build(backend, rng)
            })
            .collect::<Result<Vec<_>>>()?;
        let lin1 = Linear::new(backend, hidden, classes, true, rng)?;
        Ok(Gcn2Net {
            lins: vec![lin0, lin1],
            convs,
            dropout: Dropout::new(dropout)?,
        })
    }

    /// The parameters of the GCNII layers.
    pub fn conv_params(&self) -> Vec<Param<B>> {
        self.convs.iter().flat_map(|c| c.params()).collect()
    }

    /// The parameters of the two linear layers.
    pub fn linear_params(&self) -> Vec<Param<B>> {
        self.lins.iter().flat_map(|l| l.params()).collect()
    }

    fn lin(&self, i: usize) -> Result<&Linear<B>> {
        match self.lins.as_slice() {
            [a, b] => Ok(if i == 0 { a } else { b }),
            other => Err(Error::InvalidConfig(format!(
                "Gcn2Net has {} linear layers, expected 2",
                other.len()
            ))),
        }
    }
}

impl<B: Backend> GraphConv<B> for Gcn2Net<B> {
    fn in_channels(&self) -> usize {
        self.lins.first().map_or(0, Linear::in_features)
    }

    fn out_channels(&self) -> usize {
        self.lins.last().map_or(0, Linear::out_features)
    }

    fn forward(&self, tape: &Tape<B>, graph: &DeviceGraph<B>, x: &Features<B>) -> Result<Var<B>> {
        let x = self.dropout.forward_features(tape, x)?;
        let x0 = self.lin(0)?.forward_on(tape, &x)?.relu();
        let mut h = x0.clone();
        for conv in &self.convs {
            let hd = self.dropout.forward(&h)?;
            h = conv.forward_with_initial(tape, graph, &hd, &x0)?.relu();
        }
        let h = self.dropout.forward(&h)?;
        self.lin(1)?.forward_on(tape, &Features::Dense(h))
    }
}

impl<B: Backend> Module<B> for Gcn2Net<B> {
    fn visit_params(&self, v: &mut ParamVisitor<'_, B>) {
        for (i, c) in self.convs.iter().enumerate() {
            v.child(&format!("convs.{i}"), c);
        }
        for (i, l) in self.lins.iter().enumerate() {
            v.child(&format!("lins.{i}"), l);
        }
    }

    fn set_training(&mut self, training: bool) {
        self.dropout.set_training(training);
    }
}
