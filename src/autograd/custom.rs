//! Operations defined outside the crate: [`CustomOp`].
//!
//! The tape records a closed set of built-in ops; a [`CustomOp`] adds one
//! without a fork. It supplies its forward and backward kernels on the
//! backend's tensors (for [`Cpu`](crate::backend::Cpu) these are
//! `ndarray::Array2`s), and [`Var::apply_custom`](crate::autograd::Var::apply_custom)
//! runs the forward and records the op, so [`Var::backward`] calls its
//! backward with the saved inputs, the output and the output's gradient.
//!
//! ```
//! use std::rc::Rc;
//! use hdgcn::autograd::{CustomOp, Tape, Var};
//! use hdgcn::backend::Cpu;
//! use ndarray::Array2;
//!
//! /// `y = x³`, element-wise.
//! struct Cube;
//! impl CustomOp<Cpu<f64>> for Cube {
//!     fn name(&self) -> &str {
//!         "cube"
//!     }
//!     fn forward(&self, _: &Cpu<f64>, inputs: &[&Array2<f64>]) -> hdgcn::Result<Array2<f64>> {
//!         Ok(inputs[0].mapv(|v| v * v * v))
//!     }
//!     fn backward(
//!         &self,
//!         _: &Cpu<f64>,
//!         inputs: &[&Array2<f64>],
//!         _output: &Array2<f64>,
//!         grad: &Array2<f64>,
//!     ) -> hdgcn::Result<Vec<Option<Array2<f64>>>> {
//!         Ok(vec![Some(grad * &inputs[0].mapv(|v| 3.0 * v * v))])
//!     }
//! }
//!
//! let cpu = Cpu::<f64>::new();
//! let tape = Tape::new(&cpu);
//! let x = tape.input(ndarray::arr2(&[[2.0, -1.0]]));
//! let y = Var::apply_custom(Rc::new(Cube), &[&x])?.sum_all();
//! let grads = y.backward()?;
//! assert_eq!(grads.wrt(&x).unwrap(), &ndarray::arr2(&[[12.0, 3.0]]));
//! # Ok::<(), hdgcn::Error>(())
//! ```
//!
//! [`Var::backward`]: crate::autograd::Var::backward

use std::rc::Rc;

use crate::backend::Backend;
use crate::error::Result;

/// An operation with its own forward and backward kernels on backend `B`.
///
/// Implement it for the backends the op supports (e.g. only
/// `Cpu<f64>`, or generically over `B: Backend` when it is written with
/// the [`Backend`] kernels), and apply it with
/// [`Var::apply_custom`](crate::autograd::Var::apply_custom).
pub trait CustomOp<B: Backend> {
    /// A name for error messages.
    fn name(&self) -> &str;

    /// Computes the output from the inputs' values.
    ///
    /// # Errors
    /// Any error (e.g. [`Error::ShapeMismatch`](crate::Error::ShapeMismatch)
    /// for inputs the op cannot take) is returned by `apply_custom`.
    fn forward(&self, backend: &B, inputs: &[&B::Tensor]) -> Result<B::Tensor>;

    /// The gradient with respect to each input, given the inputs, the
    /// forward's `output` and the gradient `grad_output` of the loss with
    /// respect to it (the output's shape).
    ///
    /// Return one entry per input, of that input's shape; `None` means
    /// "no gradient" (treated as zero, e.g. for an input that is a
    /// constant). A wrong count or shape makes [`Var::backward`] fail with
    /// [`Error::Autograd`](crate::Error::Autograd).
    ///
    /// [`Var::backward`]: crate::autograd::Var::backward
    ///
    /// # Errors
    /// Any error is returned by [`Var::backward`].
    fn backward(
        &self,
        backend: &B,
        inputs: &[&B::Tensor],
        output: &B::Tensor,
        grad_output: &B::Tensor,
    ) -> Result<Vec<Option<B::Tensor>>>;
}

/// A recorded custom op (a shared handle, printable for the tape's `Debug`).
#[derive(Clone)]
pub(crate) struct CustomOpRef<B: Backend>(pub(crate) Rc<dyn CustomOp<B>>);

impl<B: Backend> std::fmt::Debug for CustomOpRef<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CustomOp({})", self.0.name())
    }
}
