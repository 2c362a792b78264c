//! The wgpu compute-shader backend (feature `wgpu`).
//!
//! [`Wgpu`] implements [`Backend`] for `f32` with one WGSL kernel per
//! operation (see `shaders/`). Tensors live in pooled GPU buffers; kernels
//! are recorded into a shared command encoder and submitted together, so a
//! training step is one or a few submissions, and data comes back to the host
//! only through [`Backend::download`] and [`Backend::sum_squares`].
//!
//! The adapter is chosen by wgpu's usual environment variables:
//! `WGPU_BACKEND` (`vulkan`, `metal`, `dx12`, `gl`), `WGPU_ADAPTER_NAME`
//! (a substring of the adapter's name) and `WGPU_POWER_PREF` (`low`/`high`).
//!
//! ```no_run
//! use hdgcn::backend::{Backend, Wgpu};
//! let gpu = Wgpu::new()?; // an error, not a panic, when there is no adapter
//! let a = gpu.upload(ndarray::arr2(&[[1.0f32, 2.0], [3.0, 4.0]]).view());
//! let b = gpu.matmul(&a, &a, false, true);
//! assert_eq!(gpu.download(&b), ndarray::arr2(&[[5.0, 11.0], [11.0, 25.0]]));
//! # Ok::<(), hdgcn::Error>(())
//! ```
//!
//! # Adding a kernel
//!
//! Write the WGSL entry point in the `shaders/` file of its group (it sees the
//! prelude: `P` with `pu(i)`/`pf(i)` for parameters, `linear_id` for split
//! dispatches), declare a `Kernel` for it next to the Rust function that
//! calls `Context::dispatch`, and run the backend suite
//! (`tests/backend_ops`), which compares every op with the CPU.

mod context;
mod elementwise;
mod matmul;
mod reduce;
mod segment;
mod shape;
mod sparse;

use std::sync::{Arc, OnceLock};

use ndarray::{Array2, ArrayView2};
use sprs::CsMat;

use super::{Axis, Backend, BinaryOp, SegmentReduce, UnaryOp, UpdateRule};
use crate::error::Result;
use context::{Buf, Context, Kernel};

/// The wgpu backend (`f32`). Cloning shares the device.
#[derive(Clone)]
pub struct Wgpu {
    ctx: Arc<Context>,
}

impl std::fmt::Debug for Wgpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Wgpu({})", self.adapter_name())
    }
}

impl Wgpu {
    /// Opens the adapter selected by wgpu's environment variables.
    ///
    /// # Errors
    /// [`Error::Backend`](crate::Error::Backend) when no adapter is available
    /// or the device cannot be opened.
    pub fn new() -> Result<Self> {
        Ok(Wgpu {
            ctx: Arc::new(Context::new()?),
        })
    }

    /// The adapter's name (e.g. `"llvmpipe (LLVM 15.0.6, 256 bits)"`).
    pub fn adapter_name(&self) -> String {
        self.ctx.info.name.clone()
    }

    /// The adapter's graphics API (`"Vulkan"`, `"Metal"`, ...).
    pub fn adapter_backend(&self) -> String {
        format!("{:?}", self.ctx.info.backend)
    }

    /// Submits all recorded work without waiting for it.
    pub fn flush(&self) {
        self.ctx.flush();
    }

    /// Number of free GPU buffers the backend keeps for reuse.
    ///
    /// A dropped tensor's buffer goes to a pool, by size, and the next
    /// tensor of that size takes it; uploaded data gets a buffer of its own,
    /// freed on drop. A loop that repeats the same computation therefore
    /// reaches a steady pool after its first pass.
    ///
    /// ```no_run
    /// use hdgcn::backend::{Backend, Wgpu};
    /// let gpu = Wgpu::new()?;
    /// let x = gpu.upload(ndarray::Array2::<f32>::ones((64, 64)).view());
    /// drop(gpu.matmul(&x, &x, false, false)); // its buffer goes to the pool
    /// assert_eq!(gpu.pooled_buffers(), 1);
    /// gpu.release_pooled_buffers();
    /// assert_eq!((gpu.pooled_buffers(), gpu.pooled_bytes()), (0, 0));
    /// # Ok::<(), hdgcn::Error>(())
    /// ```
    pub fn pooled_buffers(&self) -> usize {
        self.ctx.pool().buffers()
    }

    /// Total size of the pooled free buffers, in bytes (at most 2 GiB are kept).
    pub fn pooled_bytes(&self) -> u64 {
        self.ctx.pool().bytes()
    }

    /// Frees every pooled buffer (after a phase whose tensor sizes will not
    /// recur, say). Live tensors are not affected.
    pub fn release_pooled_buffers(&self) {
        self.ctx.pool().clear();
    }

    /// Largest tensor, in entries, that one storage binding can hold on this adapter.
    pub fn max_tensor_len(&self) -> u64 {
        self.ctx.max_binding_elems()
    }

    fn alloc(&self, rows: usize, cols: usize) -> WgpuTensor {
        WgpuTensor {
            buf: Arc::new(self.ctx.alloc(4 * (rows * cols) as u64)),
            rows,
            cols,
        }
    }

    /// Makes `t` the only handle to its buffer (copy on write).
    fn make_unique(&self, t: &mut WgpuTensor) {
        if Arc::strong_count(&t.buf) > 1 {
            let fresh = self.alloc(t.rows, t.cols);
            self.ctx.copy(&t.buf, 0, &fresh.buf, 0, t.bytes());
            *t = fresh;
        }
    }

    /// The host copy of an index (read back from the device on first use).
    fn host<'a>(&self, idx: &'a WgpuIndex) -> &'a [u32] {
        idx.host.get_or_init(|| {
            bytemuck::pod_collect_to_vec(&self.ctx.read(&idx.buf, 4 * idx.len as u64))
        })
    }

    /// A device-computed index of `len` entries (no host copy yet).
    fn device_index(&self, buf: Arc<Buf>, len: usize) -> WgpuIndex {
        WgpuIndex {
            buf,
            len,
            host: Arc::new(OnceLock::new()),
            inverse: Arc::new(OnceLock::new()),
        }
    }

    fn upload_u32(&self, v: &[u32]) -> Arc<Buf> {
        Arc::new(self.ctx.upload_bytes(bytemuck::cast_slice(v)))
    }
}

/// A dense row-major `f32` tensor in a GPU buffer. Clones share the buffer;
/// in-place kernels copy first when it is shared.
#[derive(Clone)]
pub struct WgpuTensor {
    buf: Arc<Buf>,
    rows: usize,
    cols: usize,
}

impl WgpuTensor {
    fn len(&self) -> usize {
        self.rows * self.cols
    }
    fn bytes(&self) -> u64 {
        4 * self.len() as u64
    }
}

impl std::fmt::Debug for WgpuTensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "WgpuTensor({} x {})", self.rows, self.cols)
    }
}

/// A constant CSR matrix on the GPU, with its transpose (for backward
/// products without float atomics).
#[derive(Clone)]
pub struct WgpuSparse {
    rows: usize,
    cols: usize,
    nnz: usize,
    /// CSR of the matrix: `indptr` (`rows + 1`), `indices`, `values` (`nnz`).
    indptr: Arc<Buf>,
    indices: Arc<Buf>,
    values: Arc<Buf>,
    /// CSR of the transpose.
    t_indptr: Arc<Buf>,
    t_indices: Arc<Buf>,
    t_values: Arc<Buf>,
    /// `t_perm[k]`: position in `values` of the transpose's `k`-th entry.
    t_perm: Arc<Buf>,
}

impl std::fmt::Debug for WgpuSparse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "WgpuSparse({} x {}, {} stored)",
            self.rows, self.cols, self.nnz
        )
    }
}

/// A `u32` index vector on the GPU, with a host copy (segment counts and
/// the inverse maps of scatters are derived from it). Indices uploaded from
/// the host keep their copy; indices computed on the device (arg-max) are
/// read back only if the host copy is ever asked for.
#[derive(Clone)]
pub struct WgpuIndex {
    buf: Arc<Buf>,
    len: usize,
    host: Arc<OnceLock<Vec<u32>>>,
    /// Inverse map for [`Backend::scatter_add_rows`], built on first use:
    /// `(ptr, pos)` with `pos[ptr[r]..ptr[r+1]]` the positions holding `r`.
    inverse: Arc<OnceLock<(Arc<Buf>, Arc<Buf>)>>,
}

impl std::fmt::Debug for WgpuIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "WgpuIndex(len {})", self.len)
    }
}

fn f(v: f64) -> u32 {
    (v as f32).to_bits()
}

fn u(v: usize) -> u32 {
    u32::try_from(v).expect("wgpu kernels index with u32")
}

impl Backend for Wgpu {
    type Elem = f32;
    type Tensor = WgpuTensor;
    type Sparse = WgpuSparse;
    type Index = WgpuIndex;

    fn name(&self) -> String {
        format!("wgpu ({}, {})", self.adapter_name(), self.adapter_backend())
    }

    /// Submits all recorded work and blocks until the device has finished it
    /// (for timing; [`Backend::download`] waits by itself).
    fn synchronize(&self) {
        self.ctx.wait();
    }

    fn upload(&self, a: ArrayView2<'_, f32>) -> WgpuTensor {
        let std = a.as_standard_layout();
        let data = std.as_slice().expect("standard layout");
        WgpuTensor {
            buf: Arc::new(self.ctx.upload_bytes(bytemuck::cast_slice(data))),
            rows: a.nrows(),
            cols: a.ncols(),
        }
    }

    fn download(&self, t: &WgpuTensor) -> Array2<f32> {
        let bytes = self.ctx.read(&t.buf, t.bytes());
        let data: Vec<f32> = bytemuck::pod_collect_to_vec(&bytes);
        Array2::from_shape_vec((t.rows, t.cols), data).expect("shape of downloaded tensor")
    }

    fn shape(&self, t: &WgpuTensor) -> (usize, usize) {
        (t.rows, t.cols)
    }

    fn full(&self, rows: usize, cols: usize, value: f32) -> WgpuTensor {
        elementwise::full(self, rows, cols, value)
    }

    fn sparse_from_csmat(&self, m: &CsMat<f32>) -> WgpuSparse {
        sparse::from_csmat(self, m)
    }

    fn sparse_shape(&self, s: &WgpuSparse) -> (usize, usize) {
        (s.rows, s.cols)
    }

    fn sparse_nnz(&self, s: &WgpuSparse) -> usize {
        s.nnz
    }

    fn index_from_slice(&self, idx: &[u32]) -> WgpuIndex {
        WgpuIndex {
            buf: self.upload_u32(idx),
            len: idx.len(),
            host: Arc::new(OnceLock::from(idx.to_vec())),
            inverse: Arc::new(OnceLock::new()),
        }
    }

    fn index_len(&self, idx: &WgpuIndex) -> usize {
        idx.len
    }

    fn matmul(&self, a: &WgpuTensor, b: &WgpuTensor, ta: bool, tb: bool) -> WgpuTensor {
        matmul::matmul(self, a, b, ta, tb)
    }

    fn spmm(&self, s: &WgpuSparse, x: &WgpuTensor, transpose: bool) -> WgpuTensor {
        sparse::spmm(self, s, x, transpose)
    }

    fn sparse_dropout(&self, s: &WgpuSparse, p: f64, seed: u64) -> WgpuSparse {
        sparse::dropout(self, s, p, seed)
    }

    fn binary(&self, op: BinaryOp, a: &WgpuTensor, b: &WgpuTensor) -> WgpuTensor {
        elementwise::binary(self, op, a, b)
    }

    fn add_assign(&self, acc: &mut WgpuTensor, t: &WgpuTensor) {
        elementwise::add_assign(self, acc, t)
    }

    fn slice_add_assign(&self, acc: &mut WgpuTensor, src: &WgpuTensor, axis: Axis, start: usize) {
        shape::slice_add_assign(self, acc, src, axis, start)
    }

    fn sum_to(&self, t: &WgpuTensor, rows: usize, cols: usize) -> WgpuTensor {
        reduce::sum_to(self, t, rows, cols)
    }

    fn unary(&self, op: UnaryOp, x: &WgpuTensor) -> WgpuTensor {
        elementwise::unary(self, op, x)
    }

    fn unary_grad(
        &self,
        op: UnaryOp,
        x: &WgpuTensor,
        y: &WgpuTensor,
        dy: &WgpuTensor,
    ) -> WgpuTensor {
        elementwise::unary_grad(self, op, x, y, dy)
    }

    fn positive_mask(&self, y: &WgpuTensor) -> WgpuIndex {
        elementwise::positive_mask(self, y)
    }

    fn masked_grad_owned(&self, dy: WgpuTensor, mask: &WgpuIndex) -> WgpuTensor {
        elementwise::masked_grad_owned(self, dy, mask)
    }

    fn sum_axis(&self, x: &WgpuTensor, axis: Axis) -> WgpuTensor {
        reduce::sum_axis(self, x, axis)
    }

    fn sum_squares(&self, x: &WgpuTensor) -> f64 {
        reduce::sum_squares(self, x)
    }

    fn sum_squares_many(&self, xs: &[&WgpuTensor]) -> Vec<f64> {
        reduce::sum_squares_many(self, xs)
    }

    fn softmax(&self, x: &WgpuTensor, axis: Axis, log: bool) -> WgpuTensor {
        reduce::softmax(self, x, axis, log)
    }

    fn softmax_grad(&self, y: &WgpuTensor, dy: &WgpuTensor, axis: Axis, log: bool) -> WgpuTensor {
        reduce::softmax_grad(self, y, dy, axis, log)
    }

    fn layer_norm(&self, x: &WgpuTensor, eps: f64) -> (WgpuTensor, WgpuTensor) {
        reduce::layer_norm(self, x, eps)
    }

    fn layer_norm_grad(
        &self,
        xhat: &WgpuTensor,
        rstd: &WgpuTensor,
        dxhat: &WgpuTensor,
    ) -> WgpuTensor {
        reduce::layer_norm_grad(self, xhat, rstd, dxhat)
    }

    fn dropout_mask(&self, rows: usize, cols: usize, p: f64, seed: u64) -> WgpuTensor {
        elementwise::dropout_mask(self, rows, cols, p, seed)
    }

    fn concat(&self, parts: &[&WgpuTensor], axis: Axis) -> WgpuTensor {
        shape::concat(self, parts, axis)
    }

    fn slice(&self, x: &WgpuTensor, axis: Axis, start: usize, end: usize) -> WgpuTensor {
        shape::slice(self, x, axis, start, end)
    }

    fn gather_rows(&self, x: &WgpuTensor, idx: &WgpuIndex) -> WgpuTensor {
        shape::gather_rows(self, x, idx)
    }

    fn scatter_add_rows(&self, src: &WgpuTensor, idx: &WgpuIndex, rows: usize) -> WgpuTensor {
        shape::scatter_add_rows(self, src, idx, rows)
    }

    fn segment_reduce(
        &self,
        x: &WgpuTensor,
        ptr: &WgpuIndex,
        op: SegmentReduce,
    ) -> (WgpuTensor, Option<WgpuIndex>) {
        segment::reduce(self, x, ptr, op)
    }

    fn segment_reduce_grad(
        &self,
        dy: &WgpuTensor,
        ptr: &WgpuIndex,
        op: SegmentReduce,
        argmax: Option<&WgpuIndex>,
        rows: usize,
    ) -> WgpuTensor {
        segment::reduce_grad(self, dy, ptr, op, argmax, rows)
    }

    fn segment_softmax(&self, x: &WgpuTensor, ptr: &WgpuIndex) -> WgpuTensor {
        segment::softmax(self, x, ptr)
    }

    fn segment_softmax_grad(&self, y: &WgpuTensor, dy: &WgpuTensor, ptr: &WgpuIndex) -> WgpuTensor {
        segment::softmax_grad(self, y, dy, ptr)
    }

    fn segment_broadcast(&self, x: &WgpuTensor, ptr: &WgpuIndex, rows: usize) -> WgpuTensor {
        segment::broadcast(self, x, ptr, rows)
    }

    fn segment_scores(
        &self,
        k: &WgpuTensor,
        q: &WgpuTensor,
        ptr: &WgpuIndex,
        m: usize,
    ) -> WgpuTensor {
        segment::scores(self, k, q, ptr, m)
    }

    fn segment_mix(&self, a: &WgpuTensor, uu: &WgpuTensor, ptr: &WgpuIndex) -> WgpuTensor {
        segment::mix(self, a, uu, ptr)
    }

    fn segment_mix_add(
        &self,
        acc: &mut WgpuTensor,
        a: &WgpuTensor,
        uu: &WgpuTensor,
        ptr: &WgpuIndex,
    ) {
        segment::mix_add(self, acc, a, uu, ptr)
    }

    fn segment_weighted_sum(&self, a: &WgpuTensor, x: &WgpuTensor, ptr: &WgpuIndex) -> WgpuTensor {
        segment::weighted_sum(self, a, x, ptr)
    }

    fn reshape(&self, x: &WgpuTensor, rows: usize, cols: usize) -> WgpuTensor {
        assert_eq!(
            rows * cols,
            x.len(),
            "reshape must keep the number of entries"
        );
        WgpuTensor {
            buf: x.buf.clone(),
            rows,
            cols,
        }
    }

    fn nll(&self, logp: &WgpuTensor, target: &WgpuIndex) -> WgpuTensor {
        reduce::nll(self, logp, target)
    }

    fn nll_grad(
        &self,
        dy: &WgpuTensor,
        target: &WgpuIndex,
        rows: usize,
        cols: usize,
    ) -> WgpuTensor {
        reduce::nll_grad(self, dy, target, rows, cols)
    }

    fn bce_with_logits(&self, z: &WgpuTensor, y: &WgpuTensor) -> WgpuTensor {
        reduce::bce_with_logits(self, z, y)
    }

    fn bce_with_logits_grad(&self, z: &WgpuTensor, y: &WgpuTensor, dy: &WgpuTensor) -> WgpuTensor {
        reduce::bce_with_logits_grad(self, z, y, dy)
    }

    fn optim_update(
        &self,
        rule: &UpdateRule,
        step: u64,
        param: &mut WgpuTensor,
        grad: &WgpuTensor,
        slots: &mut [WgpuTensor],
    ) {
        elementwise::optim_update(self, rule, step, param, grad, slots)
    }
}
