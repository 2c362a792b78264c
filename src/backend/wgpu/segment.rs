//! Segment (per-graph) operations and node–supernode attention kernels
//! (`shaders/segment.wgsl`).

use super::{Wgpu, WgpuIndex, WgpuTensor};
use crate::backend::SegmentReduce;

pub(super) fn reduce(
    _b: &Wgpu,
    _x: &WgpuTensor,
    _ptr: &WgpuIndex,
    _op: SegmentReduce,
) -> (WgpuTensor, Option<WgpuIndex>) {
    todo!()
}
pub(super) fn reduce_grad(
    _b: &Wgpu,
    _dy: &WgpuTensor,
    _ptr: &WgpuIndex,
    _op: SegmentReduce,
    _argmax: Option<&WgpuIndex>,
    _rows: usize,
) -> WgpuTensor {
    todo!()
}
pub(super) fn softmax(_b: &Wgpu, _x: &WgpuTensor, _ptr: &WgpuIndex) -> WgpuTensor {
    todo!()
}
pub(super) fn softmax_grad(
    _b: &Wgpu,
    _y: &WgpuTensor,
    _dy: &WgpuTensor,
    _ptr: &WgpuIndex,
) -> WgpuTensor {
    todo!()
}
pub(super) fn broadcast(_b: &Wgpu, _x: &WgpuTensor, _ptr: &WgpuIndex, _rows: usize) -> WgpuTensor {
    todo!()
}
pub(super) fn scores(
    _b: &Wgpu,
    _k: &WgpuTensor,
    _q: &WgpuTensor,
    _ptr: &WgpuIndex,
    _m: usize,
) -> WgpuTensor {
    todo!()
}
pub(super) fn mix(_b: &Wgpu, _a: &WgpuTensor, _u: &WgpuTensor, _ptr: &WgpuIndex) -> WgpuTensor {
    todo!()
}
pub(super) fn mix_add(
    _b: &Wgpu,
    _acc: &mut WgpuTensor,
    _a: &WgpuTensor,
    _u: &WgpuTensor,
    _ptr: &WgpuIndex,
) {
    todo!()
}
pub(super) fn weighted_sum(
    _b: &Wgpu,
    _a: &WgpuTensor,
    _x: &WgpuTensor,
    _ptr: &WgpuIndex,
) -> WgpuTensor {
    todo!()
}
