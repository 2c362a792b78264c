//! `GcnConv`: Kipf & Welling's graph convolution with PyG's numerics.

use rand::Rng;

use super::{DeviceGraph, GraphConv, check_input};
use crate::autograd::{Param, Tape, Var};
use crate::backend::Backend;
use crate::error::Result;
use crate::nn::{Features, Linear, Module, ParamVisitor, init};

/// `out = Â (X W) + b` with `Â = D̂^{-1/2}(A + I)D̂^{-1/2}` (self-loops added
/// only where missing), as PyG's `GCNConv`. The product is taken on the
/// narrow side: `X W` first, then one sparse product on `out`-wide rows.
///
/// Parameters: `lin.weight` (`in x out`, Glorot) and `bias` (zeros).
///
/// ```
/// use hdgcn::autograd::Tape;
/// use hdgcn::backend::Cpu;
/// use hdgcn::conv::{DeviceGraph, GcnConv, GraphConv};
/// use hdgcn::graph::Graph;
/// use rand::SeedableRng;
/// let cpu = Cpu::<f32>::new();
/// let g = DeviceGraph::new(&cpu, Graph::from_edges(3, &[(0, 1), (1, 0), (1, 2), (2, 1)]).unwrap());
/// let mut rng = rand::rngs::StdRng::seed_from_u64(0);
/// let conv = GcnConv::new(&cpu, 4, 2, &mut rng).unwrap();
/// let tape = Tape::inference(&cpu);
/// let x = tape.constant_array(&ndarray::Array2::ones((3, 4)));
/// let y = conv.forward(&tape, &g, &x.into()).unwrap();
/// assert_eq!(y.shape(), (3, 2));
/// ```
#[derive(Debug, Clone)]
pub struct GcnConv<B: Backend> {
    /// The projection (no bias).
    pub lin: Linear<B>,
    /// The bias added after propagation.
    pub bias: Option<Param<B>>,
}

impl<B: Backend> GcnConv<B> {
    /// A layer with Glorot weights and a zero bias.
    pub fn new<R: Rng + ?Sized>(
        backend: &B,
        d_in: usize,
        d_out: usize,
        rng: &mut R,
    ) -> Result<Self> {
        Self::with_bias(backend, d_in, d_out, true, rng)
    }

    /// A layer with or without bias.
    pub fn with_bias<R: Rng + ?Sized>(
        backend: &B,
        d_in: usize,
        d_out: usize,
        bias: bool,
        rng: &mut R,
    ) -> Result<Self> {
        let lin = Linear::glorot(backend, d_in, d_out, false, rng)?;
        let bias = bias
            .then(|| init::constant(backend, 1, d_out, 0.0))
            .transpose()?;
        Ok(GcnConv { lin, bias })
    }
}

impl<B: Backend> GraphConv<B> for GcnConv<B> {
    fn in_channels(&self) -> usize {
        self.lin.in_features()
    }

    fn out_channels(&self) -> usize {
        self.lin.out_features()
    }

    fn forward(&self, tape: &Tape<B>, graph: &DeviceGraph<B>, x: &Features<B>) -> Result<Var<B>> {
        check_input("GcnConv", graph, x, self.in_channels())?;
        // `X W` is freed as soon as it is propagated (its gradient does not
        // read it), before the bias makes another tensor of its size.
        let out = graph
            .gcn_operator()?
            .matmul(&self.lin.forward_on(tape, x)?)?;
        match &self.bias {
            Some(b) => out.add(&tape.param(b)),
            None => Ok(out),
        }
    }
}

impl<B: Backend> Module<B> for GcnConv<B> {
    fn visit_params(&self, v: &mut ParamVisitor<'_, B>) {
        v.child("lin", &self.lin);
        if let Some(b) = &self.bias {
            v.param("bias", b);
        }
    }
}
