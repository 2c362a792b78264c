//! Neighbour sampling (Hamilton et al.'s GraphSAGE; PyTorch Geometric's
//! `NeighborLoader`): mini-batches of seed nodes, each with the subgraph of
//! the neighbours its layers read.
//!
//! [`NeighborSampler`] holds the in-neighbours of every node (the CSC form
//! of the adjacency `A[src][dst]`, as PyG's sampler converts its
//! `edge_index` to CSC): a node receives messages from its in-neighbours,
//! so those are what its next layer needs. [`NeighborSampler::sample`]
//! expands a set of seed nodes hop by hop: hop `i` draws up to
//! `num_neighbors[i]` in-neighbours of every node first reached at hop
//! `i - 1` (the seeds at hop 0). The result ([`SampledSubgraph`]) is one
//! union subgraph for the batch, its nodes relabelled `0..` in the order
//! they were first reached, seeds first, with the original id of every
//! node and every sampled edge `(neighbour, node)` in the new labels.
//! [`NeighborLoader`] cuts a seed set into batches, reshuffles it every
//! epoch and samples the batches in parallel; it is a
//! [`Loader`](crate::train::Loader) for the generic training loop (see
//! [`SampledNodeStep`](crate::train::SampledNodeStep)).
//!
//! # Against PyG's `NeighborLoader`
//!
//! The same as PyG's defaults (`disjoint=False`, `subgraph_type="directional"`,
//! no temporal or weighted sampling):
//!
//! * `num_neighbors[i]` per node at hop `i`, `-1` for every in-neighbour;
//! * without replacement (`replace=False`, the default) a node with `deg`
//!   in-neighbours gets `min(deg, k)` distinct ones (all of them when
//!   `deg <= k`); with replacement it gets exactly `k` independent uniform
//!   draws (none when `deg == 0`), and a neighbour drawn twice gives the
//!   edge twice (the GCN operator of the batch then sums it, as PyG's
//!   `gcn_norm` scatter-adds repeated edges);
//! * nodes are numbered in the order first reached, the first `batch_size`
//!   being the seeds in batch order (PyG's `n_id[:batch_size]`), and
//!   [`SampledSubgraph::nodes`] is PyG's `n_id`;
//! * only the sampled edges are kept (PyG's `directed=True`), never the
//!   other edges among the sampled nodes;
//! * `num_sampled_nodes` / `num_sampled_edges` per hop as PyG's.
//!
//! Where it differs:
//!
//! * the random streams are this crate's (a seeded [`rand::rngs::StdRng`]
//!   per batch, keyed by the loader seed, the epoch and the batch index),
//!   so the draws are not PyTorch's; they do not depend on the number of
//!   threads or on which thread samples which batch;
//! * without replacement the `k` distinct neighbours are uniform over the
//!   `k`-subsets (Floyd's algorithm drawing in `0..=j`); torch-sparse's
//!   `neighbor_sample_cpu.cpp` draws `rand() % j`, in `0..j`, which is
//!   not quite uniform;
//! * a seed listed twice is an error ([`Error::InvalidConfig`]), where
//!   torch-sparse keeps both rows (both expanded, only the first taken
//!   as anyone's neighbour);
//!   a fan-out of 0 or below `-1`, an empty seed set and an out-of-range
//!   seed are errors too;
//! * edge weights are ignored when drawing (uniform over stored entries, as
//!   PyG without `weight_attr`); a [`Graph`] entry that summed repeated
//!   edges counts once, an edge list given to
//!   [`NeighborSampler::from_edges`] keeps its repeats;
//! * within a node, its drawn neighbours come in draw order, so the
//!   sequence of new labels differs from PyG's even for the same draws;
//!   the sampled sets follow the same distribution.
//!
//! ```
//! use hdgcn::graph::Graph;
//! use hdgcn::graph::sampling::{NeighborSampler, SamplingConfig};
//! use rand::{SeedableRng, rngs::StdRng};
//!
//! // A star: 1, 2 and 3 send to 0; 4 sends to 1.
//! let g = Graph::from_edges(5, &[(1, 0), (2, 0), (3, 0), (4, 1)])?;
//! let sampler = NeighborSampler::new(&g)?;
//! let cfg = SamplingConfig::new(vec![2, -1])?;
//! let sub = sampler.sample(&[0], &cfg, &mut StdRng::seed_from_u64(7))?;
//! assert_eq!(sub.nodes()[0], 0); // the seed comes first
//! assert_eq!(&sub.num_sampled_nodes()[..2], &[1, 2]); // seed, then 2 of its 3
//! assert_eq!(sub.num_sampled_edges()[0], 2);
//! // Every edge is (neighbour, node) in the new labels, and exists in `g`.
//! for (s, d) in sub.global_edges() {
//!     assert!(g.adjacency().get(s, d).is_some());
//! }
//! # Ok::<(), hdgcn::Error>(())
//! ```

use std::collections::{HashMap, VecDeque};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rayon::prelude::*;

use super::Graph;
use crate::error::{Error, Result};

/// The fan-outs and the replacement rule of [`NeighborSampler::sample`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SamplingConfig {
    num_neighbors: Vec<i64>,
    replace: bool,
}

impl SamplingConfig {
    /// `num_neighbors[i]` neighbours per node at hop `i` (one entry per
    /// layer, `-1` for all of them), without replacement.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for no hop at all, or a fan-out of 0 (it
    /// would sample nothing) or below `-1`.
    pub fn new(num_neighbors: Vec<i64>) -> Result<Self> {
        if num_neighbors.is_empty() {
            return Err(Error::InvalidConfig(
                "neighbour sampling needs at least one fan-out (one per layer)".into(),
            ));
        }
        for (i, &k) in num_neighbors.iter().enumerate() {
            if k == 0 || k < -1 {
                return Err(Error::InvalidConfig(format!(
                    "fan-out {k} at hop {} (of {num_neighbors:?}): each fan-out must be >= 1, \
                     or -1 for all neighbours",
                    i + 1
                )));
            }
        }
        Ok(SamplingConfig {
            num_neighbors,
            replace: false,
        })
    }

    /// The same fan-outs, drawn with replacement when `replace` is set.
    pub fn with_replacement(mut self, replace: bool) -> Self {
        self.replace = replace;
        self
    }

    /// The fan-out of every hop (`-1`: all neighbours).
    pub fn num_neighbors(&self) -> &[i64] {
        &self.num_neighbors
    }

    /// Whether neighbours are drawn with replacement.
    pub fn replace(&self) -> bool {
        self.replace
    }
}

/// A graph's in-neighbour lists, ready to sample from.
///
/// Node ids are stored as `u32`: 4 bytes an edge plus 8 a node.
#[derive(Debug, Clone, PartialEq)]
pub struct NeighborSampler {
    /// `indptr[v]..indptr[v + 1]` indexes the in-neighbours of `v`.
    indptr: Vec<usize>,
    /// In-neighbours (sources), sorted within each node.
    sources: Vec<u32>,
}

impl NeighborSampler {
    /// The in-neighbours of every node of `graph`: `u` is one of `v`'s when
    /// `A[u][v]` is stored (any weight, self-loops included).
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for more than `u32::MAX` nodes;
    /// [`Error::OverBudget`] when the lists do not fit the memory budget.
    pub fn new(graph: &Graph) -> Result<Self> {
        let a = graph.adjacency();
        Self::build(graph.num_nodes(), a.nnz(), || {
            a.iter().map(|(_, (s, d))| (s, d))
        })
    }

    /// The in-neighbours from a directed edge list `(src, dst)` on
    /// `num_nodes` nodes (repeated edges kept, so drawn more often), as
    /// [`GeneratedGraph::edges`](super::generate::GeneratedGraph::edges),
    /// without building a [`Graph`].
    ///
    /// # Errors
    /// [`Error::Empty`] for zero nodes; [`Error::NodeOutOfRange`] for an
    /// endpoint `>= num_nodes`; as [`NeighborSampler::new`].
    pub fn from_edges(num_nodes: usize, edges: &[(u32, u32)]) -> Result<Self> {
        if num_nodes == 0 {
            return Err(Error::Empty(
                "neighbour sampler on a graph of 0 nodes".into(),
            ));
        }
        if let Some(&(s, d)) = edges
            .par_iter()
            .find_any(|&&(s, d)| s as usize >= num_nodes || d as usize >= num_nodes)
        {
            let index = if s as usize >= num_nodes { s } else { d };
            return Err(Error::NodeOutOfRange {
                index: index as usize,
                num_nodes,
            });
        }
        Self::build(num_nodes, edges.len(), || {
            edges.iter().map(|&(s, d)| (s as usize, d as usize))
        })
    }

    fn build<I: Iterator<Item = (usize, usize)>>(
        num_nodes: usize,
        num_edges: usize,
        edges: impl Fn() -> I,
    ) -> Result<Self> {
        if num_nodes > u32::MAX as usize {
            return Err(Error::InvalidConfig(format!(
                "neighbour sampling stores node ids as u32: {num_nodes} nodes is too many"
            )));
        }
        let bytes = (num_nodes as u64 + 1)
            .checked_mul(8)
            .and_then(|b| b.checked_add((num_edges as u64).checked_mul(4)?));
        crate::limits::check_bytes(
            format_args!("the in-neighbour lists of {num_nodes} nodes and {num_edges} edges"),
            bytes,
        )?;
        let mut indptr = vec![0usize; num_nodes + 1];
        for (_, d) in edges() {
            indptr[d + 1] += 1;
        }
        for i in 0..num_nodes {
            indptr[i + 1] += indptr[i];
        }
        let mut fill = indptr.clone();
        let mut sources = vec![0u32; num_edges];
        for (s, d) in edges() {
            sources[fill[d]] = s as u32;
            fill[d] += 1;
        }
        drop(fill);
        let mut rows: Vec<&mut [u32]> = Vec::with_capacity(num_nodes);
        let mut rest = sources.as_mut_slice();
        for i in 0..num_nodes {
            let (row, tail) = rest.split_at_mut(indptr[i + 1] - indptr[i]);
            rows.push(row);
            rest = tail;
        }
        rows.par_iter_mut().for_each(|r| r.sort_unstable());
        drop(rows);
        Ok(NeighborSampler { indptr, sources })
    }

    /// Number of nodes.
    pub fn num_nodes(&self) -> usize {
        self.indptr.len() - 1
    }

    /// Number of stored edges.
    pub fn num_edges(&self) -> usize {
        self.sources.len()
    }

    /// The in-neighbours of `v`, sorted (repeats kept).
    ///
    /// # Panics
    /// If `v >= num_nodes()`.
    pub fn in_neighbors(&self, v: usize) -> &[u32] {
        &self.sources[self.indptr[v]..self.indptr[v + 1]]
    }

    /// Checks a seed set: non-empty, in range, no node twice.
    fn check_seeds(&self, seeds: &[usize]) -> Result<()> {
        if seeds.is_empty() {
            return Err(Error::Empty(
                "neighbour sampling from an empty seed set".into(),
            ));
        }
        let n = self.num_nodes();
        if let Some(&bad) = seeds.iter().find(|&&s| s >= n) {
            return Err(Error::NodeOutOfRange {
                index: bad,
                num_nodes: n,
            });
        }
        Ok(())
    }

    /// The subgraph sampled around `seeds` (see the [module](self) docs).
    ///
    /// # Errors
    /// [`Error::Empty`] for no seed; [`Error::NodeOutOfRange`] for a seed
    /// `>= num_nodes()`; [`Error::InvalidConfig`] for a seed listed twice.
    pub fn sample<R: Rng + ?Sized>(
        &self,
        seeds: &[usize],
        cfg: &SamplingConfig,
        rng: &mut R,
    ) -> Result<SampledSubgraph> {
        self.check_seeds(seeds)?;
        let mut local: HashMap<usize, usize> = HashMap::with_capacity(seeds.len() * 4);
        let mut nodes: Vec<usize> = Vec::with_capacity(seeds.len() * 4);
        for (i, &s) in seeds.iter().enumerate() {
            if let Some(&first) = local.get(&s) {
                return Err(Error::InvalidConfig(format!(
                    "seed node {s} listed twice in one batch (positions {first} and {i})"
                )));
            }
            local.insert(s, i);
            nodes.push(s);
        }
        let mut edges: Vec<(usize, usize)> = Vec::new();
        let mut num_sampled_nodes = vec![seeds.len()];
        let mut num_sampled_edges = Vec::with_capacity(cfg.num_neighbors.len());
        let mut picks: Vec<usize> = Vec::new();
        let (mut begin, mut end) = (0, nodes.len());
        for &k in &cfg.num_neighbors {
            let edges_before = edges.len();
            for dst in begin..end {
                let nb = self.in_neighbors(nodes[dst]);
                pick_positions(nb.len(), k, cfg.replace, rng, &mut picks);
                for &p in &picks {
                    let u = nb[p] as usize;
                    let next = nodes.len();
                    let src = *local.entry(u).or_insert(next);
                    if src == next {
                        nodes.push(u);
                    }
                    edges.push((src, dst));
                }
            }
            num_sampled_nodes.push(nodes.len() - end);
            num_sampled_edges.push(edges.len() - edges_before);
            (begin, end) = (end, nodes.len());
        }
        Ok(SampledSubgraph {
            nodes,
            num_seeds: seeds.len(),
            edges,
            num_sampled_nodes,
            num_sampled_edges,
        })
    }
}

/// Positions in `0..deg` to take: all of them for `k == -1` (or, without
/// replacement, `k >= deg`); else `k` uniform draws with replacement, or
/// `k` distinct ones without (Floyd's algorithm for small `k`, a partial
/// Fisher–Yates shuffle otherwise).
fn pick_positions<R: Rng + ?Sized>(
    deg: usize,
    k: i64,
    replace: bool,
    rng: &mut R,
    out: &mut Vec<usize>,
) {
    out.clear();
    if deg == 0 {
        return;
    }
    let k = if k < 0 { usize::MAX } else { k as usize };
    if k == usize::MAX || (!replace && k >= deg) {
        out.extend(0..deg);
    } else if replace {
        out.extend((0..k).map(|_| rng.random_range(0..deg)));
    } else if k <= 32 {
        // Floyd: for j in deg-k..deg, draw t in 0..=j; take t unless taken, else j.
        for j in deg - k..deg {
            let t = rng.random_range(0..=j);
            let v = if out.contains(&t) { j } else { t };
            out.push(v);
        }
    } else {
        let mut perm: Vec<usize> = (0..deg).collect();
        for i in 0..k {
            let j = rng.random_range(i..deg);
            perm.swap(i, j);
        }
        perm.truncate(k);
        *out = perm;
    }
}

/// One batch of neighbour sampling: a union subgraph with its nodes
/// relabelled `0..num_nodes()`, seeds first.
#[derive(Debug, Clone, PartialEq)]
pub struct SampledSubgraph {
    nodes: Vec<usize>,
    num_seeds: usize,
    edges: Vec<(usize, usize)>,
    num_sampled_nodes: Vec<usize>,
    num_sampled_edges: Vec<usize>,
}

impl SampledSubgraph {
    /// A subgraph on `nodes` (original ids, the scored ones first) with
    /// edges `(src, dst)` in the new labels: a cluster batch
    /// ([`super::partition::ClusterLoader`]), whose "hops" are the scored
    /// nodes and the others.
    pub(crate) fn from_parts(
        nodes: Vec<usize>,
        num_seeds: usize,
        edges: Vec<(usize, usize)>,
    ) -> Self {
        let rest = nodes.len() - num_seeds;
        let num_edges = edges.len();
        SampledSubgraph {
            nodes,
            num_seeds,
            edges,
            num_sampled_nodes: vec![num_seeds, rest],
            num_sampled_edges: vec![num_edges],
        }
    }

    /// The original id of every node of the subgraph (PyG's `n_id`): node
    /// `i` of the subgraph is node `nodes()[i]` of the graph, the seeds
    /// being `nodes()[..num_seeds()]` in batch order.
    pub fn nodes(&self) -> &[usize] {
        &self.nodes
    }

    /// Number of nodes of the subgraph.
    pub fn num_nodes(&self) -> usize {
        self.nodes.len()
    }

    /// Number of seed nodes (PyG's `batch_size`).
    pub fn num_seeds(&self) -> usize {
        self.num_seeds
    }

    /// The seed nodes, in original ids.
    pub fn seeds(&self) -> &[usize] {
        &self.nodes[..self.num_seeds]
    }

    /// The sampled edges `(src, dst)` in the new labels: `src` is a
    /// sampled in-neighbour of `dst` (PyG's `edge_index`). Repeated when
    /// drawn twice with replacement.
    pub fn edges(&self) -> &[(usize, usize)] {
        &self.edges
    }

    /// The sampled edges in original ids.
    pub fn global_edges(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        self.edges
            .iter()
            .map(|&(s, d)| (self.nodes[s], self.nodes[d]))
    }

    /// Nodes first reached at each hop: `[seeds, hop 1, ..., hop L]`
    /// (PyG's `num_sampled_nodes`).
    pub fn num_sampled_nodes(&self) -> &[usize] {
        &self.num_sampled_nodes
    }

    /// Edges drawn at each hop `1..=L` (PyG's `num_sampled_edges`).
    pub fn num_sampled_edges(&self) -> &[usize] {
        &self.num_sampled_edges
    }

    /// The subgraph as a [`Graph`] in the new labels (weight 1 per edge,
    /// repeats summed).
    ///
    /// # Errors
    /// As [`Graph::from_edges`] (not for a subgraph this module made).
    pub fn to_graph(&self) -> Result<Graph> {
        Graph::from_edges(self.nodes.len(), &self.edges)
    }
}

/// Settings of a [`NeighborLoader`].
#[derive(Debug, Clone, PartialEq)]
pub struct NeighborLoaderConfig {
    /// Fan-outs and replacement.
    pub sampling: SamplingConfig,
    /// Seed nodes per batch (the last batch may be smaller), at least 1.
    pub batch_size: usize,
    /// Reshuffle the seed nodes every epoch (PyG's `shuffle=True`, for
    /// training); otherwise batches follow the given order.
    pub shuffle: bool,
    /// Seed of the shuffles and of every batch's draws.
    pub seed: u64,
}

/// Seeds in batches, each sampled into a [`SampledSubgraph`]: PyG's
/// `NeighborLoader(data, num_neighbors, input_nodes, batch_size, shuffle,
/// replace)` for a homogeneous graph.
///
/// Batch `b` of epoch `e` draws from its own stream, keyed by the loader
/// seed, `e` and `b`, so batches are the same whatever the number of
/// threads; they are sampled in parallel (rayon), a window of batches
/// ahead of the one the training loop takes.
///
/// ```
/// use hdgcn::graph::generate::{generate, GeneratorConfig};
/// use hdgcn::graph::sampling::{NeighborLoader, NeighborLoaderConfig, NeighborSampler, SamplingConfig};
/// use hdgcn::train::Loader;
///
/// let g = generate(&GeneratorConfig { num_nodes: 500, degree: 4, ..GeneratorConfig::default() })?;
/// let sampler = NeighborSampler::from_edges(g.num_nodes, &g.edges)?;
/// let cfg = NeighborLoaderConfig {
///     sampling: SamplingConfig::new(vec![5, 5])?,
///     batch_size: 64,
///     shuffle: true,
///     seed: 1,
/// };
/// let mut loader = NeighborLoader::new(&sampler, (0..200).collect(), cfg)?;
/// assert_eq!(loader.num_batches(), 4); // 64 + 64 + 64 + 8
/// let batches: Vec<_> = loader.epoch(0).collect::<hdgcn::Result<_>>()?;
/// assert_eq!(batches.iter().map(|b| b.num_seeds()).sum::<usize>(), 200);
/// # Ok::<(), hdgcn::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct NeighborLoader<'s> {
    sampler: &'s NeighborSampler,
    seeds: Vec<usize>,
    cfg: NeighborLoaderConfig,
}

/// A 64-bit mix (SplitMix64's finaliser) to key one stream per batch.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

pub(crate) fn stream(seed: u64, epoch: u64, batch: u64) -> StdRng {
    StdRng::seed_from_u64(mix(mix(mix(seed) ^ epoch) ^ batch))
}

impl<'s> NeighborLoader<'s> {
    /// Batches of `seeds` (training nodes, say) sampled from `sampler`.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for a batch size of 0 or a seed listed
    /// twice; [`Error::Empty`] for no seed; [`Error::NodeOutOfRange`] for a
    /// seed outside the graph.
    pub fn new(
        sampler: &'s NeighborSampler,
        seeds: Vec<usize>,
        cfg: NeighborLoaderConfig,
    ) -> Result<Self> {
        if cfg.batch_size == 0 {
            return Err(Error::InvalidConfig(
                "NeighborLoader batch_size must be >= 1, got 0".into(),
            ));
        }
        sampler.check_seeds(&seeds)?;
        let mut seen = vec![false; sampler.num_nodes()];
        for &s in &seeds {
            if std::mem::replace(&mut seen[s], true) {
                return Err(Error::InvalidConfig(format!(
                    "seed node {s} listed twice in the NeighborLoader's seed set"
                )));
            }
        }
        Ok(NeighborLoader {
            sampler,
            seeds,
            cfg,
        })
    }

    /// The settings.
    pub fn config(&self) -> &NeighborLoaderConfig {
        &self.cfg
    }

    /// The seed nodes of every batch of `epoch`, in order (shuffled when
    /// [`NeighborLoaderConfig::shuffle`] is set).
    pub fn batch_seeds(&self, epoch: usize) -> Vec<Vec<usize>> {
        let mut order = self.seeds.clone();
        if self.cfg.shuffle {
            let mut rng = stream(self.cfg.seed, epoch as u64, u64::MAX);
            for i in (1..order.len()).rev() {
                order.swap(i, rng.random_range(0..=i));
            }
        }
        order
            .chunks(self.cfg.batch_size)
            .map(<[usize]>::to_vec)
            .collect()
    }

    /// Batch `index` of an epoch whose batches' seeds are `seeds`.
    fn sample_batch(&self, epoch: usize, index: usize, seeds: &[usize]) -> Result<SampledSubgraph> {
        let mut rng = stream(self.cfg.seed, epoch as u64, index as u64);
        self.sampler.sample(seeds, &self.cfg.sampling, &mut rng)
    }

    /// Every batch of `epoch` at once, sampled in parallel (evaluation
    /// sets, tests). The same batches as [`Loader::epoch`] gives.
    ///
    /// [`Loader::epoch`]: crate::train::Loader::epoch
    ///
    /// # Errors
    /// As [`NeighborSampler::sample`].
    pub fn sample_epoch(&self, epoch: usize) -> Result<Vec<SampledSubgraph>> {
        let batches = self.batch_seeds(epoch);
        batches
            .par_iter()
            .enumerate()
            .map(|(i, s)| self.sample_batch(epoch, i, s))
            .collect()
    }
}

impl crate::train::Loader<SampledSubgraph> for NeighborLoader<'_> {
    fn num_batches(&self) -> usize {
        self.seeds.len().div_ceil(self.cfg.batch_size)
    }

    fn epoch(&mut self, epoch: usize) -> Box<dyn Iterator<Item = Result<SampledSubgraph>> + '_> {
        let batches = self.batch_seeds(epoch);
        let this = &*self;
        windowed(batches.len(), move |i| {
            this.sample_batch(epoch, i, &batches[i])
        })
    }
}

/// Items `make(0), make(1), ...` up to `count`, in order, made in
/// parallel a window of `2 × threads` ahead of the consumer. The items do
/// not depend on the window (each is a function of its index only).
pub(crate) fn windowed<'a, T: Send + 'a>(
    count: usize,
    make: impl Fn(usize) -> Result<T> + Sync + Send + 'a,
) -> Box<dyn Iterator<Item = Result<T>> + 'a> {
    let window = 2 * rayon::current_num_threads().max(1);
    let mut next = 0;
    let mut ready: VecDeque<Result<T>> = VecDeque::new();
    Box::new(std::iter::from_fn(move || {
        if ready.is_empty() && next < count {
            let end = (next + window).min(count);
            let made: Vec<Result<T>> = (next..end).into_par_iter().map(&make).collect();
            ready.extend(made);
            next = end;
        }
        ready.pop_front()
    }))
}
