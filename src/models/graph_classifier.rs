//! Graph classification: node encoder, graph convolutions, readout, classifier.

use rand::Rng;

use crate::autograd::{Index, Tape, Var};
use crate::backend::Backend;
use crate::conv::{DeviceGraph, GcnConv, GraphConv};
use crate::error::{Error, Result};
use crate::named::named_enum;
use crate::nn::{
    Activation, Dropout, Embedding, Features, Linear, Module, ParamVisitor, PositionalEncoding,
    SubwordEmbedding,
};
use crate::readout::{GatedReadout, NodeSet, Readout};

/// The optional first layer of a [`GraphClassifier`], named `input`.
#[derive(Debug, Clone)]
pub enum InputLayer<B: Backend> {
    /// Token ids to vectors (text graphs whose nodes are words):
    /// `input.weight` is `vocab x dim`. No activation follows.
    Embedding(Embedding<B>),
    /// Token ids to vectors composed from character n-grams
    /// ([`SubwordEmbedding`]): `input.weight` is `(vocab + n-grams) x dim`.
    /// No activation follows.
    Subword(SubwordEmbedding<B>),
    /// A projection of dense (or sparse) node features, followed by the
    /// model's activation: `input.weight`, `input.bias`.
    Linear(Linear<B>),
}

impl<B: Backend> InputLayer<B> {
    /// Width of the node vectors it produces.
    pub fn out_channels(&self) -> usize {
        match self {
            InputLayer::Embedding(e) => e.weight.shape().1,
            InputLayer::Subword(e) => e.dim(),
            InputLayer::Linear(l) => l.out_features(),
        }
    }

    /// The number of token ids it embeds (`None` for a linear projection,
    /// which reads features).
    pub fn num_tokens(&self) -> Option<usize> {
        match self {
            InputLayer::Embedding(e) => Some(e.weight.shape().0),
            InputLayer::Subword(e) => Some(e.num_words()),
            InputLayer::Linear(_) => None,
        }
    }
}

impl<B: Backend> Module<B> for InputLayer<B> {
    fn visit_params(&self, v: &mut ParamVisitor<'_, B>) {
        match self {
            InputLayer::Embedding(e) => e.visit_params(v),
            InputLayer::Subword(e) => e.visit_params(v),
            InputLayer::Linear(l) => l.visit_params(v),
        }
    }
}

/// What a [`GraphClassifier`] reads for the nodes of a graph (or batch).
#[derive(Debug, Clone)]
pub enum GraphInput<B: Backend> {
    /// One token id per node (needs an [`InputLayer::Embedding`]).
    Tokens(Index<B>),
    /// Node features (a model with no input layer, or [`InputLayer::Linear`]).
    Features(Features<B>),
}

/// How [`GraphClassifier::gcn`] reads node inputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InputSpec {
    /// Token ids embedded in `dim` dimensions (vocabulary of `vocab` ids).
    Tokens {
        /// Vocabulary size.
        vocab: usize,
        /// Embedding width.
        dim: usize,
    },
    /// Dense features of width `d`, fed to the first convolution directly.
    Dense(usize),
}

/// Where [`GraphClassifier::forward_weighted`] applies per-node weights.
///
/// The weights are data, not parameters (for text graphs, the TF-IDF of
/// each distinct word, [`TfIdf::node_weights`]): a document graph has one
/// node per distinct word, so without them the model cannot see how often
/// a word occurs.
///
/// [`TfIdf::node_weights`]: crate::data::text::TfIdf::node_weights
///
/// ```
/// use hdgcn::models::NodeWeighting;
/// assert_eq!(NodeWeighting::default(), NodeWeighting::Readout);
/// assert!(NodeWeighting::Both.at_input() && NodeWeighting::Both.at_readout());
/// assert!(!NodeWeighting::Input.at_readout());
/// let both: NodeWeighting = "Both".parse()?;
/// assert_eq!(both, NodeWeighting::Both);
/// assert_eq!(both.to_string().parse::<NodeWeighting>()?, both);
/// assert!("inputs".parse::<NodeWeighting>().is_err());
/// # Ok::<(), hdgcn::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NodeWeighting {
    /// The readout pools `w_v · h_v` (with a mean readout and weights at
    /// mean 1 per graph, the weighted mean of the node states).
    #[default]
    Readout,
    /// Each node's input vector (the input layer's output, or the features
    /// without one) is multiplied by `w_v` before the position encoding and
    /// the first convolution; the readout pools the unweighted states.
    Input,
    /// Both: the inputs are scaled and the readout pools `w_v · h_v`.
    Both,
}

named_enum!(NodeWeighting, "node weighting", {
    Readout => "readout",
    Input => "input",
    Both => "both",
});

impl NodeWeighting {
    /// Whether the node inputs are scaled by the weights.
    pub fn at_input(self) -> bool {
        matches!(self, NodeWeighting::Input | NodeWeighting::Both)
    }

    /// Whether the readout pools weighted node states.
    pub fn at_readout(self) -> bool {
        matches!(self, NodeWeighting::Readout | NodeWeighting::Both)
    }
}

/// `input [+ position encoding] -> [dropout -> conv -> act] x L -> readout
/// -> dropout -> Linear`, producing one row of class logits per graph.
///
/// The graph may be a single graph or a block-diagonal batch
/// ([`DeviceGraph::from_batch`]); the readout pools each graph separately.
/// Parameters are named `input.*`, `conv1.*`, ..., `readout.*`,
/// `classifier.weight`, `classifier.bias`.
///
/// ```
/// use hdgcn::autograd::{Index, Tape};
/// use hdgcn::backend::Cpu;
/// use hdgcn::conv::DeviceGraph;
/// use hdgcn::graph::{Batch, Graph};
/// use hdgcn::models::{GraphClassifier, GraphInput, InputSpec};
/// use rand::SeedableRng;
///
/// let cpu = Cpu::<f32>::new();
/// let mut rng = rand::rngs::StdRng::seed_from_u64(0);
/// // Text graphs: nodes are distinct words (vocabulary ids), edges co-occurrences.
/// let model = GraphClassifier::gcn(&cpu, InputSpec::Tokens { vocab: 100, dim: 16 }, 16, 2, 3, 0.5, &mut rng)?;
/// let doc1 = Graph::from_edges(3, &[(0, 1), (1, 0), (1, 2), (2, 1)])?;
/// let doc2 = Graph::from_edges(2, &[(0, 1), (1, 0)])?;
/// let batch = DeviceGraph::from_batch(&cpu, &Batch::new(&[doc1, doc2])?)?;
/// let words = Index::new(&cpu, &[7, 42, 3, 42, 99])?;
/// let logits = model.forward(&Tape::inference(&cpu), &batch, &GraphInput::Tokens(words))?;
/// assert_eq!(logits.shape(), (2, 3));
/// # Ok::<(), hdgcn::Error>(())
/// ```
pub struct GraphClassifier<B: Backend> {
    /// Optional node encoder.
    pub input: Option<InputLayer<B>>,
    /// Optional sinusoidal encoding of each node's index inside its graph,
    /// added to the node vectors before the first convolution (set by
    /// [`GraphClassifier::with_position_encoding`]; `None` by default).
    pub position_encoding: Option<PositionalEncoding>,
    /// Where the node weights of [`GraphClassifier::forward_weighted`] act
    /// (set by [`GraphClassifier::with_node_weighting`]; the readout by
    /// default).
    pub node_weighting: NodeWeighting,
    /// The convolutions, first to last (at least one).
    pub convs: Vec<Box<dyn GraphConv<B>>>,
    /// Pools node states into one row per graph.
    pub readout: Box<dyn Readout<B>>,
    /// Dropout before every convolution and before the classifier.
    pub dropout: Dropout,
    /// Activation after the input projection and after every convolution.
    pub activation: Activation,
    /// Graph vector to class logits.
    pub classifier: Linear<B>,
}

impl<B: Backend> std::fmt::Debug for GraphClassifier<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let widths: Vec<(usize, usize)> = self
            .convs
            .iter()
            .map(|c| (c.in_channels(), c.out_channels()))
            .collect();
        f.debug_struct("GraphClassifier")
            .field("input", &self.input.as_ref().map(InputLayer::out_channels))
            .field("position_encoding", &self.position_encoding)
            .field("node_weighting", &self.node_weighting)
            .field("convs", &widths)
            .field("classes", &self.classifier.out_features())
            .field("dropout", &self.dropout)
            .finish()
    }
}

impl<B: Backend> GraphClassifier<B> {
    /// A classifier from given parts; widths must chain (input ->
    /// conv1 -> ... -> readout -> classifier).
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the first pair of widths that do not
    /// chain, for no convolutions, or an invalid dropout probability.
    pub fn new(
        input: Option<InputLayer<B>>,
        convs: Vec<Box<dyn GraphConv<B>>>,
        readout: Box<dyn Readout<B>>,
        classifier: Linear<B>,
        dropout: f64,
        activation: Activation,
    ) -> Result<Self> {
        let first = first_conv(&convs)?;
        if let Some(inp) = &input {
            if inp.out_channels() != first.in_channels() {
                return Err(Error::InvalidConfig(format!(
                    "the input layer outputs {} channels but conv1 expects {}",
                    inp.out_channels(),
                    first.in_channels()
                )));
            }
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
        let last = convs[convs.len() - 1].out_channels();
        let pooled = readout.out_channels(last);
        if pooled != classifier.in_features() {
            return Err(Error::InvalidConfig(format!(
                "the readout outputs {pooled} channels but the classifier expects {}",
                classifier.in_features()
            )));
        }
        Ok(GraphClassifier {
            input,
            position_encoding: None,
            node_weighting: NodeWeighting::Readout,
            convs,
            readout,
            dropout: Dropout::new(dropout)?,
            activation,
            classifier,
        })
    }

    /// `num_layers` GCN layers of width `hidden`, HDGCN's gated readout
    /// ([`GatedReadout`]) and a linear classifier, ReLU activations.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for zero widths, layers or classes.
    pub fn gcn<R: Rng + ?Sized>(
        backend: &B,
        input: InputSpec,
        hidden: usize,
        num_layers: usize,
        num_classes: usize,
        dropout: f64,
        rng: &mut R,
    ) -> Result<Self> {
        if num_layers == 0 {
            return Err(Error::InvalidConfig(
                "a graph classifier needs at least one layer".into(),
            ));
        }
        let (input, mut width) = match input {
            InputSpec::Tokens { vocab, dim } => (
                Some(InputLayer::Embedding(Embedding::new(
                    backend, vocab, dim, rng,
                )?)),
                dim,
            ),
            InputSpec::Dense(d) => (None, d),
        };
        let mut convs: Vec<Box<dyn GraphConv<B>>> = Vec::with_capacity(num_layers);
        for _ in 0..num_layers {
            convs.push(Box::new(GcnConv::new(backend, width, hidden, rng)?));
            width = hidden;
        }
        let readout = Box::new(GatedReadout::new(backend, hidden, rng)?);
        let classifier = Linear::new(backend, hidden, num_classes, true, rng)?;
        Self::new(input, convs, readout, classifier, dropout, Activation::Relu)
    }

    /// Adds `pe` of each node's index inside its graph (0 for every graph's
    /// first node) to the node vectors the first convolution reads: the
    /// input layer's output, or the features themselves without one. For
    /// the text graphs of [`doc_graph`] the index is the order in which the
    /// words first occur, as in the HDGCN reference code's position
    /// encodings. The encoding has no parameters, so checkpoints do not
    /// change.
    ///
    /// [`doc_graph`]: crate::data::text::doc_graph
    ///
    /// ```
    /// use hdgcn::backend::Cpu;
    /// use hdgcn::models::{GraphClassifier, InputSpec};
    /// use hdgcn::nn::PositionalEncoding;
    /// use rand::SeedableRng;
    /// let cpu = Cpu::<f32>::new();
    /// let mut rng = rand::rngs::StdRng::seed_from_u64(0);
    /// let spec = InputSpec::Tokens { vocab: 100, dim: 16 };
    /// let model = GraphClassifier::gcn(&cpu, spec, 16, 2, 3, 0.5, &mut rng)?;
    /// let pe = PositionalEncoding::new(16)?.with_scale(0.1)?;
    /// let model = model.with_position_encoding(pe)?;
    /// assert_eq!(model.position_encoding, Some(pe));
    /// # Ok::<(), hdgcn::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] if the encoding's width is not the width
    /// the first convolution reads.
    pub fn with_position_encoding(mut self, pe: PositionalEncoding) -> Result<Self> {
        let width = self.first_conv()?.in_channels();
        if pe.out_channels() != width {
            return Err(Error::InvalidConfig(format!(
                "the position encoding is {} wide but conv1 reads {width} channels",
                pe.out_channels()
            )));
        }
        self.position_encoding = Some(pe);
        Ok(self)
    }

    /// The model with its node weights applied where `weighting` says
    /// (see [`NodeWeighting`]). Like the position encoding, this has no
    /// parameters, so checkpoints do not change.
    ///
    /// ```
    /// use hdgcn::backend::Cpu;
    /// use hdgcn::models::{GraphClassifier, InputSpec, NodeWeighting};
    /// use rand::SeedableRng;
    /// let cpu = Cpu::<f32>::new();
    /// let mut rng = rand::rngs::StdRng::seed_from_u64(0);
    /// let spec = InputSpec::Tokens { vocab: 100, dim: 16 };
    /// let model = GraphClassifier::gcn(&cpu, spec, 16, 1, 3, 0.5, &mut rng)?
    ///     .with_node_weighting(NodeWeighting::Input);
    /// assert_eq!(model.node_weighting, NodeWeighting::Input);
    /// # Ok::<(), hdgcn::Error>(())
    /// ```
    pub fn with_node_weighting(mut self, weighting: NodeWeighting) -> Self {
        self.node_weighting = weighting;
        self
    }

    /// The first convolution; [`Error::InvalidConfig`] if `convs` was emptied.
    pub(crate) fn first_conv(&self) -> Result<&dyn GraphConv<B>> {
        first_conv(&self.convs)
    }

    /// The backend the parameters live on.
    pub fn backend(&self) -> &B {
        self.classifier.weight.backend()
    }

    /// Number of classes.
    pub fn num_classes(&self) -> usize {
        self.classifier.out_features()
    }

    /// Node states after the convolutions (`N x hidden`).
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] if `x` does not suit the input layer (tokens
    /// need an embedding, features a linear layer or none); shape errors
    /// from the layers.
    pub fn node_states(
        &self,
        tape: &Tape<B>,
        graph: &DeviceGraph<B>,
        x: &GraphInput<B>,
    ) -> Result<Var<B>> {
        self.states(tape, graph, x, None)
    }

    /// The node vectors convolution `layer` (from 0) reads, before its
    /// dropout: the input layer's output (after the position encoding) for
    /// `layer = 0`, else the activated output of convolution `layer - 1`.
    /// For probing a trained model, for example the attention maps of a
    /// dynamic [`HdChebConv`](crate::conv::HdChebConv) with
    /// [`forward_with_maps`](crate::conv::HdChebConv::forward_with_maps);
    /// in evaluation mode ([`Module::set_training`]) it is what
    /// [`GraphClassifier::forward`] feeds the layer. Node weights at the
    /// input ([`GraphClassifier::forward_weighted`]) are not applied.
    ///
    /// # Errors
    /// [`Error::IndexOutOfRange`] for a `layer` the model does not have;
    /// otherwise as [`GraphClassifier::node_states`].
    pub fn conv_input(
        &self,
        tape: &Tape<B>,
        graph: &DeviceGraph<B>,
        x: &GraphInput<B>,
        layer: usize,
    ) -> Result<Features<B>> {
        if layer >= self.convs.len() {
            return Err(Error::IndexOutOfRange {
                what: "convolution of the graph classifier",
                index: layer,
                len: self.convs.len(),
            });
        }
        self.states_until(tape, graph, x, None, layer)
    }

    /// Width of the node vectors the first convolution reads: the input
    /// layer's output width, or the feature width without an input layer.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for a classifier without convolutions.
    pub fn input_channels(&self) -> Result<usize> {
        Ok(self.first_conv()?.in_channels())
    }

    /// [`GraphClassifier::node_states`] with each node's input vector
    /// multiplied by its row of `input_weights` (`N x 1`, checked by the
    /// caller), before the position encoding and the convolutions.
    fn states(
        &self,
        tape: &Tape<B>,
        graph: &DeviceGraph<B>,
        x: &GraphInput<B>,
        input_weights: Option<&Var<B>>,
    ) -> Result<Var<B>> {
        self.states_until(tape, graph, x, input_weights, self.convs.len())?
            .dense()
    }

    /// [`GraphClassifier::states`] through the first `layers` convolutions
    /// only.
    fn states_until(
        &self,
        tape: &Tape<B>,
        graph: &DeviceGraph<B>,
        x: &GraphInput<B>,
        input_weights: Option<&Var<B>>,
        layers: usize,
    ) -> Result<Features<B>> {
        // A model without convolutions must not pool its raw input.
        self.first_conv()?;
        let mut h = match (&self.input, x) {
            (Some(InputLayer::Embedding(e)), GraphInput::Tokens(idx)) => {
                Features::Dense(e.forward(tape, idx)?)
            }
            (Some(InputLayer::Subword(e)), GraphInput::Tokens(idx)) => {
                Features::Dense(e.forward(tape, idx)?)
            }
            (Some(InputLayer::Linear(l)), GraphInput::Features(f)) => {
                let f = self.dropout.forward_features(tape, f)?;
                Features::Dense(self.activation.apply(&l.forward_on(tape, &f)?))
            }
            (None, GraphInput::Features(f)) => f.clone(),
            (Some(InputLayer::Embedding(_) | InputLayer::Subword(_)), GraphInput::Features(_)) => {
                return Err(Error::InvalidConfig(
                    "this model embeds token ids; give GraphInput::Tokens".into(),
                ));
            }
            (_, GraphInput::Tokens(_)) => {
                return Err(Error::InvalidConfig(
                    "token ids need an InputLayer::Embedding; give GraphInput::Features".into(),
                ));
            }
        };
        if let Some(w) = input_weights {
            h = Features::Dense(h.dense()?.mul(w)?);
        }
        if let Some(pe) = &self.position_encoding {
            h = self.add_position_encoding(tape, graph, pe, &h)?;
        }
        for conv in self.convs.iter().take(layers) {
            let x = self.dropout.forward_features(tape, &h)?;
            h = Features::Dense(self.activation.apply(&conv.forward(tape, graph, &x)?));
        }
        Ok(h)
    }

    /// `h + pe(index of each node inside its graph)`; `h` must be dense.
    fn add_position_encoding(
        &self,
        tape: &Tape<B>,
        graph: &DeviceGraph<B>,
        pe: &PositionalEncoding,
        h: &Features<B>,
    ) -> Result<Features<B>> {
        let Features::Dense(x) = h else {
            return Err(Error::InvalidConfig(
                "a position encoding is added to dense node vectors; give dense features or an input layer"
                    .into(),
            ));
        };
        let n = x.shape().0;
        if n != graph.num_nodes() {
            return Err(Error::ShapeMismatch {
                op: "position encoding",
                expected: format!("{} node rows", graph.num_nodes()),
                got: format!("{n}"),
            });
        }
        let enc = pe.encode_node_indices::<B::Elem>(&graph.ptr())?;
        Ok(Features::Dense(x.add(&tape.constant_array(&enc))?))
    }

    /// Class logits, one row per graph (`G x classes`).
    ///
    /// # Errors
    /// As [`GraphClassifier::node_states`]; [`Error::Empty`] if a graph of
    /// the batch has no nodes.
    pub fn forward(
        &self,
        tape: &Tape<B>,
        graph: &DeviceGraph<B>,
        x: &GraphInput<B>,
    ) -> Result<Var<B>> {
        self.forward_weighted(tape, graph, x, None)
    }

    /// Class logits with per-node weights `w_v` applied where
    /// [`GraphClassifier::node_weighting`] says: `weights` is `N x 1` (or
    /// `None`, which is [`GraphClassifier::forward`]). At the readout
    /// (the default) it pools `w_v · h_v`: with each graph's weights at
    /// mean 1 (as the training helpers batch
    /// [`GraphSample::node_weights`](crate::train::GraphSample::node_weights))
    /// a [`MeanReadout`](crate::readout::MeanReadout) gives the weighted
    /// mean `Σ_v w_v h_v / Σ_v w_v`, e.g. a TF-IDF-weighted mean of a
    /// document's word nodes. At the input ([`NodeWeighting::Input`]) the
    /// convolutions read `w_v · x_v`. The weights are data: no gradient
    /// reaches them through a constant.
    ///
    /// ```
    /// use hdgcn::autograd::{Index, Tape};
    /// use hdgcn::backend::Cpu;
    /// use hdgcn::conv::DeviceGraph;
    /// use hdgcn::graph::Graph;
    /// use hdgcn::models::{GraphClassifier, GraphInput, InputSpec};
    /// use rand::SeedableRng;
    ///
    /// let cpu = Cpu::<f64>::new();
    /// let mut rng = rand::rngs::StdRng::seed_from_u64(0);
    /// let model = GraphClassifier::gcn(&cpu, InputSpec::Tokens { vocab: 10, dim: 4 }, 4, 1, 2, 0.0, &mut rng)?;
    /// let doc = DeviceGraph::new(&cpu, Graph::from_edges(2, &[(0, 1), (1, 0)])?);
    /// let words = GraphInput::Tokens(Index::new(&cpu, &[3, 7])?);
    /// let tape = Tape::inference(&cpu);
    /// let ones = tape.constant_array(&ndarray::arr2(&[[1.0], [1.0]]));
    /// let plain = model.forward(&tape, &doc, &words)?.to_array();
    /// let weighted = model.forward_weighted(&tape, &doc, &words, Some(&ones))?.to_array();
    /// assert_eq!(plain, weighted);
    /// # Ok::<(), hdgcn::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`GraphClassifier::forward`]; [`Error::ShapeMismatch`] if
    /// `weights` is not `N x 1`.
    pub fn forward_weighted(
        &self,
        tape: &Tape<B>,
        graph: &DeviceGraph<B>,
        x: &GraphInput<B>,
        weights: Option<&Var<B>>,
    ) -> Result<Var<B>> {
        self.forward_inner(tape, graph, x, weights, None)
    }

    /// Class logits from the readout over the nodes of `nodes` only
    /// ([`Readout::forward_nodes`]): the convolutions run on the whole
    /// graph, then each graph's row pools the states of its selected nodes
    /// (for aspect-based sentiment, the aspect's tokens; with a
    /// [`MeanReadout`](crate::readout::MeanReadout), ASGCN's aspect-mean).
    /// `weights` as in [`GraphClassifier::forward_weighted`].
    ///
    /// ```
    /// use hdgcn::autograd::{Index, Tape};
    /// use hdgcn::backend::Cpu;
    /// use hdgcn::conv::DeviceGraph;
    /// use hdgcn::graph::Graph;
    /// use hdgcn::models::{GraphClassifier, GraphInput, InputSpec};
    /// use hdgcn::readout::NodeSet;
    /// use rand::SeedableRng;
    ///
    /// let cpu = Cpu::<f64>::new();
    /// let mut rng = rand::rngs::StdRng::seed_from_u64(0);
    /// let model = GraphClassifier::gcn(&cpu, InputSpec::Tokens { vocab: 10, dim: 4 }, 4, 1, 3, 0.0, &mut rng)?;
    /// let path = DeviceGraph::new(&cpu, Graph::from_edges(3, &[(0, 1), (1, 0), (1, 2), (2, 1)])?);
    /// let words = GraphInput::Tokens(Index::new(&cpu, &[3, 7, 5])?);
    /// let aspect = NodeSet::new(&cpu, &[0, 3], &[vec![1, 2]])?;
    /// let logits = model.forward_nodes(&Tape::inference(&cpu), &path, &words, None, &aspect)?;
    /// assert_eq!(logits.shape(), (1, 3));
    /// # Ok::<(), hdgcn::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`GraphClassifier::forward_weighted`]; [`Error::ShapeMismatch`]
    /// if `nodes` was made for another batch.
    pub fn forward_nodes(
        &self,
        tape: &Tape<B>,
        graph: &DeviceGraph<B>,
        x: &GraphInput<B>,
        weights: Option<&Var<B>>,
        nodes: &NodeSet<B>,
    ) -> Result<Var<B>> {
        self.forward_inner(tape, graph, x, weights, Some(nodes))
    }

    fn forward_inner(
        &self,
        tape: &Tape<B>,
        graph: &DeviceGraph<B>,
        x: &GraphInput<B>,
        weights: Option<&Var<B>>,
        nodes: Option<&NodeSet<B>>,
    ) -> Result<Var<B>> {
        if let Some(w) = weights {
            let n = graph.num_nodes();
            if w.shape() != (n, 1) {
                return Err(Error::shape(
                    "graph classifier node weights",
                    format!("({n}, 1)"),
                    format!("{:?}", w.shape()),
                ));
            }
        }
        let at = self.node_weighting;
        let mut h = self.states(tape, graph, x, weights.filter(|_| at.at_input()))?;
        if let Some(w) = weights.filter(|_| at.at_readout()) {
            h = h.mul(w)?;
        }
        let seg = graph.segments_or_whole()?;
        let g = match nodes {
            Some(nodes) => self.readout.forward_nodes(tape, &h, &seg, nodes)?,
            None => self.readout.forward(tape, &h, &seg)?,
        };
        let g = self.dropout.forward(&g)?;
        self.classifier.forward_on(tape, &Features::Dense(g))
    }
}

/// The first of `convs`; a classifier without convolutions is an error.
fn first_conv<B: Backend>(convs: &[Box<dyn GraphConv<B>>]) -> Result<&dyn GraphConv<B>> {
    convs.first().map(|c| c.as_ref()).ok_or_else(|| {
        Error::InvalidConfig("a graph classifier needs at least one convolution".into())
    })
}

impl<B: Backend> Module<B> for GraphClassifier<B> {
    fn visit_params(&self, v: &mut ParamVisitor<'_, B>) {
        if let Some(inp) = &self.input {
            v.child("input", inp);
        }
        for (i, c) in self.convs.iter().enumerate() {
            v.child(&format!("conv{}", i + 1), c.as_ref());
        }
        v.child("readout", self.readout.as_ref());
        v.child("classifier", &self.classifier);
    }

    fn set_training(&mut self, training: bool) {
        self.dropout.set_training(training);
        for c in &mut self.convs {
            c.set_training(training);
        }
        self.readout.set_training(training);
    }
}
