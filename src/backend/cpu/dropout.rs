//! Dropout fused into a matrix product: `dropout(x) · w` and
//! `dropout(x)ᵀ · g` without the dropped-out copy of `x`.
//!
//! A dropout on a large graph's input features makes a copy of the features
//! (the dropped-out values) that lives while the first layer multiplies it
//! by its weight, and again in the backward pass for the weight's gradient.
//! These kernels draw the mask block by block of rows (the counter-based
//! stream of [`rng`] makes any block's mask a pure function of its
//! position) into a small buffer and multiply that, so the extra memory is a
//! block, not the features.

use ndarray::{Array2, ArrayView2, ArrayViewMut2};
use rayon::prelude::*;

use super::{MATMUL_PAR_WORK, dense_matmul, gemm, parallel};
use crate::backend::rng;
use crate::float::Float;

/// Entries of `x` in one block of the forward product (rows rounded to a
/// multiple of 24, of both kernels' register blocks): small enough to stay in
/// the core's cache between the mask and the product.
const BLOCK_ENTRIES: usize = 1 << 15;

/// Rows of `x` in one part of the weight gradient. A part's product is one
/// matrix product; parts are summed in order, so the result does not depend
/// on the number of threads, and with at most this many rows it is the
/// unfused product exactly.
pub(crate) const PART_ROWS: usize = 1 << 14;

/// Rows `r0..r0 + rows` of `dropout(x, p, seed)` (row-major, `d` columns)
/// into `buf`.
fn masked_rows<F: Float>(
    buf: &mut [F],
    src: &[F],
    d: usize,
    r0: usize,
    rows: usize,
    p: f64,
    seed: u64,
) {
    let scale = F::from_f64_lossy(1.0 / (1.0 - p));
    let (lo, hi) = (r0 * d, (r0 + rows) * d);
    // The mask's counter is the entry's row-major position, as in
    // `Backend::dropout` (the positions fit in `u32`: the tensor sizes the
    // backend accepts do).
    rng::fill_mask(
        &mut buf[..hi - lo],
        Some(&src[lo..hi]),
        lo as u32,
        seed,
        p as f32,
        scale,
    );
}

/// `dropout(x, p, seed) · w`, each output row as the unfused product makes
/// it (with the unpacked kernel of `gemm.rs` where it takes `w`, the
/// output not zeroed first; else with `matrixmultiply`).
pub(crate) fn dropout_matmul<F: Float>(
    x: ArrayView2<'_, F>,
    p: f64,
    seed: u64,
    w: ArrayView2<'_, F>,
) -> Array2<F> {
    let (n, d) = x.dim();
    let m = w.ncols();
    let x = x.as_standard_layout();
    let src = x.as_slice().expect("standard layout");
    if n == 0 || m == 0 {
        return Array2::zeros((n, m));
    }
    let rows = (BLOCK_ENTRIES / d.max(1))
        .next_multiple_of(24)
        .clamp(8, n.next_multiple_of(8));
    let parallel = n * d * m >= MATMUL_PAR_WORK && rayon::current_num_threads() > 1;
    let w_rows = w.as_standard_layout();
    let w = w_rows.view();
    if gemm::takes(&w) {
        let mut out = Vec::with_capacity(n * m);
        let data = &mut out.spare_capacity_mut()[..n * m];
        masked_blocks(data, src, (d, m, rows), (p, seed), parallel, |a, o| {
            gemm::gemm_into(a, w, o)
        });
        // SAFETY: every block's `gemm_into` wrote all its entries.
        unsafe { out.set_len(n * m) };
        return Array2::from_shape_vec((n, m), out).expect("n x m entries");
    }
    let mut out = Array2::zeros((n, m));
    let data = out.as_slice_mut().expect("fresh array is standard layout");
    masked_blocks(data, src, (d, m, rows), (p, seed), parallel, |a, o| {
        let len = a.nrows();
        let mut o = ArrayViewMut2::from_shape((len, m), o).expect("output block");
        ndarray::linalg::general_mat_mul(F::one(), &a, &w, F::zero(), &mut o);
    });
    out
}

/// Runs `product(block of dropout(x), its output rows)` over blocks of
/// `rows` rows of `x` (`d` columns; the output has `m`), on the pool when
/// `parallel`.
fn masked_blocks<F: Float, T: Send>(
    data: &mut [T],
    src: &[F],
    (d, m, rows): (usize, usize, usize),
    (p, seed): (f64, u64),
    parallel: bool,
    product: impl Fn(ArrayView2<'_, F>, &mut [T]) + Sync,
) {
    let block = |i: usize, chunk: &mut [T], buf: &mut Vec<F>| {
        let r0 = i * rows;
        let len = chunk.len() / m;
        buf.resize(len * d, F::zero());
        masked_rows(buf, src, d, r0, len, p, seed);
        let a = ArrayView2::from_shape((len, d), &buf[..len * d]).expect("block shape");
        product(a, chunk);
    };
    if parallel {
        parallel::for_each_chunk(data, rows * m, |i, chunk| {
            let mut buf = Vec::new();
            block(i, chunk, &mut buf);
        });
    } else {
        let mut buf = Vec::new();
        for (i, chunk) in data.chunks_mut(rows * m).enumerate() {
            block(i, chunk, &mut buf);
        }
    }
}

/// `dropout(x, p, seed)ᵀ · g`: one product per [`PART_ROWS`] rows, summed in
/// order of the parts.
pub(crate) fn dropout_t_matmul<F: Float>(
    x: ArrayView2<'_, F>,
    p: f64,
    seed: u64,
    g: ArrayView2<'_, F>,
) -> Array2<F> {
    let (n, d) = x.dim();
    let m = g.ncols();
    let x = x.as_standard_layout();
    let src = x.as_slice().expect("standard layout");
    let part = |r0: usize, len: usize| {
        let mut buf = vec![F::zero(); len * d];
        // The mask of an entry depends on its position alone: drawn in
        // pieces of whole rows on the pool (a part is up to 2^14 rows).
        parallel::for_each_part(&mut buf, d, |start, piece| {
            let rows = piece.len() / d.max(1);
            masked_rows(piece, src, d, r0 + start / d.max(1), rows, p, seed);
        });
        let a = ArrayView2::from_shape((len, d), &buf[..]).expect("part shape");
        dense_matmul(a.t(), g.slice(ndarray::s![r0..r0 + len, ..]))
    };
    if n <= PART_ROWS {
        return part(0, n);
    }
    let parts = n.div_ceil(PART_ROWS);
    let partials: Vec<Array2<F>> = (0..parts)
        .into_par_iter()
        .map(|i| {
            let r0 = i * PART_ROWS;
            part(r0, PART_ROWS.min(n - r0))
        })
        .collect();
    let mut it = partials.into_iter();
    let mut acc = it.next().unwrap_or_else(|| Array2::zeros((d, m)));
    for t in it {
        acc += &t;
    }
    acc
}
