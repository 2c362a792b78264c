//! The CPU backend: ndarray dense kernels, row-parallel CSR kernels.

use std::marker::PhantomData;

/// CPU backend over element type `F` (`f32` or `f64`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Cpu<F = f32> {
    _f: PhantomData<F>,
}
