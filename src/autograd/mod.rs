//! Reverse-mode automatic differentiation over a [`Backend`](crate::backend::Backend).

mod param;

pub use param::{Gradients, Param, ParamId};
