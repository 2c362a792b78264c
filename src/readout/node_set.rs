//! A set of nodes of every graph of a batch: the nodes a readout pools
//! when it should not pool all of them ([`Readout::forward_nodes`]).

use super::{Readout, check_batch};
use crate::autograd::{Index, Segments, Tape, Var};
use crate::backend::Backend;
use crate::error::{Error, Result};

/// Some nodes of each graph of a batch (at least one per graph, none
/// twice): the rows a readout pools instead of all of the graph's rows.
///
/// Aspect-based sentiment classification pools the states of the aspect's
/// tokens only (ASGCN's aspect mask); a [`crate::readout::MeanReadout`]
/// over a `NodeSet` holding each sentence's aspect tokens is that
/// aspect-mean readout. The set keeps the selected rows of the stacked node
/// states in batch order (graph by graph, each graph's nodes in the order
/// given) and the [`Segments`] of those rows, so any readout runs on them
/// unchanged.
///
/// ```
/// use hdgcn::autograd::{Segments, Tape};
/// use hdgcn::backend::Cpu;
/// use hdgcn::readout::{MeanReadout, NodeSet, Readout};
///
/// let cpu = Cpu::<f64>::new();
/// let tape = Tape::inference(&cpu);
/// // Two graphs: nodes 0..3 and 3..5 of the batch.
/// let h = tape.constant_array(&ndarray::arr2(&[[1.0], [2.0], [4.0], [8.0], [16.0]]));
/// let seg = Segments::new(&cpu, &[0, 3, 5])?;
/// // Graph 0 pools its nodes 1 and 2, graph 1 its node 0.
/// let nodes = NodeSet::new(&cpu, seg.ptr(), &[vec![1, 2], vec![0]])?;
/// let out = MeanReadout.forward_nodes(&tape, &h, &seg, &nodes)?.to_array();
/// assert_eq!(out, ndarray::arr2(&[[3.0], [8.0]]));
/// # Ok::<(), hdgcn::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct NodeSet<B: Backend> {
    /// Rows of the batch, graph by graph.
    rows: Index<B>,
    /// Segments over `rows` (one per graph).
    seg: Segments<B>,
    /// The batch's node offsets the set was made for.
    batch_ptr: Vec<usize>,
}

impl<B: Backend> NodeSet<B> {
    /// The set of `nodes[g]` (indices local to graph `g`, `0..n_g`) of
    /// every graph of a batch whose node offsets are `ptr` (graph `g` owns
    /// rows `ptr[g]..ptr[g + 1]`, as [`Segments::ptr`]).
    ///
    /// # Errors
    /// [`Error::ShapeMismatch`] unless there is one list per graph;
    /// [`Error::Empty`] naming the graph for an empty list;
    /// [`Error::NodeOutOfRange`] for a node past its graph;
    /// [`Error::InvalidConfig`] naming the graph and node for a node given
    /// twice, or offsets that do not start at 0 or decrease.
    pub fn new(backend: &B, ptr: &[usize], nodes: &[Vec<usize>]) -> Result<Self> {
        // Validates the batch's offsets as segments do.
        Segments::new(backend, ptr)?;
        let graphs = ptr.len() - 1;
        if nodes.len() != graphs {
            return Err(Error::shape(
                "NodeSet",
                format!("{graphs} node lists (one per graph)"),
                format!("{}", nodes.len()),
            ));
        }
        let mut rows = Vec::with_capacity(nodes.iter().map(Vec::len).sum());
        let mut sel_ptr = Vec::with_capacity(graphs + 1);
        sel_ptr.push(0);
        for (g, list) in nodes.iter().enumerate() {
            let (start, n) = (ptr[g], ptr[g + 1] - ptr[g]);
            if list.is_empty() {
                return Err(Error::Empty(format!(
                    "NodeSet: graph {g} of the batch has no selected nodes"
                )));
            }
            let mut seen = vec![false; n];
            for &v in list {
                if v >= n {
                    return Err(Error::NodeOutOfRange {
                        index: v,
                        num_nodes: n,
                    });
                }
                if std::mem::replace(&mut seen[v], true) {
                    return Err(Error::InvalidConfig(format!(
                        "NodeSet: node {v} of graph {g} is given twice"
                    )));
                }
                rows.push(start + v);
            }
            sel_ptr.push(rows.len());
        }
        Ok(NodeSet {
            rows: Index::new(backend, &rows)?,
            seg: Segments::new(backend, &sel_ptr)?,
            batch_ptr: ptr.to_vec(),
        })
    }

    /// The selected rows of the batch, graph by graph.
    pub fn rows(&self) -> &[usize] {
        self.rows.host()
    }

    /// The segments of the selected rows: graph `g`'s selected nodes are
    /// rows `ptr[g]..ptr[g + 1]` of [`NodeSet::select`]'s output.
    pub fn segments(&self) -> &Segments<B> {
        &self.seg
    }

    /// Number of graphs.
    pub fn num_graphs(&self) -> usize {
        self.seg.num_segments()
    }

    /// The selected rows of `h` (`N x F`, the batch's node states), stacked
    /// graph by graph; differentiable in `h` (the gradient of a row goes
    /// back to the node it was taken from).
    ///
    /// # Errors
    /// [`Error::ShapeMismatch`] unless `h` has one row per node of the
    /// batch the set was made for.
    pub fn select(&self, h: &Var<B>) -> Result<Var<B>> {
        let n = *self
            .batch_ptr
            .last()
            .expect("offsets hold at least 2 entries");
        let (r, c) = h.shape();
        if r != n {
            return Err(Error::shape(
                "NodeSet::select",
                format!("{n} rows (the batch's nodes)"),
                format!("({r}, {c})"),
            ));
        }
        h.gather_rows(&self.rows)
    }

    /// Checks that the set was made for the batch of `seg`.
    pub(crate) fn check_segments(&self, seg: &Segments<B>) -> Result<()> {
        if seg.ptr() != self.batch_ptr.as_slice() {
            return Err(Error::shape(
                "NodeSet",
                format!("node offsets {:?} (the set's batch)", self.batch_ptr),
                format!("{:?}", seg.ptr()),
            ));
        }
        Ok(())
    }
}

/// [`Readout::forward_nodes`]: `readout` over the rows of `nodes` only.
pub(crate) fn forward_on_set<B: Backend, R: Readout<B> + ?Sized>(
    readout: &R,
    tape: &Tape<B>,
    h: &Var<B>,
    seg: &Segments<B>,
    nodes: &NodeSet<B>,
) -> Result<Var<B>> {
    check_batch("readout over a node set", h, seg)?;
    nodes.check_segments(seg)?;
    readout.forward(tape, &nodes.select(h)?, nodes.segments())
}
