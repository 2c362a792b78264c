//! The tape: recorded nodes, the closed op enum, and the backward pass.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::{Rc, Weak};

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
    /// ReLU, with where its output is positive packed one bit per entry
    /// ([`Backend::positive_mask`]): all its gradient reads, so neither its
    /// input nor its output is kept for it.
    Relu { x: usize, mask: B::Index },
    /// Sum along an axis.
    SumAxis { x: usize },
    /// Softmax or log-softmax along an axis.
    Softmax { x: usize, axis: Axis, log: bool },
    /// Row standardisation (no affine part).
    LayerNorm { x: usize, rstd: B::Tensor },
    /// Multiplication by a dropout mask, drawn again from its seed in the
    /// backward pass rather than kept.
    Dropout { x: usize, p: f64, seed: u64 },
    /// `dropout(x) · w` in one product: the dropped-out copy of `x` is not
    /// made (see [`Backend::dropout_matmul`]).
    DropoutMatMul {
        x: usize,
        w: usize,
        p: f64,
        seed: u64,
    },
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

/// What the backward pass of an op reads besides its gradient: the values of
/// some inputs, and its own output.
struct Saved {
    inputs: [Option<usize>; 2],
    all_inputs: bool,
    output: bool,
}

impl Saved {
    const NOTHING: Saved = Saved {
        inputs: [None, None],
        all_inputs: false,
        output: false,
    };

    fn output() -> Saved {
        Saved {
            output: true,
            ..Saved::NOTHING
        }
    }

    fn inputs(a: Option<usize>, b: Option<usize>) -> Saved {
        Saved {
            inputs: [a, b],
            ..Saved::NOTHING
        }
    }
}

/// Whether a unary op's gradient reads its input (`x`) and its output (`y`).
/// ReLU, sigmoid, tanh and exp read only `y` (for ReLU `y > 0` exactly when
/// `x > 0`), so the pre-activation need not be kept.
pub(crate) fn unary_reads(op: UnaryOp) -> (bool, bool) {
    match op {
        UnaryOp::Relu | UnaryOp::Sigmoid | UnaryOp::Tanh | UnaryOp::Exp => (false, true),
        UnaryOp::Neg | UnaryOp::Affine(..) => (false, false),
        UnaryOp::LeakyRelu(_) | UnaryOp::Gelu | UnaryOp::Log | UnaryOp::Square => (true, false),
        UnaryOp::Elu(_) => (true, true),
    }
}

impl<B: Backend> Op<B> {
    /// What this op's backward reads, given which nodes need a gradient.
    fn saved(&self, rg: impl Fn(usize) -> bool) -> Saved {
        let on = |cond: bool, k: usize| cond.then_some(k);
        match self {
            Op::Leaf
            | Op::SpMM { .. }
            | Op::SumAxis { .. }
            | Op::Dropout { .. }
            | Op::Relu { .. }
            | Op::Concat { .. }
            | Op::Slice { .. }
            | Op::Gather { .. }
            | Op::SegmentReduce { .. }
            | Op::SegmentBroadcast { .. }
            | Op::Reshape { .. }
            | Op::Nll { .. } => Saved::NOTHING,
            &Op::MatMul { a, b, .. } => Saved::inputs(on(rg(b), a), on(rg(a), b)),
            &Op::DropoutMatMul { x, w, .. } => Saved::inputs(on(rg(w), x), on(rg(x), w)),
            &Op::Binary { op, a, b } => match op {
                BinaryOp::Add | BinaryOp::Sub => Saved::NOTHING,
                BinaryOp::Mul => Saved::inputs(on(rg(b), a), on(rg(a), b)),
                BinaryOp::Div => Saved {
                    output: rg(b),
                    ..Saved::inputs(None, Some(b))
                },
            },
            &Op::Unary { op, x } => {
                let (rx, ry) = unary_reads(op);
                Saved {
                    output: ry,
                    ..Saved::inputs(on(rx, x), None)
                }
            }
            Op::Softmax { .. } | Op::LayerNorm { .. } | Op::SegmentSoftmax { .. } => {
                Saved::output()
            }
            &Op::SegmentScores { k, q, .. } => Saved::inputs(Some(k), Some(q)),
            &Op::SegmentMix { a, u, .. } => Saved::inputs(Some(a), Some(u)),
            &Op::SegmentWeightedSum { a, x, .. } => Saved::inputs(Some(a), Some(x)),
            &Op::Bce { z, .. } => Saved::inputs(Some(z), None),
            Op::Custom { .. } => Saved {
                all_inputs: true,
                output: true,
                ..Saved::NOTHING
            },
        }
    }
}

/// A value the backward pass will read.
enum Kept<B: Backend> {
    Value(Rc<B::Tensor>),
    /// A dropout's output, kept as its input (which something else usually
    /// keeps anyway: the features, an activation's output) and drawn again
    /// when read, so that a dropout does not double the memory of what it
    /// drops out.
    Dropout {
        x: Rc<B::Tensor>,
        p: f64,
        seed: u64,
    },
}

impl<B: Backend> Kept<B> {
    /// The value, holding a shared one by its own handle, so that the
    /// tape's handle can be released while the value is read.
    fn hold(&self, b: &B) -> Held<B> {
        match self {
            Kept::Value(v) => Held::Shared(v.clone()),
            Kept::Dropout { x, p, seed } => Held::Owned(b.dropout(x, *p, *seed)),
        }
    }
}

/// A kept value as a backward pass reads it ([`Kept::hold`]).
enum Held<B: Backend> {
    Shared(Rc<B::Tensor>),
    Owned(B::Tensor),
}

impl<B: Backend> std::ops::Deref for Held<B> {
    type Target = B::Tensor;
    fn deref(&self) -> &B::Tensor {
        match self {
            Held::Shared(v) => v,
            Held::Owned(v) => v,
        }
    }
}

/// One recorded value. The tape keeps a value (`kept`) only while a
/// backward pass can still read it: an op's output when its own backward
/// reads it, an input when a later op's backward reads it, a parameter
/// always. Every other intermediate is freed as soon as the caller drops
/// its `Var` (`value` is only a weak handle), and the backward pass frees
/// each kept value once nothing later in the pass reads it (after the last
/// reader's backward, or inside it once the part that reads it is done),
/// so the memory of a step is what its gradients need, not every tensor it
/// made.
pub(crate) struct Node<B: Backend> {
    pub(crate) op: Op<B>,
    value: Weak<B::Tensor>,
    kept: RefCell<Option<Kept<B>>>,
    /// For a dropout's output: its input, probability and seed, from which
    /// the output can be drawn again.
    redo: Option<(Weak<B::Tensor>, f64, u64)>,
    shape: (usize, usize),
    pub(crate) requires_grad: bool,
    pub(crate) param: Option<ParamId>,
    /// How many later ops' backward passes read this value, not counting
    /// those that have run.
    readers: Cell<u32>,
    /// Whether this op's own backward reads its output (then the value is
    /// kept until that runs, whatever its readers).
    reads_own: bool,
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

    /// Number of tensor elements this tape holds for its backward pass,
    /// beyond the parameters (whose values the [`Param`]s hold anyway): the
    /// inputs and outputs that recorded ops' gradients read, each counted
    /// once. Intermediates that no gradient reads are not held (they are
    /// freed when the caller drops their [`Var`]); a dropout's output is
    /// held as its input and drawn again; a backward pass frees what it
    /// has read, so this is 0 after it.
    ///
    /// ```
    /// use hdgcn::autograd::{Param, Tape};
    /// use hdgcn::backend::Cpu;
    /// let cpu = Cpu::<f64>::new();
    /// let w = Param::from_array(&cpu, &ndarray::Array2::ones((3, 2)));
    /// let tape = Tape::new(&cpu);
    /// let x = tape.constant_array(&ndarray::Array2::ones((4, 3)));
    /// // `x · w` keeps `x` (the weight's gradient reads it); `tanh` keeps its output.
    /// let y = x.matmul(&tape.param(&w)).unwrap().tanh().sum_all();
    /// assert_eq!(tape.saved_elements(), 4 * 3 + 4 * 2);
    /// y.backward().unwrap();
    /// assert_eq!(tape.saved_elements(), 0);
    /// ```
    pub fn saved_elements(&self) -> usize {
        let nodes = self.inner.nodes.borrow();
        let mut seen = std::collections::HashSet::new();
        let b = &self.inner.backend;
        let mut total = 0;
        for node in nodes.iter().filter(|n| n.param.is_none()) {
            let kept = node.kept.borrow();
            let t = match &*kept {
                Some(Kept::Value(v)) => v,
                Some(Kept::Dropout { x, .. }) => x,
                None => continue,
            };
            if seen.insert(Rc::as_ptr(t)) {
                let (r, c) = b.shape(t);
                total += r * c;
            }
        }
        total
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

    /// A constant sharing a value already on the device (no copy).
    pub(crate) fn constant_shared(&self, t: Rc<B::Tensor>) -> Var<B> {
        self.shared_leaf(t, false, None)
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
            let node = &self.inner.nodes.borrow()[id];
            let value = match &*node.kept.borrow() {
                Some(Kept::Value(v)) => Some(v.clone()),
                _ => None,
            }
            .or_else(|| node.value.upgrade())
            .unwrap_or_else(|| p.shared_value());
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
            value: Rc::downgrade(&value),
            // A parameter's value is shared with the `Param`: keeping it
            // costs nothing, and `param` hands it out again.
            kept: RefCell::new(param.is_some().then(|| Kept::Value(value.clone()))),
            redo: None,
            shape: self.inner.backend.shape(&value),
            requires_grad,
            param,
            readers: Cell::new(0),
            reads_own: false,
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
        let redo = match &op {
            &Op::Dropout { p, seed, .. } => inputs
                .first()
                .map(|x| (Rc::downgrade(x.value_rc()), p, seed)),
            _ => None,
        };
        let op = if requires_grad { op } else { Op::Leaf };
        let mut nodes = self.inner.nodes.borrow_mut();
        let saved = op.saved(|k| nodes[k].requires_grad);
        let needed: Vec<usize> = match &op {
            Op::Custom { inputs: ins, .. } if saved.all_inputs => ins.clone(),
            _ => saved.inputs.iter().flatten().copied().collect(),
        };
        for k in needed {
            nodes[k].readers.set(nodes[k].readers.get() + 1);
            if nodes[k].kept.get_mut().is_none() {
                // A dropout's output is kept as its input while that lives;
                // otherwise the operand's `Var` is among `inputs` (it holds
                // the value), and the weak handle is the fallback.
                let redo = nodes[k].redo.as_ref().and_then(|(x, p, seed)| {
                    x.upgrade().map(|x| Kept::Dropout {
                        x,
                        p: *p,
                        seed: *seed,
                    })
                });
                *nodes[k].kept.get_mut() = redo.or_else(|| {
                    inputs
                        .iter()
                        .find(|v| v.node() == Some(k))
                        .map(|v| v.value_rc().clone())
                        .or_else(|| nodes[k].value.upgrade())
                        .map(Kept::Value)
                });
            }
        }
        nodes.push(Node {
            kept: RefCell::new(saved.output.then(|| Kept::Value(value.clone()))),
            redo,
            value: Rc::downgrade(&value),
            shape: self.inner.backend.shape(&value),
            op,
            requires_grad,
            param: None,
            readers: Cell::new(0),
            reads_own: saved.output,
        });
        let id = nodes.len() - 1;
        drop(nodes);
        Var::from_parts(self.clone(), Some(id), value, requires_grad)
    }

    /// Reverse pass from node `root` (a `1 x 1` value) over the tape.
    pub(crate) fn backward(&self, root: usize) -> Result<Gradients<B>> {
        let b = &self.inner.backend;
        let mut nodes = self.inner.nodes.borrow_mut();
        let (r, c) = nodes[root].shape;
        if (r, c) != (1, 1) {
            return Err(Error::Autograd(format!(
                "backward needs a 1 x 1 value, got {r} x {c}"
            )));
        }
        let mut grads: Vec<Option<B::Tensor>> = (0..=root).map(|_| None).collect();
        grads[root] = Some(b.full(1, 1, num_traits::One::one()));
        let mut out = Gradients::default();
        for i in (0..=root).rev() {
            // Every reader of node `i`'s value comes later on the tape and
            // has run: this pass is the last to need it.
            let own = nodes[i].kept.get_mut().take();
            let Some(g) = grads[i].take() else { continue };
            let nodes = &*nodes;
            let node = &nodes[i];
            if !node.requires_grad {
                continue;
            }
            let released = || {
                Error::Autograd(
                    "a value this backward pass needs was released (by an earlier \
                     backward pass over the same tape: record the forward pass again)"
                        .into(),
                )
            };
            // The inputs this backward reads for the last time (no earlier
            // op's backward reads them, nor their own): released as soon as
            // the part that reads them is done, at the latest after this op.
            let saved = node.op.saved(|k| nodes[k].requires_grad);
            let all: &[usize] = match &node.op {
                Op::Custom { inputs, .. } if saved.all_inputs => inputs,
                _ => &[],
            };
            let mut last = Vec::new();
            for &k in saved.inputs.iter().flatten().chain(all) {
                let n = &nodes[k];
                let left = n.readers.get().saturating_sub(1);
                n.readers.set(left);
                if left == 0 && !n.reads_own && n.param.is_none() {
                    last.push(k);
                }
            }
            let release = |k: usize| {
                if last.contains(&k) {
                    let freed = nodes[k].kept.borrow_mut().take();
                    drop(freed);
                }
            };
            let val = |k: usize| -> Result<Held<B>> {
                nodes[k]
                    .kept
                    .borrow()
                    .as_ref()
                    .map(|v| v.hold(b))
                    .ok_or_else(released)
            };
            let own =
                || -> Result<Held<B>> { own.as_ref().map(|v| v.hold(b)).ok_or_else(released) };
            let shape = |k: usize| nodes[k].shape;
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
                    // `b`'s gradient first: it reads `a`, which (an
                    // activation, usually) can then be released before
                    // `a`'s gradient, of its size, is made. Each gradient
                    // goes to its own slot, so the order changes no value
                    // (for `a == b` the order of the sum is kept).
                    let da_first = a == bb;
                    let grad_a = |grads: &mut Vec<Option<B::Tensor>>| -> Result<()> {
                        if nodes[a].requires_grad {
                            let bv = &*val(bb)?;
                            let da = match (ta, tb) {
                                (false, false) => b.matmul(&g, bv, false, true),
                                (false, true) => b.matmul(&g, bv, false, false),
                                (true, false) => b.matmul(bv, &g, false, true),
                                (true, true) => b.matmul(bv, &g, true, true),
                            };
                            acc(a, da, grads);
                        }
                        Ok(())
                    };
                    if da_first {
                        grad_a(&mut grads)?;
                    }
                    if nodes[bb].requires_grad {
                        // `a` kept as a dropout of its input: the weight
                        // gradient draws the mask block by block instead of
                        // making the dropped-out copy.
                        let dropped = match (ta, tb, &*nodes[a].kept.borrow()) {
                            (false, false, Some(Kept::Dropout { x, p, seed })) => {
                                Some(b.dropout_t_matmul(x, *p, *seed, &g))
                            }
                            _ => None,
                        };
                        let db = match dropped {
                            Some(db) => db,
                            None => {
                                let av = &*val(a)?;
                                match (ta, tb) {
                                    (false, false) => b.matmul(av, &g, true, false),
                                    (false, true) => b.matmul(&g, av, true, false),
                                    (true, false) => b.matmul(av, &g, false, false),
                                    (true, true) => b.matmul(&g, av, true, true),
                                }
                            }
                        };
                        acc(bb, db, &mut grads);
                    }
                    if !da_first {
                        release(a);
                        grad_a(&mut grads)?;
                    }
                }
                Op::SpMM { s, x, transpose } => {
                    let dx = b.spmm(s, &g, !transpose);
                    acc(*x, dx, &mut grads);
                }
                &Op::Binary { op, a, b: bb } => {
                    let (sa, sb) = (shape(a), shape(bb));
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
                            BinaryOp::Mul => fit(b.binary(BinaryOp::Mul, gr, &*val(a)?), sb),
                            // d(a/b)/db = -(a/b)/b * g = -out * g / b
                            BinaryOp::Div => {
                                let t = b.binary(BinaryOp::Div, gr, &*val(bb)?);
                                let t = b.binary(BinaryOp::Mul, &t, &*own()?);
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
                            BinaryOp::Mul => b.binary(BinaryOp::Mul, &g, &*val(bb)?),
                            BinaryOp::Div => b.binary(BinaryOp::Div, &g, &*val(bb)?),
                        };
                        acc(a, fit(da, sa), &mut grads);
                    }
                }
                &Op::Unary { op, x } => {
                    // A side the gradient does not read is not kept: any
                    // tensor of the same shape stands in for it.
                    // `g` is this pass's own: the gradient may be written
                    // over it (`unary_grad_owned`).
                    let dx = match unary_reads(op) {
                        (true, true) => b.unary_grad_owned(op, &*val(x)?, &*own()?, g),
                        (true, false) => {
                            let xv = val(x)?;
                            b.unary_grad_owned(op, &*xv, &*xv, g)
                        }
                        (false, true) => {
                            let y = own()?;
                            b.unary_grad_owned(op, &*y, &*y, g)
                        }
                        (false, false) => b.unary_grad(op, &g, &g, &g),
                    };
                    acc(x, dx, &mut grads);
                }
                Op::Relu { x, mask } => {
                    acc(*x, b.masked_grad_owned(g, mask), &mut grads);
                }
                &Op::SumAxis { x } => {
                    let (r, c) = shape(x);
                    acc(x, b.broadcast_to(&g, r, c), &mut grads);
                }
                &Op::Softmax { x, axis, log } => {
                    let dx = b.softmax_grad(&*own()?, &g, axis, log);
                    acc(x, dx, &mut grads);
                }
                Op::LayerNorm { x, rstd } => {
                    let dx = b.layer_norm_grad(&*own()?, rstd, &g);
                    acc(*x, dx, &mut grads);
                }
                &Op::Dropout { x, p, seed } => {
                    // The same mask, drawn again from its seed, applied
                    // over `g` (this pass's own).
                    acc(x, b.dropout_owned(g, p, seed), &mut grads);
                }
                &Op::DropoutMatMul { x, w, p, seed } => {
                    if nodes[w].requires_grad {
                        let dw = b.dropout_t_matmul(&*val(x)?, p, seed, &g);
                        acc(w, dw, &mut grads);
                    }
                    // `x` (read last above) is not held while its gradient
                    // is made.
                    if x != w {
                        release(x);
                    }
                    if nodes[x].requires_grad {
                        // The same mask, drawn again from its seed.
                        let gx = b.matmul(&g, &*val(w)?, false, true);
                        acc(x, b.dropout_owned(gx, p, seed), &mut grads);
                    }
                }
                Op::Concat { parts, axis } => {
                    let mut start = 0;
                    for &p in parts {
                        let (r, c) = shape(p);
                        let len = if *axis == Axis::Rows { r } else { c };
                        if nodes[p].requires_grad {
                            acc(p, b.slice(&g, *axis, start, start + len), &mut grads);
                        }
                        start += len;
                    }
                }
                &Op::Slice { x, axis, start, .. } => {
                    if nodes[x].requires_grad {
                        let (r, c) = shape(x);
                        let slot = grads[x].get_or_insert_with(|| b.full(r, c, zero()));
                        b.slice_add_assign(slot, &g, axis, start);
                    }
                }
                Op::Gather { x, idx } => {
                    let (r, _) = shape(*x);
                    acc(*x, b.scatter_add_rows(&g, idx, r), &mut grads);
                }
                Op::SegmentReduce { x, ptr, op, argmax } => {
                    if nodes[*x].requires_grad {
                        let (r, _) = shape(*x);
                        let slot = &mut grads[*x];
                        b.segment_reduce_grad_into(slot, &g, ptr, *op, argmax.as_ref(), r);
                    }
                }
                Op::SegmentSoftmax { x, ptr } => {
                    acc(*x, b.segment_softmax_grad(&*own()?, &g, ptr), &mut grads);
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
                    let dq = b.segment_scores_grad(&g, &*val(*k)?, &*val(*q)?, ptr, dk, want_dq);
                    if let Some(dq) = dq {
                        acc(*q, dq, &mut grads);
                    }
                }
                Op::SegmentMix { a, u, ptr } => {
                    let (want_da, want_du) = (nodes[*a].requires_grad, nodes[*u].requires_grad);
                    let (da, du) =
                        b.segment_mix_grad(&g, &*val(*a)?, &*val(*u)?, ptr, want_da, want_du);
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
                    let da =
                        b.segment_weighted_sum_grad(&g, &*val(*a)?, &*val(*x)?, ptr, want_da, dx);
                    if let Some(da) = da {
                        acc(*a, da, &mut grads);
                    }
                }
                &Op::Reshape { x } => {
                    let (r, c) = shape(x);
                    acc(x, b.reshape(&g, r, c), &mut grads);
                }
                Op::Nll { logp, target } => {
                    let (r, c) = shape(*logp);
                    acc(*logp, b.nll_grad(&g, target, r, c), &mut grads);
                }
                Op::Bce { z, y } => {
                    acc(*z, b.bce_with_logits_grad(&*val(*z)?, y, &g), &mut grads);
                }
                Op::Custom { op, inputs } => {
                    let name = op.0.name();
                    let ins: Vec<Held<B>> =
                        inputs.iter().map(|&k| val(k)).collect::<Result<_>>()?;
                    let ins: Vec<&B::Tensor> = ins.iter().map(|v| &**v).collect();
                    let gs = op.0.backward(b, &ins, &*own()?, &g)?;
                    if gs.len() != inputs.len() {
                        return Err(Error::Autograd(format!(
                            "custom op {name}: backward returned {} gradients for {} inputs",
                            gs.len(),
                            inputs.len()
                        )));
                    }
                    for (pos, (&k, gk)) in inputs.iter().zip(gs).enumerate() {
                        let Some(gk) = gk else { continue };
                        let (want, got) = (shape(k), b.shape(&gk));
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
            for &k in &last {
                release(k);
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
