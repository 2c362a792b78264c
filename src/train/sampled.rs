//! Node classification on neighbour-sampled batches: [`SampledNodeStep`],
//! the [`TrainStep`] of a [`NodeClassifier`] over the batches of a
//! [`NeighborLoader`](crate::graph::sampling::NeighborLoader).

use super::step::{StepOutput, TrainStep};
use crate::autograd::{Index, Param, Tape};
use crate::backend::Backend;
use crate::conv::DeviceGraph;
use crate::data::FeatureStore;
use crate::error::{Error, Result};
use crate::graph::sampling::SampledSubgraph;
use crate::models::NodeClassifier;
use crate::nn::{Features, Module, ParamVisitor};

/// A [`NodeClassifier`] trained on sampled subgraphs, as PyG's
/// `NeighborLoader` examples: a step gathers the features of the batch's
/// nodes from a [`FeatureStore`] (in memory or a memory-mapped `.npy`),
/// runs the model on the batch's subgraph (its GCN operator is that of the
/// subgraph, as PyG's `GCNConv` on a sampled batch) and scores the seed
/// nodes only (the first [`SampledSubgraph::num_seeds`] rows: the loss is
/// on the seeds, the other nodes only feed them messages).
///
/// Evaluation scores the seeds of the batches it is given in the same way
/// (sampled inference; with fan-outs of `-1` it is exact for the model's
/// depth).
///
/// ```
/// use hdgcn::backend::Cpu;
/// use hdgcn::graph::generate::{generate, GeneratorConfig};
/// use hdgcn::graph::sampling::{NeighborLoader, NeighborLoaderConfig, NeighborSampler, SamplingConfig};
/// use hdgcn::models::NodeClassifier;
/// use hdgcn::train::{SampledNodeStep, TrainConfig, Trainer};
/// use rand::{SeedableRng, rngs::StdRng};
///
/// let g = generate(&GeneratorConfig { num_nodes: 400, degree: 5, classes: 3, feature_dim: 8, ..Default::default() })?;
/// let sampler = NeighborSampler::from_edges(g.num_nodes, &g.edges)?;
/// let cfg = |shuffle| NeighborLoaderConfig { sampling: SamplingConfig::new(vec![5, 5]).unwrap(), batch_size: 64, shuffle, seed: 0 };
/// let mut train = NeighborLoader::new(&sampler, (0..300).collect(), cfg(true))?;
/// let val = NeighborLoader::new(&sampler, (300..400).collect(), cfg(false))?.sample_epoch(0)?;
///
/// let cpu = Cpu::<f32>::new();
/// let mut model = NodeClassifier::gcn(&cpu, 8, 16, 3, 0.5, &mut StdRng::seed_from_u64(0))?;
/// let mut step = SampledNodeStep::new(&mut model, &g.features, &g.labels, 3)?;
/// let fit = Trainer::new(TrainConfig { epochs: 20, lr: 0.02, ..TrainConfig::default() })?
///     .fit(&mut step, &mut train, &val)?;
/// assert!(fit.val_acc > 0.6, "{}", fit.val_acc);
/// # Ok::<(), hdgcn::Error>(())
/// ```
pub struct SampledNodeStep<'a, B: Backend, S: FeatureStore> {
    model: &'a mut NodeClassifier<B>,
    features: &'a S,
    labels: &'a [usize],
    decay_first_layer_only: bool,
}

impl<'a, B: Backend, S: FeatureStore> SampledNodeStep<'a, B, S> {
    /// `model` over `features` (one row per node) and the class of every
    /// node, `labels[i] < num_classes`; weight decay on every parameter.
    ///
    /// # Errors
    /// [`Error::ShapeMismatch`] unless there is one label per feature row;
    /// [`Error::InvalidConfig`] for a label `>= num_classes`.
    pub fn new(
        model: &'a mut NodeClassifier<B>,
        features: &'a S,
        labels: &'a [usize],
        num_classes: usize,
    ) -> Result<Self> {
        if labels.len() != features.num_nodes() {
            return Err(Error::shape(
                "SampledNodeStep labels",
                format!("one label per feature row ({})", features.num_nodes()),
                format!("{} labels", labels.len()),
            ));
        }
        if let Some((i, &c)) = labels.iter().enumerate().find(|&(_, &c)| c >= num_classes) {
            return Err(Error::InvalidConfig(format!(
                "node {i} has label {c}, not below the {num_classes} classes"
            )));
        }
        Ok(SampledNodeStep {
            model,
            features,
            labels,
            decay_first_layer_only: false,
        })
    }

    /// Weight decay on the first layer only (Kipf & Welling) when set.
    pub fn decay_first_layer_only(mut self, yes: bool) -> Self {
        self.decay_first_layer_only = yes;
        self
    }
}

impl<B: Backend, S: FeatureStore> std::fmt::Debug for SampledNodeStep<'_, B, S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SampledNodeStep")
            .field("model", &self.model)
            .field("num_nodes", &self.features.num_nodes())
            .field("dim", &self.features.dim())
            .finish()
    }
}

impl<B: Backend, S: FeatureStore> Module<B> for SampledNodeStep<'_, B, S> {
    fn visit_params(&self, v: &mut ParamVisitor<'_, B>) {
        self.model.visit_params(v);
    }

    fn set_training(&mut self, training: bool) {
        self.model.set_training(training);
    }
}

impl<B: Backend, S: FeatureStore> TrainStep<B> for SampledNodeStep<'_, B, S> {
    type Batch = SampledSubgraph;

    fn train_step(&self, tape: &Tape<B>, batch: &SampledSubgraph) -> Result<StepOutput<B>> {
        let backend = tape.backend();
        let x = self.features.gather::<B::Elem>(batch.nodes())?;
        let graph = DeviceGraph::new(backend, batch.to_graph()?);
        let x = Features::Dense(tape.constant_array(&x));
        let logits = self.model.forward(tape, &graph, &x)?;
        let seeds = logits.slice(crate::backend::Axis::Rows, 0, batch.num_seeds())?;
        let targets: Vec<usize> = batch.seeds().iter().map(|&v| self.labels[v]).collect();
        StepOutput::new(seeds, Index::new(backend, &targets)?)
    }

    fn decayed_params(&self) -> Vec<Param<B>> {
        if self.decay_first_layer_only {
            self.model.first_layer_params()
        } else {
            self.model.params()
        }
    }
}
