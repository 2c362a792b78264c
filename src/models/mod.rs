//! Ready-made models assembled from the crate's layers.

mod node_classifier;

pub use node_classifier::NodeClassifier;
