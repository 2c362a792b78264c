//! What a training program needs, in one `use`:
//!
//! ```
//! use hdgcn::prelude::*;
//!
//! # fn main() -> hdgcn::Result<()> {
//! let cpu = Cpu::<f32>::new();
//! let graph = DeviceGraph::new(&cpu, Graph::from_edges(2, &[(0, 1), (1, 0)])?);
//! let mut rng = StdRng::seed_from_u64(0);
//! let model = NodeClassifier::gcn(&cpu, 3, 8, 2, 0.5, &mut rng)?;
//! let tape = Tape::new(&cpu);
//! let x = tape.constant_array(&ndarray::Array2::<f32>::ones((2, 3)));
//! assert_eq!(model.forward(&tape, &graph, &x.into())?.shape(), (2, 2));
//! # Ok(())
//! # }
//! ```

pub use crate::autograd::{Index, Param, SparseMatrix, Tape, Var};
pub use crate::backend::{Axis, Backend, Cpu};
pub use crate::conv::{ChebConv, DeviceGraph, GcnConv, GraphConv, HdChebConfig, HdChebConv};
pub use crate::data::{Planetoid, Split};
pub use crate::error::{Error, Result};
pub use crate::graph::Graph;
pub use crate::models::{GraphClassifier, GraphInput, InputSpec, NodeClassifier};
pub use crate::nn::{Features, Module, ParamVisitor};
pub use crate::optim::{
    AdaBeliefConfig, AdamConfig, AdamWConfig, LrScheduleKind, Optimizer, OptimizerKind, SgdConfig,
};
pub use crate::train::{
    GraphFeatures, GraphLoader, GraphSample, GraphTrainConfig, Hook, Loader, NodeTask,
    NodeTrainConfig, StepOutput, TrainConfig, TrainStep, Trainer, evaluate, train_graph_classifier,
    train_node_classifier,
};
pub use rand::SeedableRng;
pub use rand::rngs::StdRng;
