//! Row/column reductions, softmax, layer norm and segment kernels on the CPU.

use ndarray::{Array2, Axis};

use super::parallel::{
    PART_MIN, PART_MIN_COSTLY, for_each_chunk, for_each_part, for_each_part_from, part_len,
};
use super::sparse::PAR_THRESHOLD;
use crate::backend::SegmentReduce;
use crate::float::Float;

/// Entries per block of the row-wise loops below (whole rows each).
const ROW_BLOCK: usize = 1 << 14;

/// Entries of one block when `entries` entries of `cols`-wide rows are
/// split: all of them (one block, on the calling thread) below
/// `4 * PAR_THRESHOLD`, else a fixed number of whole rows, so that partial
/// sums over blocks, added in block order, do not depend on the number of
/// threads. (Adding one block's partial to zero is exact, so the one-block
/// case gives the plain row-after-row result.)
fn block_len(entries: usize, cols: usize) -> usize {
    if entries < 4 * PAR_THRESHOLD {
        entries.max(1)
    } else {
        (ROW_BLOCK / cols.max(1)).max(1) * cols.max(1)
    }
}

/// `f(i, block)` for each block in order, on both cores when there are
/// several (the calling thread takes part, see `parallel.rs`); the results
/// in block order.
pub(super) fn map_blocks<S: Send, R: Send>(
    blocks: Vec<S>,
    f: impl Fn(usize, S) -> R + Sync,
) -> Vec<R> {
    if blocks.len() < 2 {
        return blocks
            .into_iter()
            .enumerate()
            .map(|(i, b)| f(i, b))
            .collect();
    }
    let mut slots: Vec<(Option<S>, Option<R>)> =
        blocks.into_iter().map(|b| (Some(b), None)).collect();
    for_each_chunk(&mut slots, 1, |i, slot| {
        for (block, out) in slot {
            *out = block.take().map(|b| f(i, b));
        }
    });
    slots
        .into_iter()
        .map(|(_, r)| r.expect("every block is visited"))
        .collect()
}

/// Calls `f(first_row, block)` for blocks of whole `cols`-wide rows of
/// `data` covering it in order (see [`block_len`]). Each row is handled by
/// one call, so results do not depend on the split.
pub(crate) fn for_row_blocks<T: Send>(
    data: &mut [T],
    cols: usize,
    f: impl Fn(usize, &mut [T]) + Sync,
) {
    if cols == 0 || data.is_empty() {
        return;
    }
    let len = block_len(data.len(), cols);
    map_blocks(data.chunks_mut(len).collect(), |i, block| {
        f(i * len / cols, block)
    });
}

/// Entries per block of [`sum_squares`] (a fixed size, so the result does
/// not depend on the number of threads).
const SQUARES_BLOCK: usize = 1 << 16;

/// Sum of squares of a contiguous slice in `f64`, in eight interleaved
/// lanes (independent additions the compiler can vectorise) added at the
/// end. Each square of an `f32` is exact in `f64`.
fn sum_squares_lanes<F: Float>(xs: &[F]) -> f64 {
    let mut acc = [0.0f64; 8];
    let mut chunks = xs.chunks_exact(8);
    for c in &mut chunks {
        for (a, &v) in acc.iter_mut().zip(c) {
            let v = v.to_f64_exact();
            *a += v * v;
        }
    }
    let rest: f64 = chunks
        .remainder()
        .iter()
        .map(|&v| v.to_f64_exact() * v.to_f64_exact())
        .sum();
    acc.iter().sum::<f64>() + rest
}

/// Sum of squares of all entries, in `f64`: fixed blocks of
/// [`SQUARES_BLOCK`] entries (on both cores when there are several),
/// whose partial sums are added in block order.
pub(super) fn sum_squares<F: Float>(x: &Array2<F>) -> f64 {
    let x = x.as_standard_layout();
    let xs = x.as_slice().expect("standard layout");
    // One block (or none) runs on the calling thread (`map_blocks`).
    map_blocks(xs.chunks(SQUARES_BLOCK).collect(), |_, b| {
        sum_squares_lanes(b)
    })
    .into_iter()
    .sum()
}

/// Adds the per-block partial column sums `parts` into `acc`, in order.
fn add_parts<F: Float>(acc: &mut [F], parts: &[Vec<F>]) {
    for p in parts {
        acc.iter_mut().zip(p).for_each(|(a, &v)| *a += v);
    }
}

/// Softmax (or log-softmax) of one contiguous lane, in place.
fn softmax_lane<F: Float>(lane: &mut [F], log: bool) {
    let m = lane.iter().fold(F::neg_infinity(), |a, &b| a.max(b));
    let m = if m.is_finite() { m } else { F::zero() };
    if log {
        let s: F = lane.iter().map(|&v| (v - m).exp()).sum();
        let lse = m + s.ln();
        lane.iter_mut().for_each(|v| *v -= lse);
    } else {
        lane.iter_mut().for_each(|v| *v = (*v - m).exp());
        let s: F = lane.iter().copied().sum();
        lane.iter_mut().for_each(|v| *v /= s);
    }
}

/// Backward of [`softmax_lane`] for one lane: `g` (`dy` on entry) becomes
/// `dx`, given the output `y`.
fn softmax_grad_lane<F: Float>(g: &mut [F], y: &[F], log: bool) {
    if log {
        let s: F = g.iter().copied().sum();
        g.iter_mut().zip(y).for_each(|(g, &y)| *g -= y.exp() * s);
    } else {
        let s: F = g.iter().zip(y).map(|(&g, &y)| g * y).sum();
        g.iter_mut().zip(y).for_each(|(g, &y)| *g = y * (*g - s));
    }
}

pub(crate) fn softmax<F: Float>(x: &Array2<F>, axis: Axis, log: bool) -> Array2<F> {
    let c = x.ncols();
    match x.as_slice() {
        // Along rows of a standard-layout array: contiguous lanes, split
        // over both cores when large.
        Some(xs) if axis == Axis(1) => {
            let mut out = xs.to_vec();
            // Rows are independent: any split gives the same values.
            for_each_part_from(&mut out, c, PART_MIN_COSTLY, |_, block| {
                block
                    .chunks_exact_mut(c.max(1))
                    .for_each(|lane| softmax_lane(lane, log));
            });
            Array2::from_shape_vec(x.raw_dim(), out).expect("same shape")
        }
        _ => {
            let mut out = x.clone();
            for mut lane in out.lanes_mut(axis) {
                let mut v = lane.to_vec();
                softmax_lane(&mut v, log);
                lane.iter_mut().zip(v).for_each(|(o, v)| *o = v);
            }
            out
        }
    }
}

pub(crate) fn softmax_grad<F: Float>(
    y: &Array2<F>,
    dy: &Array2<F>,
    axis: Axis,
    log: bool,
) -> Array2<F> {
    let c = y.ncols();
    match (y.as_slice(), dy.as_slice()) {
        (Some(ys), Some(dys)) if axis == Axis(1) => {
            let mut out = dys.to_vec();
            for_each_part(&mut out, c, |start, block| {
                let yb = &ys[start..start + block.len()];
                for (g, y) in block
                    .chunks_exact_mut(c.max(1))
                    .zip(yb.chunks_exact(c.max(1)))
                {
                    softmax_grad_lane(g, y, log);
                }
            });
            Array2::from_shape_vec(y.raw_dim(), out).expect("same shape")
        }
        _ => {
            let mut out = dy.clone();
            for (mut g, yl) in out.lanes_mut(axis).into_iter().zip(y.lanes(axis)) {
                let (mut gv, yv) = (g.to_vec(), yl.to_vec());
                softmax_grad_lane(&mut gv, &yv, log);
                g.iter_mut().zip(gv).for_each(|(o, v)| *o = v);
            }
            out
        }
    }
}

/// Rows standardised together by [`layer_norm`] and [`layer_norm_grad`]:
/// their sums are independent chains, interleaved so that they overlap
/// (each row's sum still runs over its columns in order from `-0`, as
/// `Iterator::sum` adds, so the values are those of a row-by-row loop).
const LN_ROWS: usize = 8;

/// Rows of one part of a row-wise kernel over `rows x cols` entries: all of
/// them when it is not split (see [`part_len`]), else a multiple of
/// [`LN_ROWS`] rows.
fn part_rows(rows: usize, cols: usize) -> usize {
    let cols = cols.max(1);
    part_len(rows * cols, LN_ROWS * cols, PART_MIN).map_or(rows.max(1), |e| e / cols)
}

/// `f(first_row, rows of out, entries of per_row)` over parts of whole rows
/// (`cols` entries of `out` and one of `per_row` each), spread over the pool:
/// for kernels whose rows are independent.
fn row_parts<F: Float>(
    out: &mut [F],
    per_row: &mut [F],
    cols: usize,
    f: impl Fn(usize, &mut [F], &mut [F]) + Sync,
) {
    if cols == 0 {
        return f(0, out, per_row);
    }
    let per = part_rows(per_row.len(), cols);
    let parts: Vec<(&mut [F], &mut [F])> = out
        .chunks_mut(per * cols)
        .zip(per_row.chunks_mut(per))
        .collect();
    map_blocks(parts, |i, (o, r)| f(i * per, o, r));
}

/// Calls `group::<LN_ROWS>` on whole groups of rows, then `group::<1>` on
/// each row left over.
macro_rules! by_row_groups {
    ($rows:expr, |$r:ident, $k:ident| $body:expr) => {{
        let rows = $rows;
        let mut $r = 0;
        while $r + LN_ROWS <= rows {
            {
                const $k: usize = LN_ROWS;
                $body
            }
            $r += LN_ROWS;
        }
        while $r < rows {
            {
                const $k: usize = 1;
                $body
            }
            $r += 1;
        }
    }};
}

/// Standardises the `R` rows of `x` (`R · c` entries) into `out`, their
/// `1 / std` into `rstd`.
#[inline(always)]
fn ln_group<F: Float, const R: usize>(x: &[F], out: &mut [F], rstd: &mut [F], c: usize, eps: F) {
    let cols = F::from_usize(c.max(1)).expect("usize");
    let mut sum = [-F::zero(); R];
    for j in 0..c {
        for r in 0..R {
            sum[r] += x[r * c + j];
        }
    }
    let mean = sum.map(|s| s / cols);
    let mut var = [-F::zero(); R];
    for j in 0..c {
        for r in 0..R {
            let d = x[r * c + j] - mean[r];
            var[r] += d * d;
        }
    }
    for r in 0..R {
        let rs = F::one() / (var[r] / cols + eps).sqrt();
        rstd[r] = rs;
        for (o, &v) in out[r * c..(r + 1) * c]
            .iter_mut()
            .zip(&x[r * c..(r + 1) * c])
        {
            *o = (v - mean[r]) * rs;
        }
    }
}

pub(crate) fn layer_norm<F: Float>(x: &Array2<F>, eps: f64) -> (Array2<F>, Array2<F>) {
    let (n, c) = x.dim();
    let eps = F::from_f64_lossy(eps);
    let x = x.as_standard_layout();
    let xs = x.as_slice().expect("standard layout");
    let mut xhat = vec![F::zero(); n * c];
    let mut rstd = vec![F::zero(); n];
    row_parts(&mut xhat, &mut rstd, c, |r0, out, rs| {
        let x = &xs[r0 * c..r0 * c + out.len()];
        super::elementwise::simd(|| {
            by_row_groups!(rs.len(), |r, R| ln_group::<F, R>(
                &x[r * c..(r + R) * c],
                &mut out[r * c..(r + R) * c],
                &mut rs[r..r + R],
                c,
                eps,
            ))
        })
    });
    (
        Array2::from_shape_vec((n, c), xhat).expect("n x c entries"),
        Array2::from_shape_vec((n, 1), rstd).expect("n entries"),
    )
}

/// Backward of [`ln_group`]: `g` (`dx̂` on entry) becomes `dx` for the `R`
/// rows of `xh`.
#[inline(always)]
fn ln_grad_group<F: Float, const R: usize>(g: &mut [F], xh: &[F], rstd: &[F], c: usize) {
    let cols = F::from_usize(c.max(1)).expect("usize");
    let (mut sg, mut sgx) = ([-F::zero(); R], [-F::zero(); R]);
    for j in 0..c {
        for r in 0..R {
            sg[r] += g[r * c + j];
        }
    }
    for j in 0..c {
        for r in 0..R {
            sgx[r] += g[r * c + j] * xh[r * c + j];
        }
    }
    for r in 0..R {
        let (mean_g, mean_gx, rs) = (sg[r] / cols, sgx[r] / cols, rstd[r]);
        for (g, &x) in g[r * c..(r + 1) * c]
            .iter_mut()
            .zip(&xh[r * c..(r + 1) * c])
        {
            *g = rs * (*g - mean_g - x * mean_gx);
        }
    }
}

pub(crate) fn layer_norm_grad<F: Float>(
    xhat: &Array2<F>,
    rstd: &Array2<F>,
    dxhat: &Array2<F>,
) -> Array2<F> {
    let c = dxhat.ncols();
    let mut out = dxhat.as_standard_layout().into_owned();
    let xhat = xhat.as_standard_layout();
    let xs = xhat.as_slice().expect("standard layout");
    let rstd = rstd.as_standard_layout();
    let rs = rstd.as_slice().expect("standard layout");
    let data = out.as_slice_mut().expect("standard layout");
    // Parts of whole groups of rows; rows are independent.
    for_each_part(data, LN_ROWS * c, |start, g| {
        let (r0, rows) = (start / c, g.len() / c);
        let (xh, rs) = (&xs[start..start + g.len()], &rs[r0..r0 + rows]);
        super::elementwise::simd(|| {
            by_row_groups!(rows, |r, R| ln_grad_group::<F, R>(
                &mut g[r * c..(r + R) * c],
                &xh[r * c..(r + R) * c],
                &rs[r..r + R],
                c,
            ))
        })
    });
    out
}

pub(crate) fn segment_reduce<F: Float>(
    x: &Array2<F>,
    ptr: &[u32],
    op: SegmentReduce,
) -> (Array2<F>, Option<Vec<u32>>) {
    let g = ptr.len() - 1;
    let cols = x.ncols();
    let x = x.as_standard_layout();
    let xs = x.as_slice().expect("standard layout");
    let mut out = Array2::zeros((g, cols));
    if op == SegmentReduce::Max {
        let mut arg = vec![u32::MAX; g * cols];
        if cols == 0 {
            return (out, Some(arg));
        }
        // Parts of whole segments (each segment's maxima on their own).
        let o = out.as_slice_mut().expect("fresh array is standard layout");
        let per = part_rows(g, xs.len().div_ceil(g.max(1)));
        let parts: Vec<_> = o
            .chunks_mut(per * cols)
            .zip(arg.chunks_mut(per * cols))
            .collect();
        map_blocks(parts, |i, (o, arg)| {
            let segs = o.chunks_exact_mut(cols).zip(arg.chunks_exact_mut(cols));
            for (s, (o, arg)) in (i * per..).zip(segs) {
                let (a, b) = (ptr[s] as usize, ptr[s + 1] as usize);
                if a < b {
                    let rows = &xs[a * cols..b * cols];
                    super::elementwise::simd(|| segment_max(o, arg, rows, a));
                }
            }
        });
        return (out, Some(arg));
    }
    if cols == 0 {
        return (out, None);
    }
    for s in 0..g {
        let (a, b) = (ptr[s] as usize, ptr[s + 1] as usize);
        if a == b {
            continue;
        }
        let o = out
            .row_mut(s)
            .into_slice()
            .expect("rows of a standard-layout array are contiguous");
        match op {
            SegmentReduce::Sum | SegmentReduce::Mean => {
                // Column sums of blocks of rows (in parallel for a large
                // segment), added in order.
                let seg = &xs[a * cols..b * cols];
                if seg.len() < 4 * PAR_THRESHOLD {
                    // One block (the sums `add_parts` would give): summed
                    // in place, without the per-segment vectors that
                    // dominate many small segments (message passing).
                    for r in seg.chunks_exact(cols) {
                        o.iter_mut().zip(r).for_each(|(o, &v)| *o += v);
                    }
                    if op == SegmentReduce::Mean {
                        let n = F::from_usize(b - a).expect("usize");
                        o.iter_mut().for_each(|v| *v /= n);
                    }
                    continue;
                }
                let blocks = seg.chunks(block_len(seg.len(), cols)).collect();
                let parts = map_blocks(blocks, |_, block: &[F]| {
                    let mut sum = vec![F::zero(); cols];
                    for r in block.chunks_exact(cols) {
                        sum.iter_mut().zip(r).for_each(|(o, &v)| *o += v);
                    }
                    sum
                });
                add_parts(o, &parts);
                if op == SegmentReduce::Mean {
                    let n = F::from_usize(b - a).expect("usize");
                    o.iter_mut().for_each(|v| *v /= n);
                }
            }
            SegmentReduce::Max => unreachable!("maxima are taken above"),
        }
    }
    (out, None)
}

/// Column maxima of the rows `rows` (starting at row `first`) into `best`,
/// the row of each into `idx`. NaN wins, as in `torch.max`: a NaN in a
/// segment is its maximum (the first NaN), not skipped. Branch-free, so it
/// vectorises.
#[inline(always)]
fn segment_max<F: Float>(best: &mut [F], idx: &mut [u32], rows: &[F], first: usize) {
    let cols = best.len();
    best.copy_from_slice(&rows[..cols]);
    idx.fill(first as u32);
    for (i, r) in rows.chunks_exact(cols).enumerate().skip(1) {
        let i = (first + i) as u32;
        for ((b, k), &v) in best.iter_mut().zip(idx.iter_mut()).zip(r) {
            let take = (v > *b) | (v.is_nan() & !b.is_nan());
            *b = if take { v } else { *b };
            *k = if take { i } else { *k };
        }
    }
}

pub(crate) fn segment_reduce_grad<F: Float>(
    dy: &Array2<F>,
    ptr: &[u32],
    op: SegmentReduce,
    argmax: Option<&[u32]>,
    rows: usize,
) -> Array2<F> {
    let mut out = Array2::zeros((rows, dy.ncols()));
    segment_reduce_grad_add(&mut out, dy, ptr, op, argmax);
    out
}

/// `acc += segment_reduce_grad(dy, ..)` in place, `acc` standard layout.
pub(crate) fn segment_reduce_grad_add<F: Float>(
    acc: &mut Array2<F>,
    dy: &Array2<F>,
    ptr: &[u32],
    op: SegmentReduce,
    argmax: Option<&[u32]>,
) {
    let cols = dy.ncols();
    if cols == 0 {
        return;
    }
    let acc = acc
        .as_slice_mut()
        .expect("gradient accumulators are standard layout");
    for s in 0..ptr.len() - 1 {
        let (a, b) = (ptr[s] as usize, ptr[s + 1] as usize);
        if a == b {
            continue;
        }
        match op {
            SegmentReduce::Sum | SegmentReduce::Mean => {
                let scale = if op == SegmentReduce::Mean {
                    F::one() / F::from_usize(b - a).expect("usize")
                } else {
                    F::one()
                };
                let seg = &mut acc[a * cols..b * cols];
                if seg.len() < 4 * PAR_THRESHOLD {
                    // One block: no per-segment vector (many small segments).
                    let dy = dy.row(s);
                    for o in seg.chunks_exact_mut(cols) {
                        o.iter_mut().zip(&dy).for_each(|(o, &d)| *o += d * scale);
                    }
                    continue;
                }
                let d: Vec<F> = dy.row(s).iter().map(|&d| d * scale).collect();
                for_row_blocks(seg, cols, |_, block| {
                    for o in block.chunks_exact_mut(cols) {
                        o.iter_mut().zip(&d).for_each(|(o, &d)| *o += d);
                    }
                });
            }
            SegmentReduce::Max => {
                let arg = argmax.expect("max backward needs argmax");
                for c in 0..cols {
                    let i = arg[s * cols + c];
                    if i != u32::MAX {
                        acc[i as usize * cols + c] += dy[[s, c]];
                    }
                }
            }
        }
    }
}

/// Softmax over the rows of each segment, per column. Walks each segment
/// row by row (three contiguous passes) rather than column by column, so a
/// tall segment is streamed instead of read with a stride.
pub(crate) fn segment_softmax<F: Float>(x: &Array2<F>, ptr: &[u32]) -> Array2<F> {
    let mut out = x.as_standard_layout().into_owned();
    let c = out.ncols();
    let data = out.as_slice_mut().expect("standard layout");
    // Column maxima and sums of a one-block segment, reused.
    let (mut mx1, mut sum1) = (vec![F::neg_infinity(); c], vec![F::zero(); c]);
    for s in 0..ptr.len() - 1 {
        let (a, b) = (ptr[s] as usize, ptr[s + 1] as usize);
        if a == b || c == 0 {
            continue;
        }
        let seg = &mut data[a * c..b * c];
        let len = block_len(seg.len(), c);
        if len == seg.len() {
            // One block: the same operations in the same order as below,
            // without the per-segment vectors that dominate many small
            // segments (an edge softmax has one per node).
            mx1.fill(F::neg_infinity());
            sum1.fill(F::zero());
            for row in seg.chunks_exact(c) {
                mx1.iter_mut().zip(row).for_each(|(m, &v)| *m = m.max(v));
            }
            // The exponentials (each on its own, so on the pool for a large
            // segment), then their column sums row after row, then the
            // division: the same additions in the same order as one pass.
            let mx = &mx1;
            for_each_part_from(seg, c, PART_MIN_COSTLY, |_, rows| {
                for row in rows.chunks_exact_mut(c) {
                    row.iter_mut()
                        .zip(mx)
                        .for_each(|(v, &m)| *v = (*v - m).exp());
                }
            });
            for row in seg.chunks_exact(c) {
                sum1.iter_mut().zip(row).for_each(|(s, &v)| *s += v);
            }
            let sum = &sum1;
            for_each_part(seg, c, |_, rows| {
                for row in rows.chunks_exact_mut(c) {
                    row.iter_mut().zip(sum).for_each(|(v, &s)| *v /= s);
                }
            });
            continue;
        }
        // Column maxima (exact in any order), then the exponentials with
        // per-block column sums added in block order, then the division.
        let maxima = map_blocks(seg.chunks(len).collect(), |_, rows: &[F]| {
            let mut mx = vec![F::neg_infinity(); c];
            for row in rows.chunks_exact(c) {
                mx.iter_mut().zip(row).for_each(|(m, &v)| *m = m.max(v));
            }
            mx
        });
        let mut mx = vec![F::neg_infinity(); c];
        for p in &maxima {
            mx.iter_mut().zip(p).for_each(|(m, &v)| *m = m.max(v));
        }
        let parts = map_blocks(seg.chunks_mut(len).collect(), |_, rows: &mut [F]| {
            let mut sum = vec![F::zero(); c];
            for row in rows.chunks_exact_mut(c) {
                for ((v, &m), s) in row.iter_mut().zip(&mx).zip(sum.iter_mut()) {
                    *v = (*v - m).exp();
                    *s += *v;
                }
            }
            sum
        });
        let mut sum = vec![F::zero(); c];
        add_parts(&mut sum, &parts);
        for_row_blocks(seg, c, |_, rows| {
            for row in rows.chunks_exact_mut(c) {
                row.iter_mut().zip(&sum).for_each(|(v, &s)| *v /= s);
            }
        });
    }
    out
}

pub(crate) fn segment_softmax_grad<F: Float>(
    y: &Array2<F>,
    dy: &Array2<F>,
    ptr: &[u32],
) -> Array2<F> {
    let mut out = dy.as_standard_layout().into_owned();
    let y = y.as_standard_layout();
    let c = out.ncols();
    let data = out.as_slice_mut().expect("standard layout");
    let ys = y.as_slice().expect("standard layout");
    let mut dot1 = vec![F::zero(); c];
    for s in 0..ptr.len() - 1 {
        let (a, b) = (ptr[s] as usize, ptr[s + 1] as usize);
        if a == b || c == 0 {
            continue;
        }
        let (gs, yseg) = (&mut data[a * c..b * c], &ys[a * c..b * c]);
        let len = block_len(gs.len(), c);
        if len == gs.len() {
            // One block, as below without the per-segment vectors.
            dot1.fill(F::zero());
            for (g, y) in gs.chunks_exact(c).zip(yseg.chunks_exact(c)) {
                for ((d, &g), &y) in dot1.iter_mut().zip(g).zip(y) {
                    *d += g * y;
                }
            }
            for (g, y) in gs.chunks_exact_mut(c).zip(yseg.chunks_exact(c)) {
                for ((g, &y), &d) in g.iter_mut().zip(y).zip(&dot1) {
                    *g = y * (*g - d);
                }
            }
            continue;
        }
        // Per-block column dot products <g, y>, added in block order.
        let blocks = gs.chunks(len).zip(yseg.chunks(len)).collect();
        let parts = map_blocks(blocks, |_, (g, y): (&[F], &[F])| {
            let mut dot = vec![F::zero(); c];
            for (g, y) in g.chunks_exact(c).zip(y.chunks_exact(c)) {
                for ((d, &g), &y) in dot.iter_mut().zip(g).zip(y) {
                    *d += g * y;
                }
            }
            dot
        });
        let mut dot = vec![F::zero(); c];
        add_parts(&mut dot, &parts);
        let dot = &dot;
        for_row_blocks(gs, c, |row, g| {
            let y = &yseg[row * c..row * c + g.len()];
            for (g, y) in g.chunks_exact_mut(c).zip(y.chunks_exact(c)) {
                for ((g, &y), &d) in g.iter_mut().zip(y).zip(dot) {
                    *g = y * (*g - d);
                }
            }
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Plain sequential sum in `f64`, the reference.
    fn plain(x: &Array2<f32>) -> f64 {
        x.iter().map(|&v| f64::from(v) * f64::from(v)).sum()
    }

    #[test]
    fn sum_squares_matches_a_plain_sum_in_every_layout() {
        // Sizes around the lane width and the block size, and one of
        // several blocks with a ragged last one.
        for (rows, cols) in [(0, 3), (1, 7), (3, 3), (1, 8), (257, 255), (301, 700)] {
            let x = Array2::from_shape_fn((rows, cols), |(i, j)| {
                ((i * cols + j) as f32 * 0.37).sin() * 3.0
            });
            let want = plain(&x);
            for (what, t) in [
                ("row-major", x.clone()),
                ("transposed", x.clone().reversed_axes()),
            ] {
                let got = sum_squares(&t);
                assert!(
                    (got - want).abs() <= 1e-12 * want.max(1.0),
                    "{rows}x{cols} {what}: {got} != {want}"
                );
            }
        }
        // Every entry counts once: a single 1 anywhere gives 1.
        for k in [
            0,
            7,
            8,
            SQUARES_BLOCK - 1,
            SQUARES_BLOCK,
            3 * SQUARES_BLOCK + 5,
        ] {
            let mut x = Array2::<f32>::zeros((1, 3 * SQUARES_BLOCK + 9));
            x[[0, k]] = 1.0;
            assert_eq!(sum_squares(&x), 1.0, "entry {k}");
        }
    }

    /// The row-by-row loops the interleaved layer norm kernels replace.
    fn layer_norm_rows(x: &Array2<f32>, eps: f32) -> (Array2<f32>, Vec<f32>, Array2<f32>) {
        let cols = x.ncols().max(1) as f32;
        let mut xhat = x.clone();
        let mut rstd = Vec::new();
        for mut row in xhat.rows_mut() {
            let mean = row.iter().copied().sum::<f32>() / cols;
            let var = row.iter().map(|&v| (v - mean) * (v - mean)).sum::<f32>() / cols;
            let rs = 1.0 / (var + eps).sqrt();
            row.mapv_inplace(|v| (v - mean) * rs);
            rstd.push(rs);
        }
        // The gradient for dx̂ = x itself.
        let mut g = x.clone();
        for ((mut g, xh), &rs) in g.rows_mut().into_iter().zip(xhat.rows()).zip(&rstd) {
            let mean_g = g.iter().copied().sum::<f32>() / cols;
            let mean_gx = g.iter().zip(xh.iter()).map(|(&g, &x)| g * x).sum::<f32>() / cols;
            g.zip_mut_with(&xh, |g, &x| *g = rs * (*g - mean_g - x * mean_gx));
        }
        (xhat, rstd, g)
    }

    #[test]
    fn layer_norm_equals_the_row_by_row_loop_bit_for_bit() {
        let bits = |a: &[f32]| a.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        // Row counts around the group of 8 and large enough to be split
        // over threads; widths with and without a remainder; empty rows.
        for (n, c) in [
            (0, 4),
            (1, 1),
            (7, 3),
            (9, 64),
            (17, 0),
            (4099, 64),
            (3000, 37),
        ] {
            let mut x = Array2::from_shape_fn((n, c), |(i, j)| {
                ((i * 131 + j * 17) as f32 * 0.731).sin() * (1.0 + (i % 5) as f32)
            });
            if n > 3 && c > 0 {
                // A constant row (variance 0), a row of -0 and a NaN.
                x.row_mut(1).fill(2.5);
                x.row_mut(2).fill(-0.0);
                x[[3, 0]] = f32::NAN;
            }
            let (want_x, want_r, want_g) = layer_norm_rows(&x, 1e-5);
            let (got_x, got_r) = layer_norm(&x, 1e-5);
            assert_eq!(
                bits(got_x.as_slice().unwrap()),
                bits(want_x.as_slice().unwrap()),
                "{n}x{c} x̂"
            );
            assert_eq!(
                bits(got_r.as_slice().unwrap()),
                bits(&want_r),
                "{n}x{c} rstd"
            );
            assert_eq!(got_r.dim(), (n, 1));
            let got_g = layer_norm_grad(&got_x, &got_r, &x);
            assert_eq!(
                bits(got_g.as_slice().unwrap()),
                bits(want_g.as_slice().unwrap()),
                "{n}x{c} grad"
            );
            // A transposed gradient gives the same values.
            let xt = x.t().as_standard_layout().into_owned().reversed_axes();
            let got_t = layer_norm_grad(&got_x, &got_r, &xt);
            assert_eq!(
                bits(got_t.as_standard_layout().as_slice().unwrap()),
                bits(want_g.as_slice().unwrap()),
                "{n}x{c} transposed"
            );
        }
    }
}
