//! The tape: recorded nodes, the closed op enum, and the backward pass.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;

use super::custom::CustomOpRef;
use super::param::{Gradients, Param, ParamId};
use super::var::Var;
use crate::backend::{Axis, Backend, BinaryOp, SegmentReduce, UnaryOp, add_into_slot};
use crate::error::{Error, Result};

/// Every differentiable operation, with what its backward pass needs.
/// Inputs are node indices on the same tape; node values are kept there.
#[derive(Debug)]
pub(crate) enum Op<B: Backend> {
    /// A parameter, an input with `requires_grad`, or a constant.
    Leaf,
    /// `op(a) · op(b)`.
    MatMul {
        a: usize,
        b: usize,
        ta: bool,
        tb: bool,
    },
    /// `S · x` (or `Sᵀ · x`) with a constant sparse `S`.
    SpMM {
        s: B::Sparse,
        x: usize,
        transpose: bool,
    },
    /// Broadcasting element-wise binary op.
    Binary { op: BinaryOp, a: usize, b: usize },
    /// Element-wise unary map.
    Unary { op: UnaryOp, x: usize },
    /// Sum along an axis.
    SumAxis { x: usize },
    /// Softmax or log-softmax along an axis.
    Softmax { x: usize, axis: Axis, log: bool },
    /// Row standardisation (no affine part).
    LayerNorm { x: usize, rstd: B::Tensor },
    /// Multiplication by a saved dropout mask.
    Dropout { x: usize, mask: B::Tensor },
    /// Concatenation along an axis.
    Concat { parts: Vec<usize>, axis: Axis },
    /// A range of rows or columns.
    Slice { x: usize, axis: Axis, start: usize },
    /// Row gather.
    Gather { x: usize, idx: B::Index },
    /// Segment reduction.
    SegmentReduce {
        x: usize,
        ptr: B::Index,
        op: SegmentReduce,
        argmax: Option<B::Index>,
    },
    /// Segment softmax over rows.
    SegmentSoftmax { x: usize, ptr: B::Index },
    /// Broadcast of one row per segment to the segment's rows.
    SegmentBroadcast { x: usize, ptr: B::Index },
    /// `out[v, j] = k[v] · q[g(v)·m + j]`.
    SegmentScores { k: usize, q: usize, ptr: B::Index },
    /// `out[v] = Σ_j a[v, j] u[g(v)·M + j]`.
    SegmentMix { a: usize, u: usize, ptr: B::Index },
    /// `out[g·M + j] = Σ_{v in g} a[v, j] x[v]`.
    SegmentWeightedSum { a: usize, x: usize, ptr: B::Index },
    /// Row-major reshape.
    Reshape { x: usize },
    /// Mean negative log-likelihood.
    Nll { logp: usize, target: B::Index },
    /// Mean binary cross-entropy with logits against constant targets.
    Bce { z: usize, y: B::Tensor },
    /// An op defined outside the crate, with its own backward.
    Custom {
        op: CustomOpRef<B>,
        inputs: Vec<usize>,
    },
}

pub(crate) struct Node<B: Backend> {
    pub(crate) op: Op<B>,
    pub(crate) value: Rc<B::Tensor>,
    pub(crate) requires_grad: bool,
    pub(crate) param: Option<ParamId>,
}

pub(crate) struct TapeInner<B: Backend> {
    pub(crate) backend: B,
    pub(crate) nodes: RefCell<Vec<Node<B>>>,
    pub(crate) grad_enabled: bool,
    seed: u64,
    counter: Cell<u64>,
    params: RefCell<HashMap<ParamId, usize>>,
}

/// A recording of one forward computation, from which [`Var::backward`]
/// computes gradients.
///
/// Create one tape per training step (it is cheap); drop it afterwards.
/// A tape made with [`Tape::inference`] records nothing: values are computed
/// and freed as soon as they are no longer referenced.
///
/// ```
/// use hdgcn::autograd::{Param, Tape};
/// use hdgcn::backend::Cpu;
/// let cpu = Cpu::<f64>::new();
/// let w = Param::from_array(&cpu, &ndarray::arr2(&[[2.0]]));
/// let tape = Tape::new(&cpu);
/// let x = tape.constant_array(&ndarray::arr2(&[[3.0]]));
/// let y = x.matmul(&tape.param(&w)).unwrap().square();   // (3w)^2
/// let grads = y.backward().unwrap();
/// assert_eq!(cpu_value(grads.get(&w).unwrap()), 36.0);     // 18 w
/// # fn cpu_value(t: &ndarray::Array2<f64>) -> f64 { t[[0, 0]] }
/// ```
#[derive(Clone)]
pub struct Tape<B: Backend> {
    pub(crate) inner: Rc<TapeInner<B>>,
}

impl<B: Backend> std::fmt::Debug for Tape<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tape")
            .field("backend", &self.inner.backend.name())
            .field("nodes", &self.inner.nodes.borrow().len())
            .field("grad_enabled", &self.inner.grad_enabled)
            .finish()
    }
}

impl<B: Backend> Tape<B> {
    fn build(backend: &B, grad_enabled: bool, seed: u64) -> Self {
        Tape {
            inner: Rc::new(TapeInner {
                backend: backend.clone(),
                nodes: RefCell::new(Vec::new()),
                grad_enabled,
                seed,
                counter: Cell::new(0),
                params: RefCell::new(HashMap::new()),
            }),
        }
    }

    /// A recording tape (random streams from seed 0).
    pub fn new(backend: &B) -> Self {
        Self::build(backend, true, 0)
    }

    /// A recording tape whose dropout masks derive from `seed`.
    pub fn with_seed(backend: &B, seed: u64) -> Self {
        Self::build(backend, true, seed)
    }

    /// A tape that records nothing (evaluation, prediction).
    pub fn inference(backend: &B) -> Self {
        Self::build(backend, false, 0)
    }

    /// The backend.
    pub fn backend(&self) -> &B {
        &self.inner.backend
    }

    /// Whether operations are recorded for backward.
    pub fn grad_enabled(&self) -> bool {
        self.inner.grad_enabled
    }

    /// Number of recorded nodes.
    pub fn len(&self) -> usize {
        self.inner.nodes.borrow().len()
    }

    /// Whether nothing has been recorded.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A fresh seed for a random operation (dropout): the tape's seed mixed
    /// with a per-tape counter, so that every call differs and a run repeats.
    pub fn next_seed(&self) -> u64 {
        let c = self.inner.counter.get();
        self.inner.counter.set(c + 1);
        splitmix64(self.inner.seed ^ splitmix64(c.wrapping_add(0x5851_F42D_4C95_7F2D)))
    }

    /// A constant (no gradient) from a device tensor.
    pub fn constant(&self, t: B::Tensor) -> Var<B> {
        self.leaf(t, false, None)
    }

    /// A constant from a host array.
    pub fn constant_array(&self, a: &ndarray::Array2<B::Elem>) -> Var<B> {
        self.constant(self.inner.backend.upload(a.view()))
    }

    /// An input whose gradient [`Gradients::wrt`] reports (gradient checks, saliency).
    pub fn input(&self, t: B::Tensor) -> Var<B> {
        self.leaf(t, self.inner.grad_enabled, None)
    }

    /// The current value of a parameter as a leaf of this tape. Using the
    /// same parameter twice returns the same node, so gradients accumulate.
    pub fn param(&self, p: &Param<B>) -> Var<B> {
        // The tape shares the parameter's storage (copy-on-write, see
        // `Param`), so recording a large embedding table costs nothing.
        if !self.inner.grad_enabled {
            return self.shared_leaf(p.shared_value(), false, None);
        }
        if let Some(&id) = self.inner.params.borrow().get(&p.id()) {
            let value = self.inner.nodes.borrow()[id].value.clone();
            return Var::from_parts(self.clone(), Some(id), value, true);
        }
        let v = self.shared_leaf(p.shared_value(), true, Some(p.id()));
        self.inner
            .params
            .borrow_mut()
            .insert(p.id(), v.node().expect("recorded"));
        v
    }

    fn leaf(&self, t: B::Tensor, requires_grad: bool, param: Option<ParamId>) -> Var<B> {
        self.shared_leaf(Rc::new(t), requires_grad, param)
    }

    fn shared_leaf(
        &self,
        value: Rc<B::Tensor>,
        requires_grad: bool,
        param: Option<ParamId>,
    ) -> Var<B> {
        if !self.inner.grad_enabled {
            return Var::from_parts(self.clone(), None, value, false);
        }
        let id = self.push(Node {
            op: Op::Leaf,
            value: value.clone(),
            requires_grad,
            param,
        });
        Var::from_parts(self.clone(), Some(id), value, requires_grad)
    }

    fn push(&self, node: Node<B>) -> usize {
        let mut nodes = self.inner.nodes.borrow_mut();
        nodes.push(node);
        nodes.len() - 1
    }

    /// Records `op` producing `value` if any input requires a gradient.
    pub(crate) fn record(&self, op: Op<B>, value: B::Tensor, inputs: &[&Var<B>]) -> Var<B> {
        let requires_grad = self.inner.grad_enabled && inputs.iter().any(|v| v.requires_grad());
        let value = Rc::new(value);
        if !self.inner.grad_enabled {
            return Var::from_parts(self.clone(), None, value, false);
        }
        let op = if requires_grad { op } else { Op::Leaf };
        let id = self.push(Node {
            op,
            value: value.clone(),
            requires_grad,
            param: None,
        });
        Var::from_parts(self.clone(), Some(id), value, requires_grad)
    }

    /// Reverse pass from node `root` (a `1 x 1` value) over the tape.
    pub(crate) fn backward(&self, root: usize) -> Result<Gradients<B>> {
        let b = &self.inner.backend;
        let nodes = self.inner.nodes.borrow();
        let (r, c) = b.shape(&nodes[root].value);
        if (r, c) != (1, 1) {
            return Err(Error::Autograd(format!(
                "backward needs a 1 x 1 value, got {r} x {c}"
            )));
        }
        let mut grads: Vec<Option<B::Tensor>> = (0..=root).map(|_| None).collect();
        grads[root] = Some(b.full(1, 1, num_traits::One::one()));
        let mut out = Gradients::default();
        for i in (0..=root).rev() {
            let Some(g) = grads[i].take() else { continue };
            let node = &nodes[i];
            if !node.requires_grad {
                continue;
            }
            let val = |k: usize| -> &B::Tensor { &nodes[k].value };
            let acc = |k: usize, t: B::Tensor, grads: &mut Vec<Option<B::Tensor>>| {
                if nodes[k].requires_grad {
                    add_into_slot(b, &mut grads[k], t);
                }
            };
            match &node.op {
                Op::Leaf => {
                    if let Some(pid) = node.param {
                        out.by_param.insert(pid, g);
                    } else {
                        out.by_node.insert(i, g);
                    }
                }
                &Op::MatMul { a, b: bb, ta, tb } => {
                    let (av, bv) = (val(a), val(bb));
                    if nodes[a].requires_grad {
                        let da = match (ta, tb) {
                            (false, false) => b.matmul(&g, bv, false, true),
                            (false, true) => b.matmul(&g, bv, false, false),
                            (true, false) => b.matmul(bv, &g, false, true),
                            (true, true) => b.matmul(bv, &g, true, true),
                        };
                        acc(a, da, &mut grads);
                    }
                    if nodes[bb].requires_grad {
                        let db = match (ta, tb) {
                            (false, false) => b.matmul(av, &g, true, false),
                            (false, true) => b.matmul(&g, av, true, false),
                            (true, false) => b.matmul(av, &g, false, false),
                            (true, true) => b.matmul(&g, av, true, true),
                        };
                        acc(bb, db, &mut grads);
                    }
                }
                Op::SpMM { s, x, transpose } => {
                    let dx = b.spmm(s, &g, !transpose);
                    acc(*x, dx, &mut grads);
                }
                &Op::Binary { op, a, b: bb } => {
                    let (av, bv) = (val(a), val(bb));
                    let (sa, sb) = (b.shape(av), b.shape(bv));
                    let (need_a, need_b) = (nodes[a].requires_grad, nodes[bb].requires_grad);
                    // Fits a gradient to an operand's shape: a gradient of
                    // that shape is used as it is, a broadcast one is
                    // summed down, so no full-size copy is made here.
                    let fit = |t: B::Tensor, (r, c): (usize, usize)| {
                        if b.shape(&t) == (r, c) {
                            t
                        } else {
                            b.sum_to(&t, r, c)
                        }
                    };
                    // `b`'s gradient is built first, from `&g`, so that
                    // `a`'s can take `g` itself (an `Add` copies `g` only
                    // when both operands need it at full size).
                    let mut g = Some(g);
                    if need_b {
                        let gr = g.as_ref().expect("g is taken below only");
                        let db = match op {
                            BinaryOp::Add if need_a => {
                                if b.shape(gr) == sb {
                                    gr.clone()
                                } else {
                                    b.sum_to(gr, sb.0, sb.1)
                                }
                            }
                            BinaryOp::Add => fit(g.take().expect("not taken yet"), sb),
                            BinaryOp::Sub => fit(b.unary(UnaryOp::Neg, gr), sb),
                            BinaryOp::Mul => fit(b.binary(BinaryOp::Mul, gr, av), sb),
                            // d(a/b)/db = -(a/b)/b * g = -out * g / b
                            BinaryOp::Div => {
                                let t = b.binary(BinaryOp::Div, gr, bv);
                                let t = b.binary(BinaryOp::Mul, &t, &node.value);
                                fit(b.unary(UnaryOp::Neg, &t), sb)
                            }
                        };
                        acc(bb, db, &mut grads);
                    }
                    if need_a {
                        let g = g
                            .take()
                            .expect("taken above only when `a` needs no gradient");
                        let da = match op {
                            BinaryOp::Add | BinaryOp::Sub => g,
                            BinaryOp::Mul => b.binary(BinaryOp::Mul, &g, bv),
                            BinaryOp::Div => b.binary(BinaryOp::Div, &g, bv),
                        };
                        acc(a, fit(da, sa), &mut grads);
                    }
                }
                &Op::Unary { op, x } => {
                    let dx = b.unary_grad(op, val(x), &node.value, &g);
                    acc(x, dx, &mut grads);
                }
                &Op::SumAxis { x } => {
                    let (r, c) = b.shape(val(x));
                    acc(x, b.broadcast_to(&g, r, c), &mut grads);
                }
                &Op::Softmax { x, axis, log } => {
                    let dx = b.softmax_grad(&node.value, &g, axis, log);
                    acc(x, dx, &mut grads);
                }
                Op::LayerNorm { x, rstd } => {
                    let dx = b.layer_norm_grad(&node.value, rstd, &g);
                    acc(*x, dx, &mut grads);
                }
                Op::Dropout { x, mask } => {
                    acc(*x, b.binary(BinaryOp::Mul, &g, mask), &mut grads);
                }
                Op::Concat { parts, axis } => {
                    let mut start = 0;
                    for &p in parts {
                        let (r, c) = b.shape(val(p));
                        let len = if *axis == Axis::Rows { r } else { c };
                        if nodes[p].requires_grad {
                            acc(p, b.slice(&g, *axis, start, start + len), &mut grads);
                        }
                        start += len;
                    }
                }
                &Op::Slice { x, axis, start, .. } => {
                    if nodes[x].requires_grad {
                        let (r, c) = b.shape(val(x));
                        let slot = grads[x].get_or_insert_with(|| b.full(r, c, zero()));
                        b.slice_add_assign(slot, &g, axis, start);
                    }
                }
                Op::Gather { x, idx } => {
                    let (r, _) = b.shape(val(*x));
                    acc(*x, b.scatter_add_rows(&g, idx, r), &mut grads);
                }
                Op::SegmentReduce { x, ptr, op, argmax } => {
                    if nodes[*x].requires_grad {
                        let (r, _) = b.shape(val(*x));
                        let slot = &mut grads[*x];
                        b.segment_reduce_grad_into(slot, &g, ptr, *op, argmax.as_ref(), r);
                    }
                }
                Op::SegmentSoftmax { x, ptr } => {
                    acc(*x, b.segment_softmax_grad(&node.value, &g, ptr), &mut grads);
                }
                Op::SegmentBroadcast { x, ptr } => {
                    let (dx, _) = b.segment_reduce(&g, ptr, SegmentReduce::Sum);
                    acc(*x, dx, &mut grads);
                }
                // Each backward is the other two cross-attention kernels,
                // computed by the backend in one pass where it can.
                Op::SegmentScores { k, q, ptr } => {
                    let dk = nodes[*k].requires_grad.then_some(&mut grads[*k]);
                    let want_dq = nodes[*q].requires_grad;
                    let dq = b.segment_scores_grad(&g, val(*k), val(*q), ptr, dk, want_dq);
                    if let Some(dq) = dq {
                        acc(*q, dq, &mut grads);
                    }
                }
                Op::SegmentMix { a, u, ptr } => {
                    let (want_da, want_du) = (nodes[*a].requires_grad, nodes[*u].requires_grad);
                    let (da, du) = b.segment_mix_grad(&g, val(*a), val(*u), ptr, want_da, want_du);
                    if let Some(da) = da {
                        acc(*a, da, &mut grads);
                    }
                    if let Some(du) = du {
                        acc(*u, du, &mut grads);
                    }
                }
                Op::SegmentWeightedSum { a, x, ptr } => {
                    let want_da = nodes[*a].requires_grad;
                    let dx = nodes[*x].requires_grad.then_some(&mut grads[*x]);
                    let da = b.segment_weighted_sum_grad(&g, val(*a), val(*x), ptr, want_da, dx);
                    if let Some(da) = da {
                        acc(*a, da, &mut grads);
                    }
                }
                &Op::Reshape { x } => {
                    let (r, c) = b.shape(val(x));
                    acc(x, b.reshape(&g, r, c), &mut grads);
                }
                Op::Nll { logp, target } => {
                    let (r, c) = b.shape(val(*logp));
                    acc(*logp, b.nll_grad(&g, target, r, c), &mut grads);
                }
                Op::Bce { z, y } => {
                    acc(*z, b.bce_with_logits_grad(val(*z), y, &g), &mut grads);
                }
                Op::Custom { op, inputs } => {
                    let name = op.0.name();
                    let ins: Vec<&B::Tensor> = inputs.iter().map(|&k| val(k)).collect();
                    let gs = op.0.backward(b, &ins, &node.value, &g)?;
                    if gs.len() != inputs.len() {
                        return Err(Error::Autograd(format!(
                            "custom op {name}: backward returned {} gradients for {} inputs",
                            gs.len(),
                            inputs.len()
                        )));
                    }
                    for (pos, (&k, gk)) in inputs.iter().zip(gs).enumerate() {
                        let Some(gk) = gk else { continue };
                        let (want, got) = (b.shape(val(k)), b.shape(&gk));
                        if want != got {
                            return Err(Error::Autograd(format!(
                                "custom op {name}: gradient for input {pos} is {} x {}, \
                                 the input is {} x {}",
                                got.0, got.1, want.0, want.1
                            )));
                        }
                        acc(k, gk, &mut grads);
                    }
                }
            }
        }
        Ok(out)
    }
}

fn zero<T: num_traits::Zero>() -> T {
    T::zero()
}

/// SplitMix64 finaliser, used to derive per-operation seeds.
pub(crate) fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
