//! Ready-made models assembled from the crate's layers.

mod appnp_net;
mod gcn2_net;
mod graph_classifier;
mod node_classifier;

pub use appnp_net::AppnpNet;
pub use gcn2_net::Gcn2Net;
pub use graph_classifier::{GraphClassifier, GraphInput, InputLayer, InputSpec, NodeWeighting};
pub use node_classifier::NodeClassifier;
