//! Parameter initialisers (PyTorch / PyG conventions), seeded.

use ndarray::Array2;
use rand::Rng;
use rand_distr::{Distribution, Uniform};

use crate::autograd::Param;
use crate::backend::Backend;
use crate::error::{Error, Result, check_non_negative};
use crate::float::Float;

/// Checks a `rows x cols` tensor of `T` against the memory budget
/// ([`crate::limits::check_tensor`]): [`Error::OverBudget`] or, for a size
/// that overflows, [`Error::InvalidConfig`], naming `what` and the shape.
pub(crate) fn check_size<T>(what: &str, rows: usize, cols: usize) -> Result<()> {
    crate::limits::check_tensor::<T>(what, rows, cols)
}

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
///
/// # Errors
/// [`Error::NonFinite`] if `value` is NaN or infinite;
/// [`Error::InvalidConfig`] if the shape's size overflows;
/// [`Error::OverBudget`] if it is over the memory budget ([`crate::limits`]).
pub fn constant<B: Backend>(backend: &B, rows: usize, cols: usize, value: f64) -> Result<Param<B>> {
    if !value.is_finite() {
        return Err(Error::NonFinite {
            what: "constant initial value".into(),
            value,
        });
    }
    check_size::<B::Elem>("parameter", rows, cols)?;
    Ok(Param::new(
        backend,
        backend.full(rows, cols, B::Elem::from_f64_lossy(value)),
    ))
}

/// `N(0, std²)` entries (`std = 1`: embeddings, as `torch.nn.Embedding`).
///
/// # Errors
/// [`Error::InvalidConfig`] if `std` is negative, NaN or infinite, or the
/// shape's size overflows; [`Error::OverBudget`] if it is over the memory
/// budget ([`crate::limits`]).
pub fn normal<B: Backend, R: Rng + ?Sized>(
    backend: &B,
    rows: usize,
    cols: usize,
    std: f64,
    rng: &mut R,
) -> Result<Param<B>> {
    normal_named("parameter", backend, rows, cols, std, rng)
}

/// [`normal`], with `what` naming the tensor in the too-large error
/// ("embedding table of ...").
pub(crate) fn normal_named<B: Backend, R: Rng + ?Sized>(
    what: &str,
    backend: &B,
    rows: usize,
    cols: usize,
    std: f64,
    rng: &mut R,
) -> Result<Param<B>> {
    let bad = || {
        Error::InvalidConfig(format!(
            "normal init std must be finite and >= 0, got {std}"
        ))
    };
    // rand_distr accepts a negative std (it negates the samples).
    check_non_negative("normal init std", std)?;
    check_size::<B::Elem>(what, rows, cols)?;
    let d = rand_distr::Normal::new(0.0, std).map_err(|_| bad())?;
    let a = Array2::from_shape_fn((rows, cols), |_| B::Elem::from_f64_lossy(d.sample(rng)));
    Ok(Param::from_array(backend, &a))
}
