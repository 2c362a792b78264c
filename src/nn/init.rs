//! Parameter initialisers (PyTorch / PyG conventions), seeded.

use ndarray::Array2;
use rand::Rng;
use rand_distr::{Distribution, Uniform};

use crate::autograd::Param;
use crate::backend::Backend;
use crate::float::Float;

fn uniform<B: Backend, R: Rng + ?Sized>(
    backend: &B,
    rows: usize,
    cols: usize,
    bound: f64,
    rng: &mut R,
) -> Param<B> {
    let a = if bound > 0.0 {
        let d = Uniform::new_inclusive(-bound, bound).expect("finite bound");
        Array2::from_shape_fn((rows, cols), |_| B::Elem::from_f64_lossy(d.sample(rng)))
    } else {
        Array2::zeros((rows, cols))
    };
    Param::from_array(backend, &a)
}

/// Glorot (Xavier) uniform: `U(-a, a)`, `a = sqrt(6 / (fan_in + fan_out))`
/// (PyG's `glorot`, used by `GCNConv` and `ChebConv`). Shape `fan_in x fan_out`.
pub fn glorot<B: Backend, R: Rng + ?Sized>(
    backend: &B,
    fan_in: usize,
    fan_out: usize,
    rng: &mut R,
) -> Param<B> {
    let a = (6.0 / (fan_in + fan_out).max(1) as f64).sqrt();
    uniform(backend, fan_in, fan_out, a, rng)
}

/// `torch.nn.Linear`'s default: `U(-1/sqrt(fan_in), 1/sqrt(fan_in))` for a
/// `rows x cols` tensor.
pub fn linear_default<B: Backend, R: Rng + ?Sized>(
    backend: &B,
    fan_in: usize,
    rows: usize,
    cols: usize,
    rng: &mut R,
) -> Param<B> {
    let a = 1.0 / (fan_in.max(1) as f64).sqrt();
    uniform(backend, rows, cols, a, rng)
}

/// A `rows x cols` parameter filled with `value`.
pub fn constant<B: Backend>(backend: &B, rows: usize, cols: usize, value: f64) -> Param<B> {
    Param::new(
        backend,
        backend.full(rows, cols, B::Elem::from_f64_lossy(value)),
    )
}

/// Standard normal entries (embeddings, as `torch.nn.Embedding`).
pub fn normal<B: Backend, R: Rng + ?Sized>(
    backend: &B,
    rows: usize,
    cols: usize,
    std: f64,
    rng: &mut R,
) -> Param<B> {
    let d = rand_distr::Normal::new(0.0, std).expect("finite std");
    let a = Array2::from_shape_fn((rows, cols), |_| B::Elem::from_f64_lossy(d.sample(rng)));
    Param::from_array(backend, &a)
}
