//! Neural-network building blocks: the [`Module`] trait and the standard
//! layers ([`Linear`], [`LayerNorm`], [`Dropout`], [`Mlp`], [`Embedding`],
//! [`SubwordEmbedding`], [`PositionalEncoding`]).

mod activation;
mod dropout;
mod embedding;
mod features;
pub mod init;
mod layer_norm;
mod linear;
mod mlp;
mod module;
mod positional_encoding;
mod subword;

pub use activation::Activation;
pub use dropout::Dropout;
pub use embedding::Embedding;
pub use features::Features;
pub use layer_norm::LayerNorm;
pub use linear::Linear;
pub(crate) use linear::check_dims;
pub use mlp::Mlp;
pub use module::{Module, ParamVisitor, TorchLayout};
pub use positional_encoding::PositionalEncoding;
pub use subword::{SubwordConfig, SubwordEmbedding};
