//! Graph partitions and Cluster-GCN batches (Chiang et al., 2019;
//! PyTorch Geometric's `ClusterData` and `ClusterLoader`).
//!
//! A partition gives every node a part `0..num_parts`.
//! [`metis_partition`] computes one with METIS' multilevel k-way method
//! (as PyG's `ClusterData`, through its `metis` cargo feature); any other
//! partition works too ([`check_partition`]). [`ClusterLoader`] groups the
//! parts, `clusters_per_batch` at a time in an order reshuffled every
//! epoch, and hands out the subgraph induced by each group's nodes: every
//! edge between two nodes of the group, those between its clusters
//! included (PyG's `ClusterLoader`). The batch is a [`SampledSubgraph`]
//! whose first nodes are those the loss is computed on (the training nodes
//! of the group), so [`SampledNodeStep`](crate::train::SampledNodeStep)
//! trains on it as on a neighbour-sampled batch. A group without any
//! scored node is skipped (its loss would be a mean over nothing).
//!
//! ```
//! use hdgcn::graph::Graph;
//! use hdgcn::graph::partition::{ClusterLoader, ClusterLoaderConfig};
//! use hdgcn::train::Loader;
//!
//! // A path 0 - 1 - 2 - 3 - 4 - 5 in three parts {0, 1}, {2, 3}, {4, 5}.
//! let mut edges = vec![];
//! for i in 0..5 {
//!     edges.extend([(i, i + 1), (i + 1, i)]);
//! }
//! let g = Graph::from_edges(6, &edges)?;
//! let cfg = ClusterLoaderConfig { clusters_per_batch: 2, shuffle: false, seed: 0 };
//! let mut loader = ClusterLoader::new(&g, &[0, 0, 1, 1, 2, 2], 3, &[true; 6], cfg)?;
//! let batches: Vec<_> = loader.epoch(0).collect::<hdgcn::Result<_>>()?;
//! assert_eq!(batches.len(), 2);
//! assert_eq!(batches[0].nodes(), &[0, 1, 2, 3]);
//! // The edge 1 - 2 joins the two clusters of the batch: kept.
//! assert_eq!(batches[0].edges().len(), 6);
//! # Ok::<(), hdgcn::Error>(())
//! ```

use rayon::prelude::*;

use super::Graph;
use super::sampling::{SampledSubgraph, stream, windowed};
use crate::error::{Error, Result};

/// Checks a partition of `num_nodes` nodes into `num_parts` parts: one
/// part per node, every part `< num_parts`, no more parts than nodes.
///
/// # Errors
/// [`Error::InvalidConfig`] for zero parts or more parts than nodes;
/// [`Error::ShapeMismatch`] for a partition of another length;
/// [`Error::IndexOutOfRange`] for a part `>= num_parts`.
pub fn check_partition(num_nodes: usize, parts: &[usize], num_parts: usize) -> Result<()> {
    check_num_parts(num_nodes, num_parts)?;
    if parts.len() != num_nodes {
        return Err(Error::shape(
            "partition",
            format!("one part per node ({num_nodes})"),
            format!("{} entries", parts.len()),
        ));
    }
    if let Some(&p) = parts.iter().find(|&&p| p >= num_parts) {
        return Err(Error::IndexOutOfRange {
            what: "part of a partition",
            index: p,
            len: num_parts,
        });
    }
    Ok(())
}

fn check_num_parts(num_nodes: usize, num_parts: usize) -> Result<()> {
    if num_parts == 0 {
        return Err(Error::InvalidConfig(
            "a partition needs at least 1 part, got 0".into(),
        ));
    }
    if num_parts > num_nodes {
        return Err(Error::InvalidConfig(format!(
            "{num_parts} parts is more parts than nodes ({num_nodes})"
        )));
    }
    Ok(())
}

/// The undirected simple graph METIS takes: `A + Aᵀ` without self-loops
/// or repeats, as CSR `(xadj, adjncy)` of `metis::Idx`.
#[cfg(feature = "metis")]
fn metis_csr(graph: &Graph) -> Result<(Vec<metis::Idx>, Vec<metis::Idx>)> {
    let n = graph.num_nodes();
    let too_big = || {
        Error::InvalidConfig(format!(
            "a graph of {n} nodes and {} edges is too large for METIS' 32-bit indices",
            graph.num_edges()
        ))
    };
    let a = graph.adjacency();
    let mut lists: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (_, (s, d)) in a.iter() {
        if s != d {
            lists[s].push(d);
            lists[d].push(s);
        }
    }
    lists.par_iter_mut().for_each(|l| {
        l.sort_unstable();
        l.dedup();
    });
    let total: usize = lists.iter().map(Vec::len).sum();
    metis::Idx::try_from(total).map_err(|_| too_big())?;
    let mut xadj = Vec::with_capacity(n + 1);
    let mut adjncy = Vec::with_capacity(total);
    xadj.push(0);
    for l in lists {
        adjncy.extend(l.into_iter().map(|v| v as metis::Idx));
        xadj.push(adjncy.len() as metis::Idx);
    }
    Ok((xadj, adjncy))
}

/// A partition of `graph` into `num_parts` parts by METIS' multilevel
/// k-way method (`METIS_PartGraphKway`, as PyG's `ClusterData` with
/// `recursive=False`), on the undirected graph `A + Aᵀ` without
/// self-loops and with unit weights. `seed` seeds METIS' own generator:
/// the same graph and seed give the same partition (calls are serialised,
/// as METIS' random state is global). One part puts every node in part 0 without calling METIS. Parts may
/// come out empty on graphs with few edges.
///
/// # Errors
/// [`Error::InvalidConfig`] for zero parts, more parts than nodes, or a
/// graph too large for METIS' 32-bit indices; [`Error::Numerical`] when
/// METIS fails.
#[cfg(feature = "metis")]
#[cfg_attr(docsrs, doc(cfg(feature = "metis")))]
pub fn metis_partition(graph: &Graph, num_parts: usize, seed: u64) -> Result<Vec<usize>> {
    let n = graph.num_nodes();
    check_num_parts(n, num_parts)?;
    if num_parts == 1 {
        return Ok(vec![0; n]);
    }
    let (xadj, adjncy) = metis_csr(graph)?;
    let nparts = metis::Idx::try_from(num_parts)
        .map_err(|_| Error::InvalidConfig(format!("{num_parts} parts is too many for METIS")))?;
    let mut part: Vec<metis::Idx> = vec![0; n];
    // METIS keeps its random state in a global: two partitions running at
    // once would draw from each other's stream, so a seed would not give
    // one partition. Calls are serialised.
    static METIS: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one_at_a_time = METIS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    metis::Graph::new(1, nparts, &xadj, &adjncy)
        .map_err(|e| Error::Numerical(format!("METIS refused the graph: {e}")))?
        .set_option(metis::option::Seed((seed & 0x7fff_ffff) as metis::Idx))
        .part_kway(&mut part)
        .map_err(|e| Error::Numerical(format!("METIS failed: {e:?}")))?;
    Ok(part.into_iter().map(|p| p as usize).collect())
}

/// Settings of a [`ClusterLoader`].
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterLoaderConfig {
    /// Parts per batch (PyG's `batch_size` of `ClusterLoader`), at least 1.
    pub clusters_per_batch: usize,
    /// Reshuffle the parts every epoch (for training).
    pub shuffle: bool,
    /// Seed of the shuffles.
    pub seed: u64,
}

/// Cluster-GCN batches: groups of parts of a partition, each the subgraph
/// its nodes induce, the scored nodes first (see the [module](self) docs).
#[derive(Debug, Clone)]
pub struct ClusterLoader<'g> {
    graph: &'g Graph,
    /// The nodes of every part, scored ones first, in id order.
    clusters: Vec<Vec<usize>>,
    /// How many of each part's nodes are scored.
    scored: Vec<usize>,
    cfg: ClusterLoaderConfig,
}

impl<'g> ClusterLoader<'g> {
    /// Batches of the parts of `parts` (node `i` in part `parts[i]`, of
    /// `num_parts`), scoring the nodes where `scored` is true (the
    /// training mask).
    ///
    /// # Errors
    /// As [`check_partition`]; [`Error::ShapeMismatch`] for a mask of
    /// another length; [`Error::InvalidConfig`] for zero clusters per
    /// batch; [`Error::Empty`] when no node is scored.
    pub fn new(
        graph: &'g Graph,
        parts: &[usize],
        num_parts: usize,
        scored: &[bool],
        cfg: ClusterLoaderConfig,
    ) -> Result<Self> {
        let n = graph.num_nodes();
        check_partition(n, parts, num_parts)?;
        if scored.len() != n {
            return Err(Error::shape(
                "ClusterLoader scored mask",
                format!("one flag per node ({n})"),
                format!("{} flags", scored.len()),
            ));
        }
        if cfg.clusters_per_batch == 0 {
            return Err(Error::InvalidConfig(
                "ClusterLoader clusters_per_batch must be >= 1, got 0".into(),
            ));
        }
        if !scored.contains(&true) {
            return Err(Error::Empty("ClusterLoader with no scored node".into()));
        }
        let mut clusters = vec![Vec::new(); num_parts];
        for want in [true, false] {
            for (v, &p) in parts.iter().enumerate() {
                if scored[v] == want {
                    clusters[p].push(v);
                }
            }
        }
        let scored_per_part = clusters
            .iter()
            .map(|c| c.iter().take_while(|&&v| scored[v]).count())
            .collect();
        Ok(ClusterLoader {
            graph,
            clusters,
            scored: scored_per_part,
            cfg,
        })
    }

    /// The parts of every batch of `epoch`, in order (groups without a
    /// scored node left out).
    pub fn batch_parts(&self, epoch: usize) -> Vec<Vec<usize>> {
        let mut order: Vec<usize> = (0..self.clusters.len()).collect();
        if self.cfg.shuffle {
            use rand::Rng;
            let mut rng = stream(self.cfg.seed, epoch as u64, u64::MAX);
            for i in (1..order.len()).rev() {
                order.swap(i, rng.random_range(0..=i));
            }
        }
        order
            .chunks(self.cfg.clusters_per_batch)
            .filter(|g| g.iter().any(|&p| self.scored[p] > 0))
            .map(<[usize]>::to_vec)
            .collect()
    }

    /// The batch of the parts `group`.
    fn batch(&self, group: &[usize]) -> Result<SampledSubgraph> {
        let mut nodes: Vec<usize> = Vec::new();
        for &p in group {
            nodes.extend_from_slice(&self.clusters[p][..self.scored[p]]);
        }
        let num_scored = nodes.len();
        for &p in group {
            nodes.extend_from_slice(&self.clusters[p][self.scored[p]..]);
        }
        let sub = self.graph.subgraph(&nodes)?;
        let edges = sub.adjacency().iter().map(|(_, e)| e).collect();
        Ok(SampledSubgraph::from_parts(nodes, num_scored, edges))
    }

    /// Every batch of `epoch` at once (evaluation).
    ///
    /// # Errors
    /// None for a loader [`ClusterLoader::new`] accepted.
    pub fn batches(&self, epoch: usize) -> Result<Vec<SampledSubgraph>> {
        self.batch_parts(epoch)
            .par_iter()
            .map(|g| self.batch(g))
            .collect()
    }
}

impl crate::train::Loader<SampledSubgraph> for ClusterLoader<'_> {
    fn num_batches(&self) -> usize {
        self.batch_parts(0).len()
    }

    fn epoch(&mut self, epoch: usize) -> Box<dyn Iterator<Item = Result<SampledSubgraph>> + '_> {
        let groups = self.batch_parts(epoch);
        let this = &*self;
        windowed(groups.len(), move |i| this.batch(&groups[i]))
    }
}
