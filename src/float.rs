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

    /// `dst[i] = tanh(src[i])` for every `i`.
    ///
    /// `f64` calls libm per element. `f32` computes each value in `f64`
    /// and rounds it once, in a loop that vectorises: the result is the
    /// correctly rounded `tanh`, or one ulp from it where the exact value
    /// is within about 1e-13 (relative) of a rounding boundary.
    ///
    /// ```
    /// use hdgcn::Float;
    /// let mut y = [0.0_f32; 3];
    /// f32::tanh_slice(&[0.0, 0.5, -20.0], &mut y);
    /// assert_eq!(y, [0.0, 0.5_f64.tanh() as f32, -1.0]);
    /// ```
    ///
    /// # Panics
    /// If the slices differ in length.
    fn tanh_slice(src: &[Self], dst: &mut [Self]) {
        assert_eq!(src.len(), dst.len(), "tanh_slice: slice lengths");
        for (d, &s) in dst.iter_mut().zip(src) {
            *d = s.tanh();
        }
    }

    /// `dst[i] = 1 / (1 + exp(-src[i]))` for every `i`, with the accuracy
    /// of [`Float::tanh_slice`] (`f64`: the two-branch formula that never
    /// overflows, per element).
    ///
    /// # Panics
    /// If the slices differ in length.
    fn sigmoid_slice(src: &[Self], dst: &mut [Self]) {
        assert_eq!(src.len(), dst.len(), "sigmoid_slice: slice lengths");
        for (d, &s) in dst.iter_mut().zip(src) {
            *d = crate::backend::cpu::sigmoid(s);
        }
    }
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
    fn tanh_slice(src: &[Self], dst: &mut [Self]) {
        crate::backend::cpu::vmath::tanh_f32(src, dst)
    }
    fn sigmoid_slice(src: &[Self], dst: &mut [Self]) {
        crate::backend::cpu::vmath::sigmoid_f32(src, dst)
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
