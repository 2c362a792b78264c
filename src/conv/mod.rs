//! Graph convolutions: the [`GraphConv`] trait and the layers that
//! implement it ([`GcnConv`], [`ChebConv`], [`GatConv`], [`GatV2Conv`],
//! [`SageConv`], [`GinConv`], [`Gcn2Conv`], [`Appnp`]),
//! [`MessagePassing`] to write edge-wise layers on, and (feature `lapack`)
//! the exact spectral filter `SpectralFilter`.
//!
//! A layer from another crate plugs in by implementing [`GraphConv`] (and
//! [`Module`] for its parameters): it receives the
//! [`DeviceGraph`], whose cached operators it can use or extend with
//! [`DeviceGraph::operator`], and composes [`Var`] operations, so autograd
//! and every backend work for it unchanged.

mod appnp;
mod cheb;
mod device_graph;
mod gat;
mod gatv2;
mod gcn;
mod gcn2;
mod gin;
mod hd_cheb;
mod message_passing;
mod sage;
#[cfg(feature = "lapack")]
mod spectral_filter;

pub use appnp::Appnp;
pub use cheb::{ChebConv, ChebConvConfig};
pub use device_graph::DeviceGraph;
pub use gat::{GatConv, GatConvConfig};
pub use gatv2::{GatV2Conv, GatV2ConvConfig};
pub use gcn::GcnConv;
pub use gcn2::{Gcn2Conv, Gcn2ConvConfig};
pub use gin::{GinConv, GinNn};
pub use hd_cheb::{HdChaining, HdChebConfig, HdChebConv, HdUnit, StaticTransition, Transition};
pub use message_passing::{MessagePassing, SelfLoops};
pub use sage::{SageConv, SageConvConfig};
#[cfg(feature = "lapack")]
pub use spectral_filter::{SPECTRAL_FILTER_MAX_NODES, SpectralFilter, SpectralResponse};

use crate::autograd::{Tape, Var};
use crate::backend::Backend;
use crate::error::Result;
use crate::nn::{Features, Module};

/// A graph convolution: maps node features `N x in` to `N x out` over a graph.
pub trait GraphConv<B: Backend>: Module<B> {
    /// Input width.
    fn in_channels(&self) -> usize;
    /// Output width.
    fn out_channels(&self) -> usize;
    /// Applies the convolution, recording on `tape`.
    fn forward(&self, tape: &Tape<B>, graph: &DeviceGraph<B>, x: &Features<B>) -> Result<Var<B>>;
}

pub(crate) fn check_input<B: Backend>(
    name: &'static str,
    graph: &DeviceGraph<B>,
    x: &Features<B>,
    d_in: usize,
) -> Result<()> {
    let (r, c) = x.shape();
    if r != graph.num_nodes() || c != d_in {
        return Err(crate::Error::shape(
            name,
            format!("({}, {d_in})", graph.num_nodes()),
            format!("({r}, {c})"),
        ));
    }
    Ok(())
}
