//! Neural-network building blocks.

mod module;

pub use module::{Module, ParamVisitor};
