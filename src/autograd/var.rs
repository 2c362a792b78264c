//! [`Var`]: a value on a tape, and every differentiable operation on it.

use std::rc::Rc;

use ndarray::Array2;

use super::Segments;
use super::custom::{CustomOp, CustomOpRef};
use super::param::Gradients;
use super::sparse::SparseMatrix;
use super::tape::{Op, Tape};
use crate::backend::{Axis, Backend, BinaryOp, SegmentReduce, UnaryOp};
use crate::error::{Error, Result};

/// A 2-D tensor value on a [`Tape`], differentiable when it depends on a
/// parameter or an input that requires a gradient.
///
/// Operations that can meet inconsistent shapes return [`Result`]; the
/// element-wise maps cannot and return the new `Var` directly.
#[derive(Clone)]
pub struct Var<B: Backend> {
    tape: Tape<B>,
    node: Option<usize>,
    value: Rc<B::Tensor>,
    requires_grad: bool,
}

impl<B: Backend> std::fmt::Debug for Var<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Var")
            .field("shape", &self.shape())
            .field("node", &self.node)
            .field("requires_grad", &self.requires_grad)
            .finish()
    }
}

fn shape_str((r, c): (usize, usize)) -> String {
    format!("({r}, {c})")
}

impl<B: Backend> Var<B> {
    pub(crate) fn from_parts(
        tape: Tape<B>,
        node: Option<usize>,
        value: Rc<B::Tensor>,
        requires_grad: bool,
    ) -> Self {
        Var {
            tape,
            node,
            value,
            requires_grad,
        }
    }

    pub(crate) fn node(&self) -> Option<usize> {
        self.node
    }

    /// The shared value.
    pub(crate) fn value_rc(&self) -> &Rc<B::Tensor> {
        &self.value
    }

    fn id(&self) -> usize {
        // Only called when recording, where every Var has a node.
        self.node.unwrap_or(usize::MAX)
    }

    /// The tape this value lives on.
    pub fn tape(&self) -> &Tape<B> {
        &self.tape
    }

    /// The backend.
    pub fn backend(&self) -> &B {
        self.tape.backend()
    }

    /// The device tensor.
    pub fn value(&self) -> &B::Tensor {
        &self.value
    }

    /// Copies the value to the host.
    pub fn to_array(&self) -> Array2<B::Elem> {
        self.backend().download(&self.value)
    }

    /// The single entry of a `1 x 1` value, as `f64` (e.g. a loss).
    pub fn scalar(&self) -> Result<f64> {
        let (r, c) = self.shape();
        if (r, c) != (1, 1) {
            return Err(Error::shape("scalar", "(1, 1)", shape_str((r, c))));
        }
        Ok(num_traits::ToPrimitive::to_f64(&self.to_array()[[0, 0]]).unwrap_or(f64::NAN))
    }

    /// `(rows, cols)`.
    pub fn shape(&self) -> (usize, usize) {
        self.backend().shape(&self.value)
    }

    /// Whether gradients flow through this value.
    pub fn requires_grad(&self) -> bool {
        self.requires_grad
    }

    /// Gradients of this `1 x 1` value with respect to every parameter (and
    /// every [`Tape::input`]) it depends on.
    pub fn backward(&self) -> Result<Gradients<B>> {
        if !self.tape.grad_enabled() {
            return Err(Error::Autograd("backward on an inference tape".into()));
        }
        if !self.requires_grad {
            return Err(Error::Autograd(
                "backward from a value that depends on no parameter".into(),
            ));
        }
        self.tape.backward(self.id())
    }

    /// Whether this value was recorded on `tape`.
    pub fn is_on(&self, tape: &Tape<B>) -> bool {
        Rc::ptr_eq(&self.tape.inner, &tape.inner)
    }

    fn same_tape(&self, other: &Var<B>, op: &'static str) -> Result<()> {
        if Rc::ptr_eq(&self.tape.inner, &other.tape.inner) {
            Ok(())
        } else {
            Err(Error::Autograd(format!(
                "{op}: operands live on different tapes"
            )))
        }
    }

    fn rec(&self, op: Op<B>, value: B::Tensor, inputs: &[&Var<B>]) -> Var<B> {
        self.tape.record(op, value, inputs)
    }

    // ----- products --------------------------------------------------------

    /// Matrix product `self · rhs`.
    pub fn matmul(&self, rhs: &Var<B>) -> Result<Var<B>> {
        self.matmul_t(rhs, false, false)
    }

    /// Matrix product with optional transposes: `op(self) · op(rhs)`.
    pub fn matmul_t(&self, rhs: &Var<B>, trans_self: bool, trans_rhs: bool) -> Result<Var<B>> {
        self.same_tape(rhs, "matmul")?;
        let (r1, c1) = self.shape();
        let (r2, c2) = rhs.shape();
        let (m, k1) = if trans_self { (c1, r1) } else { (r1, c1) };
        let (k2, n) = if trans_rhs { (c2, r2) } else { (r2, c2) };
        if k1 != k2 {
            return Err(Error::shape(
                "matmul",
                format!("inner dimensions equal (left is {m} x {k1})"),
                format!("right {k2} x {n}"),
            ));
        }
        let v = self
            .backend()
            .matmul(&self.value, &rhs.value, trans_self, trans_rhs);
        Ok(self.rec(
            Op::MatMul {
                a: self.id(),
                b: rhs.id(),
                ta: trans_self,
                tb: trans_rhs,
            },
            v,
            &[self, rhs],
        ))
    }

    /// Sparse-constant times dense: `s · x` (`transpose`: `sᵀ · x`).
    /// The gradient flows to `x` through the transposed matrix.
    pub fn spmm(s: &SparseMatrix<B>, x: &Var<B>, transpose: bool) -> Result<Var<B>> {
        let (sr, sc) = s.shape();
        let (inner, outer) = if transpose { (sr, sc) } else { (sc, sr) };
        let (xr, xc) = x.shape();
        if inner != xr {
            return Err(Error::shape(
                "spmm",
                format!("x with {inner} rows"),
                shape_str((xr, xc)),
            ));
        }
        let _ = outer;
        let v = x.backend().spmm(s.raw(), &x.value, transpose);
        Ok(x.rec(
            Op::SpMM {
                s: s.raw().clone(),
                x: x.id(),
                transpose,
            },
            v,
            &[x],
        ))
    }

    // ----- ops from outside -------------------------------------------------

    /// Applies an op defined outside the crate ([`CustomOp`]) to `inputs`:
    /// runs its forward now and records it, so that [`Var::backward`] runs
    /// its backward. See [`CustomOp`] for an example.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for no inputs, [`Error::Autograd`] for
    /// inputs on different tapes, and any error of the op's forward.
    pub fn apply_custom(op: Rc<dyn CustomOp<B>>, inputs: &[&Var<B>]) -> Result<Var<B>> {
        let Some(first) = inputs.first() else {
            return Err(Error::InvalidConfig(format!(
                "custom op {} applied to no inputs",
                op.name()
            )));
        };
        for v in &inputs[1..] {
            first.same_tape(v, "apply_custom")?;
        }
        let values: Vec<&B::Tensor> = inputs.iter().map(|v| v.value()).collect();
        let out = op.forward(first.backend(), &values)?;
        let ids = inputs.iter().map(|v| v.id()).collect();
        Ok(first.rec(
            Op::Custom {
                op: CustomOpRef(op),
                inputs: ids,
            },
            out,
            inputs,
        ))
    }

    // ----- element-wise ----------------------------------------------------

    fn binary(&self, op: BinaryOp, rhs: &Var<B>, name: &'static str) -> Result<Var<B>> {
        self.same_tape(rhs, name)?;
        let (a, b) = (self.shape(), rhs.shape());
        let ok = |x: usize, y: usize| x == y || x == 1 || y == 1;
        if !(ok(a.0, b.0) && ok(a.1, b.1)) {
            return Err(Error::shape(
                name,
                format!("broadcast-compatible with {}", shape_str(a)),
                shape_str(b),
            ));
        }
        let v = self.backend().binary(op, &self.value, &rhs.value);
        Ok(self.rec(
            Op::Binary {
                op,
                a: self.id(),
                b: rhs.id(),
            },
            v,
            &[self, rhs],
        ))
    }

    /// `self + rhs` (broadcasting rows, columns or scalars).
    pub fn add(&self, rhs: &Var<B>) -> Result<Var<B>> {
        self.binary(BinaryOp::Add, rhs, "add")
    }

    /// `self - rhs` (broadcasting).
    pub fn sub(&self, rhs: &Var<B>) -> Result<Var<B>> {
        self.binary(BinaryOp::Sub, rhs, "sub")
    }

    /// `self * rhs` element-wise (broadcasting).
    pub fn mul(&self, rhs: &Var<B>) -> Result<Var<B>> {
        self.binary(BinaryOp::Mul, rhs, "mul")
    }

    /// `self / rhs` element-wise (broadcasting).
    pub fn div(&self, rhs: &Var<B>) -> Result<Var<B>> {
        self.binary(BinaryOp::Div, rhs, "div")
    }

    /// Applies an element-wise map.
    pub fn unary(&self, op: UnaryOp) -> Var<B> {
        let b = self.backend();
        let v = b.unary(op, &self.value);
        if op == UnaryOp::Relu && self.requires_grad() {
            // ReLU's gradient reads only where the output is positive: one
            // bit per entry is kept instead of the output.
            let mask = b.positive_mask(&v);
            return self.rec(Op::Relu { x: self.id(), mask }, v, &[self]);
        }
        self.rec(Op::Unary { op, x: self.id() }, v, &[self])
    }

    /// `alpha * self`.
    pub fn scale(&self, alpha: f64) -> Var<B> {
        self.unary(UnaryOp::Affine(alpha, 0.0))
    }

    /// `alpha * self + beta`.
    pub fn affine(&self, alpha: f64, beta: f64) -> Var<B> {
        self.unary(UnaryOp::Affine(alpha, beta))
    }

    /// `-self`.
    pub fn neg(&self) -> Var<B> {
        self.unary(UnaryOp::Neg)
    }

    /// `self²` element-wise.
    pub fn square(&self) -> Var<B> {
        self.unary(UnaryOp::Square)
    }

    /// `exp(self)`.
    pub fn exp(&self) -> Var<B> {
        self.unary(UnaryOp::Exp)
    }

    /// `ln(self)`.
    pub fn log(&self) -> Var<B> {
        self.unary(UnaryOp::Log)
    }

    /// ReLU.
    pub fn relu(&self) -> Var<B> {
        self.unary(UnaryOp::Relu)
    }

    /// Leaky ReLU with the given negative slope.
    pub fn leaky_relu(&self, slope: f64) -> Var<B> {
        self.unary(UnaryOp::LeakyRelu(slope))
    }

    /// ELU with the given alpha.
    pub fn elu(&self, alpha: f64) -> Var<B> {
        self.unary(UnaryOp::Elu(alpha))
    }

    /// Logistic sigmoid.
    pub fn sigmoid(&self) -> Var<B> {
        self.unary(UnaryOp::Sigmoid)
    }

    /// Hyperbolic tangent.
    pub fn tanh(&self) -> Var<B> {
        self.unary(UnaryOp::Tanh)
    }

    /// Exact GELU (`torch.nn.GELU()`).
    pub fn gelu(&self) -> Var<B> {
        self.unary(UnaryOp::Gelu)
    }

    // ----- reductions and normalisation -------------------------------------

    /// Sum along `axis` (`Axis::Rows` gives `1 x cols`).
    pub fn sum_axis(&self, axis: Axis) -> Var<B> {
        let v = self.backend().sum_axis(&self.value, axis);
        self.rec(Op::SumAxis { x: self.id() }, v, &[self])
    }

    /// Sum of all entries (`1 x 1`).
    pub fn sum_all(&self) -> Var<B> {
        self.sum_axis(Axis::Rows).sum_axis(Axis::Cols)
    }

    /// Mean of all entries (`1 x 1`).
    pub fn mean_all(&self) -> Var<B> {
        let (r, c) = self.shape();
        self.sum_all().scale(1.0 / (r * c).max(1) as f64)
    }

    /// Softmax along `axis` (`Axis::Cols`: every row sums to 1).
    pub fn softmax(&self, axis: Axis) -> Var<B> {
        let v = self.backend().softmax(&self.value, axis, false);
        self.rec(
            Op::Softmax {
                x: self.id(),
                axis,
                log: false,
            },
            v,
            &[self],
        )
    }

    /// Log-softmax along `axis`.
    pub fn log_softmax(&self, axis: Axis) -> Var<B> {
        let v = self.backend().softmax(&self.value, axis, true);
        self.rec(
            Op::Softmax {
                x: self.id(),
                axis,
                log: true,
            },
            v,
            &[self],
        )
    }

    /// Row standardisation `(x - mean) / sqrt(var + eps)` (biased variance),
    /// the non-affine part of layer normalisation.
    pub fn layer_norm(&self, eps: f64) -> Var<B> {
        let (xhat, rstd) = self.backend().layer_norm(&self.value, eps);
        self.rec(Op::LayerNorm { x: self.id(), rstd }, xhat, &[self])
    }

    /// Inverted dropout with drop probability `p` (`0 <= p < 1`), mask drawn
    /// from the tape's seed stream. Identity when `p == 0`.
    pub fn dropout(&self, p: f64) -> Result<Var<B>> {
        check_dropout_p(p)?;
        if p == 0.0 {
            return Ok(self.clone());
        }
        let seed = self.tape.next_seed();
        Ok(self.dropout_seeded(p, seed))
    }

    /// [`Var::dropout`] with the mask of stream `seed` (`0 < p < 1`).
    pub(crate) fn dropout_seeded(&self, p: f64, seed: u64) -> Var<B> {
        let v = self.backend().dropout(&self.value, p, seed);
        self.rec(
            Op::Dropout {
                x: self.id(),
                p,
                seed,
            },
            v,
            &[self],
        )
    }

    /// `self.dropout(p)? · w` as one operation: the same values (the mask
    /// drawn from the tape's seed stream as [`Var::dropout`] draws it) and
    /// gradients, without the dropped-out copy of `self` in the forward or
    /// the backward pass where the backend fuses the two
    /// ([`Backend::dropout_matmul`]; the CPU backend does). For the input
    /// layer of a large graph that copy is the size of the features.
    ///
    /// ```
    /// use hdgcn::autograd::Tape;
    /// use hdgcn::backend::Cpu;
    /// let cpu = Cpu::<f64>::new();
    /// let (a, b) = (Tape::with_seed(&cpu, 7), Tape::with_seed(&cpu, 7));
    /// let x = ndarray::Array2::from_shape_fn((5, 3), |(i, j)| (i * 3 + j) as f64);
    /// let w = ndarray::Array2::from_shape_fn((3, 2), |(i, j)| i as f64 - j as f64);
    /// let fused = a.constant_array(&x).dropout_matmul(0.5, &a.constant_array(&w))?;
    /// let plain = b.constant_array(&x).dropout(0.5)?.matmul(&b.constant_array(&w))?;
    /// assert_eq!(fused.to_array(), plain.to_array());
    /// # Ok::<(), hdgcn::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for `p` outside `[0, 1)`, [`Error::ShapeMismatch`]
    /// when the columns of `self` are not the rows of `w`, and an error when
    /// the two are on different tapes.
    pub fn dropout_matmul(&self, p: f64, w: &Var<B>) -> Result<Var<B>> {
        check_dropout_p(p)?;
        if p == 0.0 {
            return self.matmul(w);
        }
        let seed = self.tape.next_seed();
        self.dropout_matmul_seeded(p, seed, w)
    }

    /// [`Var::dropout_matmul`] with the mask of stream `seed` (`0 < p < 1`).
    pub(crate) fn dropout_matmul_seeded(&self, p: f64, seed: u64, w: &Var<B>) -> Result<Var<B>> {
        self.same_tape(w, "dropout_matmul")?;
        let (r, c) = self.shape();
        let (wr, wc) = w.shape();
        if c != wr {
            return Err(Error::shape(
                "dropout_matmul",
                format!("inner dimensions equal (left is {r} x {c})"),
                format!("right {wr} x {wc}"),
            ));
        }
        let v = self
            .backend()
            .dropout_matmul(&self.value, p, seed, &w.value);
        Ok(self.rec(
            Op::DropoutMatMul {
                x: self.id(),
                w: w.id(),
                p,
                seed,
            },
            v,
            &[self, w],
        ))
    }

    // ----- shape manipulation -------------------------------------------------

    /// Concatenates along `axis` (`Axis::Cols`: side by side).
    pub fn concat(parts: &[&Var<B>], axis: Axis) -> Result<Var<B>> {
        let first = parts
            .first()
            .ok_or_else(|| Error::Empty("concat of no tensors".into()))?;
        let (r0, c0) = first.shape();
        for p in parts {
            first.same_tape(p, "concat")?;
            let (r, c) = p.shape();
            if (axis == Axis::Cols && r != r0) || (axis == Axis::Rows && c != c0) {
                return Err(Error::shape(
                    "concat",
                    shape_str((r0, c0)),
                    shape_str((r, c)),
                ));
            }
        }
        let vals: Vec<&B::Tensor> = parts.iter().map(|p| &*p.value).collect();
        let v = first.backend().concat(&vals, axis);
        let ids = parts.iter().map(|p| p.id()).collect();
        Ok(first.rec(Op::Concat { parts: ids, axis }, v, parts))
    }

    /// Rows (`Axis::Rows`) or columns `start..end`.
    pub fn slice(&self, axis: Axis, start: usize, end: usize) -> Result<Var<B>> {
        let (r, c) = self.shape();
        let n = if axis == Axis::Rows { r } else { c };
        if start > end || end > n {
            return Err(Error::IndexOutOfRange {
                what: "slice end",
                index: end,
                len: n,
            });
        }
        let v = self.backend().slice(&self.value, axis, start, end);
        Ok(self.rec(
            Op::Slice {
                x: self.id(),
                axis,
                start,
            },
            v,
            &[self],
        ))
    }

    /// Rows `self[idx[i]]` (`index_select` along rows).
    pub fn gather_rows(&self, idx: &super::Index<B>) -> Result<Var<B>> {
        let (r, _) = self.shape();
        if let Some(&bad) = idx.host().iter().find(|&&i| i >= r) {
            return Err(Error::IndexOutOfRange {
                what: "gather_rows",
                index: bad,
                len: r,
            });
        }
        let v = self.backend().gather_rows(&self.value, idx.raw());
        Ok(self.rec(
            Op::Gather {
                x: self.id(),
                idx: idx.raw().clone(),
            },
            v,
            &[self],
        ))
    }

    // ----- segment operations ------------------------------------------------------

    fn check_segments(&self, seg: &Segments<B>, op: &'static str) -> Result<()> {
        let (r, _) = self.shape();
        if r != seg.num_rows() {
            return Err(Error::shape(
                op,
                format!("{} rows (the batch's nodes)", seg.num_rows()),
                format!("{r} rows"),
            ));
        }
        Ok(())
    }

    /// Per-graph sum, mean or max of rows (`G x cols`); empty segments give zeros.
    pub fn segment_reduce(&self, seg: &Segments<B>, op: SegmentReduce) -> Result<Var<B>> {
        self.check_segments(seg, "segment_reduce")?;
        let (v, argmax) = self.backend().segment_reduce(&self.value, seg.raw(), op);
        Ok(self.rec(
            Op::SegmentReduce {
                x: self.id(),
                ptr: seg.raw().clone(),
                op,
                argmax,
            },
            v,
            &[self],
        ))
    }

    /// Softmax over the rows of each segment, per column.
    pub fn segment_softmax(&self, seg: &Segments<B>) -> Result<Var<B>> {
        self.check_segments(seg, "segment_softmax")?;
        let v = self.backend().segment_softmax(&self.value, seg.raw());
        Ok(self.rec(
            Op::SegmentSoftmax {
                x: self.id(),
                ptr: seg.raw().clone(),
            },
            v,
            &[self],
        ))
    }

    /// Repeats row `g` of `self` (`G x c`) for every row of segment `g`.
    pub fn segment_broadcast(&self, seg: &Segments<B>) -> Result<Var<B>> {
        let (r, c) = self.shape();
        if r != seg.num_segments() {
            return Err(Error::shape(
                "segment_broadcast",
                format!("({}, {c})", seg.num_segments()),
                shape_str((r, c)),
            ));
        }
        let v = self
            .backend()
            .segment_broadcast(&self.value, seg.raw(), seg.num_rows());
        Ok(self.rec(
            Op::SegmentBroadcast {
                x: self.id(),
                ptr: seg.raw().clone(),
            },
            v,
            &[self],
        ))
    }

    // ----- node–supernode cross-attention ------------------------------------------

    /// Supernode rows expected for `seg` with `m` supernodes per segment.
    fn supernode_rows(seg: &Segments<B>, m: usize, op: &'static str) -> Result<usize> {
        seg.num_segments()
            .checked_mul(m)
            .ok_or_else(|| Error::InvalidConfig(format!("{op}: G * M overflows")))
    }

    /// Node–supernode scores: `self` is `K` (`N x d`, rows grouped by `seg`),
    /// `q` is `Q` (`(G·m) x d`, graph `g` owning rows `g·m..(g+1)·m`); the
    /// result is `E` (`N x m`) with `E[v, j] = K[v] · Q[g(v)·m + j]`.
    /// Costs `O(N·m·d)`; never forms an `N x N` matrix.
    ///
    /// ```
    /// use hdgcn::autograd::{Segments, Tape};
    /// use hdgcn::backend::Cpu;
    /// let cpu = Cpu::<f64>::new();
    /// let tape = Tape::new(&cpu);
    /// let seg = Segments::new(&cpu, &[0, 2, 3])?; // graphs {0, 1} and {2}
    /// let k = tape.constant_array(&ndarray::arr2(&[[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]));
    /// let q = tape.constant_array(&ndarray::arr2(&[[2.0, 3.0], [5.0, 7.0]])); // m = 1
    /// let e = k.segment_scores(&q, &seg, 1)?;
    /// assert_eq!(e.to_array(), ndarray::arr2(&[[2.0], [3.0], [12.0]]));
    /// # Ok::<(), hdgcn::Error>(())
    /// ```
    pub fn segment_scores(&self, q: &Var<B>, seg: &Segments<B>, m: usize) -> Result<Var<B>> {
        self.same_tape(q, "segment_scores")?;
        self.check_segments(seg, "segment_scores")?;
        if m == 0 {
            return Err(Error::InvalidConfig(
                "segment_scores: need at least one supernode".into(),
            ));
        }
        let rows = Self::supernode_rows(seg, m, "segment_scores")?;
        let (_, d) = self.shape();
        if q.shape() != (rows, d) {
            return Err(Error::shape(
                "segment_scores (supernode queries)",
                shape_str((rows, d)),
                shape_str(q.shape()),
            ));
        }
        let v = self
            .backend()
            .segment_scores(&self.value, &q.value, seg.raw(), m);
        Ok(self.rec(
            Op::SegmentScores {
                k: self.id(),
                q: q.id(),
                ptr: seg.raw().clone(),
            },
            v,
            &[self, q],
        ))
    }

    /// Mixes supernode rows into nodes: `self` is `A` (`N x M`, rows grouped
    /// by `seg`), `u` is `U` (`(G·M) x h`); the result is `N x h` with
    /// `out[v] = Σ_j A[v, j] U[g(v)·M + j]`. Costs `O(N·M·h)`.
    pub fn segment_mix(&self, u: &Var<B>, seg: &Segments<B>) -> Result<Var<B>> {
        self.same_tape(u, "segment_mix")?;
        self.check_segments(seg, "segment_mix")?;
        let (_, m) = self.shape();
        let rows = Self::supernode_rows(seg, m, "segment_mix")?;
        let (ur, uc) = u.shape();
        if ur != rows {
            return Err(Error::shape(
                "segment_mix (supernode values)",
                format!("({rows}, _)"),
                shape_str((ur, uc)),
            ));
        }
        let v = self.backend().segment_mix(&self.value, &u.value, seg.raw());
        Ok(self.rec(
            Op::SegmentMix {
                a: self.id(),
                u: u.id(),
                ptr: seg.raw().clone(),
            },
            v,
            &[self, u],
        ))
    }

    /// Weighted per-graph sums of node rows into supernodes: `self` is `A`
    /// (`N x M`), `x` is `X` (`N x h`), both grouped by `seg`; the result is
    /// `(G·M) x h` with `out[g·M + j] = Σ_{v in g} A[v, j] X[v]`.
    /// Costs `O(N·M·h)`.
    pub fn segment_weighted_sum(&self, x: &Var<B>, seg: &Segments<B>) -> Result<Var<B>> {
        self.same_tape(x, "segment_weighted_sum")?;
        self.check_segments(seg, "segment_weighted_sum")?;
        x.check_segments(seg, "segment_weighted_sum")?;
        let v = self
            .backend()
            .segment_weighted_sum(&self.value, &x.value, seg.raw());
        Ok(self.rec(
            Op::SegmentWeightedSum {
                a: self.id(),
                x: x.id(),
                ptr: seg.raw().clone(),
            },
            v,
            &[self, x],
        ))
    }

    /// Row-major reinterpretation as `rows x cols` (e.g. `G x (M·h)` to
    /// `(G·M) x h`). The number of entries must not change.
    pub fn reshape(&self, rows: usize, cols: usize) -> Result<Var<B>> {
        let (r, c) = self.shape();
        if rows.checked_mul(cols) != Some(r * c) {
            return Err(Error::shape(
                "reshape",
                format!("{} entries", r * c),
                format!("({rows}, {cols})"),
            ));
        }
        let v = self.backend().reshape(&self.value, rows, cols);
        Ok(self.rec(Op::Reshape { x: self.id() }, v, &[self]))
    }

    // ----- losses ------------------------------------------------------------------

    /// Mean negative log-likelihood of `targets` under log-probabilities `self`
    /// (rows = samples).
    pub fn nll(&self, targets: &super::Index<B>) -> Result<Var<B>> {
        let (r, c) = self.shape();
        if targets.len() != r {
            return Err(Error::shape(
                "nll",
                format!("{r} targets"),
                format!("{}", targets.len()),
            ));
        }
        if r == 0 {
            return Err(Error::Empty("nll over zero samples".into()));
        }
        if let Some(&bad) = targets.host().iter().find(|&&t| t >= c) {
            return Err(Error::IndexOutOfRange {
                what: "class target",
                index: bad,
                len: c,
            });
        }
        let v = self.backend().nll(&self.value, targets.raw());
        Ok(self.rec(
            Op::Nll {
                logp: self.id(),
                target: targets.raw().clone(),
            },
            v,
            &[self],
        ))
    }

    /// Mean label-smoothed negative log-likelihood of `targets` under
    /// log-probabilities `self` (rows = samples, `C` columns = classes): the
    /// cross-entropy against the target distribution `(1 - ε)·onehot(y) + ε/C`,
    /// as `torch.nn.CrossEntropyLoss(label_smoothing=ε)` computes it, that is
    /// `(1 - ε)·nll + ε·mean_c(-log p_c)` averaged over the rows.
    /// `epsilon = 0` is [`Var::nll`].
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] unless `0 ≤ epsilon ≤ 1`; the errors of
    /// [`Var::nll`].
    ///
    /// # Examples
    /// ```
    /// use hdgcn::autograd::{Index, Tape};
    /// use hdgcn::backend::{Axis, Cpu};
    /// let cpu = Cpu::<f64>::new();
    /// let tape = Tape::new(&cpu);
    /// let logp = tape.constant_array(&ndarray::arr2(&[[0.0, 0.0]])).log_softmax(Axis::Cols);
    /// let y = Index::new(&cpu, &[0])?;
    /// // Uniform predictions cost ln 2 whatever the smoothing.
    /// let loss = logp.nll_smoothed(&y, 0.1)?.scalar()?;
    /// assert!((loss - 2f64.ln()).abs() < 1e-12);
    /// # Ok::<(), hdgcn::Error>(())
    /// ```
    pub fn nll_smoothed(&self, targets: &super::Index<B>, epsilon: f64) -> Result<Var<B>> {
        check_label_smoothing(epsilon)?;
        let nll = self.nll(targets)?;
        if epsilon == 0.0 {
            return Ok(nll);
        }
        // mean over all entries = mean over rows of the mean over classes.
        nll.scale(1.0 - epsilon)
            .add(&self.mean_all().scale(-epsilon))
    }

    /// Symmetric Kullback–Leibler divergence between two rows of
    /// log-probabilities, averaged over the rows: with `p = exp(self)` and
    /// `q = exp(other)`,
    /// `mean_r ½ [KL(p_r ‖ q_r) + KL(q_r ‖ p_r)] = mean_r ½ Σ_c (p_rc − q_rc)(log p_rc − log q_rc)`.
    ///
    /// This is R-Drop's consistency term (Liang et al., NeurIPS 2021): the
    /// same batch run twice with different dropout masks, the two
    /// predictions pulled together. Gradients flow into both arguments.
    ///
    /// # Errors
    /// [`Error::ShapeMismatch`] when the shapes differ; [`Error::Empty`]
    /// for zero rows.
    ///
    /// ```
    /// use hdgcn::autograd::Tape;
    /// use hdgcn::backend::Cpu;
    /// let cpu = Cpu::<f64>::new();
    /// let tape = Tape::new(&cpu);
    /// let p = tape.constant_array(&ndarray::arr2(&[[0.5f64.ln(), 0.5f64.ln()]]));
    /// let q = tape.constant_array(&ndarray::arr2(&[[0.25f64.ln(), 0.75f64.ln()]]));
    /// // ½ [(0.5 − 0.25) ln 2 + (0.5 − 0.75) ln(2/3)]
    /// let want = 0.5 * (0.25 * 2f64.ln() - 0.25 * (2.0f64 / 3.0).ln());
    /// assert!((p.symmetric_kl(&q)?.scalar()? - want).abs() < 1e-15);
    /// assert_eq!(p.symmetric_kl(&p)?.scalar()?, 0.0);
    /// # Ok::<(), hdgcn::Error>(())
    /// ```
    pub fn symmetric_kl(&self, other: &Var<B>) -> Result<Var<B>> {
        if self.shape() != other.shape() {
            return Err(Error::shape(
                "symmetric_kl",
                format!("{:?}", self.shape()),
                format!("{:?}", other.shape()),
            ));
        }
        let rows = self.shape().0;
        if rows == 0 {
            return Err(Error::Empty("symmetric_kl over zero rows".into()));
        }
        let dp = self.exp().sub(&other.exp())?;
        let dlogp = self.sub(other)?;
        Ok(dp.mul(&dlogp)?.sum_all().scale(0.5 / rows as f64))
    }

    /// Cross-entropy of logits `self` over the rows in `mask`, against
    /// `targets` (one class per masked row): `log_softmax`, gather, NLL.
    pub fn cross_entropy_masked(
        &self,
        mask: &super::Index<B>,
        targets: &super::Index<B>,
    ) -> Result<Var<B>> {
        self.log_softmax(Axis::Cols).gather_rows(mask)?.nll(targets)
    }

    /// Mean binary cross-entropy with logits `self` against targets `y` in [0, 1].
    pub fn bce_with_logits(&self, y: &B::Tensor) -> Result<Var<B>> {
        let ys = self.backend().shape(y);
        if ys != self.shape() {
            return Err(Error::shape(
                "bce_with_logits",
                shape_str(self.shape()),
                shape_str(ys),
            ));
        }
        let v = self.backend().bce_with_logits(&self.value, y);
        Ok(self.rec(
            Op::Bce {
                z: self.id(),
                y: y.clone(),
            },
            v,
            &[self],
        ))
    }
}

/// `Ok` for a label smoothing in `[0, 1]`, else an [`Error::InvalidConfig`]
/// naming `label_smoothing` (shared by [`Var::nll_smoothed`] and the
/// training loops, which check before any work is done).
pub(crate) fn check_label_smoothing(epsilon: f64) -> Result<()> {
    if (0.0..=1.0).contains(&epsilon) {
        Ok(())
    } else {
        Err(Error::InvalidConfig(format!(
            "label_smoothing must lie in [0, 1], got {epsilon}"
        )))
    }
}

/// A dropout probability must be in `[0, 1)`: [`Error::InvalidConfig`]
/// otherwise (NaN included).
pub(crate) fn check_dropout_p(p: f64) -> Result<()> {
    if (0.0..1.0).contains(&p) {
        Ok(())
    } else {
        Err(Error::InvalidConfig(format!(
            "dropout probability must be in [0, 1), got {p}"
        )))
    }
}
