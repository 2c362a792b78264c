//! Ready-made models assembled from the crate's layers.

mod graph_classifier;
mod node_classifier;

pub use graph_classifier::{GraphClassifier, GraphInput, InputLayer, InputSpec, NodeWeighting};
pub use node_classifier::NodeClassifier;
