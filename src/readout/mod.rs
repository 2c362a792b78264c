//! Graph-level readouts: pool the node states of every graph of a batch
//! into one row per graph.
//!
//! A readout receives node states `h` (`N x F`, all graphs of a batch
//! stacked) and the batch's [`Segments`] (graph `g` owns rows
//! `ptr[g]..ptr[g + 1]`) and returns `G x out_channels(F)`. Every readout
//! works per graph, so a batch gives the same rows as the graphs one at a
//! time, and every readout rejects a batch containing a graph with no nodes
//! ([`Error::Empty`] naming the graph), since a mean or max over nothing is
//! undefined.
//!
//! | readout | `h_g` |
//! |---|---|
//! | [`SumReadout`] | `Σ_v h_v` |
//! | [`MeanReadout`] | `mean_v h_v` |
//! | [`MaxReadout`] | `max_v h_v` (per column) |
//! | [`MeanMaxReadout`] | `mean_v h_v + max_v h_v` (a sum, not a concatenation) |
//! | [`GatedReadout`] | HDGCN / TextING: `h'_v = σ(f1(h_v)) ⊙ tanh(f2(h_v))`, then `mean + max` of `h'` |
//! | [`AttentionPooling`] | PyG `AttentionalAggregation`: `Σ_v softmax_g(gate_nn(h))_v · nn(h_v)` |
//!
//! Any readout can also pool a chosen subset of each graph's nodes
//! ([`Readout::forward_nodes`] with a [`NodeSet`]): [`MeanReadout`] over
//! the aspect's tokens is the aspect-mean readout of ABSA (ASGCN's aspect
//! mask).
//!
//! ```
//! use hdgcn::autograd::{Segments, Tape};
//! use hdgcn::backend::Cpu;
//! use hdgcn::readout::{MeanMaxReadout, Readout};
//!
//! let cpu = Cpu::<f64>::new();
//! let tape = Tape::inference(&cpu);
//! // Two graphs: nodes 0..2 and node 2.
//! let h = tape.constant_array(&ndarray::arr2(&[[1.0, -1.0], [3.0, 0.0], [5.0, 2.0]]));
//! let seg = Segments::new(&cpu, &[0, 2, 3])?;
//! let out = MeanMaxReadout.forward(&tape, &h, &seg)?.to_array();
//! assert_eq!(out, ndarray::arr2(&[[2.0 + 3.0, -0.5 + 0.0], [10.0, 4.0]]));
//! # Ok::<(), hdgcn::Error>(())
//! ```

mod attention;
mod basic;
mod gated;
mod node_set;

pub use attention::AttentionPooling;
pub use basic::{MaxReadout, MeanMaxReadout, MeanReadout, SumReadout};
pub use gated::GatedReadout;
pub use node_set::NodeSet;

use crate::autograd::{Segments, Tape, Var};
use crate::backend::Backend;
use crate::error::{Error, Result};
use crate::nn::Module;

/// Pools node states into one row per graph.
///
/// Implementations must treat every graph of the batch independently.
pub trait Readout<B: Backend>: Module<B> {
    /// `G x out_channels(F)` from node states `h` (`N x F`) and the batch's
    /// segments.
    ///
    /// # Errors
    /// [`Error::Empty`] if a graph has no nodes; [`Error::ShapeMismatch`] if
    /// `h` does not have one row per node of `seg` or the wrong width.
    fn forward(&self, tape: &Tape<B>, h: &Var<B>, seg: &Segments<B>) -> Result<Var<B>>;

    /// Output width for input width `in_channels`.
    fn out_channels(&self, in_channels: usize) -> usize;

    /// The readout over the nodes of `nodes` only: `G x out_channels(F)`,
    /// graph `g`'s row pooling the rows of `h` that `nodes` selects in
    /// graph `g` (the readout's own pooling, on those rows alone; its
    /// parameters are the same). [`MeanReadout`] gives the mean of the
    /// selected nodes' states, e.g. ASGCN's aspect-masked mean.
    ///
    /// # Errors
    /// As [`Readout::forward`]; [`Error::ShapeMismatch`] if `nodes` was
    /// made for a batch with other node offsets than `seg`'s.
    fn forward_nodes(
        &self,
        tape: &Tape<B>,
        h: &Var<B>,
        seg: &Segments<B>,
        nodes: &NodeSet<B>,
    ) -> Result<Var<B>> {
        node_set::forward_on_set(self, tape, h, seg, nodes)
    }
}

/// Checks that `h` has one row per node of `seg` and that no graph is empty.
pub(crate) fn check_batch<B: Backend>(
    name: &'static str,
    h: &Var<B>,
    seg: &Segments<B>,
) -> Result<()> {
    let (r, c) = h.shape();
    if r != seg.num_rows() {
        return Err(Error::shape(
            name,
            format!("{} rows (the batch's nodes)", seg.num_rows()),
            format!("({r}, {c})"),
        ));
    }
    if let Some(g) = seg.ptr().windows(2).position(|w| w[0] == w[1]) {
        return Err(Error::Empty(format!(
            "{name}: graph {g} of the batch has no nodes"
        )));
    }
    Ok(())
}

/// Checks that `h` is `in_channels` wide.
pub(crate) fn check_width<B: Backend>(
    name: &'static str,
    h: &Var<B>,
    in_channels: usize,
) -> Result<()> {
    let (r, c) = h.shape();
    if c != in_channels {
        return Err(Error::shape(
            name,
            format!("({r}, {in_channels})"),
            format!("({r}, {c})"),
        ));
    }
    Ok(())
}
