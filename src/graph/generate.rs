//! Seeded random graphs with community structure, for tests and benchmarks.
//!
//! [`generate`] builds a directed graph on `num_nodes` nodes with
//! `num_nodes × degree` edges, node labels (`classes` communities) and dense
//! `f32` features correlated with the labels, so that accuracy on it means
//! something:
//!
//! * **Topology** ([`Topology`]): [`Topology::Uniform`] gives every node
//!   exactly `degree` distinct out-neighbours (no self-loops), drawn
//!   uniformly within the community constraint below;
//!   [`Topology::Rmat`] draws every edge by R-MAT's recursive quadrant choice
//!   (Chakrabarti et al., 2004; `a, b, c, d = 0.57, 0.19, 0.19, 0.05` by
//!   default), which gives a heavy-tailed (power-law-like) degree
//!   distribution. R-MAT edges may repeat ([`Graph`] sums repeats), never
//!   loop on one node. An edge that cannot be placed in 64 draws (quadrant
//!   probabilities that put all the mass on the diagonal or beyond
//!   `num_nodes`, or a class with a single node) is drawn uniformly instead.
//! * **Communities** (a stochastic block model by homophily ratio): node `i`
//!   has label `i % classes`. Each edge is intra-class with probability
//!   [`GeneratorConfig::homophily`] and joins two different classes
//!   otherwise, so the fraction of intra-class edges is the requested ratio
//!   (up to sampling noise). With one class every edge is intra-class.
//!   For R-MAT the target is moved to the chosen class within its block of
//!   `classes` consecutive ids, which keeps the heavy tail.
//! * **Features**: row `i` is the mean of class `labels[i]` (drawn once from
//!   a standard normal per class and dimension) plus Gaussian noise of
//!   standard deviation [`GeneratorConfig::feature_noise`].
//!
//! Edges are stored as `(src, dst)` pairs of `u32` (8 bytes an edge, so
//! 10^8 edges take 800 MB). The output is identical for a seed whatever the
//! number of rayon threads: the work is cut into fixed chunks, each with its
//! own counter-keyed random stream (SplitMix64 keyed by the seed, the stream
//! kind and the chunk index), and chunks are generated in parallel.
//!
//! # Example
//!
//! ```
//! use hdgcn::graph::generate::{generate, GeneratorConfig, Topology};
//!
//! let cfg = GeneratorConfig {
//!     num_nodes: 1_000,
//!     degree: 5,
//!     classes: 4,
//!     feature_dim: 8,
//!     homophily: 0.8,
//!     topology: Topology::Uniform,
//!     ..GeneratorConfig::default()
//! };
//! let g = generate(&cfg).unwrap();
//! assert_eq!(g.edges.len(), 5_000);
//! assert_eq!(g.features.dim(), (1_000, 8));
//! assert_eq!(g.labels.len(), 1_000);
//! let graph = g.to_graph().unwrap().symmetrized();
//! assert_eq!(graph.num_nodes(), 1_000);
//! // Same seed, same graph.
//! assert_eq!(generate(&cfg).unwrap().edges, g.edges);
//! ```

use super::Graph;
use crate::{Error, Result};
use ndarray::Array2;
use rand::RngCore;
use rand_distr::{Distribution, StandardNormal};
use rayon::prelude::*;
use sprs::CsMat;

/// How the edges are drawn.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Topology {
    /// Every node draws exactly `degree` distinct out-neighbours, none of
    /// them itself. Requires `degree < num_nodes`.
    Uniform,
    /// R-MAT: `num_nodes × degree` edges, each placed by choosing one of the
    /// four quadrants of the adjacency matrix with probabilities
    /// `a, b, c, d` at each of `ceil(log2 num_nodes)` levels (draws outside
    /// `num_nodes` or on the diagonal are redrawn).
    Rmat {
        /// Top-left quadrant probability.
        a: f64,
        /// Top-right quadrant probability.
        b: f64,
        /// Bottom-left quadrant probability.
        c: f64,
        /// Bottom-right quadrant probability.
        d: f64,
    },
}

impl Topology {
    /// R-MAT with the usual `a, b, c, d = 0.57, 0.19, 0.19, 0.05`.
    pub const RMAT: Topology = Topology::Rmat {
        a: 0.57,
        b: 0.19,
        c: 0.19,
        d: 0.05,
    };
}

/// What [`generate`] makes. Check it with [`GeneratorConfig::validate`]
/// ([`generate`] does).
#[derive(Debug, Clone, PartialEq)]
pub struct GeneratorConfig {
    /// Number of nodes (at least 1, at most `u32::MAX`).
    pub num_nodes: usize,
    /// Out-degree of every node ([`Topology::Uniform`]) or average
    /// out-degree ([`Topology::Rmat`]): the graph has `num_nodes × degree`
    /// edges.
    pub degree: usize,
    /// How the edges are drawn.
    pub topology: Topology,
    /// Number of communities (labels `0..classes`), at least 1 and at most
    /// `num_nodes`.
    pub classes: usize,
    /// Probability that an edge joins two nodes of the same class, in
    /// `[0, 1]`. Ignored with one class.
    pub homophily: f64,
    /// Width of the feature matrix (0 gives an empty `num_nodes x 0` one).
    pub feature_dim: usize,
    /// Standard deviation of the Gaussian noise added to the class means
    /// (which are standard-normal), finite and `>= 0`.
    pub feature_noise: f64,
    /// The seed: the same seed and configuration give the same output.
    pub seed: u64,
}

impl Default for GeneratorConfig {
    /// 1,000 nodes, degree 10, uniform, 4 classes, homophily 0.8, 16
    /// features with noise 1.0, seed 0.
    fn default() -> Self {
        GeneratorConfig {
            num_nodes: 1_000,
            degree: 10,
            topology: Topology::Uniform,
            classes: 4,
            homophily: 0.8,
            feature_dim: 16,
            feature_noise: 1.0,
            seed: 0,
        }
    }
}

fn invalid(field: &str, rule: &str, got: impl std::fmt::Display) -> Error {
    Error::InvalidConfig(format!(
        "GeneratorConfig: {field} must be {rule}, got {got}"
    ))
}

fn check_probability(field: &str, p: f64) -> Result<()> {
    if (0.0..=1.0).contains(&p) {
        Ok(())
    } else {
        Err(invalid(field, "a probability in [0, 1]", p))
    }
}

impl GeneratorConfig {
    /// Checks every field.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the first invalid field: zero nodes
    /// or more than `u32::MAX`; `degree >= num_nodes` for
    /// [`Topology::Uniform`] (a simple graph has at most `num_nodes - 1`
    /// out-neighbours); a number of edges that overflows; R-MAT
    /// probabilities outside `[0, 1]` or not summing to 1; `homophily`
    /// outside `[0, 1]`; zero classes or more classes than nodes; a negative
    /// or non-finite `feature_noise`.
    pub fn validate(&self) -> Result<()> {
        let n = self.num_nodes;
        if n == 0 {
            return Err(invalid("num_nodes", ">= 1", n));
        }
        if n > u32::MAX as usize {
            return Err(invalid("num_nodes", "<= u32::MAX (ids are u32)", n));
        }
        if n.checked_mul(self.degree).is_none() {
            return Err(invalid(
                "degree",
                "small enough that num_nodes x degree fits a usize",
                self.degree,
            ));
        }
        match self.topology {
            Topology::Uniform => {
                if self.degree >= n {
                    return Err(invalid(
                        "degree",
                        &format!("< num_nodes ({n}) for a simple uniform graph"),
                        self.degree,
                    ));
                }
            }
            Topology::Rmat { a, b, c, d } => {
                for (field, p) in [
                    ("topology.a", a),
                    ("topology.b", b),
                    ("topology.c", c),
                    ("topology.d", d),
                ] {
                    check_probability(field, p)?;
                }
                let sum = a + b + c + d;
                if (sum - 1.0).abs() > 1e-6 {
                    return Err(invalid("topology (a + b + c + d)", "1", sum));
                }
                if n < 2 && self.degree > 0 {
                    return Err(invalid(
                        "num_nodes",
                        ">= 2 for R-MAT edges without self-loops",
                        n,
                    ));
                }
            }
        }
        if self.classes == 0 {
            return Err(invalid("classes", ">= 1", 0));
        }
        if self.classes > n {
            return Err(invalid(
                "classes",
                &format!("<= num_nodes ({n})"),
                self.classes,
            ));
        }
        check_probability("homophily", self.homophily)?;
        if !(self.feature_noise.is_finite() && self.feature_noise >= 0.0) {
            return Err(invalid(
                "feature_noise",
                "finite and >= 0",
                self.feature_noise,
            ));
        }
        Ok(())
    }

    /// Bytes of the output ([`GeneratedGraph`]): the edge list, the
    /// features and the labels (`None` on overflow).
    pub fn output_bytes(&self) -> Option<u64> {
        let edges = (self.num_nodes as u64).checked_mul(self.degree as u64)?;
        let feats = (self.num_nodes as u64).checked_mul(self.feature_dim as u64)?;
        edges
            .checked_mul(8)?
            .checked_add(feats.checked_mul(4)?)?
            .checked_add((self.num_nodes as u64).checked_mul(8)?)
    }
}

/// A generated graph: the edge list, the features and the labels.
#[derive(Debug, Clone, PartialEq)]
pub struct GeneratedGraph {
    /// Number of nodes.
    pub num_nodes: usize,
    /// Number of classes.
    pub num_classes: usize,
    /// Directed edges `(src, dst)`. For [`Topology::Uniform`] node `i`'s
    /// edges are `edges[i * degree..(i + 1) * degree]`.
    pub edges: Vec<(u32, u32)>,
    /// `num_nodes x feature_dim` features.
    pub features: Array2<f32>,
    /// The class of every node, `i % classes`.
    pub labels: Vec<usize>,
}

impl GeneratedGraph {
    /// The fraction of edges whose endpoints share a label (`NaN` with no
    /// edges).
    pub fn edge_homophily(&self) -> f64 {
        let same = self
            .edges
            .par_iter()
            .filter(|&&(s, d)| self.labels[s as usize] == self.labels[d as usize])
            .count();
        same as f64 / self.edges.len() as f64
    }

    /// Out-degree of every node (repeated edges counted).
    pub fn out_degrees(&self) -> Vec<u32> {
        let mut deg = vec![0u32; self.num_nodes];
        for &(s, _) in &self.edges {
            deg[s as usize] += 1;
        }
        deg
    }

    /// In-degree of every node (repeated edges counted).
    pub fn in_degrees(&self) -> Vec<u32> {
        let mut deg = vec![0u32; self.num_nodes];
        for &(_, d) in &self.edges {
            deg[d as usize] += 1;
        }
        deg
    }

    /// The edges as CSR arrays `(indptr, indices)`: row `s` holds the
    /// targets of `s`'s edges, sorted, repeats kept. `indptr` has
    /// `num_nodes + 1` entries.
    ///
    /// # Errors
    /// [`Error::OverBudget`] when the arrays do not fit the memory budget
    /// ([`crate::limits`]).
    pub fn to_csr(&self) -> Result<(Vec<usize>, Vec<u32>)> {
        let n = self.num_nodes;
        let bytes = (n as u64 + 1)
            .checked_mul(8)
            .and_then(|b| b.checked_add((self.edges.len() as u64).checked_mul(4)?));
        crate::limits::check_bytes(
            format_args!("the CSR arrays of a generated graph of {n} nodes"),
            bytes,
        )?;
        let mut indptr = vec![0usize; n + 1];
        for &(s, _) in &self.edges {
            indptr[s as usize + 1] += 1;
        }
        for i in 0..n {
            indptr[i + 1] += indptr[i];
        }
        let mut fill = indptr.clone();
        let mut indices = vec![0u32; self.edges.len()];
        for &(s, d) in &self.edges {
            let at = &mut fill[s as usize];
            indices[*at] = d;
            *at += 1;
        }
        // Sort each row, in parallel over disjoint row slices.
        let mut rows: Vec<&mut [u32]> = Vec::with_capacity(n);
        let mut rest = indices.as_mut_slice();
        for i in 0..n {
            let (row, tail) = rest.split_at_mut(indptr[i + 1] - indptr[i]);
            rows.push(row);
            rest = tail;
        }
        rows.par_iter_mut().for_each(|r| r.sort_unstable());
        drop(rows);
        Ok((indptr, indices))
    }

    /// The graph as a [`Graph`] (weight 1 per edge, repeated edges summed).
    /// The edges are directed; call [`Graph::symmetrized`] for an undirected
    /// graph.
    ///
    /// # Errors
    /// [`Error::OverBudget`] when the adjacency does not fit the memory
    /// budget; the errors of [`Graph::from_csmat`].
    pub fn to_graph(&self) -> Result<Graph> {
        let (indptr, indices) = self.to_csr()?;
        let n = self.num_nodes;
        crate::limits::check_elements::<(usize, f64)>(
            format_args!("the adjacency of a generated graph of {n} nodes"),
            Some(indices.len()),
        )?;
        let mut ip = Vec::with_capacity(n + 1);
        let mut idx = Vec::with_capacity(indices.len());
        let mut data = Vec::with_capacity(indices.len());
        ip.push(0usize);
        for i in 0..n {
            let row = &indices[indptr[i]..indptr[i + 1]];
            let mut k = 0;
            while k < row.len() {
                let mut w = 1.0;
                while k + 1 < row.len() && row[k + 1] == row[k] {
                    w += 1.0;
                    k += 1;
                }
                idx.push(row[k] as usize);
                data.push(w);
                k += 1;
            }
            ip.push(idx.len());
        }
        let m = CsMat::try_new((n, n), ip, idx, data)
            .map_err(|e| Error::InvalidConfig(format!("generated adjacency: {}", e.3)))?;
        Graph::from_csmat(&m)
    }
}

/// SplitMix64: a counter-based stream. Each chunk of work gets its own
/// stream keyed by (seed, kind, chunk), so results do not depend on how
/// rayon schedules the chunks.
#[derive(Debug, Clone)]
struct Stream {
    state: u64,
}

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Stream {
    fn new(seed: u64, kind: u64, chunk: u64) -> Stream {
        Stream {
            state: mix(mix(seed ^ mix(kind.wrapping_add(0x1234_5678))) ^ chunk),
        }
    }

    /// Uniform in `[0, bound)` (`bound >= 1`), by Lemire's multiply-shift
    /// (bias below 2^-32 for the bounds used here, u32 ids).
    fn below(&mut self, bound: u64) -> u64 {
        ((self.next_u64() as u128 * bound as u128) >> 64) as u64
    }

    /// Uniform in `[0, 1)`.
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

impl RngCore for Stream {
    fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }

    fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix(self.state)
    }

    fn fill_bytes(&mut self, dst: &mut [u8]) {
        for chunk in dst.chunks_mut(8) {
            let v = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
    }
}

const KIND_EDGES: u64 = 1;
const KIND_MEANS: u64 = 2;
const KIND_NOISE: u64 = 3;
/// Nodes per chunk of uniform edges and of feature rows.
const NODE_CHUNK: usize = 4096;
/// Edges per chunk of R-MAT edges.
const EDGE_CHUNK: usize = 1 << 16;
/// Draws of one R-MAT edge before falling back to a uniform edge.
const MAX_RMAT_ATTEMPTS: u32 = 64;

/// Class membership with labels `i % k`.
#[derive(Clone, Copy)]
struct Classes {
    n: u64,
    k: u64,
}

impl Classes {
    fn size(self, c: u64) -> u64 {
        (self.n - c).div_ceil(self.k)
    }

    /// A uniform node of class `c`.
    fn node_in(self, c: u64, rng: &mut Stream) -> u64 {
        c + self.k * rng.below(self.size(c))
    }

    /// A uniform class other than `c` (`k >= 2`).
    fn other_class(self, c: u64, rng: &mut Stream) -> u64 {
        (c + 1 + rng.below(self.k - 1)) % self.k
    }
}

/// Generates the graph, features and labels that `cfg` describes.
///
/// # Errors
/// [`Error::InvalidConfig`] naming the field ([`GeneratorConfig::validate`]);
/// [`Error::OverBudget`] when the output does not fit the memory budget
/// ([`crate::limits`]), checked before anything is allocated.
pub fn generate(cfg: &GeneratorConfig) -> Result<GeneratedGraph> {
    cfg.validate()?;
    crate::limits::check_bytes(
        format_args!(
            "a generated graph of {} nodes, {} edges and {} features",
            cfg.num_nodes,
            cfg.num_nodes.saturating_mul(cfg.degree),
            cfg.feature_dim
        ),
        cfg.output_bytes(),
    )?;
    let edges = match cfg.topology {
        Topology::Uniform => uniform_edges(cfg),
        Topology::Rmat { a, b, c, .. } => rmat_edges(cfg, a, b, c),
    };
    let labels: Vec<usize> = (0..cfg.num_nodes).map(|i| i % cfg.classes).collect();
    let features = features(cfg);
    Ok(GeneratedGraph {
        num_nodes: cfg.num_nodes,
        num_classes: cfg.classes,
        edges,
        features,
        labels,
    })
}

fn uniform_edges(cfg: &GeneratorConfig) -> Vec<(u32, u32)> {
    let n = cfg.num_nodes;
    let d = cfg.degree;
    let mut edges = vec![(0u32, 0u32); n * d];
    if d == 0 {
        return edges;
    }
    let cls = Classes {
        n: n as u64,
        k: cfg.classes as u64,
    };
    let h = cfg.homophily;
    edges
        .par_chunks_mut(NODE_CHUNK * d)
        .enumerate()
        .for_each(|(chunk, out)| {
            let mut rng = Stream::new(cfg.seed, KIND_EDGES, chunk as u64);
            let mut chosen: Vec<u32> = Vec::with_capacity(d);
            for (j, node_out) in out.chunks_mut(d).enumerate() {
                let u = (chunk * NODE_CHUNK + j) as u64;
                let cu = u % cls.k;
                chosen.clear();
                let mut attempts = 0usize;
                let max_attempts = 64 * d + 64;
                while chosen.len() < d && attempts < max_attempts {
                    attempts += 1;
                    let v = if cls.k == 1 || rng.unit() < h {
                        cls.node_in(cu, &mut rng)
                    } else {
                        let c = cls.other_class(cu, &mut rng);
                        cls.node_in(c, &mut rng)
                    };
                    let v = v as u32;
                    if u64::from(v) != u && !chosen.contains(&v) {
                        chosen.push(v);
                    }
                }
                // A class too small for `d` distinct neighbours: fill from a
                // random start in id order (terminates: d < n).
                let mut v = rng.below(cls.n);
                while chosen.len() < d {
                    let w = v as u32;
                    if v != u && !chosen.contains(&w) {
                        chosen.push(w);
                    }
                    v = (v + 1) % cls.n;
                }
                for (slot, &v) in node_out.iter_mut().zip(&chosen) {
                    *slot = (u as u32, v);
                }
            }
        });
    edges
}

fn rmat_edges(cfg: &GeneratorConfig, a: f64, b: f64, c: f64) -> Vec<(u32, u32)> {
    let n = cfg.num_nodes as u64;
    let m = cfg.num_nodes * cfg.degree;
    let mut edges = vec![(0u32, 0u32); m];
    let levels = u64::BITS - (n - 1).leading_zeros().min(63);
    let levels = if n <= 1 { 0 } else { levels };
    // Thresholds on a 16-bit draw (probabilities to 1/65536): quadrant a,
    // b, c, else d.
    let scale = f64::from(1u32 << 16);
    let ta = (a * scale).round() as u64;
    let tb = ((a + b) * scale).round() as u64;
    let tc = ((a + b + c) * scale).round() as u64;
    let cls = Classes {
        n,
        k: cfg.classes as u64,
    };
    let h = cfg.homophily;
    edges
        .par_chunks_mut(EDGE_CHUNK)
        .enumerate()
        .for_each(|(chunk, out)| {
            let mut rng = Stream::new(cfg.seed, KIND_EDGES, chunk as u64);
            for slot in out.iter_mut() {
                let mut attempts = 0u32;
                *slot = loop {
                    attempts += 1;
                    if attempts > MAX_RMAT_ATTEMPTS {
                        // Degenerate quadrant probabilities (all mass on
                        // the diagonal or outside `n`) or a class with one
                        // node: a uniform non-loop edge instead.
                        let u = rng.below(n);
                        let v = (u + 1 + rng.below(n - 1)) % n;
                        break (u as u32, v as u32);
                    }
                    let (mut u, mut v) = (0u64, 0u64);
                    let mut bits = 0u64;
                    for level in 0..levels {
                        if level % 4 == 0 {
                            bits = rng.next_u64();
                        }
                        let r = bits & 0xFFFF;
                        bits >>= 16;
                        // Branch-free quadrant: 0 = a, 1 = b, 2 = c, 3 = d.
                        let q = u64::from(r >= ta) + u64::from(r >= tb) + u64::from(r >= tc);
                        u = (u << 1) | (q >> 1);
                        v = (v << 1) | (q & 1);
                    }
                    if u >= n || v >= n {
                        continue;
                    }
                    if cls.k > 1 {
                        let cu = u % cls.k;
                        let cv = v % cls.k;
                        let target = if rng.unit() < h {
                            cu
                        } else if cv != cu {
                            cv
                        } else {
                            cls.other_class(cu, &mut rng)
                        };
                        v = v - cv + target;
                        if v >= n {
                            v -= cls.k;
                        }
                    }
                    if u != v {
                        break (u as u32, v as u32);
                    }
                };
            }
        });
    edges
}

fn features(cfg: &GeneratorConfig) -> Array2<f32> {
    let (n, f, k) = (cfg.num_nodes, cfg.feature_dim, cfg.classes);
    let mut means_rng = Stream::new(cfg.seed, KIND_MEANS, 0);
    let means: Vec<f32> = (0..k * f)
        .map(|_| StandardNormal.sample(&mut means_rng))
        .collect();
    let mut x = Array2::<f32>::zeros((n, f));
    if f == 0 {
        return x;
    }
    let noise = cfg.feature_noise as f32;
    if let Some(data) = x.as_slice_mut() {
        data.par_chunks_mut(NODE_CHUNK * f)
            .enumerate()
            .for_each(|(chunk, out)| {
                let mut rng = Stream::new(cfg.seed, KIND_NOISE, chunk as u64);
                for (j, row) in out.chunks_mut(f).enumerate() {
                    let c = (chunk * NODE_CHUNK + j) % k;
                    let mean = &means[c * f..(c + 1) * f];
                    for (x, &mu) in row.iter_mut().zip(mean) {
                        let z: f32 = StandardNormal.sample(&mut rng);
                        *x = mu + noise * z;
                    }
                }
            });
    }
    x
}
