//! Host-side graphs and the normalised operators of PyTorch Geometric.
//!
//! # Conventions
//!
//! * **Edge direction.** A [`Graph`] stores its adjacency `A` as a CSR
//!   matrix with `A[src][dst] = w` (row = source, column = target), exactly
//!   the `edge_index = [src; dst]` order of PyTorch Geometric. Duplicate edges
//!   are summed and column indices are sorted within each row.
//! * **Operators** ([`Graph::gcn_operator`], [`Graph::laplacian`],
//!   [`Graph::scaled_laplacian`]) are returned in *propagation form*: a CSR
//!   matrix `P` such that the layer output is `out = P · X` (row `i` of `P` is
//!   the target node `i`). PyG sends messages from `src` to `dst`, so `P` is
//!   the transpose of the PyG edge-weight matrix indexed `[src][dst]`; for a
//!   symmetric graph the two coincide.
//! * **Degrees.** [`Graph::degrees`] and the GCN operator sum weights at the
//!   target node (in-degree, column sums of `A`), as PyG's `gcn_norm`. The
//!   Laplacians follow PyG's `get_laplacian`, which sums at the source node
//!   (out-degree, row sums of `A`). For a symmetric graph both agree.
//! * **Empty graphs.** Constructors reject `num_nodes == 0` with
//!   [`Error::Empty`]; the only zero-node graph is [`Graph::empty`], meant as
//!   a segment inside a [`Batch`]. Operators on it return [`Error::Empty`].

mod batch;
pub mod generate;
mod lambda;
mod ops;
pub mod partition;
pub mod sampling;
#[cfg(feature = "lapack")]
pub mod spectral;

pub use batch::Batch;
pub use lambda::LambdaMax;
pub use ops::Normalization;

use crate::{Error, Result};
use sprs::CsMat;

/// A graph on `num_nodes` nodes with non-zero-pattern adjacency `A[src][dst] = w`.
///
/// Invariants: the adjacency is square CSR, indices sorted within rows,
/// no duplicate entries, every weight finite.
#[derive(Debug, Clone, PartialEq)]
pub struct Graph {
    num_nodes: usize,
    adjacency: CsMat<f64>,
}

impl Graph {
    /// The graph with no nodes. It is only useful as a (zero-length) segment
    /// of a [`Batch`]; every operator on it returns [`Error::Empty`].
    pub fn empty() -> Graph {
        Graph {
            num_nodes: 0,
            adjacency: CsMat::zero((0, 0)),
        }
    }

    /// Builds a graph from directed edges `(src, dst)`, each of weight 1.
    ///
    /// The edge `(src, dst)` is stored as `A[src][dst]`; repeated edges are
    /// summed (two copies give weight 2). Undirected graphs must list both
    /// directions (or call [`Graph::symmetrized`]).
    ///
    /// # Errors
    /// [`Error::Empty`] if `num_nodes == 0`; [`Error::InvalidConfig`] if
    /// `num_nodes` is too large to allocate ([`Error::OverBudget`] when over
    /// the memory budget); [`Error::NodeOutOfRange`] if an
    /// endpoint is `>= num_nodes`.
    pub fn from_edges(num_nodes: usize, edges: &[(usize, usize)]) -> Result<Graph> {
        let triplets: Vec<(usize, usize, f64)> = edges.iter().map(|&(s, d)| (s, d, 1.0)).collect();
        Graph::from_weighted_edges(num_nodes, &triplets)
    }

    /// Builds a graph from weighted directed edges `(src, dst, w)`, stored as
    /// `A[src][dst] = w`. Repeated edges are summed. Explicit zero weights are
    /// kept as stored entries (PyG keeps such edges too).
    ///
    /// # Errors
    /// [`Error::Empty`] if `num_nodes == 0`; [`Error::InvalidConfig`] if
    /// `num_nodes` is too large for its row pointers to be allocated
    /// ([`Error::OverBudget`] when over the memory budget);
    /// [`Error::NodeOutOfRange`] for an endpoint `>= num_nodes`;
    /// [`Error::NonFinite`] for a NaN or infinite weight (or a sum of
    /// duplicates that overflows).
    pub fn from_weighted_edges(num_nodes: usize, edges: &[(usize, usize, f64)]) -> Result<Graph> {
        if num_nodes == 0 {
            return Err(Error::Empty("graph with 0 nodes".into()));
        }
        // The CSR row pointers take `num_nodes + 1` words.
        crate::limits::check_elements::<usize>(
            format_args!("a graph of {num_nodes} nodes"),
            num_nodes.checked_add(1),
        )?;
        for &(s, d, w) in edges {
            for idx in [s, d] {
                if idx >= num_nodes {
                    return Err(Error::NodeOutOfRange {
                        index: idx,
                        num_nodes,
                    });
                }
            }
            if !w.is_finite() {
                return Err(Error::NonFinite {
                    what: format!("weight of edge ({s}, {d})"),
                    value: w,
                });
            }
        }
        let adjacency = csr_from_triplets(num_nodes, num_nodes, edges.to_vec());
        if let Some((&value, (s, d))) = adjacency.iter().find(|(w, _)| !w.is_finite()) {
            return Err(Error::NonFinite {
                what: format!("summed weight of repeated edge ({s}, {d})"),
                value,
            });
        }
        Ok(Graph {
            num_nodes,
            adjacency,
        })
    }

    /// Builds a graph from a square sparse matrix `m[src][dst] = w` (CSR or
    /// CSC; CSC is converted). Every stored entry becomes an edge, explicit
    /// zeros included; duplicate entries are summed.
    ///
    /// # Errors
    /// [`Error::ShapeMismatch`] if `m` is not square, [`Error::Empty`] if it
    /// is 0 x 0, [`Error::NonFinite`] for a NaN or infinite entry.
    pub fn from_csmat(m: &CsMat<f64>) -> Result<Graph> {
        let (r, c) = m.shape();
        if r != c {
            return Err(Error::shape(
                "Graph::from_csmat",
                format!("square matrix ({r}, {r})"),
                format!("({r}, {c})"),
            ));
        }
        let triplets: Vec<(usize, usize, f64)> =
            m.iter().map(|(&w, (row, col))| (row, col, w)).collect();
        Graph::from_weighted_edges(r, &triplets)
    }

    /// Builds a graph from a dense square adjacency `a[src][dst] = w`. Zero
    /// entries are not edges.
    ///
    /// # Errors
    /// As [`Graph::from_csmat`].
    pub fn from_dense(a: ndarray::ArrayView2<f64>) -> Result<Graph> {
        let (r, c) = a.dim();
        if r != c {
            return Err(Error::shape(
                "Graph::from_dense",
                format!("square matrix ({r}, {r})"),
                format!("({r}, {c})"),
            ));
        }
        let triplets: Vec<(usize, usize, f64)> = a
            .indexed_iter()
            .filter(|&(_, &w)| w != 0.0)
            .map(|((i, j), &w)| (i, j, w))
            .collect();
        Graph::from_weighted_edges(r, &triplets)
    }

    /// Builds a graph from any petgraph graph (`&Graph`, `&StableGraph`,
    /// `&GraphMap`, ...), with edge weights given by `weight(edge_ref)`.
    ///
    /// Nodes are numbered `0..n` in the order of `node_identifiers()` (for a
    /// `StableGraph` with removed nodes this compacts the holes). A directed
    /// edge `a -> b` becomes `A[a][b]`; an undirected edge `{a, b}` yields both
    /// `A[a][b]` and `A[b][a]`, and an undirected self-loop yields one entry
    /// (as PyG's `from_networkx`). Parallel edges are summed.
    ///
    /// # Errors
    /// [`Error::Empty`] for a graph without nodes, [`Error::NonFinite`] for a
    /// NaN or infinite weight.
    pub fn from_petgraph<G, F>(g: G, mut weight: F) -> Result<Graph>
    where
        G: petgraph::visit::IntoEdgeReferences
            + petgraph::visit::IntoNodeIdentifiers
            + petgraph::visit::NodeIndexable
            + petgraph::visit::GraphProp,
        F: FnMut(G::EdgeRef) -> f64,
    {
        use petgraph::visit::EdgeRef;
        let mut position = vec![usize::MAX; g.node_bound()];
        let mut n = 0;
        for id in g.node_identifiers() {
            position[g.to_index(id)] = n;
            n += 1;
        }
        let directed = g.is_directed();
        let mut triplets = Vec::new();
        for e in g.edge_references() {
            let s = position[g.to_index(e.source())];
            let d = position[g.to_index(e.target())];
            let w = weight(e);
            triplets.push((s, d, w));
            if !directed && s != d {
                triplets.push((d, s, w));
            }
        }
        Graph::from_weighted_edges(n, &triplets)
    }

    /// As [`Graph::from_petgraph`] with every edge of weight 1.
    ///
    /// # Errors
    /// [`Error::Empty`] for a graph without nodes.
    pub fn from_petgraph_unweighted<G>(g: G) -> Result<Graph>
    where
        G: petgraph::visit::IntoEdgeReferences
            + petgraph::visit::IntoNodeIdentifiers
            + petgraph::visit::NodeIndexable
            + petgraph::visit::GraphProp,
    {
        Graph::from_petgraph(g, |_| 1.0)
    }

    /// The undirected version `A + Aᵀ`, exactly PyG's `to_undirected` with
    /// its default `reduce="add"`: the edge list is concatenated with its
    /// reverse and duplicates are summed. An edge present in one direction
    /// only gets its weight in both directions; an edge present both ways
    /// gets `A[i][j] + A[j][i]` in both (so a symmetric graph has its weights
    /// doubled), and self-loops are doubled. A sum that overflows is clamped
    /// to `±f64::MAX` so that weights stay finite.
    pub fn symmetrized(&self) -> Graph {
        let mut triplets = Vec::with_capacity(2 * self.num_edges());
        for (&w, (s, d)) in self.adjacency.iter() {
            triplets.push((s, d, w));
            triplets.push((d, s, w));
        }
        let mut adjacency = csr_from_triplets(self.num_nodes, self.num_nodes, triplets);
        // Keep the finite-weight invariant if `w + w'` overflows.
        adjacency.map_inplace(|&w| w.clamp(-f64::MAX, f64::MAX));
        Graph {
            num_nodes: self.num_nodes,
            adjacency,
        }
    }

    /// The subgraph induced by `nodes`, relabelled in the order given: node
    /// `i` of the result is node `nodes[i]` of `self`, and every edge between
    /// two kept nodes is kept with its weight (PyG's
    /// `subgraph(subset, edge_index, relabel_nodes=True)`).
    ///
    /// ```
    /// use hdgcn::graph::Graph;
    ///
    /// // The path 0 - 1 - 2 - 3; keep 3, 2 and 0.
    /// let path = Graph::from_edges(4, &[(0, 1), (1, 0), (1, 2), (2, 1), (2, 3), (3, 2)])?;
    /// let sub = path.subgraph(&[3, 2, 0])?;
    /// assert_eq!(sub.num_nodes(), 3);
    /// // Only the edge 3 - 2 survives, as 0 - 1 in the new labels.
    /// let edges: Vec<_> = sub.adjacency().iter().map(|(_, e)| e).collect();
    /// assert_eq!(edges, [(0, 1), (1, 0)]);
    /// # Ok::<(), hdgcn::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::Empty`] if `nodes` is empty; [`Error::NodeOutOfRange`] for a
    /// node `>= num_nodes()`; [`Error::InvalidConfig`] for a node listed twice.
    pub fn subgraph(&self, nodes: &[usize]) -> Result<Graph> {
        if nodes.is_empty() {
            return Err(Error::Empty("subgraph on 0 nodes".into()));
        }
        let mut new_id = vec![usize::MAX; self.num_nodes];
        for (i, &v) in nodes.iter().enumerate() {
            let slot = new_id.get_mut(v).ok_or(Error::NodeOutOfRange {
                index: v,
                num_nodes: self.num_nodes,
            })?;
            if *slot != usize::MAX {
                return Err(Error::InvalidConfig(format!(
                    "subgraph lists node {v} twice (positions {} and {i})",
                    *slot
                )));
            }
            *slot = i;
        }
        let mut triplets = Vec::new();
        for (i, &v) in nodes.iter().enumerate() {
            let row = self.adjacency.outer_view(v).expect("v < num_nodes");
            for (d, &w) in row.iter() {
                if new_id[d] != usize::MAX {
                    triplets.push((i, new_id[d], w));
                }
            }
        }
        Ok(Graph {
            num_nodes: nodes.len(),
            adjacency: csr_from_triplets(nodes.len(), nodes.len(), triplets),
        })
    }

    /// Number of nodes.
    pub fn num_nodes(&self) -> usize {
        self.num_nodes
    }

    /// Number of stored (directed) edges, self-loops included; an undirected
    /// edge stored both ways counts twice.
    pub fn num_edges(&self) -> usize {
        self.adjacency.nnz()
    }

    /// The adjacency as CSR, `A[src][dst] = w`.
    pub fn adjacency(&self) -> &CsMat<f64> {
        &self.adjacency
    }

    /// Weighted in-degree of each node: `deg[i] = Σ_src A[src][i]` (sum at the
    /// target node, as PyG's `gcn_norm`/`degree(col)`), existing self-loops
    /// included. For a symmetric graph this equals the row sums.
    pub fn degrees(&self) -> Vec<f64> {
        let mut deg = vec![0.0; self.num_nodes];
        for (&w, (_, d)) in self.adjacency.iter() {
            deg[d] += w;
        }
        deg
    }

    /// Whether `A == Aᵀ` exactly (same pattern and bit-equal weights).
    pub fn is_symmetric(&self) -> bool {
        let t = self.adjacency.transpose_view().to_csr();
        t.indptr().raw_storage() == self.adjacency.indptr().raw_storage()
            && t.indices() == self.adjacency.indices()
            && t.data() == self.adjacency.data()
    }

    /// Whether any node has a stored self-loop.
    pub fn has_self_loops(&self) -> bool {
        self.adjacency.iter().any(|(_, (s, d))| s == d)
    }

    /// Checks that no weight is negative.
    ///
    /// # Errors
    /// [`Error::NegativeWeight`] naming the first offending edge (in row
    /// order) and carrying `why`.
    pub fn validate_non_negative(&self, why: &'static str) -> Result<()> {
        match self.adjacency.iter().find(|(w, _)| **w < 0.0) {
            Some((&weight, (src, dst))) => Err(Error::NegativeWeight {
                src,
                dst,
                weight,
                why,
            }),
            None => Ok(()),
        }
    }

    pub(crate) fn require_nodes(&self, what: &str) -> Result<()> {
        if self.num_nodes == 0 {
            Err(Error::Empty(format!("{what} of a graph with 0 nodes")))
        } else {
            Ok(())
        }
    }
}

/// Builds a CSR matrix from `(row, col, value)` triplets, summing duplicates
/// (in input order) and sorting indices within rows. Indices must be in range.
pub(crate) fn csr_from_triplets(
    nrows: usize,
    ncols: usize,
    mut triplets: Vec<(usize, usize, f64)>,
) -> CsMat<f64> {
    // Stable sort keeps the input order among duplicates, so sums are
    // accumulated in edge-list order (as a scatter-add would).
    triplets.sort_by_key(|&(r, c, _)| (r, c));
    let mut indptr = vec![0usize; nrows + 1];
    let mut indices: Vec<usize> = Vec::with_capacity(triplets.len());
    let mut data: Vec<f64> = Vec::with_capacity(triplets.len());
    let mut last: Option<(usize, usize)> = None;
    for (r, c, w) in triplets {
        if last == Some((r, c)) {
            *data.last_mut().expect("a previous entry exists") += w;
        } else {
            indices.push(c);
            data.push(w);
            indptr[r + 1] += 1;
            last = Some((r, c));
        }
    }
    for r in 0..nrows {
        indptr[r + 1] += indptr[r];
    }
    // Sorted, deduplicated, in-range indices by construction.
    CsMat::try_new((nrows, ncols), indptr, indices, data)
        .unwrap_or_else(|(_, _, _, e)| unreachable!("structure built sorted and in range: {e}"))
}
