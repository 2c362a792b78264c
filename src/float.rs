//! The floating-point element types tensors may hold.

use std::fmt::{Debug, Display};

/// Element type of tensors: implemented for `f32` (training default) and `f64`
/// (gradient checks, exact comparisons).
pub trait Float:
    num_traits::Float
    + num_traits::FromPrimitive
    + num_traits::ToPrimitive
    + ndarray::LinalgScalar
    + ndarray::ScalarOperand
    + std::ops::AddAssign
    + std::ops::SubAssign
    + std::ops::MulAssign
    + std::ops::DivAssign
    + std::iter::Sum
    + Default
    + Debug
    + Display
    + Send
    + Sync
    + 'static
{
    /// Short name of the type (`"f32"`, `"f64"`), used in checkpoints and errors.
    const NAME: &'static str;
    /// Converts from `f64` (rounding for `f32`).
    fn from_f64_lossy(v: f64) -> Self;
    /// Converts to `f64` (exact).
    fn to_f64_exact(self) -> f64;
    /// The Gauss error function.
    fn erf(self) -> Self;
}

impl Float for f32 {
    const NAME: &'static str = "f32";
    fn from_f64_lossy(v: f64) -> Self {
        v as f32
    }
    fn to_f64_exact(self) -> f64 {
        self as f64
    }
    fn erf(self) -> Self {
        libm::erff(self)
    }
}

impl Float for f64 {
    const NAME: &'static str = "f64";
    fn from_f64_lossy(v: f64) -> Self {
        v
    }
    fn to_f64_exact(self) -> f64 {
        self
    }
    fn erf(self) -> Self {
        libm::erf(self)
    }
}
