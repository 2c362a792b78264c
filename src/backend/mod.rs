//! Compute backends.
//!
//! A [`Backend`] bundles every kernel the autograd tape and the optimisers
//! need: dense and sparse products, element-wise maps, reductions, segment
//! operations over a batch of graphs, losses and fused optimiser updates.
//! Layers never call kernels directly; they build [`Var`](crate::autograd::Var)
//! expressions, and the tape dispatches forward and backward through the
//! backend. A new backend (the wgpu one, say) implements this trait and every
//! layer, loss and optimiser runs on it unchanged.
//!
//! All tensors are **2-D, row-major** matrices: node features are `N x d`,
//! weights `d_in x d_out`, biases `1 x d_out`, scalars `1 x 1`. Graph neural
//! networks need nothing else, and the restriction keeps every kernel simple.
//!
//! Index vectors (labels, gather indices, segment offsets) live on the device
//! as [`Backend::Index`].

pub mod cpu;
mod device;
pub mod rng;
#[cfg(feature = "wgpu")]
#[cfg_attr(docsrs, doc(cfg(feature = "wgpu")))]
pub mod wgpu;

use ndarray::{Array2, ArrayView2};
use sprs::CsMat;

use crate::float::Float;

#[cfg(feature = "wgpu")]
pub use self::wgpu::Wgpu;
pub use cpu::Cpu;
pub use device::{Device, WithBackend};

/// Element-wise binary operations (with broadcasting, see [`Backend::binary`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    /// `a + b`
    Add,
    /// `a - b`
    Sub,
    /// `a * b`
    Mul,
    /// `a / b`
    Div,
}

/// Element-wise unary maps. Parameters are stored as `f64`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum UnaryOp {
    /// `max(x, 0)`
    Relu,
    /// `x` if `x > 0`, else `slope * x`.
    LeakyRelu(f64),
    /// `x` if `x > 0`, else `alpha * (exp(x) - 1)`.
    Elu(f64),
    /// `1 / (1 + exp(-x))`
    Sigmoid,
    /// `tanh(x)`
    Tanh,
    /// Exact (erf-based) GELU, as `torch.nn.GELU()`: `x * Φ(x)`.
    Gelu,
    /// `exp(x)`
    Exp,
    /// Natural logarithm.
    Log,
    /// `-x`
    Neg,
    /// `x * x`
    Square,
    /// `a * x + b`
    Affine(f64, f64),
}

/// Axis of a 2-D tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Axis {
    /// Along rows (reduces over rows: result is `1 x cols`).
    Rows,
    /// Along columns (reduces over columns: result is `rows x 1`).
    Cols,
}

/// Reductions over the rows of each segment (graph) of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SegmentReduce {
    /// Sum of the segment's rows (zero for an empty segment).
    Sum,
    /// Mean of the segment's rows (zero for an empty segment).
    Mean,
    /// Column-wise maximum (zero for an empty segment; gradient to the arg-max row,
    /// the first one on ties). A NaN is the maximum of its column (the first
    /// NaN, with the gradient), as in `torch.max`, so it is never hidden.
    Max,
}

/// A fused parameter-update rule, applied by [`Backend::optim_update`].
///
/// The optimisers in [`crate::optim`] translate their hyper-parameters into
/// one of these, so that an update runs wherever the parameters live.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum UpdateRule {
    /// SGD with momentum (`torch.optim.SGD` semantics). State: 1 slot (momentum buffer).
    Sgd {
        /// Learning rate.
        lr: f64,
        /// Momentum factor (0 disables the buffer).
        momentum: f64,
        /// Dampening for momentum.
        dampening: f64,
        /// Nesterov momentum.
        nesterov: bool,
        /// L2 penalty added to the gradient.
        weight_decay: f64,
    },
    /// Adam / AdamW (`torch.optim.Adam` / `AdamW`). State: 2 slots (m, v).
    Adam {
        /// Learning rate.
        lr: f64,
        /// First-moment decay.
        beta1: f64,
        /// Second-moment decay.
        beta2: f64,
        /// Denominator epsilon.
        eps: f64,
        /// Weight decay.
        weight_decay: f64,
        /// `true`: decoupled (AdamW); `false`: L2 added to the gradient (Adam).
        decoupled: bool,
    },
    /// AdaBelief (`adabelief-pytorch` semantics). State: 2 slots (m, s).
    AdaBelief {
        /// Learning rate.
        lr: f64,
        /// First-moment decay.
        beta1: f64,
        /// Belief decay.
        beta2: f64,
        /// Epsilon (added inside the belief and to the denominator).
        eps: f64,
        /// Weight decay.
        weight_decay: f64,
        /// `true`: decoupled weight decay; `false`: L2 added to the gradient.
        decoupled: bool,
        /// Rectified update (RAdam-style variance rectification).
        rectify: bool,
    },
}

impl UpdateRule {
    /// Number of per-parameter state tensors the rule keeps.
    pub fn num_slots(&self) -> usize {
        match self {
            UpdateRule::Sgd { momentum, .. } => usize::from(*momentum != 0.0),
            UpdateRule::Adam { .. } | UpdateRule::AdaBelief { .. } => 2,
        }
    }
}

/// Adds `t` into a gradient slot, or fills an empty one with it (the
/// tape's accumulation and the default kernels').
pub(crate) fn add_into_slot<B: Backend>(b: &B, slot: &mut Option<B::Tensor>, t: B::Tensor) {
    match slot {
        Some(acc) => b.add_assign(acc, &t),
        None => *slot = Some(t),
    }
}

/// Adds `segment_mix(a, u)` into a gradient slot, or fills an empty one
/// (the default backward kernels' accumulation).
fn mix_into_slot<B: Backend>(
    b: &B,
    slot: &mut Option<B::Tensor>,
    a: &B::Tensor,
    u: &B::Tensor,
    ptr: &B::Index,
) {
    match slot {
        Some(acc) => b.segment_mix_add(acc, a, u, ptr),
        None => *slot = Some(b.segment_mix(a, u, ptr)),
    }
}

/// The set of kernels a device must provide.
///
/// Shapes are validated by the autograd layer before a kernel is called, so
/// kernels may assume consistent shapes (and may panic on a violated
/// precondition, which is a bug in the caller, never user input).
pub trait Backend: Clone + std::fmt::Debug + Send + Sync + 'static {
    /// Element type of this backend's tensors.
    type Elem: Float;
    /// A dense row-major 2-D tensor on the device.
    type Tensor: Clone + std::fmt::Debug;
    /// A constant sparse CSR matrix on the device (graph operators, sparse
    /// features). Products with its transpose must be available for backward.
    type Sparse: Clone + std::fmt::Debug;
    /// A vector of `u32` indices on the device.
    type Index: Clone + std::fmt::Debug;

    /// Human-readable name of the device (e.g. `"cpu"` or the adapter name).
    fn name(&self) -> String;

    /// Blocks until all work issued so far has finished. Kernels of an
    /// asynchronous backend (wgpu) only record work; timings must wait for
    /// it. The CPU backend is synchronous, so the default does nothing.
    fn synchronize(&self) {}

    // ----- transfer and construction -------------------------------------

    /// Copies a host array to the device.
    fn upload(&self, a: ArrayView2<'_, Self::Elem>) -> Self::Tensor;
    /// As [`Backend::upload`], taking the array, so that a backend whose
    /// tensors are host arrays (the CPU backend) keeps it without a copy: a
    /// feature matrix the size of the memory budget is not held twice. The
    /// default copies, as `upload`.
    fn upload_owned(&self, a: ndarray::Array2<Self::Elem>) -> Self::Tensor {
        self.upload(a.view())
    }
    /// Copies a device tensor to the host.
    fn download(&self, t: &Self::Tensor) -> Array2<Self::Elem>;
    /// `(rows, cols)` of a tensor.
    fn shape(&self, t: &Self::Tensor) -> (usize, usize);
    /// A tensor filled with `value`.
    fn full(&self, rows: usize, cols: usize, value: Self::Elem) -> Self::Tensor;
    /// Uploads a sparse matrix (CSR or CSC storage; converted as needed).
    fn sparse_from_csmat(&self, m: &CsMat<Self::Elem>) -> Self::Sparse;
    /// `(rows, cols)` of a sparse matrix.
    fn sparse_shape(&self, s: &Self::Sparse) -> (usize, usize);
    /// Number of stored entries.
    fn sparse_nnz(&self, s: &Self::Sparse) -> usize;
    /// Uploads an index vector.
    fn index_from_slice(&self, idx: &[u32]) -> Self::Index;
    /// Length of an index vector.
    fn index_len(&self, idx: &Self::Index) -> usize;

    // ----- products --------------------------------------------------------

    /// `op(a) · op(b)` where `op` transposes when the flag is set.
    fn matmul(
        &self,
        a: &Self::Tensor,
        b: &Self::Tensor,
        trans_a: bool,
        trans_b: bool,
    ) -> Self::Tensor;
    /// `S · x`, or `Sᵀ · x` when `transpose` is set.
    fn spmm(&self, s: &Self::Sparse, x: &Self::Tensor, transpose: bool) -> Self::Tensor;
    /// Dropout on the stored values of `s`: a matrix with the same structure
    /// whose `i`-th stored value is dropped with probability `p` (decided by
    /// [`rng::keep`]`(seed, i, p)`, so every backend draws the same mask) and
    /// otherwise scaled by `1 / (1 - p)`.
    fn sparse_dropout(&self, s: &Self::Sparse, p: f64, seed: u64) -> Self::Sparse;

    // ----- element-wise ----------------------------------------------------

    /// `a ∘ b` with broadcasting: `b` may have the shape of `a`, or be a row
    /// (`1 x c`), a column (`r x 1`) or a scalar (`1 x 1`); symmetrically `a`
    /// may be the broadcast side.
    fn binary(&self, op: BinaryOp, a: &Self::Tensor, b: &Self::Tensor) -> Self::Tensor;
    /// `acc += t` in place (same shapes): gradient accumulation.
    fn add_assign(&self, acc: &mut Self::Tensor, t: &Self::Tensor);
    /// Adds `src` into the rows (`Axis::Rows`) or columns of `acc` starting
    /// at `start`, in place: the backward of [`Backend::slice`].
    fn slice_add_assign(
        &self,
        acc: &mut Self::Tensor,
        src: &Self::Tensor,
        axis: Axis,
        start: usize,
    );
    /// Sums `t` over broadcast axes down to `rows x cols` (each of which is
    /// either `t`'s size or 1). The backward of broadcasting.
    fn sum_to(&self, t: &Self::Tensor, rows: usize, cols: usize) -> Self::Tensor;
    /// `t` broadcast to `rows x cols` (`t` is `1 x cols`, `rows x 1`, `1 x 1`
    /// or already `rows x cols`): the adjoint of [`Backend::sum_to`], and
    /// the backward of [`Backend::sum_axis`]. The default adds `t` to zeros;
    /// a backend may write the result in one pass.
    fn broadcast_to(&self, t: &Self::Tensor, rows: usize, cols: usize) -> Self::Tensor {
        let zeros = self.full(rows, cols, num_traits::Zero::zero());
        self.binary(BinaryOp::Add, &zeros, t)
    }
    /// `f(x)` element-wise.
    fn unary(&self, op: UnaryOp, x: &Self::Tensor) -> Self::Tensor;
    /// `dy ∘ f'(x)`, given the input `x` and the output `y = f(x)`.
    fn unary_grad(
        &self,
        op: UnaryOp,
        x: &Self::Tensor,
        y: &Self::Tensor,
        dy: &Self::Tensor,
    ) -> Self::Tensor;
    /// As [`Backend::unary_grad`], taking `dy`: a backend may write the
    /// gradient over it (the CPU backend does, with the same values), so
    /// the backward pass, which owns `dy`, holds one tensor of that size
    /// instead of two. The default calls `unary_grad`.
    fn unary_grad_owned(
        &self,
        op: UnaryOp,
        x: &Self::Tensor,
        y: &Self::Tensor,
        dy: Self::Tensor,
    ) -> Self::Tensor {
        self.unary_grad(op, x, y, &dy)
    }
    /// Where `y > 0`, one bit per element in row-major order (bit `i % 32`
    /// of word `i / 32`, the last word's unused bits clear): all that
    /// ReLU's gradient reads, so that a ReLU's backward pass keeps 1/32 of
    /// its output (one bit per `f32`) instead of the output itself.
    fn positive_mask(&self, y: &Self::Tensor) -> Self::Index;
    /// `dy ∘ m`, `m` the 0/1 mask of [`Backend::positive_mask`] taken of a
    /// tensor of `dy`'s shape: ReLU's gradient, the same values as
    /// [`Backend::unary_grad`] gives (each entry of `dy` multiplied by 1 or
    /// 0, so NaN and infinities propagate alike). A backend may write it
    /// over `dy`.
    fn masked_grad_owned(&self, dy: Self::Tensor, mask: &Self::Index) -> Self::Tensor;
    /// Sum over an axis (kept as a 2-D tensor).
    fn sum_axis(&self, x: &Self::Tensor, axis: Axis) -> Self::Tensor;
    /// Sum of squares of all entries (read back to the host).
    fn sum_squares(&self, x: &Self::Tensor) -> f64;
    /// [`Backend::sum_squares`] of each tensor, in order. The default calls
    /// it once per tensor; a device backend overrides it to read all the
    /// results back in one transfer (the gradient norm of every step needs
    /// one per parameter).
    fn sum_squares_many(&self, xs: &[&Self::Tensor]) -> Vec<f64> {
        xs.iter().map(|x| self.sum_squares(x)).collect()
    }

    // ----- normalisation and attention --------------------------------------

    /// Softmax (or log-softmax) along `axis` (`Cols`: each row sums to 1).
    fn softmax(&self, x: &Self::Tensor, axis: Axis, log: bool) -> Self::Tensor;
    /// Backward of [`Backend::softmax`] from its output `y`.
    fn softmax_grad(
        &self,
        y: &Self::Tensor,
        dy: &Self::Tensor,
        axis: Axis,
        log: bool,
    ) -> Self::Tensor;
    /// Row-wise standardisation: returns `(x̂, rstd)` with `x̂ = (x - mean) * rstd`,
    /// `rstd = 1 / sqrt(var + eps)` (`rows x 1`), biased variance as in
    /// `torch.nn.LayerNorm`.
    fn layer_norm(&self, x: &Self::Tensor, eps: f64) -> (Self::Tensor, Self::Tensor);
    /// Backward of [`Backend::layer_norm`] with respect to `x`, given `x̂`, `rstd` and `dx̂`.
    fn layer_norm_grad(
        &self,
        xhat: &Self::Tensor,
        rstd: &Self::Tensor,
        dxhat: &Self::Tensor,
    ) -> Self::Tensor;
    /// A dropout mask: each entry is 0 with probability `p`, else `1 / (1 - p)`.
    /// Deterministic in `seed`.
    fn dropout_mask(&self, rows: usize, cols: usize, p: f64, seed: u64) -> Self::Tensor;
    /// `x` times [`Backend::dropout_mask`]`(rows, cols, p, seed)` of its
    /// shape, the same values. The default builds the mask; a backend can
    /// fuse the two and skip the mask's memory.
    fn dropout(&self, x: &Self::Tensor, p: f64, seed: u64) -> Self::Tensor {
        let (r, c) = self.shape(x);
        let mask = self.dropout_mask(r, c, p, seed);
        self.binary(BinaryOp::Mul, x, &mask)
    }
    /// As [`Backend::dropout`], taking `x`: a backend may write the result
    /// over it (the CPU backend does, with the same values), as the
    /// backward pass does with a gradient it owns. The default calls
    /// `dropout`.
    fn dropout_owned(&self, x: Self::Tensor, p: f64, seed: u64) -> Self::Tensor {
        self.dropout(&x, p, seed)
    }
    /// [`Backend::dropout`]`(x, p, seed) · w`, the same values (each output
    /// row is computed as the unfused product computes it). The default
    /// makes the dropped-out copy of `x`; a backend can apply the mask block
    /// by block inside the product and never hold that copy, which for the
    /// input layer of a large graph is the size of the features.
    fn dropout_matmul(
        &self,
        x: &Self::Tensor,
        p: f64,
        seed: u64,
        w: &Self::Tensor,
    ) -> Self::Tensor {
        self.matmul(&self.dropout(x, p, seed), w, false, false)
    }
    /// [`Backend::dropout`]`(x, p, seed)ᵀ · g` (the weight gradient of
    /// [`Backend::dropout_matmul`]). The default makes the dropped-out copy;
    /// a backend may sum the product over blocks of rows in a fixed order
    /// (independent of its thread count), so that the result can differ from
    /// the unfused product by rounding when `x` has many rows.
    fn dropout_t_matmul(
        &self,
        x: &Self::Tensor,
        p: f64,
        seed: u64,
        g: &Self::Tensor,
    ) -> Self::Tensor {
        self.matmul(&self.dropout(x, p, seed), g, true, false)
    }

    // ----- shape manipulation ---------------------------------------------

    /// Concatenates tensors along `axis` (`Cols`: side by side).
    fn concat(&self, parts: &[&Self::Tensor], axis: Axis) -> Self::Tensor;
    /// The half-open range `start..end` of rows (`Axis::Rows`) or columns.
    fn slice(&self, x: &Self::Tensor, axis: Axis, start: usize, end: usize) -> Self::Tensor;
    /// Rows `x[idx[i]]`.
    fn gather_rows(&self, x: &Self::Tensor, idx: &Self::Index) -> Self::Tensor;
    /// `out[idx[i]] += src[i]` into a zero `rows x src.cols` tensor.
    fn scatter_add_rows(&self, src: &Self::Tensor, idx: &Self::Index, rows: usize) -> Self::Tensor;

    // ----- segment operations (rows grouped contiguously by graph) --------------

    /// Reduces each segment `ptr[g]..ptr[g+1]` of rows to one row
    /// (`G x cols`). For `Max` also returns the arg-max row of each output
    /// entry (`G * cols` indices; `u32::MAX` for an empty segment).
    fn segment_reduce(
        &self,
        x: &Self::Tensor,
        ptr: &Self::Index,
        op: SegmentReduce,
    ) -> (Self::Tensor, Option<Self::Index>);
    /// Backward of [`Backend::segment_reduce`]: `dy` is `G x cols`, the result `rows x cols`.
    fn segment_reduce_grad(
        &self,
        dy: &Self::Tensor,
        ptr: &Self::Index,
        op: SegmentReduce,
        argmax: Option<&Self::Index>,
        rows: usize,
    ) -> Self::Tensor;
    /// [`Backend::segment_reduce_grad`] (`rows x cols`) added into a
    /// gradient slot, or filling an empty one. The default allocates the
    /// gradient and adds it; a backend may add in place, saving a
    /// `rows x cols` temporary and a pass over it.
    fn segment_reduce_grad_into(
        &self,
        slot: &mut Option<Self::Tensor>,
        dy: &Self::Tensor,
        ptr: &Self::Index,
        op: SegmentReduce,
        argmax: Option<&Self::Index>,
        rows: usize,
    ) {
        add_into_slot(
            self,
            slot,
            self.segment_reduce_grad(dy, ptr, op, argmax, rows),
        );
    }
    /// Softmax over the rows of each segment, per column.
    fn segment_softmax(&self, x: &Self::Tensor, ptr: &Self::Index) -> Self::Tensor;
    /// Backward of [`Backend::segment_softmax`] from its output.
    fn segment_softmax_grad(
        &self,
        y: &Self::Tensor,
        dy: &Self::Tensor,
        ptr: &Self::Index,
    ) -> Self::Tensor;
    /// Broadcasts row `g` of `x` (`G x c`) to every row of segment `g` (`N x c`).
    fn segment_broadcast(&self, x: &Self::Tensor, ptr: &Self::Index, rows: usize) -> Self::Tensor;

    // ----- node–supernode cross-attention -----------------------------------------
    //
    // Node tensors are `N x c` with rows grouped by segment (`ptr`); supernode
    // tensors are `(G·M) x c`, segment `g` owning rows `g·M..(g+1)·M`. The
    // three kernels are mutually adjoint, so each one's backward is two of the
    // others. All cost `O(N·M·c)`.

    /// Scores `out[v, j] = k[v] · q[g(v)·m + j]` (`N x m`), `k: N x d`,
    /// `q: (G·m) x d`, where `g(v)` is the segment of row `v`.
    fn segment_scores(
        &self,
        k: &Self::Tensor,
        q: &Self::Tensor,
        ptr: &Self::Index,
        m: usize,
    ) -> Self::Tensor;
    /// Mixing `out[v] = Σ_j a[v, j] u[g(v)·M + j]` (`N x h`), `a: N x M`,
    /// `u: (G·M) x h`.
    fn segment_mix(&self, a: &Self::Tensor, u: &Self::Tensor, ptr: &Self::Index) -> Self::Tensor;
    /// `acc += segment_mix(a, u, ptr)` in place (gradient accumulation
    /// without a temporary `N x h` tensor). The default allocates.
    fn segment_mix_add(
        &self,
        acc: &mut Self::Tensor,
        a: &Self::Tensor,
        u: &Self::Tensor,
        ptr: &Self::Index,
    ) {
        let t = self.segment_mix(a, u, ptr);
        self.add_assign(acc, &t);
    }
    /// Weighted per-segment sums `out[g·M + j] = Σ_{v in g} a[v, j] x[v]`
    /// (`(G·M) x h`), `a: N x M`, `x: N x h`.
    fn segment_weighted_sum(
        &self,
        a: &Self::Tensor,
        x: &Self::Tensor,
        ptr: &Self::Index,
    ) -> Self::Tensor;
    /// Backward of [`Backend::segment_scores`] (`out = segment_scores(k, q)`)
    /// for `g = d out` (`N x m`): adds `segment_mix(g, q)` (the gradient of
    /// `k`) into `*dk` when `dk` is given (an empty slot is filled), and
    /// returns `segment_weighted_sum(g, k)` (the gradient of `q`) when
    /// `want_dq`. The default calls those two kernels; a backend may compute
    /// both in one pass over the nodes.
    fn segment_scores_grad(
        &self,
        g: &Self::Tensor,
        k: &Self::Tensor,
        q: &Self::Tensor,
        ptr: &Self::Index,
        dk: Option<&mut Option<Self::Tensor>>,
        want_dq: bool,
    ) -> Option<Self::Tensor> {
        if let Some(slot) = dk {
            mix_into_slot(self, slot, g, q, ptr);
        }
        want_dq.then(|| self.segment_weighted_sum(g, k, ptr))
    }
    /// Backward of [`Backend::segment_mix`] (`out = segment_mix(a, u)`) for
    /// `g = d out` (`N x h`): `(segment_scores(g, u), segment_weighted_sum(a, g))`,
    /// the gradients of `a` and `u`, each when wanted. A backend may compute
    /// both in one pass over the nodes.
    fn segment_mix_grad(
        &self,
        g: &Self::Tensor,
        a: &Self::Tensor,
        u: &Self::Tensor,
        ptr: &Self::Index,
        want_da: bool,
        want_du: bool,
    ) -> (Option<Self::Tensor>, Option<Self::Tensor>) {
        let m = self.shape(a).1;
        (
            want_da.then(|| self.segment_scores(g, u, ptr, m)),
            want_du.then(|| self.segment_weighted_sum(a, g, ptr)),
        )
    }
    /// Backward of [`Backend::segment_weighted_sum`]
    /// (`out = segment_weighted_sum(a, x)`) for `g = d out` (`(G·M) x h`):
    /// returns `segment_scores(x, g)` (the gradient of `a`) when `want_da`,
    /// and adds `segment_mix(a, g)` (the gradient of `x`) into `*dx` when
    /// `dx` is given (an empty slot is filled). A backend may compute both
    /// in one pass over the nodes.
    fn segment_weighted_sum_grad(
        &self,
        g: &Self::Tensor,
        a: &Self::Tensor,
        x: &Self::Tensor,
        ptr: &Self::Index,
        want_da: bool,
        dx: Option<&mut Option<Self::Tensor>>,
    ) -> Option<Self::Tensor> {
        let m = self.shape(a).1;
        let da = want_da.then(|| self.segment_scores(x, g, ptr, m));
        if let Some(slot) = dx {
            mix_into_slot(self, slot, a, g, ptr);
        }
        da
    }
    /// Row-major reinterpretation of `x` as `rows x cols` (same number of entries).
    fn reshape(&self, x: &Self::Tensor, rows: usize, cols: usize) -> Self::Tensor;

    // ----- losses -------------------------------------------------------------

    /// Mean negative log-likelihood `-(1/n) Σ_i logp[i, target[i]]` (`1 x 1`).
    fn nll(&self, logp: &Self::Tensor, target: &Self::Index) -> Self::Tensor;
    /// Backward of [`Backend::nll`]: `dy` is `1 x 1`.
    fn nll_grad(
        &self,
        dy: &Self::Tensor,
        target: &Self::Index,
        rows: usize,
        cols: usize,
    ) -> Self::Tensor;
    /// Mean binary cross-entropy with logits over all entries (`1 x 1`), numerically stable.
    fn bce_with_logits(&self, z: &Self::Tensor, y: &Self::Tensor) -> Self::Tensor;
    /// Backward of [`Backend::bce_with_logits`] with respect to `z`.
    fn bce_with_logits_grad(
        &self,
        z: &Self::Tensor,
        y: &Self::Tensor,
        dy: &Self::Tensor,
    ) -> Self::Tensor;

    // ----- optimisers ------------------------------------------------------------

    /// Applies one update of `rule` in place. `step` counts from 1;
    /// `slots` holds [`UpdateRule::num_slots`] state tensors shaped like `param`.
    fn optim_update(
        &self,
        rule: &UpdateRule,
        step: u64,
        param: &mut Self::Tensor,
        grad: &Self::Tensor,
        slots: &mut [Self::Tensor],
    );
}

/// The size of one dimension of a broadcast result: a dimension of size 1
/// stretches to the other (also to 0), otherwise the two agree (the caller
/// has checked that they do).
pub(crate) fn broadcast_dim(a: usize, b: usize) -> usize {
    if a == 1 { b } else { a }
}
