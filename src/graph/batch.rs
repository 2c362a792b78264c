//! Block-diagonal batches of graphs (PyG's `Batch`).

use super::ops::check_lambda;
use super::{Graph, LambdaMax, Normalization, csr_from_triplets};
use crate::{Error, Result};
use sprs::CsMat;

/// Several graphs as one block-diagonal graph: graph `g` owns nodes
/// `ptr[g]..ptr[g + 1]`, and `node_to_graph[v]` is the graph of node `v`
/// (PyG's `batch` vector).
#[derive(Debug, Clone, PartialEq)]
pub struct Batch {
    graph: Graph,
    node_to_graph: Vec<usize>,
    ptr: Vec<usize>,
}

impl Batch {
    /// Concatenates `graphs` block-diagonally, in order. Zero-node graphs
    /// ([`Graph::empty`]) are allowed and give empty segments.
    ///
    /// # Errors
    /// [`Error::Empty`] if `graphs` is empty or has no nodes in total.
    pub fn new(graphs: &[Graph]) -> Result<Batch> {
        if graphs.is_empty() {
            return Err(Error::Empty("batch of 0 graphs".into()));
        }
        let mut ptr = Vec::with_capacity(graphs.len() + 1);
        ptr.push(0);
        let mut node_to_graph = Vec::new();
        let mut triplets = Vec::with_capacity(graphs.iter().map(Graph::num_edges).sum());
        for (g, graph) in graphs.iter().enumerate() {
            let off = *ptr.last().expect("ptr starts with 0");
            for (&w, (s, d)) in graph.adjacency().iter() {
                triplets.push((s + off, d + off, w));
            }
            node_to_graph.extend(std::iter::repeat_n(g, graph.num_nodes()));
            ptr.push(off + graph.num_nodes());
        }
        let n = *ptr.last().expect("non-empty");
        if n == 0 {
            return Err(Error::Empty(
                "batch whose graphs have 0 nodes in total".into(),
            ));
        }
        let graph = Graph {
            num_nodes: n,
            adjacency: csr_from_triplets(n, n, triplets),
        };
        Ok(Batch {
            graph,
            node_to_graph,
            ptr,
        })
    }

    /// The block-diagonal graph.
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// For each node, the index of the graph it belongs to.
    pub fn node_to_graph(&self) -> &[usize] {
        &self.node_to_graph
    }

    /// Node offsets, length `num_graphs() + 1`: graph `g` is
    /// `ptr[g]..ptr[g + 1]`.
    pub fn ptr(&self) -> &[usize] {
        &self.ptr
    }

    /// Number of graphs in the batch.
    pub fn num_graphs(&self) -> usize {
        self.ptr.len() - 1
    }

    /// Graph `g` of the batch, as a standalone graph ([`Graph::empty`] for
    /// a zero-node segment).
    ///
    /// # Errors
    /// [`Error::IndexOutOfRange`] if `g >= num_graphs()`.
    pub fn get(&self, g: usize) -> Result<Graph> {
        if g >= self.num_graphs() {
            return Err(Error::IndexOutOfRange {
                what: "graphs of a batch",
                index: g,
                len: self.num_graphs(),
            });
        }
        let (lo, hi) = (self.ptr[g], self.ptr[g + 1]);
        if lo == hi {
            return Ok(Graph::empty());
        }
        let block = self.graph.adjacency().slice_outer(lo..hi);
        let triplets = block.iter().map(|(&w, (s, d))| (s, d - lo, w)).collect();
        Ok(Graph {
            num_nodes: hi - lo,
            adjacency: csr_from_triplets(hi - lo, hi - lo, triplets),
        })
    }

    /// `λ_max` of each graph's Laplacian, by `method` (see
    /// [`Graph::lambda_max`]). A zero-node graph gets the `Fixed` value, or
    /// 0 for `Estimate`/`Exact` (its block of the scaled Laplacian is empty,
    /// so the value is never used).
    ///
    /// # Errors
    /// As [`Graph::lambda_max`] for any graph of the batch.
    pub fn lambda_max(&self, norm: Normalization, method: &LambdaMax) -> Result<Vec<f64>> {
        (0..self.num_graphs())
            .map(|g| {
                let graph = self.get(g)?;
                if graph.num_nodes() > 0 {
                    graph.lambda_max(norm, method)
                } else if let LambdaMax::Fixed(v) = *method {
                    check_lambda(v)?;
                    Ok(v)
                } else {
                    Ok(0.0)
                }
            })
            .collect()
    }

    /// The block-diagonal scaled Laplacian: block `g` is
    /// `graph_g.scaled_laplacian(norm, lambda_max[g])` (PyG's ChebConv with
    /// `lambda_max[batch[src]]`).
    ///
    /// # Errors
    /// [`Error::ShapeMismatch`] if `lambda_max.len() != num_graphs()`;
    /// [`Error::InvalidConfig`] if the value of a non-empty graph is not finite
    /// and `> 0`; otherwise as [`Graph::laplacian`].
    pub fn scaled_laplacian(&self, norm: Normalization, lambda_max: &[f64]) -> Result<CsMat<f64>> {
        if lambda_max.len() != self.num_graphs() {
            return Err(Error::shape(
                "Batch::scaled_laplacian lambda_max",
                format!("{} values (one per graph)", self.num_graphs()),
                format!("{} values", lambda_max.len()),
            ));
        }
        for (g, &l) in lambda_max.iter().enumerate() {
            if self.ptr[g] < self.ptr[g + 1] {
                check_lambda(l)?;
            }
        }
        self.graph
            .scaled_laplacian_per_node(norm, |v| lambda_max[self.node_to_graph[v]])
    }
}
