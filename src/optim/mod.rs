//! Optimisers (placeholder until the optimiser branch lands).
pub mod kernels;
