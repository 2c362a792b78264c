//! The backend-agnostic op suite: every check is a generic function
//! `fn check<B: Backend<Elem = f32>>(b: &B)` that runs an op on `B` and
//! compares it with an `f64` reference computed on `Cpu<f64>` or by hand.
//! [`backend_tests!`] instantiates each check once per backend: `cpu::name`
//! always, `wgpu::name` with the `wgpu` feature.
//!
//! Every op must match the reference within 1e-4 relative
//! ([`assert_close`]). The wgpu tests are ignored unless `HDGCN_WGPU` or
//! `CI` is set, and then a missing adapter fails them (the rule is at the
//! top of `tests/common/mod.rs`).

use hdgcn::backend::{Backend, Cpu};
use ndarray::Array2;
use rand::{Rng, SeedableRng, rngs::StdRng};

/// Declares each generic check as one test per backend.
macro_rules! backend_tests {
    ($($name:ident),* $(,)?) => {
        mod cpu {
            $(
                #[test]
                fn $name() {
                    super::$name(&hdgcn::backend::Cpu::<f32>::new());
                }
            )*
        }
        #[cfg(feature = "wgpu")]
        mod wgpu {
            $(
                #[test]
                #[cfg_attr(
                    not(hdgcn_wgpu_tests),
                    ignore = "needs a wgpu adapter: set HDGCN_WGPU=1 (see tests/common/mod.rs)"
                )]
                fn $name() {
                    super::$name(&crate::common::wgpu::shared_wgpu());
                }
            )*
        }
    };
}

#[path = "../common/mod.rs"]
mod common;
mod elementwise;
#[macro_use]
mod layers;
mod layers_more;
mod matmul;
mod message_passing;
#[cfg(feature = "wgpu")]
mod pool;
mod reduce;
mod segment;
mod shape;
mod sparse;

/// The `f64` reference backend.
pub fn reference() -> Cpu<f64> {
    Cpu::<f64>::new()
}

/// A `rows x cols` array with entries uniform in `[lo, hi)`.
pub fn rand_array(rows: usize, cols: usize, seed: u64, lo: f64, hi: f64) -> Array2<f64> {
    let mut rng = StdRng::seed_from_u64(seed);
    Array2::from_shape_fn((rows, cols), |_| rng.random_range(lo..hi))
}

/// Uploads an `f64` array to an `f32` backend.
pub fn up<B: Backend<Elem = f32>>(b: &B, a: &Array2<f64>) -> B::Tensor {
    b.upload(a.mapv(|v| v as f32).view())
}

/// Downloads an `f32` tensor as `f64`.
pub fn down<B: Backend<Elem = f32>>(b: &B, t: &B::Tensor) -> Array2<f64> {
    b.download(t).mapv(f64::from)
}

/// The `f64` reference of an op whose inputs were rounded to `f32` (so that
/// the reference sees exactly the backend's inputs).
pub fn r32(a: &Array2<f64>) -> Array2<f64> {
    a.mapv(|v| f64::from(v as f32))
}

/// Asserts `|got - want| <= 1e-4 * max(|want|, 1e-2 * max|want|)` entry-wise
/// (relative, with a floor for entries much smaller than the largest).
pub fn assert_close(what: &str, got: &Array2<f64>, want: &Array2<f64>) {
    assert_eq!(got.dim(), want.dim(), "{what}: shape");
    let scale = want.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    for ((idx, &g), &w) in got.indexed_iter().zip(want.iter()) {
        let tol = 1e-4 * w.abs().max(1e-2 * scale).max(1e-30);
        assert!(
            (g - w).abs() <= tol || (g.is_nan() && w.is_nan()),
            "{what}: entry {idx:?} is {g}, expected {w} (tolerance {tol:e})"
        );
    }
}

/// Asserts `max|got - want| <= 1e-4 * max(max|want|, floor)` over the whole
/// tensor (norm-wise relative: for gradients, whose small entries are sums
/// of cancelling terms).
pub fn assert_close_tensor(what: &str, got: &Array2<f64>, want: &Array2<f64>, floor: f64) {
    assert_eq!(got.dim(), want.dim(), "{what}: shape");
    let scale = want.iter().fold(0.0f64, |m, v| m.max(v.abs())).max(floor);
    let err = got
        .iter()
        .zip(want.iter())
        .fold(0.0f64, |m, (g, w)| m.max((g - w).abs()));
    assert!(
        err <= 1e-4 * scale.max(1e-30),
        "{what}: largest error {err:e} exceeds 1e-4 of the largest entry {scale:e}"
    );
}
