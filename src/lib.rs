#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]
//! # hdgcn
//!
//! Graph neural networks in Rust.

pub mod autograd;
pub mod backend;
pub mod data;
pub mod error;
pub mod float;
pub mod graph;
pub mod metrics;
pub mod nn;
pub mod optim;

pub use error::{Error, Result};
pub use float::Float;
