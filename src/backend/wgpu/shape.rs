//! Shape manipulation: concat, slices, gathers and scatters (`shaders/shape.wgsl`).

use super::{Wgpu, WgpuIndex, WgpuTensor};
use crate::backend::Axis;

pub(super) fn concat(_b: &Wgpu, _parts: &[&WgpuTensor], _axis: Axis) -> WgpuTensor {
    todo!()
}
pub(super) fn slice(
    _b: &Wgpu,
    _x: &WgpuTensor,
    _axis: Axis,
    _start: usize,
    _end: usize,
) -> WgpuTensor {
    todo!()
}
pub(super) fn slice_add_assign(
    _b: &Wgpu,
    _acc: &mut WgpuTensor,
    _src: &WgpuTensor,
    _axis: Axis,
    _start: usize,
) {
    todo!()
}
pub(super) fn gather_rows(_b: &Wgpu, _x: &WgpuTensor, _idx: &WgpuIndex) -> WgpuTensor {
    todo!()
}
pub(super) fn scatter_add_rows(
    _b: &Wgpu,
    _src: &WgpuTensor,
    _idx: &WgpuIndex,
    _rows: usize,
) -> WgpuTensor {
    todo!()
}
