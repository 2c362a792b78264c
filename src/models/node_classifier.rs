//! A stack of graph convolutions for node classification (Kipf & Welling's
//! two-layer GCN, Defferrard et al.'s ChebNet, or any [`GraphConv`]).

use rand::Rng;

use crate::autograd::{Tape, Var};
use crate::backend::Backend;
use crate::conv::{
    ChebConv, ChebConvConfig, DeviceGraph, GatConvConfig, GatV2ConvConfig, GcnConv, GraphConv,
    HdChebConfig,
};
use crate::error::{Error, Result};
use crate::nn::{Activation, Dropout, Features, Linear, Module, ParamVisitor};

/// `dropout -> conv1 -> act -> dropout -> conv2 -> ... -> convL` producing
/// class logits, as PyG's `examples/gcn.py`. Layers are named `conv1`,
/// `conv2`, ... so parameters read `conv1.lin.weight`, `conv2.lins.0.weight`.
pub struct NodeClassifier<B: Backend> {
    /// The convolutions, first to last.
    pub convs: Vec<Box<dyn GraphConv<B>>>,
    /// Dropout before every convolution (input included).
    pub dropout: Dropout,
    /// Activation between convolutions.
    pub activation: Activation,
    /// Optional output layer after the last convolution (dropout, then
    /// `Linear`), as HDGCN's `H -> dropout -> Linear` classifier.
    pub head: Option<Linear<B>>,
}

impl<B: Backend> std::fmt::Debug for NodeClassifier<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let widths: Vec<(usize, usize)> = self
            .convs
            .iter()
            .map(|c| (c.in_channels(), c.out_channels()))
            .collect();
        f.debug_struct("NodeClassifier")
            .field("convs", &widths)
            .field("dropout", &self.dropout)
            .finish()
    }
}

impl<B: Backend> NodeClassifier<B> {
    /// A classifier from given convolutions (widths must chain).
    pub fn new(
        convs: Vec<Box<dyn GraphConv<B>>>,
        dropout: f64,
        activation: Activation,
    ) -> Result<Self> {
        if convs.is_empty() {
            return Err(Error::InvalidConfig(
                "a node classifier needs at least one convolution".into(),
            ));
        }
        for (i, w) in convs.windows(2).enumerate() {
            if w[0].out_channels() != w[1].in_channels() {
                return Err(Error::InvalidConfig(format!(
                    "conv{} outputs {} channels but conv{} expects {}",
                    i + 1,
                    w[0].out_channels(),
                    i + 2,
                    w[1].in_channels()
                )));
            }
        }
        Ok(NodeClassifier {
            convs,
            dropout: Dropout::new(dropout)?,
            activation,
            head: None,
        })
    }

    /// Adds an output layer `Linear(last conv width -> classes)` after the
    /// convolutions (applied after dropout, without activation).
    pub fn with_head<R: Rng + ?Sized>(
        mut self,
        backend: &B,
        classes: usize,
        rng: &mut R,
    ) -> Result<Self> {
        let width = self.last_conv()?.out_channels();
        self.head = Some(Linear::new(backend, width, classes, true, rng)?);
        Ok(self)
    }

    /// Adds a graph-convolutional output layer: a [`GcnConv`] from the
    /// last convolution's width to `classes`, appended to the convolutions,
    /// so the logits are `Â H W + b` (the second layer of Kipf & Welling's
    /// GCN) where [`NodeClassifier::with_head`] gives `H W + b`. Its
    /// parameters read `conv{L+1}.lin.weight` and `conv{L+1}.bias`.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] if the classifier has no convolution or
    /// already has a linear head (one output layer at most); zero `classes`
    /// as [`GcnConv::new`].
    ///
    /// ```
    /// use hdgcn::backend::Cpu;
    /// use hdgcn::conv::HdChebConfig;
    /// use hdgcn::models::NodeClassifier;
    /// use hdgcn::nn::Activation;
    /// use rand::{SeedableRng, rngs::StdRng};
    ///
    /// let cpu = Cpu::<f64>::new();
    /// let mut rng = StdRng::seed_from_u64(0);
    /// // HDGCN-static (5 features -> 8, K = 2), then GCN(8 -> 3 classes).
    /// let conv = HdChebConfig::in_model(5, 8, 2, 0.5).build_static(&cpu, &mut rng)?;
    /// let model = NodeClassifier::new(vec![Box::new(conv)], 0.5, Activation::Relu)?
    ///     .with_gcn_head(&cpu, 3, &mut rng)?;
    /// assert_eq!(model.convs.len(), 2);
    /// assert_eq!(model.convs[1].out_channels(), 3);
    /// // One output layer: a model with a linear head refuses a second.
    /// let linear = NodeClassifier::hdgcn_static(&cpu, 5, 8, 3, 2, 0.5, &mut rng)?;
    /// assert!(linear.with_gcn_head(&cpu, 3, &mut rng).is_err());
    /// # Ok::<(), hdgcn::Error>(())
    /// ```
    pub fn with_gcn_head<R: Rng + ?Sized>(
        mut self,
        backend: &B,
        classes: usize,
        rng: &mut R,
    ) -> Result<Self> {
        let width = self.last_conv()?.out_channels();
        if self.head.is_some() {
            return Err(Error::InvalidConfig(
                "this node classifier already has a linear head; give it one output layer".into(),
            ));
        }
        self.convs
            .push(Box::new(GcnConv::new(backend, width, classes, rng)?));
        Ok(self)
    }

    /// HDGCN for node classification: one dynamic [`HdChebConv`](crate::conv::HdChebConv)
    /// (MVCAttn transitions with `supernodes` supernodes, `in -> hidden`,
    /// `K` even), then dropout and a linear classifier.
    #[allow(clippy::too_many_arguments)]
    pub fn hdgcn<R: Rng + ?Sized>(
        backend: &B,
        d_in: usize,
        hidden: usize,
        classes: usize,
        k: usize,
        supernodes: usize,
        dropout: f64,
        rng: &mut R,
    ) -> Result<Self> {
        let cfg = HdChebConfig::in_model(d_in, hidden, k, dropout);
        let mut attn = crate::attention::MvcAttnConfig::new(hidden);
        attn.supernodes = supernodes;
        let conv = cfg.build_dynamic(backend, rng, &attn)?;
        Self::new(vec![Box::new(conv)], dropout, Activation::Relu)?.with_head(backend, classes, rng)
    }

    /// HDGCN-static for node classification: one [`HdChebConv`](crate::conv::HdChebConv)
    /// with the static transition `Â` (the paper's chaining,
    /// [`HdChaining::Output`](crate::conv::HdChaining::Output); `in -> hidden`,
    /// `K` even), then dropout and a linear classifier.
    #[allow(clippy::too_many_arguments)]
    pub fn hdgcn_static<R: Rng + ?Sized>(
        backend: &B,
        d_in: usize,
        hidden: usize,
        classes: usize,
        k: usize,
        dropout: f64,
        rng: &mut R,
    ) -> Result<Self> {
        let cfg = HdChebConfig::in_model(d_in, hidden, k, dropout);
        let conv = cfg.build_static(backend, rng)?;
        Self::new(vec![Box::new(conv)], dropout, Activation::Relu)?.with_head(backend, classes, rng)
    }

    /// Two-layer GCN `in -> hidden -> classes` (Kipf & Welling).
    pub fn gcn<R: Rng + ?Sized>(
        backend: &B,
        d_in: usize,
        hidden: usize,
        classes: usize,
        dropout: f64,
        rng: &mut R,
    ) -> Result<Self> {
        let c1 = GcnConv::new(backend, d_in, hidden, rng)?;
        let c2 = GcnConv::new(backend, hidden, classes, rng)?;
        Self::new(vec![Box::new(c1), Box::new(c2)], dropout, Activation::Relu)
    }

    /// Two-layer ChebNet with `k` terms per layer.
    pub fn cheb<R: Rng + ?Sized>(
        backend: &B,
        d_in: usize,
        hidden: usize,
        classes: usize,
        k: usize,
        dropout: f64,
        rng: &mut R,
    ) -> Result<Self> {
        let c1 = ChebConvConfig::new(d_in, hidden, k).build(backend, rng)?;
        let c2: ChebConv<B> = ChebConvConfig::new(hidden, classes, k).build(backend, rng)?;
        Self::new(vec![Box::new(c1), Box::new(c2)], dropout, Activation::Relu)
    }

    /// Two-layer GAT as PyG's `examples/gat.py`: `GatConv(in -> hidden,
    /// heads)` (concatenated), ELU, `GatConv(hidden·heads -> classes, 1
    /// head, concat = false)`; `dropout` on the inputs of both layers and
    /// on both layers' attention coefficients.
    ///
    /// ```
    /// use hdgcn::backend::Cpu;
    /// use hdgcn::models::NodeClassifier;
    /// use hdgcn::nn::Module;
    /// use rand::SeedableRng;
    /// let mut rng = rand::rngs::StdRng::seed_from_u64(0);
    /// let model = NodeClassifier::gat(&Cpu::<f32>::new(), 10, 8, 8, 3, 0.6, &mut rng)?;
    /// assert_eq!(model.convs[0].out_channels(), 64);
    /// assert_eq!(model.named_params()[1].0, "conv1.att_src");
    /// # Ok::<(), hdgcn::Error>(())
    /// ```
    pub fn gat<R: Rng + ?Sized>(
        backend: &B,
        d_in: usize,
        hidden: usize,
        heads: usize,
        classes: usize,
        dropout: f64,
        rng: &mut R,
    ) -> Result<Self> {
        let mut c1 = GatConvConfig::new(d_in, hidden);
        (c1.heads, c1.dropout) = (heads, dropout);
        let mut c2 = GatConvConfig::new(c1.output_width(), classes);
        (c2.concat, c2.dropout) = (false, dropout);
        let convs: Vec<Box<dyn GraphConv<B>>> = vec![
            Box::new(c1.build(backend, rng)?),
            Box::new(c2.build(backend, rng)?),
        ];
        Self::new(convs, dropout, Activation::Elu(1.0))
    }

    /// [`NodeClassifier::gat`] with [`GatV2Conv`](crate::conv::GatV2Conv)
    /// layers (same widths, heads, dropout and ELU).
    pub fn gatv2<R: Rng + ?Sized>(
        backend: &B,
        d_in: usize,
        hidden: usize,
        heads: usize,
        classes: usize,
        dropout: f64,
        rng: &mut R,
    ) -> Result<Self> {
        let mut c1 = GatV2ConvConfig::new(d_in, hidden);
        (c1.heads, c1.dropout) = (heads, dropout);
        let mut c2 = GatV2ConvConfig::new(c1.output_width(), classes);
        (c2.concat, c2.dropout) = (false, dropout);
        let convs: Vec<Box<dyn GraphConv<B>>> = vec![
            Box::new(c1.build(backend, rng)?),
            Box::new(c2.build(backend, rng)?),
        ];
        Self::new(convs, dropout, Activation::Elu(1.0))
    }

    /// The last convolution; [`Error::InvalidConfig`] if `convs` was emptied.
    fn last_conv(&self) -> Result<&dyn GraphConv<B>> {
        self.convs.last().map(|c| c.as_ref()).ok_or_else(|| {
            Error::InvalidConfig("a node classifier needs at least one convolution".into())
        })
    }

    /// Class logits for every node.
    pub fn forward(
        &self,
        tape: &Tape<B>,
        graph: &DeviceGraph<B>,
        x: &Features<B>,
    ) -> Result<Var<B>> {
        self.last_conv()?;
        let mut h = self.dropout.forward_features(tape, x)?;
        let last = self.convs.len() - 1;
        for (i, conv) in self.convs.iter().enumerate() {
            let y = conv.forward(tape, graph, &h)?;
            h = if i < last {
                // Each hidden-sized value goes as soon as the next exists
                // (what the backward pass reads, the tape keeps): at most
                // two of them are alive at once. The dropout is applied
                // inside the next layer's product where that layer has one
                // (`Features::DenseDropout`): the dropped-out copy of the
                // hidden layer is never made.
                let a = self.activation.apply(&y);
                drop(y);
                self.dropout.forward_features(tape, &Features::Dense(a))?
            } else {
                Features::Dense(y)
            };
        }
        let Features::Dense(out) = h else {
            unreachable!("convolutions return dense values")
        };
        match &self.head {
            Some(head) => head.forward(&Features::Dense(self.dropout.forward(&out)?)),
            None => Ok(out),
        }
    }

    /// Parameters of the first convolution (Kipf & Welling apply weight decay to these only).
    pub fn first_layer_params(&self) -> Vec<crate::autograd::Param<B>> {
        self.convs.first().map(|c| c.params()).unwrap_or_default()
    }

    /// Parameters of every layer after the first (head included).
    pub fn other_params(&self) -> Vec<crate::autograd::Param<B>> {
        let mut out: Vec<_> = self.convs.iter().skip(1).flat_map(|c| c.params()).collect();
        if let Some(h) = &self.head {
            out.extend(h.params());
        }
        out
    }
}

impl<B: Backend> Module<B> for NodeClassifier<B> {
    fn visit_params(&self, v: &mut ParamVisitor<'_, B>) {
        for (i, c) in self.convs.iter().enumerate() {
            v.child(&format!("conv{}", i + 1), c.as_ref());
        }
        if let Some(h) = &self.head {
            v.child("head", h);
        }
    }

    fn set_training(&mut self, training: bool) {
        self.dropout.set_training(training);
        for c in &mut self.convs {
            c.set_training(training);
        }
    }
}
