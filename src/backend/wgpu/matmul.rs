//! Dense matrix products (`shaders/matmul.wgsl`).

use super::{Wgpu, WgpuTensor};

pub(super) fn matmul(
    _b: &Wgpu,
    _a: &WgpuTensor,
    _x: &WgpuTensor,
    _ta: bool,
    _tb: bool,
) -> WgpuTensor {
    todo!("matmul")
}
