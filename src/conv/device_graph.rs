//! A graph (or batch of graphs) on a backend, with its operators cached.

use std::cell::RefCell;
use std::collections::HashMap;

use super::message_passing::{MessagePassing, SelfLoops};
use crate::autograd::{Segments, SparseMatrix};
use crate::backend::Backend;
use crate::error::{Error, Result};
use crate::graph::{Batch, Graph, LambdaMax, Normalization};

/// A graph, or a block-diagonal batch of graphs, ready for convolution on
/// a backend. Operators (GCN operator, scaled Laplacians) are built on
/// first use and cached, like PyG's `cached=True`; layers of any crate may
/// cache their own operators with [`DeviceGraph::operator`].
#[derive(Debug)]
pub struct DeviceGraph<B: Backend> {
    backend: B,
    /// The host graph; `None` once [`DeviceGraph::release_host`] gave it back.
    graph: Option<Graph>,
    num_nodes: usize,
    /// The batch structure; `None` for a single graph.
    batch: Option<Batch>,
    ptr: Option<Vec<usize>>,
    segments: Option<Segments<B>>,
    cache: RefCell<HashMap<String, SparseMatrix<B>>>,
    lambdas: RefCell<HashMap<String, Vec<f64>>>,
    edges: RefCell<HashMap<SelfLoops, MessagePassing<B>>>,
}

fn lambda_key(norm: Normalization, lm: &LambdaMax) -> String {
    format!("{norm:?}/{lm:?}")
}

impl<B: Backend> DeviceGraph<B> {
    /// One graph.
    pub fn new(backend: &B, graph: Graph) -> Self {
        DeviceGraph {
            backend: backend.clone(),
            num_nodes: graph.num_nodes(),
            graph: Some(graph),
            batch: None,
            ptr: None,
            segments: None,
            cache: RefCell::new(HashMap::new()),
            lambdas: RefCell::new(HashMap::new()),
            edges: RefCell::new(HashMap::new()),
        }
    }

    /// A batch of graphs (block-diagonal), with per-graph segments.
    pub fn from_batch(backend: &B, batch: &Batch) -> Result<Self> {
        let segments = Segments::new(backend, batch.ptr())?;
        Ok(DeviceGraph {
            backend: backend.clone(),
            graph: Some(batch.graph().clone()),
            num_nodes: batch.graph().num_nodes(),
            batch: Some(batch.clone()),
            ptr: Some(batch.ptr().to_vec()),
            segments: Some(segments),
            cache: RefCell::new(HashMap::new()),
            lambdas: RefCell::new(HashMap::new()),
            edges: RefCell::new(HashMap::new()),
        })
    }

    /// The backend.
    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// The host graph (block-diagonal for batches).
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] once [`DeviceGraph::release_host`] has
    /// given it back.
    pub fn graph(&self) -> Result<&Graph> {
        self.graph.as_ref().ok_or_else(|| {
            Error::InvalidConfig(
                "DeviceGraph: the host graph was released (release_host); build every operator \
                 the model uses before releasing it"
                    .into(),
            )
        })
    }

    /// Gives back the host graph (and a batch's graphs), keeping what is
    /// on the backend: the operators, λ_max values and message-passing
    /// edges cached so far, the segments and the node count. On a graph
    /// near the memory limit this frees the host adjacency (16 bytes a
    /// stored entry) once the model's operators are built; build them
    /// first (e.g. [`DeviceGraph::gcn_operator`]), because anything not yet
    /// cached is then an error ([`DeviceGraph::graph`]). `None` if it was
    /// already released.
    ///
    /// ```
    /// use hdgcn::prelude::*;
    ///
    /// let cpu = Cpu::<f32>::new();
    /// let mut g = DeviceGraph::new(&cpu, Graph::from_edges(3, &[(0, 1), (1, 2)])?);
    /// g.gcn_operator()?; // built and cached while the host graph is there
    /// let host = g.release_host();
    /// assert_eq!(host.map(|h| h.num_nodes()), Some(3));
    /// assert!(g.gcn_operator().is_ok()); // from the cache
    /// assert!(g.graph().is_err());
    /// # Ok::<(), hdgcn::Error>(())
    /// ```
    pub fn release_host(&mut self) -> Option<Graph> {
        self.batch = None;
        self.graph.take()
    }

    /// Number of nodes (all graphs of a batch together).
    pub fn num_nodes(&self) -> usize {
        self.num_nodes
    }

    /// Per-graph segments for batches.
    pub fn segments(&self) -> Option<&Segments<B>> {
        self.segments.as_ref()
    }

    /// Segments for batches, or one segment covering all nodes.
    pub fn segments_or_whole(&self) -> Result<Segments<B>> {
        match &self.segments {
            Some(s) => Ok(s.clone()),
            None => Segments::new(&self.backend, &[0, self.num_nodes()]),
        }
    }

    /// Number of graphs (1 for a single graph).
    pub fn num_graphs(&self) -> usize {
        self.ptr.as_ref().map_or(1, |p| p.len() - 1)
    }

    /// Segment offsets (`[0, N]` for a single graph).
    pub fn ptr(&self) -> Vec<usize> {
        self.ptr
            .clone()
            .unwrap_or_else(|| vec![0, self.num_nodes()])
    }

    /// A cached operator: built once by `build` from the host graph,
    /// uploaded, and returned from the cache afterwards.
    pub fn operator(
        &self,
        key: &str,
        build: impl FnOnce(&Graph) -> Result<sprs::CsMat<f64>>,
    ) -> Result<SparseMatrix<B>> {
        if let Some(m) = self.cache.borrow().get(key) {
            return Ok(m.clone());
        }
        let host = build(self.graph()?)?;
        let n = self.num_nodes();
        if host.shape() != (n, n) {
            return Err(Error::shape(
                "operator",
                format!("({n}, {n})"),
                format!("{:?}", host.shape()),
            ));
        }
        let m = SparseMatrix::from_csmat(&self.backend, &host)?;
        self.cache.borrow_mut().insert(key.to_string(), m.clone());
        Ok(m)
    }

    /// The graph's edges sorted by target for message passing (every
    /// stored adjacency entry one edge, weights ignored), built on first
    /// use and cached per self-loop rule.
    ///
    /// # Errors
    /// As [`MessagePassing::from_graph`].
    pub fn message_passing(&self, self_loops: SelfLoops) -> Result<MessagePassing<B>> {
        if let Some(m) = self.edges.borrow().get(&self_loops) {
            return Ok(m.clone());
        }
        let m = MessagePassing::from_graph(&self.backend, self.graph()?, self_loops)?;
        self.edges.borrow_mut().insert(self_loops, m.clone());
        Ok(m)
    }

    /// The GCN operator `D̂^{-1/2}(A + I)D̂^{-1/2}` (PyG `gcn_norm`).
    pub fn gcn_operator(&self) -> Result<SparseMatrix<B>> {
        self.operator("gcn", |g| g.gcn_operator())
    }

    /// λ_max per graph for a normalisation and a λ_max rule (cached).
    pub fn lambda_max(&self, norm: Normalization, lambda: &LambdaMax) -> Result<Vec<f64>> {
        let key = lambda_key(norm, lambda);
        if let Some(v) = self.lambdas.borrow().get(&key) {
            return Ok(v.clone());
        }
        let v = match &self.batch {
            None => vec![self.graph()?.lambda_max(norm, lambda)?],
            Some(b) => b.lambda_max(norm, lambda)?,
        };
        self.lambdas.borrow_mut().insert(key, v.clone());
        Ok(v)
    }

    /// The scaled Laplacian `2L/λ_max - I` (per-graph λ_max for batches),
    /// exactly the operator PyG's `ChebConv` propagates.
    pub fn scaled_laplacian(
        &self,
        norm: Normalization,
        lambda: &LambdaMax,
    ) -> Result<SparseMatrix<B>> {
        let lm = self.lambda_max(norm, lambda)?;
        self.scaled_laplacian_with(norm, &lm)
    }

    /// The scaled Laplacian with explicit λ_max values (one, or one per graph).
    pub fn scaled_laplacian_with(
        &self,
        norm: Normalization,
        lambda_max: &[f64],
    ) -> Result<SparseMatrix<B>> {
        let key = format!("cheb/{norm:?}/{lambda_max:?}");
        if let Some(m) = self.cache.borrow().get(&key) {
            return Ok(m.clone());
        }
        let g = self.num_graphs();
        if lambda_max.len() != g && lambda_max.len() != 1 {
            return Err(Error::shape(
                "lambda_max",
                format!("1 or {g} values"),
                format!("{}", lambda_max.len()),
            ));
        }
        let host = match &self.batch {
            None => self.graph()?.scaled_laplacian(norm, lambda_max[0])?,
            Some(b) => {
                let per: Vec<f64> = if lambda_max.len() == 1 {
                    vec![lambda_max[0]; g]
                } else {
                    lambda_max.to_vec()
                };
                b.scaled_laplacian(norm, &per)?
            }
        };
        let m = SparseMatrix::from_csmat(&self.backend, &host)?;
        self.cache.borrow_mut().insert(key, m.clone());
        Ok(m)
    }
}
