//! MVCAttn: multi-vote cross-attention (`docs/hdgcn-math.md` §4).

use ndarray::{Array2, s};
use rand::Rng;

use crate::autograd::{Segments, Tape, Var};
use crate::backend::{Axis, Backend, SegmentReduce};
use crate::error::{Error, Result, check_non_negative};
use crate::float::Float;
use crate::named::named_enum;
use crate::nn::{Dropout, LayerNorm, Linear, Module, ParamVisitor, init};

/// Largest graph (in nodes) for which [`AttentionMaps::dynamic_adjacency`]
/// forms the dense `N_g x N_g` matrix (4096² `f64` entries are 128 MiB).
pub const MAX_DENSE_NODES: usize = 4096;

/// How nodes and supernodes exchange attention.
///
/// ```
/// use hdgcn::attention::Routing;
///
/// assert_eq!("Votes".parse::<Routing>()?, Routing::Votes);
/// assert_eq!(Routing::Attention.as_str().parse::<Routing>()?, Routing::Attention);
/// assert!("vote".parse::<Routing>().unwrap_err().to_string().contains("'vote'"));
/// # Ok::<(), hdgcn::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Routing {
    /// §4 as written (the default). Forward step: each supernode attends
    /// over its graph's nodes (`A_f`, `M x N`, softmax over nodes, rows sum
    /// to 1), `Ŝ = A_f Z W_fv`. Backward step: each node attends over the
    /// supernodes (`A_b`, `N x M`, softmax over supernodes, rows sum to 1),
    /// `Z' = A_b Ŝ W_bv`. `A_d = A_b A_f` is row-stochastic.
    #[default]
    Attention,
    /// The reference code's "votes" reading. Forward step: each node splits
    /// one vote among the `M` supernodes (softmax over supernodes, so the
    /// *columns* of `A_f` (`M x N`) sum to 1), `Ŝ = A_f Z W_fv`, i.e.
    /// `ŝ_m = Σ_v A_f[m, v] z_v W_fv` (an unnormalised vote-weighted sum).
    /// Backward step: each supernode distributes over the nodes (softmax over
    /// nodes, so the *columns* of `A_b` (`N x M`) sum to 1),
    /// `Z' = A_b Ŝ W_bv`. Scores are scaled by `1/sqrt(d_c)` and
    /// `1/sqrt(d_a)` (not by the square root of the batch size, as the
    /// reference code does by mistake).
    Votes,
}

named_enum!(Routing, "routing", {
    Attention => "attention",
    Votes => "votes",
});

/// Hyper-parameters of [`MvcAttn`].
#[derive(Debug, Clone, PartialEq)]
pub struct MvcAttnConfig {
    /// Node-state width `h` (input and output).
    pub hidden: usize,
    /// Supernodes per graph `M` (default 10, as the paper).
    pub supernodes: usize,
    /// Query/key width of the forward (node -> supernode) step, `d_c`.
    pub d_c: usize,
    /// Query/key width of the backward (supernode -> node) step, `d_a`.
    pub d_a: usize,
    /// Dropout probability on the attention probabilities `A_f` and `A_b`
    /// (after the softmax, before they weight values), active in training
    /// mode only. Default 0.
    pub dropout: f64,
    /// Routing (default [`Routing::Attention`]).
    pub routing: Routing,
    /// Epsilon of the supernode LayerNorm (default `1e-5`).
    pub layer_norm_eps: f64,
    /// Scale-invariant scores (default `false`, §4 as written). When set,
    /// the node states enter both scores through a LayerNorm
    /// (`score_norm.nodes`), and `Ŝ` enters the backward query through
    /// another (`score_norm.supernodes`); the values (`Z W_fv`, `Ŝ W_bv`)
    /// are unchanged. `S` is already normalised by MVProj, so every score
    /// then compares two normalised vectors. Without it, `E_f` scales with
    /// the node states and `E_b` with their square, and a trained model can stay
    /// at the point where every supernode is the same and `A_b` is uniform
    /// (`docs/hdgcn.md`, "What a trained transition does on text").
    pub score_norm: bool,
}

impl MvcAttnConfig {
    /// Defaults for width `hidden`: `M = 10`, `d_c = d_a = hidden`, no
    /// dropout, attention routing, `eps = 1e-5`, no score normalisation.
    pub fn new(hidden: usize) -> Self {
        MvcAttnConfig {
            hidden,
            supernodes: 10,
            d_c: hidden,
            d_a: hidden,
            dropout: 0.0,
            routing: Routing::Attention,
            layer_norm_eps: 1e-5,
            score_norm: false,
        }
    }

    /// Checks every field: sizes must be positive, `0 <= dropout < 1`, the
    /// epsilon finite and non-negative ([`Error::InvalidConfig`] otherwise).
    pub fn validate(&self) -> Result<()> {
        for (name, v) in [
            ("hidden", self.hidden),
            ("supernodes", self.supernodes),
            ("d_c", self.d_c),
            ("d_a", self.d_a),
        ] {
            if v == 0 {
                return Err(Error::InvalidConfig(format!(
                    "MvcAttn: {name} must be positive"
                )));
            }
        }
        if self.hidden.checked_mul(self.supernodes).is_none() {
            return Err(Error::InvalidConfig(
                "MvcAttn: hidden * supernodes overflows".into(),
            ));
        }
        if !(0.0..1.0).contains(&self.dropout) {
            return Err(Error::InvalidConfig(format!(
                "MvcAttn: dropout must be in [0, 1), got {}",
                self.dropout
            )));
        }
        check_non_negative("MvcAttn: layer_norm_eps", self.layer_norm_eps)?;
        Ok(())
    }

    /// Number of parameters: MVProj (`h · M·h`), its LayerNorm (`2h`), the
    /// score LayerNorms (`4h`, with `score_norm`) and the six projections
    /// (`h · (2 d_c + 2 d_a + 2h)`). `None` when it overflows.
    pub fn num_params(&self) -> Option<usize> {
        let h = self.hidden;
        let mvproj = h.checked_mul(self.supernodes)?.checked_mul(h)?;
        let norms = h.checked_mul(if self.score_norm { 6 } else { 2 })?;
        let widths = self
            .d_c
            .checked_add(self.d_a)?
            .checked_add(h)?
            .checked_mul(2)?;
        mvproj
            .checked_add(norms)?
            .checked_add(h.checked_mul(widths)?)
    }

    /// Validates the configuration and initialises a layer (weights as
    /// `torch.nn.Linear`, LayerNorm to identity).
    pub fn build<B: Backend, R: Rng + ?Sized>(
        &self,
        backend: &B,
        rng: &mut R,
    ) -> Result<MvcAttn<B>> {
        self.validate()?;
        let (h, m) = (self.hidden, self.supernodes);
        // `validate` has checked that `m * h` does not overflow.
        init::check_size::<B::Elem>("MvcAttn MVProj weight", h, m * h)?;
        crate::limits::check_elements::<B::Elem>(
            format_args!("MvcAttn parameters (hidden {h}, {m} supernodes)"),
            self.num_params(),
        )?;
        let mvproj = init::linear_default(backend, h, h, m * h, rng);
        let mvproj_norm = LayerNorm::new(backend, h, self.layer_norm_eps)?;
        let score_norm = if self.score_norm {
            Some(ScoreNorm {
                nodes: LayerNorm::new(backend, h, self.layer_norm_eps)?,
                supernodes: LayerNorm::new(backend, h, self.layer_norm_eps)?,
            })
        } else {
            None
        };
        let lin = |d: usize, rng: &mut R| Linear::new(backend, h, d, false, rng);
        let fc_q = lin(self.d_c, rng)?;
        let fc_k = lin(self.d_c, rng)?;
        let fc_v = lin(h, rng)?;
        let bc_q = lin(self.d_a, rng)?;
        let bc_k = lin(self.d_a, rng)?;
        let bc_v = lin(h, rng)?;
        Ok(MvcAttn {
            config: self.clone(),
            mvproj,
            mvproj_norm,
            fc_q,
            fc_k,
            fc_v,
            bc_q,
            bc_k,
            bc_v,
            score_norm,
            dropout: Dropout::new(self.dropout)?,
        })
    }
}

/// Multi-vote cross-attention (HDGCN's dynamic transition, math.md §4).
///
/// For each graph of a batch (node states `Z`, `N_g x h`):
///
/// 1. **MVProj**: `s_m = LayerNorm(mean_v z_v W^V_m)`, `m = 1..M` (`S`: `M x h`).
/// 2. **FCAttn**: `E_f = (S W_fq)(Z W_fk)ᵀ / sqrt(d_c)`, `A_f` its softmax,
///    `Ŝ = A_f Z W_fv` (`M x h`).
/// 3. **BCAttn**: `E_b = (Z W_bk)(Ŝ W_bq)ᵀ / sqrt(d_a)`, `A_b` its softmax,
///    `Z' = A_b Ŝ W_bv` (`N_g x h`).
///
/// The softmax axes depend on [`Routing`]. Products are reassociated so that
/// nothing of size `N x d` besides `Z` and `Z'` is formed:
/// `E_f = (S W_fq W_fkᵀ) Zᵀ`, `Ŝ = (A_f Z) W_fv`, `E_b = Z (Ŝ W_bq W_bkᵀ)ᵀ`
/// (identical maths; `O(N·M·h)` time, `O(N·M)` memory besides `Z`, `Z'`).
/// Every sum and softmax over nodes runs within each graph
/// ([`Segments`]); graph `g`'s supernodes are rows `g·M..(g+1)·M` of the
/// `(G·M) x h` supernode tensors. Dropout (training mode, probability
/// [`MvcAttnConfig::dropout`]) acts on `A_f` and `A_b`.
///
/// Parameters: `mvproj.weight` (`h x (M·h)`, `W^V_m` is column block `m`),
/// `mvproj_norm.{weight,bias}`, then, with [`MvcAttnConfig::score_norm`],
/// `score_norm.nodes.{weight,bias}` and `score_norm.supernodes.{weight,bias}`,
/// then `fcattn.{q,k,v}.weight`, `bcattn.{q,k,v}.weight` (`h x d`, no
/// biases).
///
/// ```
/// use hdgcn::attention::{MvcAttnConfig, Routing};
/// use hdgcn::autograd::{Segments, Tape};
/// use hdgcn::backend::Cpu;
/// use hdgcn::nn::Module;
/// use rand::SeedableRng;
///
/// let cpu = Cpu::<f64>::new();
/// let mut rng = rand::rngs::StdRng::seed_from_u64(0);
/// let mut cfg = MvcAttnConfig::new(4);
/// cfg.supernodes = 2;
/// let layer = cfg.build(&cpu, &mut rng)?;
///
/// // A batch of two graphs: nodes 0..3 and 3..5.
/// let seg = Segments::new(&cpu, &[0, 3, 5])?;
/// let tape = Tape::new(&cpu);
/// let z = tape.constant_array(&ndarray::Array2::from_shape_fn((5, 4), |(i, j)| (i * 4 + j) as f64 / 10.0));
/// let (out, maps) = layer.forward_with_maps(&tape, &z, &seg)?;
/// assert_eq!(out.shape(), (5, 4));
/// assert_eq!(maps.forward[0].dim(), (2, 3)); // A_f of graph 0: M x N_0
/// assert_eq!(maps.backward[1].dim(), (2, 2)); // A_b of graph 1: N_1 x M
/// let a_d = maps.dynamic_adjacency(0)?;       // N_0 x N_0, rows sum to 1
/// assert!(a_d.rows().into_iter().all(|r| (r.sum() - 1.0).abs() < 1e-12));
///
/// let grads = out.square().sum_all().backward()?;
/// assert_eq!(grads.len(), layer.named_params().len());
/// # Ok::<(), hdgcn::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct MvcAttn<B: Backend> {
    config: MvcAttnConfig,
    mvproj: crate::autograd::Param<B>,
    mvproj_norm: LayerNorm<B>,
    fc_q: Linear<B>,
    fc_k: Linear<B>,
    fc_v: Linear<B>,
    bc_q: Linear<B>,
    bc_k: Linear<B>,
    bc_v: Linear<B>,
    score_norm: Option<ScoreNorm<B>>,
    dropout: Dropout,
}

/// The LayerNorms of [`MvcAttnConfig::score_norm`].
#[derive(Debug, Clone)]
struct ScoreNorm<B: Backend> {
    /// Node states as they enter `E_f` and `E_b`.
    nodes: LayerNorm<B>,
    /// `Ŝ` as it enters the backward query.
    supernodes: LayerNorm<B>,
}

/// The attention maps of one forward pass, per graph, on the host (`f64`),
/// before dropout.
#[derive(Debug, Clone, PartialEq)]
pub struct AttentionMaps {
    /// `A_f` per graph, `M x N_g`. Under [`Routing::Attention`] each row sums
    /// to 1 (a supernode's attention over the nodes); under
    /// [`Routing::Votes`] each column sums to 1 (a node's vote).
    pub forward: Vec<Array2<f64>>,
    /// `A_b` per graph, `N_g x M`. Under [`Routing::Attention`] each row sums
    /// to 1 (a node's attention over the supernodes); under
    /// [`Routing::Votes`] each column sums to 1.
    pub backward: Vec<Array2<f64>>,
}

impl AttentionMaps {
    /// The dynamic adjacency `A_d = A_b A_f` (`N_g x N_g`) of graph `graph`:
    /// row-stochastic under [`Routing::Attention`]. Formed densely, so only
    /// for graphs of at most [`MAX_DENSE_NODES`] nodes
    /// ([`Error::InvalidConfig`] above that, [`Error::IndexOutOfRange`] for a
    /// graph that does not exist).
    pub fn dynamic_adjacency(&self, graph: usize) -> Result<Array2<f64>> {
        let (af, ab) = match (self.forward.get(graph), self.backward.get(graph)) {
            (Some(f), Some(b)) => (f, b),
            _ => {
                return Err(Error::IndexOutOfRange {
                    what: "graph of AttentionMaps",
                    index: graph,
                    len: self.forward.len().min(self.backward.len()),
                });
            }
        };
        let n = ab.nrows();
        if n > MAX_DENSE_NODES {
            return Err(Error::InvalidConfig(format!(
                "dynamic_adjacency forms an N x N matrix; graph {graph} has {n} nodes \
                 (limit {MAX_DENSE_NODES}); use A_f and A_b directly"
            )));
        }
        if af.dim() != (ab.ncols(), n) {
            return Err(Error::shape(
                "dynamic_adjacency",
                format!("A_f of shape ({}, {n})", ab.ncols()),
                format!("{:?}", af.dim()),
            ));
        }
        Ok(ab.dot(af))
    }
}

/// Mean Shannon entropy of the rows of `probs`, each divided by the largest
/// possible, `ln(columns)`: 1 when every row is uniform, 0 when every row is
/// one-hot. A diagnostic for [`AttentionMaps`]: under [`Routing::Attention`]
/// pass `A_f` or `A_b` as they are; under [`Routing::Votes`] their columns
/// are the distributions, so pass the transposes (`.t()`).
///
/// A value of 1 for `A_b` means every node reads back the same mixture of
/// supernodes, so the transition gives every node the same vector
/// (`docs/hdgcn.md`, "What a trained transition does on text").
///
/// ```
/// use hdgcn::attention::normalized_entropy;
/// use ndarray::array;
///
/// let uniform = array![[0.25, 0.25, 0.25, 0.25]];
/// let one_hot = array![[0.0, 1.0, 0.0, 0.0]];
/// assert!((normalized_entropy(uniform.view())? - 1.0).abs() < 1e-12);
/// assert_eq!(normalized_entropy(one_hot.view())?, 0.0);
/// # Ok::<(), hdgcn::Error>(())
/// ```
///
/// # Errors
/// [`Error::Empty`] for a matrix without rows or with fewer than two
/// columns (no spread to measure); [`Error::NonFinite`] or
/// [`Error::InvalidConfig`] for an entry that is not a probability
/// (not finite, negative or above 1) or a row that does not sum to 1
/// within `max(1e-4, n · 2^-24)` for a row of `n` entries: the maps of an
/// `f32` model carry its rounding, and an `f32` sum of `n` terms may be off
/// by up to about `n · 2^-24` (a supernode's row over PubMed's 19,717 nodes
/// sums to `1 ± 2e-4`).
pub fn normalized_entropy(probs: ndarray::ArrayView2<'_, f64>) -> Result<f64> {
    let (rows, cols) = probs.dim();
    if rows == 0 || cols < 2 {
        return Err(Error::Empty(format!(
            "normalized_entropy needs at least one row and two columns, got ({rows}, {cols})"
        )));
    }
    // The rounding bound of an `f32` sum of `cols` terms, floored at 1e-4.
    let row_sum_tolerance = 1e-4_f64.max(cols as f64 * f64::from(f32::EPSILON) / 2.0);
    let mut total = 0.0;
    for (r, row) in probs.rows().into_iter().enumerate() {
        let mut sum = 0.0;
        for (c, &p) in row.iter().enumerate() {
            if !p.is_finite() {
                return Err(Error::NonFinite {
                    what: format!("normalized_entropy, entry ({r}, {c})"),
                    value: p,
                });
            }
            if !(0.0..=1.0).contains(&p) {
                return Err(Error::InvalidConfig(format!(
                    "normalized_entropy: entry ({r}, {c}) = {p} is not a probability"
                )));
            }
            if p > 0.0 {
                total -= p * p.ln();
            }
            sum += p;
        }
        if (sum - 1.0).abs() > row_sum_tolerance {
            return Err(Error::InvalidConfig(format!(
                "normalized_entropy: row {r} sums to {sum}, not 1 (pass the transpose of a \
                 column-stochastic map)"
            )));
        }
    }
    Ok(total / rows as f64 / (cols as f64).ln())
}

fn to_f64<F: Float>(a: ndarray::ArrayView2<'_, F>) -> Array2<f64> {
    a.mapv(|v| v.to_f64_exact())
}

impl<B: Backend> MvcAttn<B> {
    /// The configuration the layer was built with.
    pub fn config(&self) -> &MvcAttnConfig {
        &self.config
    }

    /// `Z'` (`N x h`) for node states `z` (`N x h`, rows grouped by `seg`).
    ///
    /// Errors: [`Error::ShapeMismatch`] if `z` is not `seg.num_rows() x h`,
    /// [`Error::Empty`] if any graph of the batch has no nodes.
    pub fn forward(&self, tape: &Tape<B>, z: &Var<B>, seg: &Segments<B>) -> Result<Var<B>> {
        Ok(self.run(tape, z, seg, None)?.0)
    }

    /// `Z' w` for a weight `w` (`h x h'`), computed as `A_b (Ŝ (W_bv w))`:
    /// `w` joins the value weights, so the product runs over the `G·M`
    /// supernode rows instead of the `N` node rows. The same value as
    /// `self.forward(..)?.matmul(w)` up to rounding (HD-ChebConv's
    /// `T_k(Z) Wd_k`).
    ///
    /// Errors: as [`MvcAttn::forward`], and [`Error::ShapeMismatch`] if `w`
    /// does not have `h` rows.
    pub fn forward_then(
        &self,
        tape: &Tape<B>,
        z: &Var<B>,
        seg: &Segments<B>,
        w: &Var<B>,
    ) -> Result<Var<B>> {
        Ok(self.run(tape, z, seg, Some(w))?.0)
    }

    /// As [`MvcAttn::forward`], also returning `A_f` and `A_b` per graph
    /// (copied to the host).
    pub fn forward_with_maps(
        &self,
        tape: &Tape<B>,
        z: &Var<B>,
        seg: &Segments<B>,
    ) -> Result<(Var<B>, AttentionMaps)> {
        self.forward_with_maps_then(tape, z, seg, None)
    }

    /// As [`MvcAttn::forward_with_maps`], the output multiplied by `w` as in
    /// [`MvcAttn::forward_then`] when one is given.
    pub(crate) fn forward_with_maps_then(
        &self,
        tape: &Tape<B>,
        z: &Var<B>,
        seg: &Segments<B>,
        w: Option<&Var<B>>,
    ) -> Result<(Var<B>, AttentionMaps)> {
        let (out, af, ab) = self.run(tape, z, seg, w)?;
        let (af, ab) = (af.to_array(), ab.to_array());
        let ptr = seg.ptr();
        let mut maps = AttentionMaps {
            forward: Vec::with_capacity(seg.num_segments()),
            backward: Vec::with_capacity(seg.num_segments()),
        };
        for w in ptr.windows(2) {
            // Both are stored node-major (N x M); A_f is reported as M x N_g.
            maps.forward.push(to_f64(af.slice(s![w[0]..w[1], ..]).t()));
            maps.backward.push(to_f64(ab.slice(s![w[0]..w[1], ..])));
        }
        Ok((out, maps))
    }

    /// Returns `(Z' w, A_fᵀ, A_b)` (`Z'` alone without `w`) with both maps
    /// node-major (`N x M`), before dropout.
    fn run(
        &self,
        tape: &Tape<B>,
        z: &Var<B>,
        seg: &Segments<B>,
        out_w: Option<&Var<B>>,
    ) -> Result<(Var<B>, Var<B>, Var<B>)> {
        let cfg = &self.config;
        let (h, m) = (cfg.hidden, cfg.supernodes);
        let (n, c) = z.shape();
        if (n, c) != (seg.num_rows(), h) {
            return Err(Error::shape(
                "MvcAttn input",
                format!("({}, {h})", seg.num_rows()),
                format!("({n}, {c})"),
            ));
        }
        if let Some(w) = out_w
            && w.shape().0 != h
        {
            return Err(Error::shape(
                "MvcAttn output weight",
                format!("({h}, _)"),
                format!("{:?}", w.shape()),
            ));
        }
        // `W_bv w` where a weight follows the output (h x h products).
        let value_w = |w_bv: Var<B>| -> Result<Var<B>> {
            match out_w {
                Some(w) => w_bv.matmul(w),
                None => Ok(w_bv),
            }
        };
        if let Some(g) = seg.ptr().windows(2).position(|w| w[0] == w[1]) {
            return Err(Error::Empty(format!(
                "MvcAttn: graph {g} of the batch has no nodes (softmax over zero nodes)"
            )));
        }
        let graphs = seg.num_segments();
        let p = |l: &Linear<B>| tape.param(&l.weight);

        // 1. MVProj: S = LayerNorm(mean_v z_v W^V_m), (G·M) x h.
        let zbar = z.segment_reduce(seg, SegmentReduce::Mean)?;
        let sup_rows = graphs
            .checked_mul(m)
            .ok_or_else(|| Error::InvalidConfig("MvcAttn: graphs * supernodes overflows".into()))?;
        let s_all = zbar
            .matmul(&tape.param(&self.mvproj))?
            .reshape(sup_rows, h)?;
        let s_sup = self.mvproj_norm.forward(&s_all)?;

        // 2. FCAttn. E_fᵀ[v, m] = z_v · (s_m W_fq W_fkᵀ) / sqrt(d_c), N x M.
        // `W_fq W_fkᵀ` (h x h) is formed first where that is the cheaper
        // order (the same product, associated differently).
        let qf = if merge_pays(sup_rows, h, cfg.d_c) {
            let w_qk = p(&self.fc_q).matmul_t(&p(&self.fc_k), false, true)?;
            s_sup.matmul(&w_qk)?
        } else {
            s_sup
                .matmul(&p(&self.fc_q))?
                .matmul_t(&p(&self.fc_k), false, true)?
        };
        // Node states as they enter the scores (values use `z` itself).
        let z_score = match &self.score_norm {
            Some(sn) => sn.nodes.forward(z)?,
            None => z.clone(),
        };
        let ef = z_score
            .segment_scores(&qf, seg, m)?
            .scale(1.0 / (cfg.d_c as f64).sqrt());
        let af = match cfg.routing {
            Routing::Attention => ef.segment_softmax(seg)?, // over nodes, per supernode
            Routing::Votes => ef.softmax(Axis::Cols),       // over supernodes, per node
        };
        let af_d = self.dropout.forward(&af)?;
        // Ŝ = (A_f Z) W_fv.
        let pooled = af_d.segment_weighted_sum(z, seg)?;

        // 3. BCAttn. E_b[v, m] = z_v · (ŝ_m W_bq W_bkᵀ) / sqrt(d_a), N x M,
        // and the values Ŝ W_bv. Without score normalisation both are
        // `A_f Z` times an h x h product of the weights (`W_fv W_bq W_bkᵀ`,
        // `W_fv W_bv`), formed first: two products over the supernodes
        // instead of four.
        let (qb, vb) = match &self.score_norm {
            None => {
                let w_fv = p(&self.fc_v);
                let w_q = w_fv.matmul(&p(&self.bc_q))?;
                let w_qk = w_q.matmul_t(&p(&self.bc_k), false, true)?;
                let w_v = value_w(w_fv.matmul(&p(&self.bc_v))?)?;
                (pooled.matmul(&w_qk)?, pooled.matmul(&w_v)?)
            }
            Some(sn) => {
                let s_hat = pooled.matmul(&p(&self.fc_v))?;
                let qb = sn
                    .supernodes
                    .forward(&s_hat)?
                    .matmul(&p(&self.bc_q))?
                    .matmul_t(&p(&self.bc_k), false, true)?;
                (qb, s_hat.matmul(&value_w(p(&self.bc_v))?)?)
            }
        };
        let eb = z_score
            .segment_scores(&qb, seg, m)?
            .scale(1.0 / (cfg.d_a as f64).sqrt());
        let ab = match cfg.routing {
            Routing::Attention => eb.softmax(Axis::Cols), // over supernodes, per node
            Routing::Votes => eb.segment_softmax(seg)?,   // over nodes, per supernode
        };
        let ab_d = self.dropout.forward(&ab)?;
        // Z' = A_b (Ŝ W_bv), or A_b (Ŝ W_bv w).
        let out = ab_d.segment_mix(&vb, seg)?;
        Ok((out, af, ab))
    }
}

/// Whether `S (W_q W_kᵀ)` (`W_q`, `W_k`: `h x d`) costs fewer multiplies
/// than `(S W_q) W_kᵀ` for `rows` rows of `S`.
fn merge_pays(rows: usize, h: usize, d: usize) -> bool {
    let (r, h, d) = (rows as u128, h as u128, d as u128);
    r * h * h + h * h * d < 2 * r * h * d
}

impl<B: Backend> Module<B> for MvcAttn<B> {
    fn visit_params(&self, v: &mut ParamVisitor<'_, B>) {
        v.param("mvproj.weight", &self.mvproj);
        v.child("mvproj_norm", &self.mvproj_norm);
        if let Some(sn) = &self.score_norm {
            v.child("score_norm.nodes", &sn.nodes);
            v.child("score_norm.supernodes", &sn.supernodes);
        }
        v.child("fcattn.q", &self.fc_q);
        v.child("fcattn.k", &self.fc_k);
        v.child("fcattn.v", &self.fc_v);
        v.child("bcattn.q", &self.bc_q);
        v.child("bcattn.k", &self.bc_k);
        v.child("bcattn.v", &self.bc_v);
    }

    fn set_training(&mut self, training: bool) {
        self.dropout.set_training(training);
    }
}
