//! Message passing on [`Var`]s: gather the endpoints of every edge, compute
//! per-edge rows, and aggregate them at the targets (sum, mean, max, or a
//! softmax over each node's incoming edges), as PyG's `MessagePassing`.
//!
//! A [`MessagePassing`] is built once from an edge list, a [`Graph`] or a
//! [`DeviceGraph`](super::DeviceGraph) (which caches it): the edges are
//! sorted by target, so the incoming edges of node `i` are the contiguous
//! rows `ptr[i]..ptr[i + 1]` of every per-edge tensor, and aggregation is a
//! segment reduction over those rows. Everything is composed from existing
//! differentiable ops ([`Var::gather_rows`], [`Var::segment_reduce`],
//! [`Var::segment_softmax`]), so a layer written on it needs no backward
//! code and runs on every backend.

use std::sync::Arc;

use crate::autograd::{Index, Segments, Var};
use crate::backend::{Backend, SegmentReduce};
use crate::error::{Error, Result};
use crate::graph::Graph;

/// How self-loops of the input edges are treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SelfLoops {
    /// The edges as given (existing self-loops kept, none added).
    Keep,
    /// PyG's `remove_self_loops` then `add_self_loops`: every existing
    /// self-loop is dropped and exactly one is added per node, as
    /// `GATConv(add_self_loops=True)` does.
    Add,
}

/// The edges of a graph sorted by target, ready for message passing.
///
/// Per-edge tensors have one row per edge in this order (see
/// [`MessagePassing::sources`], [`MessagePassing::targets`]); node tensors
/// one row per node. Cheap to clone (shared).
///
/// ```
/// use hdgcn::autograd::Tape;
/// use hdgcn::backend::{Cpu, SegmentReduce};
/// use hdgcn::conv::{MessagePassing, SelfLoops};
/// let cpu = Cpu::<f64>::new();
/// // 0 -> 2, 1 -> 2, 2 -> 0; node 1 receives nothing.
/// let mp = MessagePassing::from_edges(&cpu, 3, &[(0, 2), (1, 2), (2, 0)], SelfLoops::Keep)?;
/// let tape = Tape::new(&cpu);
/// let x = tape.constant_array(&ndarray::arr2(&[[1.0], [2.0], [4.0]]));
/// // Sum of the source rows at each target.
/// let msgs = mp.gather_source(&x)?;
/// let out = mp.aggregate(&msgs, SegmentReduce::Sum)?;
/// assert_eq!(out.to_array(), ndarray::arr2(&[[4.0], [0.0], [3.0]]));
/// // Softmax over each node's incoming edges: node 2's two edges share 1.
/// let alpha = mp.softmax(&tape.constant_array(&ndarray::arr2(&[[5.0], [0.0], [0.0]])))?;
/// assert_eq!(alpha.to_array(), ndarray::arr2(&[[1.0], [0.5], [0.5]]));
/// # Ok::<(), hdgcn::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct MessagePassing<B: Backend> {
    inner: Arc<Inner<B>>,
}

#[derive(Debug)]
struct Inner<B: Backend> {
    num_nodes: usize,
    source: Index<B>,
    target: Index<B>,
    segments: Segments<B>,
}

impl<B: Backend> MessagePassing<B> {
    /// From directed edges `(source, target)` on `num_nodes` nodes. Every
    /// listed edge is one message (repeated edges are kept, as PyG keeps
    /// them); edges with the same target keep their order.
    ///
    /// # Errors
    /// [`Error::Empty`] if `num_nodes == 0`; [`Error::NodeOutOfRange`] for
    /// an endpoint `>= num_nodes`; [`Error::IndexOutOfRange`] for more
    /// nodes or edges than `u32` indices address.
    pub fn from_edges(
        backend: &B,
        num_nodes: usize,
        edges: &[(usize, usize)],
        self_loops: SelfLoops,
    ) -> Result<Self> {
        if num_nodes == 0 {
            return Err(Error::Empty(
                "message passing over a graph with 0 nodes".into(),
            ));
        }
        if let Some(&index) = edges
            .iter()
            .flat_map(|(s, d)| [s, d])
            .find(|&&i| i >= num_nodes)
        {
            return Err(Error::NodeOutOfRange { index, num_nodes });
        }
        let kept: Vec<(usize, usize)> = match self_loops {
            SelfLoops::Keep => edges.to_vec(),
            SelfLoops::Add => edges
                .iter()
                .copied()
                .filter(|(s, d)| s != d)
                .chain((0..num_nodes).map(|i| (i, i)))
                .collect(),
        };
        // Stable counting sort by target.
        let mut ptr = vec![0usize; num_nodes + 1];
        for &(_, d) in &kept {
            ptr[d + 1] += 1;
        }
        for i in 0..num_nodes {
            ptr[i + 1] += ptr[i];
        }
        let mut next = ptr.clone();
        let mut source = vec![0usize; kept.len()];
        let mut target = vec![0usize; kept.len()];
        for &(s, d) in &kept {
            let p = next[d];
            source[p] = s;
            target[p] = d;
            next[d] += 1;
        }
        Ok(MessagePassing {
            inner: Arc::new(Inner {
                num_nodes,
                source: Index::new(backend, &source)?,
                target: Index::new(backend, &target)?,
                segments: Segments::new(backend, &ptr)?,
            }),
        })
    }

    /// From a [`Graph`]: every stored adjacency entry `A[src][dst]` is one
    /// edge `src -> dst`; edge weights are ignored (as by PyG's `GATConv`).
    /// A `Graph` sums repeated edges into one entry, so build from an edge
    /// list ([`MessagePassing::from_edges`]) to keep multi-edges.
    ///
    /// # Errors
    /// As [`MessagePassing::from_edges`].
    pub fn from_graph(backend: &B, graph: &Graph, self_loops: SelfLoops) -> Result<Self> {
        let edges: Vec<(usize, usize)> =
            graph.adjacency().iter().map(|(_, (s, d))| (s, d)).collect();
        Self::from_edges(backend, graph.num_nodes(), &edges, self_loops)
    }

    /// Number of nodes.
    pub fn num_nodes(&self) -> usize {
        self.inner.num_nodes
    }

    /// Number of edges (messages), self-loops included.
    pub fn num_edges(&self) -> usize {
        self.inner.source.len()
    }

    /// The source node of every edge, in edge order.
    pub fn sources(&self) -> &[usize] {
        self.inner.source.host()
    }

    /// The target node of every edge, in edge order (non-decreasing).
    pub fn targets(&self) -> &[usize] {
        self.inner.target.host()
    }

    /// Edge offsets by target: the incoming edges of node `i` are rows
    /// `ptr[i]..ptr[i + 1]` (`num_nodes + 1` entries).
    pub fn ptr(&self) -> &[usize] {
        self.inner.segments.ptr()
    }

    /// The per-target segments of the edge rows (for segment ops not
    /// wrapped here).
    pub fn segments(&self) -> &Segments<B> {
        &self.inner.segments
    }

    fn check_nodes(&self, x: &Var<B>, op: &'static str) -> Result<()> {
        let (r, c) = x.shape();
        if r != self.num_nodes() {
            return Err(Error::shape(
                op,
                format!("{} rows (one per node)", self.num_nodes()),
                format!("({r}, {c})"),
            ));
        }
        Ok(())
    }

    fn check_edges(&self, x: &Var<B>, op: &'static str) -> Result<()> {
        let (r, c) = x.shape();
        if r != self.num_edges() {
            return Err(Error::shape(
                op,
                format!("{} rows (one per edge)", self.num_edges()),
                format!("({r}, {c})"),
            ));
        }
        Ok(())
    }

    /// The source row of every edge (`x_j` in PyG): `E x d` from `N x d`.
    ///
    /// # Errors
    /// [`Error::ShapeMismatch`] unless `x` has one row per node.
    pub fn gather_source(&self, x: &Var<B>) -> Result<Var<B>> {
        self.check_nodes(x, "MessagePassing::gather_source")?;
        x.gather_rows(&self.inner.source)
    }

    /// The target row of every edge (`x_i` in PyG): `E x d` from `N x d`.
    ///
    /// # Errors
    /// [`Error::ShapeMismatch`] unless `x` has one row per node.
    pub fn gather_target(&self, x: &Var<B>) -> Result<Var<B>> {
        self.check_nodes(x, "MessagePassing::gather_target")?;
        x.gather_rows(&self.inner.target)
    }

    /// Aggregates per-edge rows at their targets (`N x d` from `E x d`):
    /// the sum, mean or column-wise max of each node's incoming messages.
    /// A node without incoming edges gets zeros (as PyG's `scatter`).
    ///
    /// # Errors
    /// [`Error::ShapeMismatch`] unless `messages` has one row per edge.
    pub fn aggregate(&self, messages: &Var<B>, reduce: SegmentReduce) -> Result<Var<B>> {
        self.check_edges(messages, "MessagePassing::aggregate")?;
        messages.segment_reduce(&self.inner.segments, reduce)
    }

    /// Softmax of per-edge scores over each node's incoming edges, per
    /// column (so `E x heads` scores give one softmax per head), as PyG's
    /// `utils.softmax(src, index)`.
    ///
    /// # Errors
    /// [`Error::ShapeMismatch`] unless `scores` has one row per edge.
    pub fn softmax(&self, scores: &Var<B>) -> Result<Var<B>> {
        self.check_edges(scores, "MessagePassing::softmax")?;
        scores.segment_softmax(&self.inner.segments)
    }

    /// `aggregate(gather_source(x), reduce)`: each node's sum, mean or max
    /// of its in-neighbours' rows.
    ///
    /// # Errors
    /// As [`MessagePassing::gather_source`].
    pub fn propagate(&self, x: &Var<B>, reduce: SegmentReduce) -> Result<Var<B>> {
        self.aggregate(&self.gather_source(x)?, reduce)
    }
}
