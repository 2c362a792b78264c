//! Sparse (CSR) kernels (`shaders/sparse.wgsl`).

use sprs::CsMat;

use super::{Wgpu, WgpuSparse, WgpuTensor};

pub(super) fn from_csmat(_b: &Wgpu, _m: &CsMat<f32>) -> WgpuSparse {
    todo!("from_csmat")
}

pub(super) fn spmm(_b: &Wgpu, _s: &WgpuSparse, _x: &WgpuTensor, _transpose: bool) -> WgpuTensor {
    todo!("spmm")
}

pub(super) fn dropout(_b: &Wgpu, _s: &WgpuSparse, _p: f64, _seed: u64) -> WgpuSparse {
    todo!("sparse dropout")
}
