//! The CPU backend: ndarray dense kernels and row-parallel CSR kernels
//! (rayon), in `f32` or `f64`.

mod dropout;
mod elementwise;
mod gemm;
mod parallel;
mod reduce;
mod segment;
mod sparse;
pub(crate) mod vmath;

use std::marker::PhantomData;
use std::sync::Arc;

use ndarray::{Array2, ArrayView2, Axis as NdAxis, s};
use sprs::CsMat;

pub(crate) use elementwise::sigmoid;
pub use sparse::CpuCsr;

use super::{Axis, Backend, BinaryOp, SegmentReduce, UnaryOp, UpdateRule, rng};
use crate::float::Float;

/// CPU backend over element type `F` (`f32` or `f64`).
///
/// ```
/// use hdgcn::backend::{Backend, Cpu};
/// let cpu = Cpu::<f64>::new();
/// let a = cpu.upload(ndarray::arr2(&[[1.0, 2.0], [3.0, 4.0]]).view());
/// let b = cpu.matmul(&a, &a, false, true);
/// assert_eq!(cpu.download(&b), ndarray::arr2(&[[5.0, 11.0], [11.0, 25.0]]));
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct Cpu<F = f32> {
    _f: PhantomData<F>,
}

impl<F: Float> Cpu<F> {
    /// The CPU backend. Kernels use rayon's global thread pool
    /// (`RAYON_NUM_THREADS` sets its size).
    pub fn new() -> Self {
        Cpu { _f: PhantomData }
    }
}

/// Multiply-adds from which [`dense_matmul`] splits its output rows over
/// threads.
const MATMUL_PAR_WORK: usize = 1 << 20;

/// Smallest chunk of an optimiser update handed to another core (entries).
const OPTIM_CHUNK: usize = 1 << 16;

/// `a · b` on blocks of output rows spread over rayon's threads (the
/// caller joins in, see `parallel.rs`): with the unpacked kernel of
/// `gemm.rs` where it takes the operands (a layer's `n x 64` by `64 x 64`,
/// the same bits), else with `matrixmultiply`'s single-threaded kernel.
/// `matrixmultiply`'s own threading is not used: its separate pool
/// competed with rayon's for the cores, and products the size of a GNN
/// layer's ran no faster on it.
fn dense_matmul<F: Float>(a: ArrayView2<'_, F>, b: ArrayView2<'_, F>) -> Array2<F> {
    let (m, k) = a.dim();
    let n = b.ncols();
    // A transposed small `b` (a weight in a backward pass) copied row-major
    // lets the unpacked kernel take the product; the values are the same.
    let b_rows;
    let b = if !b.is_standard_layout() && a.is_standard_layout() && gemm::takes_dims(k, n) {
        b_rows = b.as_standard_layout().into_owned();
        b_rows.view()
    } else {
        b
    };
    let threads = rayon::current_num_threads();
    let parallel = m * n * k >= MATMUL_PAR_WORK && threads >= 2 && m >= 2 && n > 0;
    // Two blocks per thread for balance, rows rounded up to a multiple of
    // 24 (of both kernels' register blocks, 6 and 8 rows). A short output
    // (a weight gradient's 64 rows, `k` the node count) gets one block per
    // thread of a multiple of 8 rows instead: `matrixmultiply` packs the
    // whole of the other operand for every block, so fewer blocks pack
    // less (a `64 x 2708` by `2708 x 64` product: 155-170 µs against
    // 180-210 µs in four blocks of 16 rows and 210-220 µs in three of 24,
    // two threads). Each entry is computed the same way in any block.
    let rows = m.div_ceil(2 * threads);
    let rows = if rows >= 48 {
        rows.next_multiple_of(24)
    } else {
        m.div_ceil(threads).next_multiple_of(8)
    };
    let rows = rows.min(m).max(1);
    if gemm::applies(&a, &b) {
        let mut out = Vec::with_capacity(m * n);
        let data = &mut out.spare_capacity_mut()[..m * n];
        if parallel {
            parallel::for_each_chunk(data, rows * n, |i, chunk| {
                let lo = i * rows;
                let hi = lo + chunk.len() / n;
                gemm::gemm_into(a.slice(s![lo..hi, ..]), b, chunk);
            });
        } else {
            gemm::gemm_into(a, b, data);
        }
        // SAFETY: `gemm_into` wrote all `m * n` entries.
        unsafe { out.set_len(m * n) };
        return Array2::from_shape_vec((m, n), out).expect("m x n entries");
    }
    let mut out = Array2::zeros((m, n));
    if !parallel {
        ndarray::linalg::general_mat_mul(F::one(), &a, &b, F::zero(), &mut out);
        return out;
    }
    let data = out.as_slice_mut().expect("fresh array is standard layout");
    parallel::for_each_chunk(data, rows * n, |i, chunk| {
        let lo = i * rows;
        let hi = lo + chunk.len() / n;
        let mut o = ndarray::ArrayViewMut2::from_shape((hi - lo, n), chunk).expect("row block");
        ndarray::linalg::general_mat_mul(F::one(), &a.slice(s![lo..hi, ..]), &b, F::zero(), &mut o);
    });
    out
}

pub(crate) fn std_layout<F: Float>(a: Array2<F>) -> Array2<F> {
    if a.is_standard_layout() {
        a
    } else {
        a.as_standard_layout().into_owned()
    }
}

fn nd_axis(axis: Axis) -> NdAxis {
    match axis {
        Axis::Rows => NdAxis(0),
        Axis::Cols => NdAxis(1),
    }
}

impl<F: Float> Backend for Cpu<F> {
    type Elem = F;
    type Tensor = Array2<F>;
    type Sparse = CpuCsr<F>;
    type Index = Arc<Vec<u32>>;

    fn name(&self) -> String {
        format!(
            "cpu ({}, {} threads)",
            F::NAME,
            rayon::current_num_threads()
        )
    }

    fn upload(&self, a: ArrayView2<'_, F>) -> Array2<F> {
        a.as_standard_layout().into_owned()
    }

    fn upload_owned(&self, a: Array2<F>) -> Array2<F> {
        if a.is_standard_layout() {
            a
        } else {
            a.as_standard_layout().into_owned()
        }
    }

    fn download(&self, t: &Array2<F>) -> Array2<F> {
        t.clone()
    }

    fn shape(&self, t: &Array2<F>) -> (usize, usize) {
        t.dim()
    }

    fn full(&self, rows: usize, cols: usize, value: F) -> Array2<F> {
        Array2::from_elem((rows, cols), value)
    }

    fn sparse_from_csmat(&self, m: &CsMat<F>) -> CpuCsr<F> {
        CpuCsr::from_csmat(m)
    }

    fn sparse_shape(&self, s: &CpuCsr<F>) -> (usize, usize) {
        s.shape()
    }

    fn sparse_nnz(&self, s: &CpuCsr<F>) -> usize {
        s.nnz()
    }

    fn index_from_slice(&self, idx: &[u32]) -> Arc<Vec<u32>> {
        Arc::new(idx.to_vec())
    }

    fn index_len(&self, idx: &Arc<Vec<u32>>) -> usize {
        idx.len()
    }

    fn matmul(&self, a: &Array2<F>, b: &Array2<F>, trans_a: bool, trans_b: bool) -> Array2<F> {
        let av = if trans_a { a.t() } else { a.view() };
        let bv = if trans_b { b.t() } else { b.view() };
        dense_matmul(av, bv)
    }

    fn spmm(&self, s: &CpuCsr<F>, x: &Array2<F>, transpose: bool) -> Array2<F> {
        let rows = if transpose { s.shape().1 } else { s.shape().0 };
        let width = x.ncols();
        let xs = x.as_standard_layout();
        let out = s.spmm(xs.as_slice().expect("standard layout"), width, transpose);
        Array2::from_shape_vec((rows, width), out).expect("spmm output shape")
    }

    fn sparse_dropout(&self, s: &CpuCsr<F>, p: f64, seed: u64) -> CpuCsr<F> {
        s.dropout(p, seed)
    }

    fn binary(&self, op: BinaryOp, a: &Array2<F>, b: &Array2<F>) -> Array2<F> {
        elementwise::binary(op, a, b)
    }

    fn add_assign(&self, acc: &mut Array2<F>, t: &Array2<F>) {
        elementwise::add_assign(acc, t)
    }

    fn slice_add_assign(&self, acc: &mut Array2<F>, src: &Array2<F>, axis: Axis, start: usize) {
        match axis {
            Axis::Rows => {
                let mut view = acc.slice_mut(s![start..start + src.nrows(), ..]);
                view += src;
            }
            Axis::Cols => {
                let mut view = acc.slice_mut(s![.., start..start + src.ncols()]);
                view += src;
            }
        }
    }

    fn sum_to(&self, t: &Array2<F>, rows: usize, cols: usize) -> Array2<F> {
        // Sums straight from `t`: a copy is made only when nothing is summed.
        let summed_rows =
            (rows == 1 && t.nrows() != 1).then(|| t.sum_axis(NdAxis(0)).insert_axis(NdAxis(0)));
        let src = summed_rows.as_ref().unwrap_or(t);
        let out = if cols == 1 && src.ncols() != 1 {
            src.sum_axis(NdAxis(1)).insert_axis(NdAxis(1))
        } else {
            summed_rows.unwrap_or_else(|| t.clone())
        };
        std_layout(out)
    }

    fn broadcast_to(&self, t: &Array2<F>, rows: usize, cols: usize) -> Array2<F> {
        let len = rows
            .checked_mul(cols)
            .expect("broadcast_to: rows * cols overflows usize");
        let mut out = Vec::with_capacity(len);
        match t.dim() {
            (1, c) if c == cols => {
                let row: Vec<F> = t.iter().copied().collect();
                let spare = &mut out.spare_capacity_mut()[..len];
                reduce::for_row_blocks(spare, cols, |_, block| {
                    for dst in block.chunks_exact_mut(cols) {
                        // SAFETY: `dst` is `cols` entries of `out`'s spare
                        // capacity, `row` has `cols` entries; the copy
                        // writes them (a raw write to uninitialised memory).
                        unsafe {
                            std::ptr::copy_nonoverlapping(
                                row.as_ptr(),
                                dst.as_mut_ptr().cast(),
                                cols,
                            )
                        };
                    }
                });
                // SAFETY: `spare` is `rows` whole rows of `cols` entries
                // (`len` did not overflow); `for_row_blocks` passes every
                // row to the closure once (nothing when `cols` is 0, where
                // `len` is 0), and the closure writes all of each row.
                unsafe { out.set_len(len) };
            }
            (r, 1) if r == rows => {
                for &v in t.iter() {
                    out.extend(std::iter::repeat_n(v, cols));
                }
            }
            _ => {
                // The general rule (also `1 x 1` and a full-size `t`).
                let view = t
                    .broadcast((rows, cols))
                    .expect("broadcast_to: t is a row, a column, a scalar or rows x cols");
                out.extend(view.iter().copied());
            }
        }
        Array2::from_shape_vec((rows, cols), out).expect("rows * cols entries")
    }

    fn unary(&self, op: UnaryOp, x: &Array2<F>) -> Array2<F> {
        elementwise::unary(op, x)
    }

    fn unary_grad(&self, op: UnaryOp, x: &Array2<F>, y: &Array2<F>, dy: &Array2<F>) -> Array2<F> {
        elementwise::unary_grad(op, x, y, dy)
    }

    fn unary_grad_owned(
        &self,
        op: UnaryOp,
        x: &Array2<F>,
        y: &Array2<F>,
        dy: Array2<F>,
    ) -> Array2<F> {
        elementwise::unary_grad_owned(op, x, y, dy)
    }

    fn positive_mask(&self, y: &Array2<F>) -> Arc<Vec<u32>> {
        Arc::new(elementwise::positive_mask(y))
    }

    fn masked_grad_owned(&self, dy: Array2<F>, mask: &Arc<Vec<u32>>) -> Array2<F> {
        elementwise::masked_grad_owned(dy, mask)
    }

    fn sum_axis(&self, x: &Array2<F>, axis: Axis) -> Array2<F> {
        let ax = nd_axis(axis);
        std_layout(x.sum_axis(ax).insert_axis(ax))
    }

    fn sum_squares(&self, x: &Array2<F>) -> f64 {
        reduce::sum_squares(x)
    }

    fn softmax(&self, x: &Array2<F>, axis: Axis, log: bool) -> Array2<F> {
        reduce::softmax(x, nd_axis(axis), log)
    }

    fn softmax_grad(&self, y: &Array2<F>, dy: &Array2<F>, axis: Axis, log: bool) -> Array2<F> {
        reduce::softmax_grad(y, dy, nd_axis(axis), log)
    }

    fn layer_norm(&self, x: &Array2<F>, eps: f64) -> (Array2<F>, Array2<F>) {
        reduce::layer_norm(x, eps)
    }

    fn layer_norm_grad(&self, xhat: &Array2<F>, rstd: &Array2<F>, dxhat: &Array2<F>) -> Array2<F> {
        reduce::layer_norm_grad(xhat, rstd, dxhat)
    }

    fn dropout_mask(&self, rows: usize, cols: usize, p: f64, seed: u64) -> Array2<F> {
        let scale = F::from_f64_lossy(1.0 / (1.0 - p));
        let pf = p as f32;
        let mut out = vec![F::zero(); rows * cols];
        // Each entry's mask is a function of its position alone (`rng`), so
        // any split gives the same mask.
        parallel::for_each_part(&mut out, 1, |start, part| {
            rng::fill_mask(part, None, start as u32, seed, pf, scale)
        });
        Array2::from_shape_vec((rows, cols), out).expect("mask shape")
    }

    fn dropout(&self, x: &Array2<F>, p: f64, seed: u64) -> Array2<F> {
        let (rows, cols) = x.dim();
        let x = x.as_standard_layout();
        let src = x.as_slice().expect("standard layout");
        let scale = F::from_f64_lossy(1.0 / (1.0 - p));
        let pf = p as f32;
        let mut out = vec![F::zero(); rows * cols];
        parallel::for_each_part(&mut out, 1, |start, part| {
            let src = &src[start..start + part.len()];
            rng::fill_mask(part, Some(src), start as u32, seed, pf, scale)
        });
        Array2::from_shape_vec((rows, cols), out).expect("dropout shape")
    }

    fn dropout_owned(&self, mut x: Array2<F>, p: f64, seed: u64) -> Array2<F> {
        let Some(data) = x.as_slice_mut() else {
            return self.dropout(&x, p, seed);
        };
        let scale = F::from_f64_lossy(1.0 / (1.0 - p));
        let pf = p as f32;
        // The counters of `dropout`: the same mask, entry by entry.
        parallel::for_each_part(data, 1, |start, part| {
            rng::mask_in_place(part, start as u32, seed, pf, scale)
        });
        x
    }

    fn dropout_matmul(&self, x: &Array2<F>, p: f64, seed: u64, w: &Array2<F>) -> Array2<F> {
        dropout::dropout_matmul(x.view(), p, seed, w.view())
    }

    fn dropout_t_matmul(&self, x: &Array2<F>, p: f64, seed: u64, g: &Array2<F>) -> Array2<F> {
        dropout::dropout_t_matmul(x.view(), p, seed, g.view())
    }

    fn concat(&self, parts: &[&Array2<F>], axis: Axis) -> Array2<F> {
        match axis {
            Axis::Rows => {
                let views: Vec<ArrayView2<'_, F>> = parts.iter().map(|p| p.view()).collect();
                std_layout(
                    ndarray::concatenate(NdAxis(0), &views)
                        .expect("concat shapes checked by caller"),
                )
            }
            Axis::Cols => {
                let rows = parts.first().map_or(0, |p| p.nrows());
                let cols: usize = parts.iter().map(|p| p.ncols()).sum();
                let mut out = Vec::with_capacity(rows * cols);
                for i in 0..rows {
                    for p in parts {
                        let row = p.row(i);
                        match row.to_slice() {
                            Some(r) => out.extend_from_slice(r),
                            None => out.extend(row.iter().copied()),
                        }
                    }
                }
                Array2::from_shape_vec((rows, cols), out).expect("concat shape")
            }
        }
    }

    fn slice(&self, x: &Array2<F>, axis: Axis, start: usize, end: usize) -> Array2<F> {
        match axis {
            Axis::Rows => x.slice(s![start..end, ..]).to_owned(),
            Axis::Cols => x
                .slice(s![.., start..end])
                .as_standard_layout()
                .into_owned(),
        }
    }

    fn gather_rows(&self, x: &Array2<F>, idx: &Arc<Vec<u32>>) -> Array2<F> {
        let cols = x.ncols();
        let mut out = Array2::zeros((idx.len(), cols));
        for (mut o, &i) in out.rows_mut().into_iter().zip(idx.iter()) {
            o.assign(&x.row(i as usize));
        }
        out
    }

    fn scatter_add_rows(&self, src: &Array2<F>, idx: &Arc<Vec<u32>>, rows: usize) -> Array2<F> {
        let mut out = Array2::zeros((rows, src.ncols()));
        for (r, &i) in src.rows().into_iter().zip(idx.iter()) {
            let mut o = out.row_mut(i as usize);
            o += &r;
        }
        out
    }

    fn segment_reduce(
        &self,
        x: &Array2<F>,
        ptr: &Arc<Vec<u32>>,
        op: SegmentReduce,
    ) -> (Array2<F>, Option<Arc<Vec<u32>>>) {
        let (out, arg) = reduce::segment_reduce(x, ptr, op);
        (out, arg.map(Arc::new))
    }

    fn segment_reduce_grad(
        &self,
        dy: &Array2<F>,
        ptr: &Arc<Vec<u32>>,
        op: SegmentReduce,
        argmax: Option<&Arc<Vec<u32>>>,
        rows: usize,
    ) -> Array2<F> {
        reduce::segment_reduce_grad(dy, ptr, op, argmax.map(|a| a.as_slice()), rows)
    }

    fn segment_reduce_grad_into(
        &self,
        slot: &mut Option<Array2<F>>,
        dy: &Array2<F>,
        ptr: &Arc<Vec<u32>>,
        op: SegmentReduce,
        argmax: Option<&Arc<Vec<u32>>>,
        rows: usize,
    ) {
        let argmax = argmax.map(|a| a.as_slice());
        match slot {
            Some(acc) if acc.is_standard_layout() => {
                reduce::segment_reduce_grad_add(acc, dy, ptr, op, argmax);
            }
            Some(acc) => *acc += &reduce::segment_reduce_grad(dy, ptr, op, argmax, rows),
            None => *slot = Some(reduce::segment_reduce_grad(dy, ptr, op, argmax, rows)),
        }
    }

    fn segment_softmax(&self, x: &Array2<F>, ptr: &Arc<Vec<u32>>) -> Array2<F> {
        reduce::segment_softmax(x, ptr)
    }

    fn segment_softmax_grad(
        &self,
        y: &Array2<F>,
        dy: &Array2<F>,
        ptr: &Arc<Vec<u32>>,
    ) -> Array2<F> {
        reduce::segment_softmax_grad(y, dy, ptr)
    }

    fn segment_broadcast(&self, x: &Array2<F>, ptr: &Arc<Vec<u32>>, rows: usize) -> Array2<F> {
        let mut out = Array2::zeros((rows, x.ncols()));
        for g in 0..ptr.len() - 1 {
            let (a, b) = (ptr[g] as usize, ptr[g + 1] as usize);
            for i in a..b {
                out.row_mut(i).assign(&x.row(g));
            }
        }
        out
    }

    fn segment_scores(
        &self,
        k: &Array2<F>,
        q: &Array2<F>,
        ptr: &Arc<Vec<u32>>,
        m: usize,
    ) -> Array2<F> {
        segment::segment_scores(k, q, ptr, m)
    }

    fn segment_mix(&self, a: &Array2<F>, u: &Array2<F>, ptr: &Arc<Vec<u32>>) -> Array2<F> {
        segment::segment_mix(a, u, ptr)
    }

    fn segment_mix_add(
        &self,
        acc: &mut Array2<F>,
        a: &Array2<F>,
        u: &Array2<F>,
        ptr: &Arc<Vec<u32>>,
    ) {
        if !acc.is_standard_layout() {
            *acc = std_layout(std::mem::take(acc));
        }
        segment::segment_mix_add(acc, a, u, ptr)
    }

    fn segment_weighted_sum(&self, a: &Array2<F>, x: &Array2<F>, ptr: &Arc<Vec<u32>>) -> Array2<F> {
        segment::segment_weighted_sum(a, x, ptr)
    }

    fn segment_scores_grad(
        &self,
        g: &Array2<F>,
        k: &Array2<F>,
        q: &Array2<F>,
        ptr: &Arc<Vec<u32>>,
        dk: Option<&mut Option<Array2<F>>>,
        want_dq: bool,
    ) -> Option<Array2<F>> {
        segment::segment_scores_grad(g, k, q, ptr, dk, want_dq)
    }

    fn segment_mix_grad(
        &self,
        g: &Array2<F>,
        a: &Array2<F>,
        u: &Array2<F>,
        ptr: &Arc<Vec<u32>>,
        want_da: bool,
        want_du: bool,
    ) -> (Option<Array2<F>>, Option<Array2<F>>) {
        segment::segment_mix_grad(g, a, u, ptr, want_da, want_du)
    }

    fn segment_weighted_sum_grad(
        &self,
        g: &Array2<F>,
        a: &Array2<F>,
        x: &Array2<F>,
        ptr: &Arc<Vec<u32>>,
        want_da: bool,
        dx: Option<&mut Option<Array2<F>>>,
    ) -> Option<Array2<F>> {
        segment::segment_weighted_sum_grad(g, a, x, ptr, want_da, dx)
    }

    fn reshape(&self, x: &Array2<F>, rows: usize, cols: usize) -> Array2<F> {
        std_layout(x.clone())
            .into_shape_with_order((rows, cols))
            .expect("reshape size checked by caller")
    }

    fn nll(&self, logp: &Array2<F>, target: &Arc<Vec<u32>>) -> Array2<F> {
        let n = target.len();
        let mut acc = F::zero();
        for (i, &t) in target.iter().enumerate() {
            acc += logp[[i, t as usize]];
        }
        let loss = if n == 0 {
            F::zero()
        } else {
            -acc / F::from_usize(n).expect("usize")
        };
        Array2::from_elem((1, 1), loss)
    }

    fn nll_grad(
        &self,
        dy: &Array2<F>,
        target: &Arc<Vec<u32>>,
        rows: usize,
        cols: usize,
    ) -> Array2<F> {
        let mut out = Array2::zeros((rows, cols));
        let n = target.len();
        if n > 0 {
            let g = -dy[[0, 0]] / F::from_usize(n).expect("usize");
            for (i, &t) in target.iter().enumerate() {
                out[[i, t as usize]] = g;
            }
        }
        out
    }

    fn bce_with_logits(&self, z: &Array2<F>, y: &Array2<F>) -> Array2<F> {
        let n = F::from_usize(z.len().max(1)).expect("usize");
        let total: F = z
            .iter()
            .zip(y.iter())
            .map(|(&z, &y)| z.max(F::zero()) - z * y + (-z.abs()).exp().ln_1p())
            .sum();
        Array2::from_elem((1, 1), total / n)
    }

    fn bce_with_logits_grad(&self, z: &Array2<F>, y: &Array2<F>, dy: &Array2<F>) -> Array2<F> {
        let scale = dy[[0, 0]] / F::from_usize(z.len().max(1)).expect("usize");
        let mut out = z.clone();
        out.zip_mut_with(y, |z, &y| *z = (elementwise::sigmoid(*z) - y) * scale);
        out
    }

    fn optim_update(
        &self,
        rule: &UpdateRule,
        step: u64,
        param: &mut Array2<F>,
        grad: &Array2<F>,
        slots: &mut [Array2<F>],
    ) {
        // Tensors set from user arrays may have any memory order.
        if !param.is_standard_layout() {
            *param = std_layout(param.clone());
        }
        for t in slots.iter_mut() {
            if !t.is_standard_layout() {
                *t = std_layout(t.clone());
            }
        }
        let g = grad.as_standard_layout();
        let p = param.as_slice_mut().expect("standard layout ensured above");
        let g = g.as_slice().expect("standard layout ensured above");
        let s: Vec<&mut [F]> = slots
            .iter_mut()
            .map(|t| t.as_slice_mut().expect("standard layout ensured above"))
            .collect();
        // The update is elementwise, so splitting it into chunks (on both
        // cores for a large tensor, e.g. an embedding table) gives the same
        // values as one call.
        let len = OPTIM_CHUNK.max(p.len().div_ceil(rayon::current_num_threads().max(1)));
        let mut slot_chunks: Vec<std::slice::ChunksMut<'_, F>> =
            s.into_iter().map(|t| t.chunks_mut(len)).collect();
        let blocks: Vec<_> = p
            .chunks_mut(len)
            .zip(g.chunks(len))
            .map(|(p, g)| {
                let slots: Vec<&mut [F]> = slot_chunks
                    .iter_mut()
                    .map(|c| c.next().expect("slots have the parameter's length"))
                    .collect();
                (p, g, slots)
            })
            .collect();
        reduce::map_blocks(blocks, |_, (p, g, mut slots)| {
            crate::optim::kernels::update_slices(rule, step, p, g, &mut slots)
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An array in standard layout becomes the tensor without a copy (the
    /// same buffer); another layout is copied into standard layout.
    #[test]
    fn upload_owned_keeps_a_standard_layout_buffer() {
        let cpu = Cpu::<f32>::new();
        let a = Array2::from_shape_fn((5, 3), |(r, c)| (r * 3 + c) as f32);
        let b = a.clone();
        let b_ptr = b.as_ptr();
        let t = cpu.upload_owned(b);
        assert_eq!(t.as_ptr(), b_ptr);
        assert_eq!(t, a);
        let t = cpu.upload_owned(a.clone().reversed_axes());
        assert!(t.is_standard_layout());
        assert_eq!(t, a.t());
    }

    /// Every kernel split over the pool gives the same bits on one thread
    /// as on several, and the same as a plain loop where one is written
    /// here: a split changes where an entry is computed, never how.
    #[test]
    fn split_kernels_do_not_depend_on_the_thread_count() {
        let cpu = Cpu::<f32>::new();
        // 300 x 257 = 77,100 entries: several parts on any pool of 2+.
        let (n, c) = (300, 257);
        let x = Array2::from_shape_fn((n, c), |(i, j)| {
            let v = ((i * c + j) as f32 * 0.618).sin() * 3.0;
            if (i + j) % 97 == 0 { f32::NAN } else { v }
        });
        let y = Array2::from_shape_fn((n, c), |(i, j)| ((i * 7 + j * 3) as f32 * 0.11).cos());
        let row = Array2::from_shape_fn((1, c), |(_, j)| j as f32 - 100.0);
        let col = Array2::from_shape_fn((n, 1), |(i, _)| i as f32 * 0.5);
        let s10 = Array2::from_shape_fn((8000, 10), |(i, j)| {
            ((i * 10 + j) as f32 * 0.37).sin() * 4.0
        });
        let ptr = Arc::new(vec![0u32, 3000, 3001, 8000]);
        let small = Array2::from_shape_fn((64, 64), |(i, j)| ((i * 64 + j) as f32 * 0.7).sin());
        let tall = Array2::from_shape_fn((2708, 64), |(i, j)| ((i * 64 + j) as f32 * 0.3).cos());
        let bits = |a: &Array2<f32>| {
            a.as_standard_layout()
                .iter()
                .map(|v| v.to_bits())
                .collect::<Vec<_>>()
        };
        let run = || {
            let mut outs = vec![
                cpu.unary(UnaryOp::Relu, &x),
                cpu.unary(UnaryOp::Affine(0.5, -1.0), &x),
                cpu.unary(UnaryOp::Tanh, &x),
                cpu.unary(UnaryOp::Sigmoid, &x),
                cpu.binary(BinaryOp::Add, &x, &y),
                cpu.binary(BinaryOp::Mul, &x, &row),
                cpu.binary(BinaryOp::Sub, &row, &x),
                cpu.binary(BinaryOp::Div, &x, &col),
                cpu.unary_grad(UnaryOp::Tanh, &x, &cpu.unary(UnaryOp::Tanh, &x), &y),
                cpu.unary_grad_owned(UnaryOp::LeakyRelu(0.2), &x, &x, y.clone()),
                cpu.masked_grad_owned(y.clone(), &cpu.positive_mask(&x)),
                cpu.dropout(&x, 0.3, 11),
                cpu.dropout_owned(x.clone(), 0.3, 11),
                cpu.dropout_mask(n, c, 0.3, 11),
                cpu.softmax(&s10, Axis::Cols, false),
                cpu.softmax(&s10, Axis::Cols, true),
                cpu.softmax_grad(
                    &cpu.softmax(&s10, Axis::Cols, false),
                    &s10,
                    Axis::Cols,
                    false,
                ),
                cpu.segment_softmax(&s10, &ptr),
                cpu.layer_norm(&x, 1e-5).0,
                cpu.matmul(&tall, &tall, true, false),
                cpu.matmul(&small, &tall, false, true),
            ];
            let (mx, arg) = cpu.segment_reduce(&s10, &ptr, SegmentReduce::Max);
            outs.push(mx);
            outs.push(
                arg.map(|a| Array2::from_shape_fn((1, a.len()), |(_, k)| a[k] as f32))
                    .unwrap(),
            );
            let mut acc = x.clone();
            cpu.add_assign(&mut acc, &y);
            outs.push(acc);
            outs.iter().map(bits).collect::<Vec<_>>()
        };
        let on = |threads: usize| {
            rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .expect("pool")
                .install(run)
        };
        let one = on(1);
        for threads in [2, 3] {
            let got = on(threads);
            for (k, (a, b)) in one.iter().zip(&got).enumerate() {
                assert!(a == b, "output {k} differs between 1 and {threads} threads");
            }
        }
        // Against plain loops: the element-wise ones and the dropout mask.
        let plain_add: Vec<u32> = x.iter().zip(&y).map(|(a, b)| (a + b).to_bits()).collect();
        assert_eq!(one[4], plain_add);
        let plain_row: Vec<u32> = x
            .indexed_iter()
            .map(|((_, j), &v)| (v * row[[0, j]]).to_bits())
            .collect();
        assert_eq!(one[5], plain_row);
        let scale = (1.0 / (1.0 - 0.3f64)) as f32;
        let mask = |i: usize| {
            if rng::keep(11, i as u32, 0.3) {
                scale
            } else {
                0.0
            }
        };
        let plain_drop: Vec<u32> = x
            .iter()
            .enumerate()
            .map(|(i, &v)| (v * mask(i)).to_bits())
            .collect();
        assert_eq!(one[11], plain_drop);
        assert_eq!(one[12], plain_drop);
        let plain_mask: Vec<u32> = (0..n * c).map(|i| mask(i).to_bits()).collect();
        assert_eq!(one[13], plain_mask);
    }
}
