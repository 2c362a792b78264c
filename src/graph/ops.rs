//! GCN operator and (scaled) Laplacians, numerically as PyTorch Geometric.

use super::{Graph, csr_from_triplets};
use crate::error::{Error, Result, check_positive};
use crate::named::named_enum;
use sprs::CsMat;

/// Laplacian normalisation, as PyG's `get_laplacian(normalization=...)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Normalization {
    /// `L = I - D^{-1/2} A D^{-1/2}` (PyG `"sym"`, ChebConv's default).
    #[default]
    Sym,
    /// `L = I - D^{-1} A` (PyG `"rw"`).
    Rw,
    /// `L = D - A` (PyG `None`).
    None,
}

named_enum!(Normalization, "Laplacian normalization", {
    Sym => "sym",
    Rw => "rw",
    None => "none",
});

/// `x^{-1/2}` with `inf` replaced by 0, as PyG's `deg.pow(-0.5).masked_fill(inf, 0)`.
fn inv_sqrt(x: f64) -> f64 {
    let v = x.powf(-0.5);
    if v == f64::INFINITY { 0.0 } else { v }
}

impl Graph {
    /// The GCN propagation operator `P` with `out = P · X`, numerically PyG's
    /// `GCNConv(normalize=True)` (`gcn_norm` with `add_remaining_self_loops`,
    /// fill value 1).
    ///
    /// `Â = A + I` where self-loops are added only to nodes lacking one (an
    /// existing self-loop keeps its weight); `deg[i] = Σ_j Â[j][i]` (summed at
    /// the target); the message from `j` to `i` has weight
    /// `deg^{-1/2}[j] · Â[j][i] · deg^{-1/2}[i]` (a zero degree gives 0), so
    /// `P = D̂^{-1/2} Âᵀ D̂^{-1/2}`, which is `D̂^{-1/2} Â D̂^{-1/2}` for a
    /// symmetric graph.
    ///
    /// # Errors
    /// [`Error::Empty`] for [`Graph::empty`]; [`Error::NegativeWeight`] if any
    /// weight is negative.
    pub fn gcn_operator(&self) -> Result<CsMat<f64>> {
        self.require_nodes("GCN operator")?;
        self.validate_non_negative("GCN normalisation takes square roots of degrees")?;
        let n = self.num_nodes;
        let a = &self.adjacency;
        debug_assert!(a.is_csr(), "a Graph's adjacency is CSR, rows the sources");
        // Degrees at the targets (the stored edges in order, then the added
        // self-loops, as a scatter-add over PyG's edge list would sum them),
        // and the number of entries of each operator row (one per target).
        let mut has_loop = vec![false; n];
        let mut deg = vec![0.0; n];
        let mut indptr = vec![0usize; n + 1];
        for (&w, (s, d)) in a.iter() {
            if s == d {
                has_loop[s] = true;
            }
            deg[d] += w;
            indptr[d + 1] += 1;
        }
        for i in (0..n).filter(|&i| !has_loop[i]) {
            deg[i] += 1.0;
            indptr[i + 1] += 1;
        }
        let dis: Vec<f64> = deg.into_iter().map(inv_sqrt).collect();
        for r in 0..n {
            indptr[r + 1] += indptr[r];
        }
        // `P = Âᵀ` scaled, written straight into CSR: walking the sources in
        // order fills every target row in increasing column order, and a
        // `Graph` stores each (source, target) pair once, so the rows come
        // out sorted and without duplicates (no triplet list to sort).
        let nnz = indptr[n];
        let mut next = indptr[..n].to_vec();
        let mut indices = vec![0usize; nnz];
        let mut data = vec![0.0; nnz];
        for (s, row) in a.outer_iterator().enumerate() {
            let mut place = |d: usize, w: f64| {
                let k = next[d];
                next[d] += 1;
                indices[k] = s;
                data[k] = dis[s] * w * dis[d];
            };
            for (d, &w) in row.iter() {
                place(d, w);
            }
            if !has_loop[s] {
                place(s, 1.0);
            }
        }
        drop(next);
        CsMat::try_new((n, n), indptr, indices, data).map_err(|(_, _, _, e)| {
            Error::InvalidConfig(format!("GCN operator: a malformed adjacency ({e})"))
        })
    }

    /// The sum-aggregation operator `P` (`out = P · X`, row `i` summing the
    /// features of every node with an edge into `i`), as PyG's
    /// `aggr="add"` with messages `x_j` (`GINConv`): `P[i][j] = 1` for every
    /// stored edge `j → i`. Edge weights are ignored, as PyG's `GINConv`
    /// and `SAGEConv` ignore them; existing self-loops count as edges and
    /// none are added. (A [`Graph`] sums repeated edges into one entry, so
    /// a repeated edge counts once.)
    ///
    /// # Errors
    /// [`Error::Empty`] for [`Graph::empty`].
    pub fn sum_operator(&self) -> Result<CsMat<f64>> {
        self.require_nodes("sum operator")?;
        let n = self.num_nodes;
        let triplets = self
            .adjacency
            .iter()
            .map(|(_, (s, d))| (d, s, 1.0))
            .collect();
        Ok(csr_from_triplets(n, n, triplets))
    }

    /// The mean-aggregation operator `P` (`out = P · X`), as PyG's
    /// `aggr="mean"` with messages `x_j` (`SAGEConv`): `P[i][j] = 1 / c_i`
    /// for every stored edge `j → i`, `c_i` the number of edges into `i`; a
    /// node without incoming edges gets a zero row (PyG's empty mean).
    /// Weights, self-loops and repeated edges as [`Graph::sum_operator`].
    ///
    /// # Errors
    /// [`Error::Empty`] for [`Graph::empty`].
    pub fn mean_operator(&self) -> Result<CsMat<f64>> {
        self.require_nodes("mean operator")?;
        let n = self.num_nodes;
        let mut count = vec![0usize; n];
        for (_, (_, d)) in self.adjacency.iter() {
            count[d] += 1;
        }
        let triplets = self
            .adjacency
            .iter()
            .map(|(_, (s, d))| (d, s, 1.0 / count[d] as f64))
            .collect();
        Ok(csr_from_triplets(n, n, triplets))
    }

    /// The edge list `(src, dst, w)` of PyG's `get_laplacian`: existing
    /// self-loops removed, off-diagonal entries first, then one diagonal
    /// entry for every node.
    fn pyg_laplacian_edges(&self, norm: Normalization) -> Result<Vec<(usize, usize, f64)>> {
        self.require_nodes("Laplacian")?;
        let n = self.num_nodes;
        if norm != Normalization::None {
            let bad = self
                .adjacency
                .iter()
                .find(|&(&w, (s, d))| s != d && w < 0.0);
            if let Some((&weight, (src, dst))) = bad {
                return Err(Error::NegativeWeight {
                    src,
                    dst,
                    weight,
                    why: "the sym/rw Laplacian needs non-negative degrees",
                });
            }
        }
        let mut edges: Vec<(usize, usize, f64)> = self
            .adjacency
            .iter()
            .filter(|&(_, (s, d))| s != d)
            .map(|(&w, (s, d))| (s, d, w))
            .collect();
        // get_laplacian sums degrees at the source (`scatter(w, row)`).
        let mut deg = vec![0.0; n];
        for &(s, _, w) in &edges {
            deg[s] += w;
        }
        match norm {
            Normalization::None => {
                for e in &mut edges {
                    e.2 = -e.2;
                }
                edges.extend((0..n).map(|i| (i, i, deg[i])));
            }
            Normalization::Sym => {
                let dis: Vec<f64> = deg.into_iter().map(inv_sqrt).collect();
                for e in &mut edges {
                    e.2 = -(dis[e.0] * e.2 * dis[e.1]);
                }
                edges.extend((0..n).map(|i| (i, i, 1.0)));
            }
            Normalization::Rw => {
                let inv: Vec<f64> = deg
                    .into_iter()
                    .map(|d| {
                        let v = 1.0 / d;
                        if v == f64::INFINITY { 0.0 } else { v }
                    })
                    .collect();
                for e in &mut edges {
                    e.2 = -(inv[e.0] * e.2);
                }
                edges.extend((0..n).map(|i| (i, i, 1.0)));
            }
        }
        Ok(edges)
    }

    /// The Laplacian in propagation form `P` (`out = P · X`), exactly what
    /// PyG's `ChebConv` propagates after `get_laplacian(normalization)`.
    ///
    /// Existing self-loops are removed first and degrees are summed at the
    /// source node, `deg[i] = Σ_j A[i][j]` (PyG `scatter(w, row)`). With
    /// `D = diag(deg)` and `X⁺` meaning `1/x` with `1/0 = 0`:
    /// * `Sym`: `P = I - D^{-1/2} Aᵀ D^{-1/2}`; an isolated node has `P_ii = 1`;
    /// * `Rw`: `P = I - Aᵀ D⁺` (PyG's edge matrix is `I - D⁺ A`, whose rows
    ///   sum to 0 at nodes with out-edges; in `P` these are the columns);
    /// * `None`: `P = D - Aᵀ`.
    ///
    /// For a symmetric graph `Aᵀ = A` and these are the textbook forms.
    ///
    /// # Errors
    /// [`Error::Empty`] for [`Graph::empty`]; [`Error::NegativeWeight`] for a
    /// negative weight on a non-loop edge with `Sym` or `Rw`.
    pub fn laplacian(&self, norm: Normalization) -> Result<CsMat<f64>> {
        let n = self.num_nodes;
        let edges = self.pyg_laplacian_edges(norm)?;
        Ok(csr_from_triplets(n, n, transpose_triplets(edges)))
    }

    /// The scaled Laplacian `L̃ = 2 L / λ_max - I` in propagation form, exactly
    /// PyG's `ChebConv.__norm__`: every Laplacian weight becomes
    /// `2 w / λ_max` (a `+inf` result is replaced by 0) and 1 is subtracted
    /// from each diagonal entry.
    ///
    /// # Errors
    /// As [`Graph::laplacian`], plus [`Error::InvalidConfig`] unless
    /// `lambda_max` is finite and `> 0`.
    pub fn scaled_laplacian(&self, norm: Normalization, lambda_max: f64) -> Result<CsMat<f64>> {
        check_lambda(lambda_max)?;
        self.scaled_laplacian_per_node(norm, |_| lambda_max)
    }

    /// Scaled Laplacian where the edge leaving node `s` is scaled with
    /// `lambda_of(s)` (PyG's `lambda_max[batch[edge_index[0]]]`).
    pub(crate) fn scaled_laplacian_per_node(
        &self,
        norm: Normalization,
        lambda_of: impl Fn(usize) -> f64,
    ) -> Result<CsMat<f64>> {
        let n = self.num_nodes;
        let mut edges = self.pyg_laplacian_edges(norm)?;
        for e in &mut edges {
            let mut v = (2.0 * e.2) / lambda_of(e.0);
            if v == f64::INFINITY {
                v = 0.0;
            }
            if e.0 == e.1 {
                v -= 1.0;
            }
            e.2 = v;
        }
        Ok(csr_from_triplets(n, n, transpose_triplets(edges)))
    }
}

/// Validates a λ_max for the scaled Laplacian.
pub(crate) fn check_lambda(lambda_max: f64) -> Result<()> {
    check_positive("lambda_max", lambda_max)
}

fn transpose_triplets(edges: Vec<(usize, usize, f64)>) -> Vec<(usize, usize, f64)> {
    edges.into_iter().map(|(s, d, w)| (d, s, w)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng, rngs::StdRng};

    /// The operator as it was built before it was written straight into
    /// CSR: every entry a `(target, source, value)` triplet, sorted.
    fn gcn_operator_from_triplets(g: &Graph) -> CsMat<f64> {
        let n = g.num_nodes;
        let mut has_loop = vec![false; n];
        let mut edges: Vec<(usize, usize, f64)> = Vec::new();
        for (&w, (s, d)) in g.adjacency.iter() {
            if s == d {
                has_loop[s] = true;
            }
            edges.push((s, d, w));
        }
        edges.extend((0..n).filter(|&i| !has_loop[i]).map(|i| (i, i, 1.0)));
        let mut deg = vec![0.0; n];
        for &(_, d, w) in &edges {
            deg[d] += w;
        }
        let dis: Vec<f64> = deg.into_iter().map(inv_sqrt).collect();
        let triplets = edges
            .into_iter()
            .map(|(s, d, w)| (d, s, dis[s] * w * dis[d]))
            .collect();
        csr_from_triplets(n, n, triplets)
    }

    /// Directed weighted graphs with self-loops on some nodes, zero
    /// weights, repeated edges and isolated nodes: the direct CSR build is
    /// the triplet build to the bit (structure and values).
    #[test]
    fn gcn_operator_is_the_triplet_build_bit_for_bit() {
        let mut rng = StdRng::seed_from_u64(5);
        for case in 0..40 {
            let n = 1 + case % 17;
            let m = rng.random_range(0..4 * n);
            let edges: Vec<(usize, usize, f64)> = (0..m)
                .map(|_| {
                    let w = match rng.random_range(0..4) {
                        0 => 0.0,
                        1 => 1.0,
                        _ => rng.random::<f64>() * 3.0,
                    };
                    (rng.random_range(0..n), rng.random_range(0..n), w)
                })
                .collect();
            let g = Graph::from_weighted_edges(n, &edges).unwrap();
            let direct = g.gcn_operator().unwrap();
            let reference = gcn_operator_from_triplets(&g);
            assert_eq!(direct.indptr(), reference.indptr(), "case {case}");
            assert_eq!(direct.indices(), reference.indices(), "case {case}");
            let bits = |m: &CsMat<f64>| m.data().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&direct), bits(&reference), "case {case}");
        }
    }
}
