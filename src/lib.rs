#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]
//! # hdgcn
//!
//! Graph neural networks in Rust: [`conv::GcnConv`], a true spectral
//! [`conv::ChebConv`], and the parts of HDGCN (Jiang et al., ACL 2021), on a
//! reverse-mode autograd ([`autograd`]) that dispatches every kernel through
//! a [`backend::Backend`].
//!
//! ## Layout
//!
//! | module | what lives there |
//! |---|---|
//! | [`graph`] | host graphs ([`graph::Graph`], [`graph::Batch`]), PyG-exact operators, λ_max |
//! | [`backend`] | the [`backend::Backend`] trait and the CPU backend ([`backend::Cpu`]) |
//! | [`autograd`] | [`autograd::Tape`], [`autograd::Var`], [`autograd::Param`], gradient checks |
//! | [`nn`] | [`nn::Module`] and standard layers |
//! | [`attention`] | [`attention::MvcAttn`]: multi-vote cross-attention with per-graph supernodes |
//! | [`conv`] | the [`conv::GraphConv`] trait, [`conv::DeviceGraph`], convolutions |
//! | [`models`] | ready-made models ([`models::NodeClassifier`], [`models::GraphClassifier`]) |
//! | [`readout`] | graph-level pooling ([`readout::Readout`]: sum, mean, max, gated, attention; over all nodes or a [`readout::NodeSet`]) |
//! | [`optim`] | SGD, Adam, AdamW, AdaBelief, clipping, schedules |
//! | [`train`] | the generic training loop ([`train::Trainer`] over [`train::TrainStep`]), node and graph classification |
//! | [`data`], [`metrics`] | datasets and splits, metrics |
//! | [`prelude`] | what a training program needs, in one `use` |
//! | [`checkpoint`] | saving and loading parameters as safetensors files |
//! | [`limits`] | the memory budget that sizes from settings and files are checked against |
//! | [`alloc`] | [`alloc::BlockCache`], an opt-in global allocator that reuses large tensors' blocks across steps |
//!
//! ## Example: one ChebConv layer, forward and backward
//!
//! ```
//! use hdgcn::autograd::Tape;
//! use hdgcn::backend::Cpu;
//! use hdgcn::conv::{ChebConv, DeviceGraph, GraphConv};
//! use hdgcn::graph::Graph;
//! use hdgcn::nn::Module;
//! use rand::SeedableRng;
//!
//! let cpu = Cpu::<f64>::new();
//! let path = Graph::from_edges(3, &[(0, 1), (1, 0), (1, 2), (2, 1)])?;
//! let graph = DeviceGraph::new(&cpu, path);
//! let mut rng = rand::rngs::StdRng::seed_from_u64(0);
//! let conv = ChebConv::new(&cpu, 2, 4, 3, &mut rng)?; // K = 3 terms
//!
//! let tape = Tape::new(&cpu);
//! let x = tape.constant_array(&ndarray::arr2(&[[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]));
//! let y = conv.forward(&tape, &graph, &x.into())?;
//! assert_eq!(y.shape(), (3, 4));
//! let grads = y.square().sum_all().backward()?;
//! for (name, p) in conv.named_params() {
//!     assert_eq!(grads.get(&p).map(|g| g.dim()), Some(p.shape()), "{name}");
//! }
//! # Ok::<(), hdgcn::Error>(())
//! ```

pub mod alloc;
pub mod attention;
pub mod autograd;
pub mod backend;
pub mod checkpoint;
pub mod conv;
pub mod data;
pub mod error;
pub mod float;
#[doc(hidden)]
pub mod fuzzing;
pub mod graph;
pub mod limits;
pub mod metrics;
pub mod models;
mod named;
pub mod nn;
pub mod optim;
pub mod prelude;
pub mod readout;
pub mod train;
pub mod util;

pub use error::{Error, Result};
pub use float::Float;

/// The README's code blocks, compiled and run as doc tests.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
