//! Reverse-mode automatic differentiation over a [`Backend`](crate::backend::Backend).
//!
//! A [`Tape`] records every operation on [`Var`]s as one variant of a closed
//! op enum (plus [`CustomOp`]s defined outside the crate); [`Var::backward`] walks the tape once in reverse (the recording
//! order is a topological order) and dispatches each op's backward through
//! the backend. Layers compose `Var` operations and never see kernels.
//!
//! Constants that never need gradients (graph operators, sparse features,
//! labels, batch offsets) are [`SparseMatrix`], [`Index`] and [`Segments`].

mod custom;
pub mod gradcheck;
mod param;
mod sparse;
mod tape;
mod var;

pub use custom::CustomOp;
pub use param::{Gradients, Param, ParamId};
pub use sparse::{Index, Segments, SparseMatrix};
pub use tape::Tape;
pub use var::Var;
pub(crate) use var::{check_dropout_p, check_label_smoothing};
