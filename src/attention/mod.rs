//! Attention layers over batches of graphs.
//!
//! [`MvcAttn`] is HDGCN's multi-vote cross-attention (`docs/hdgcn-math.md`
//! §4): every graph gets `M` learned supernodes, nodes attend to them and
//! they attend back, so the layer applies a learned, row-stochastic `N x N`
//! transition `A_d = A_b A_f` of rank at most `M` in `O(N·M·h)` time and
//! `O(N·M)` memory, without ever forming it.

mod mvcattn;

pub use mvcattn::{
    AttentionMaps, MAX_DENSE_NODES, MvcAttn, MvcAttnConfig, Routing, normalized_entropy,
};
