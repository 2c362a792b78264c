//! Reductions, softmax, layer norm and losses (`shaders/reduce.wgsl`).

use super::{Wgpu, WgpuIndex, WgpuTensor};
use crate::backend::Axis;

pub(super) fn sum_to(_b: &Wgpu, _t: &WgpuTensor, _rows: usize, _cols: usize) -> WgpuTensor {
    todo!()
}
pub(super) fn sum_axis(_b: &Wgpu, _x: &WgpuTensor, _axis: Axis) -> WgpuTensor {
    todo!()
}
pub(super) fn sum_squares(_b: &Wgpu, _x: &WgpuTensor) -> f64 {
    todo!()
}
pub(super) fn softmax(_b: &Wgpu, _x: &WgpuTensor, _axis: Axis, _log: bool) -> WgpuTensor {
    todo!()
}
pub(super) fn softmax_grad(
    _b: &Wgpu,
    _y: &WgpuTensor,
    _dy: &WgpuTensor,
    _axis: Axis,
    _log: bool,
) -> WgpuTensor {
    todo!()
}
pub(super) fn layer_norm(_b: &Wgpu, _x: &WgpuTensor, _eps: f64) -> (WgpuTensor, WgpuTensor) {
    todo!()
}
pub(super) fn layer_norm_grad(
    _b: &Wgpu,
    _xhat: &WgpuTensor,
    _rstd: &WgpuTensor,
    _dxhat: &WgpuTensor,
) -> WgpuTensor {
    todo!()
}
pub(super) fn nll(_b: &Wgpu, _logp: &WgpuTensor, _target: &WgpuIndex) -> WgpuTensor {
    todo!()
}
pub(super) fn nll_grad(
    _b: &Wgpu,
    _dy: &WgpuTensor,
    _target: &WgpuIndex,
    _rows: usize,
    _cols: usize,
) -> WgpuTensor {
    todo!()
}
pub(super) fn bce_with_logits(_b: &Wgpu, _z: &WgpuTensor, _y: &WgpuTensor) -> WgpuTensor {
    todo!()
}
pub(super) fn bce_with_logits_grad(
    _b: &Wgpu,
    _z: &WgpuTensor,
    _y: &WgpuTensor,
    _dy: &WgpuTensor,
) -> WgpuTensor {
    todo!()
}
