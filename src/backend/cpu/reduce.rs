//! Row/column reductions, softmax, layer norm and segment kernels on the CPU.

use ndarray::{Array2, Axis, Zip};

use super::parallel::for_each_chunk;
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
            for_row_blocks(&mut out, c, |_, block| {
                block
                    .chunks_exact_mut(c)
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
            for_row_blocks(&mut out, c, |row, block| {
                let yb = &ys[row * c..row * c + block.len()];
                for (g, y) in block.chunks_exact_mut(c).zip(yb.chunks_exact(c)) {
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

pub(crate) fn layer_norm<F: Float>(x: &Array2<F>, eps: f64) -> (Array2<F>, Array2<F>) {
    let cols = F::from_usize(x.ncols().max(1)).expect("usize");
    let eps = F::from_f64_lossy(eps);
    let mut xhat = x.clone();
    let mut rstd = Array2::zeros((x.nrows(), 1));
    for (mut row, r) in xhat.rows_mut().into_iter().zip(rstd.iter_mut()) {
        let mean = row.iter().copied().sum::<F>() / cols;
        let var = row.iter().map(|&v| (v - mean) * (v - mean)).sum::<F>() / cols;
        let rs = F::one() / (var + eps).sqrt();
        row.mapv_inplace(|v| (v - mean) * rs);
        *r = rs;
    }
    (xhat, rstd)
}

pub(crate) fn layer_norm_grad<F: Float>(
    xhat: &Array2<F>,
    rstd: &Array2<F>,
    dxhat: &Array2<F>,
) -> Array2<F> {
    let cols = F::from_usize(xhat.ncols().max(1)).expect("usize");
    let mut out = dxhat.clone();
    for ((mut g, xh), &rs) in out.rows_mut().into_iter().zip(xhat.rows()).zip(rstd.iter()) {
        let mean_g = g.iter().copied().sum::<F>() / cols;
        let mean_gx = g.iter().zip(xh.iter()).map(|(&g, &x)| g * x).sum::<F>() / cols;
        Zip::from(&mut g)
            .and(&xh)
            .for_each(|g, &x| *g = rs * (*g - mean_g - x * mean_gx));
    }
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
    let mut arg = if op == SegmentReduce::Max {
        Some(vec![u32::MAX; g * cols])
    } else {
        None
    };
    if cols == 0 {
        return (out, arg);
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
        // Row by row (contiguous reads), one running value per column.
        let rows = xs[a * cols..b * cols].chunks_exact(cols);
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
            SegmentReduce::Max => {
                let arg = &mut arg.as_mut().expect("max has argmax")[s * cols..(s + 1) * cols];
                o.copy_from_slice(&xs[a * cols..(a + 1) * cols]);
                arg.fill(a as u32);
                for (i, r) in (a + 1..b).zip(rows.skip(1)) {
                    for ((best, idx), &v) in o.iter_mut().zip(arg.iter_mut()).zip(r) {
                        // NaN wins, as in torch.max: a NaN in a segment is
                        // its maximum (the first NaN), not skipped.
                        if v > *best || (v.is_nan() && !best.is_nan()) {
                            *best = v;
                            *idx = i as u32;
                        }
                    }
                }
            }
        }
    }
    (out, arg)
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
            for row in seg.chunks_exact_mut(c) {
                for ((v, &m), s) in row.iter_mut().zip(&mx1).zip(sum1.iter_mut()) {
                    *v = (*v - m).exp();
                    *s += *v;
                }
            }
            for row in seg.chunks_exact_mut(c) {
                row.iter_mut().zip(&sum1).for_each(|(v, &s)| *v /= s);
            }
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
}
