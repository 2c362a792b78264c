//! Trainable parameters and the gradients a backward pass produces.

use std::cell::{Ref, RefCell, RefMut};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};

use ndarray::Array2;

use crate::backend::Backend;
use crate::error::{Error, Result};

static NEXT_PARAM_ID: AtomicU64 = AtomicU64::new(1);

/// Process-unique identity of a [`Param`]; optimiser state is keyed by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ParamId(u64);

impl ParamId {
    fn fresh() -> Self {
        ParamId(NEXT_PARAM_ID.fetch_add(1, Ordering::Relaxed))
    }
}

/// A trainable tensor. Cloning a `Param` shares the same storage (a handle),
/// like `torch.nn.Parameter` held by two modules.
///
/// The value is copy-on-write: a [`Tape`](crate::autograd::Tape) that uses
/// the parameter holds the current value without copying it, and
/// [`value_mut`](Self::value_mut) copies it only while such a tape is still
/// alive (so the tape keeps the value its forward pass saw). Drop the tape
/// before the optimiser step to update in place.
#[derive(Clone, Debug)]
pub struct Param<B: Backend> {
    id: ParamId,
    backend: B,
    value: Rc<RefCell<Rc<B::Tensor>>>,
}

impl<B: Backend> Param<B> {
    /// Wraps a device tensor as a new parameter.
    pub fn new(backend: &B, value: B::Tensor) -> Self {
        Param {
            id: ParamId::fresh(),
            backend: backend.clone(),
            value: Rc::new(RefCell::new(Rc::new(value))),
        }
    }

    /// Uploads a host array as a new parameter.
    pub fn from_array(backend: &B, a: &Array2<B::Elem>) -> Self {
        Self::new(backend, backend.upload(a.view()))
    }

    /// The parameter's identity.
    pub fn id(&self) -> ParamId {
        self.id
    }

    /// The backend the parameter lives on.
    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// Borrows the current value.
    pub fn value(&self) -> Ref<'_, B::Tensor> {
        Ref::map(self.value.borrow(), |v| &**v)
    }

    /// The current value as a shared handle (no copy); what a tape records.
    pub(crate) fn shared_value(&self) -> Rc<B::Tensor> {
        Rc::clone(&self.value.borrow())
    }

    /// Mutably borrows the value (optimisers, checkpoint loading). Copies
    /// the value first if a live tape still holds it (copy-on-write).
    pub fn value_mut(&self) -> RefMut<'_, B::Tensor> {
        RefMut::map(self.value.borrow_mut(), Rc::make_mut)
    }

    /// `(rows, cols)`.
    pub fn shape(&self) -> (usize, usize) {
        self.backend.shape(&self.value.borrow())
    }

    /// Number of scalar entries.
    pub fn numel(&self) -> usize {
        let (r, c) = self.shape();
        r * c
    }

    /// Copies the value to the host.
    pub fn to_array(&self) -> Array2<B::Elem> {
        self.backend.download(&self.value.borrow())
    }

    /// Replaces the value with one of the same shape.
    ///
    /// # Errors
    /// [`Error::ShapeMismatch`] if `value`'s shape differs from the
    /// parameter's; the parameter is then unchanged.
    pub fn set(&self, value: B::Tensor) -> Result<()> {
        let want = self.shape();
        let got = self.backend.shape(&value);
        if got != want {
            return Err(Error::shape(
                "Param::set",
                format!("({}, {})", want.0, want.1),
                format!("({}, {})", got.0, got.1),
            ));
        }
        *self.value.borrow_mut() = Rc::new(value);
        Ok(())
    }
}

/// Gradients of a scalar with respect to the parameters that took part in
/// its computation, as returned by [`Var::backward`](crate::autograd::Var::backward).
#[derive(Debug)]
pub struct Gradients<B: Backend> {
    pub(crate) by_param: HashMap<ParamId, B::Tensor>,
    pub(crate) by_node: HashMap<usize, B::Tensor>,
}

impl<B: Backend> Default for Gradients<B> {
    fn default() -> Self {
        Gradients {
            by_param: HashMap::new(),
            by_node: HashMap::new(),
        }
    }
}

impl<B: Backend> Gradients<B> {
    /// The gradient of `p`, if `p` was used.
    pub fn get(&self, p: &Param<B>) -> Option<&B::Tensor> {
        self.by_param.get(&p.id)
    }

    /// The gradient with respect to an input created by
    /// [`Tape::input`](crate::autograd::Tape::input), if it was used.
    pub fn wrt(&self, v: &crate::autograd::Var<B>) -> Option<&B::Tensor> {
        v.node().and_then(|n| self.by_node.get(&n))
    }

    /// Mutable access (clipping, scaling).
    pub fn get_mut(&mut self, p: &Param<B>) -> Option<&mut B::Tensor> {
        self.by_param.get_mut(&p.id)
    }

    /// Sets (or replaces) the gradient of `p`.
    pub fn insert(&mut self, p: &Param<B>, g: B::Tensor) {
        self.by_param.insert(p.id, g);
    }

    /// Number of parameters with a gradient.
    pub fn len(&self) -> usize {
        self.by_param.len()
    }

    /// Whether no parameter received a gradient.
    pub fn is_empty(&self) -> bool {
        self.by_param.is_empty()
    }

    /// Iterates over all gradient tensors (order unspecified).
    pub fn tensors_mut(&mut self) -> impl Iterator<Item = &mut B::Tensor> {
        self.by_param.values_mut()
    }

    /// Iterates over all gradient tensors (order unspecified).
    pub fn tensors(&self) -> impl Iterator<Item = &B::Tensor> {
        self.by_param.values()
    }
}
