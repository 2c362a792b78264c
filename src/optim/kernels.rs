//! Placeholder.
use crate::backend::UpdateRule;
/// Placeholder.
pub fn update_slices<F: crate::Float>(
    _rule: &UpdateRule,
    _step: u64,
    _p: &mut [F],
    _g: &[F],
    _s: &mut [&mut [F]],
) {
    unimplemented!("optimiser kernels land with the optim branch")
}
