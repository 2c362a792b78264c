//! Node–supernode kernels for cross-attention over a batch of graphs.
//!
//! Rows of the node tensors are grouped by graph (offsets `ptr`); the
//! supernode tensors are `(G·M) x c` with graph `g` owning rows
//! `g·M..(g+1)·M`. Every kernel costs `O(N·M·c)` and never forms `N x N`.

use ndarray::{Array2, s};
use rayon::prelude::*;

use super::gemm_rows;
use super::sparse::PAR_THRESHOLD;
use crate::float::Float;

/// Rows per parallel task.
const ROWS_PER_TASK: usize = 256;

/// Mean rows per segment from which the kernels run one matrix product per
/// segment (`matrixmultiply`, cache-blocked, on rayon's threads)
/// instead of their row loops. Below it (a batch of small documents) the
/// row loops, parallel over the whole batch, are faster.
const GEMM_MEAN_ROWS: usize = 256;

/// `(graph, lo, hi)` for every non-empty segment when they are large enough for
/// the per-segment matrix products, `None` otherwise.
fn gemm_segments(ptr: &[u32]) -> Option<impl Iterator<Item = (usize, usize, usize)> + '_> {
    let segs = ptr.len().saturating_sub(1);
    let n = ptr.last().copied().unwrap_or(0) as usize;
    (segs > 0 && n / segs >= GEMM_MEAN_ROWS).then(|| {
        ptr.windows(2)
            .enumerate()
            .map(|(g, w)| (g, w[0] as usize, w[1] as usize))
            .filter(|&(_, lo, hi)| hi > lo)
    })
}

/// The segment holding row `v` (the last of several equal offsets, so that
/// empty segments are skipped).
fn segment_of(ptr: &[u32], v: usize) -> usize {
    ptr.partition_point(|&p| p as usize <= v) - 1
}

/// Dot product with eight independent accumulators (vectorises without
/// fast-math).
#[inline]
fn dot<F: Float>(a: &[F], b: &[F]) -> F {
    let mut acc = [F::zero(); 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for k in 0..8 {
            acc[k] += x[k] * y[k];
        }
    }
    let mut s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    for (&x, &y) in ra.iter().zip(rb) {
        s += x * y;
    }
    s
}

/// `o += alpha * x`.
#[inline]
fn axpy<F: Float>(o: &mut [F], alpha: F, x: &[F]) {
    for (o, &x) in o.iter_mut().zip(x) {
        *o += alpha * x;
    }
}

fn slice_of<F: Float>(a: &Array2<F>) -> std::borrow::Cow<'_, [F]> {
    match a.as_slice() {
        Some(s) => std::borrow::Cow::Borrowed(s),
        None => std::borrow::Cow::Owned(a.iter().copied().collect()),
    }
}

/// Fills `out` (`n x width`, row-major) row by row: `f(v, g, row)` with `g`
/// the segment of row `v`. Parallel over blocks of rows when `work` is large.
fn for_each_row<F: Float, Fun>(out: &mut [F], width: usize, ptr: &[u32], work: usize, f: Fun)
where
    Fun: Fn(usize, usize, &mut [F]) + Sync,
{
    if width == 0 || out.is_empty() {
        return;
    }
    let block = |(c, chunk): (usize, &mut [F])| {
        let start = c * ROWS_PER_TASK;
        let mut g = segment_of(ptr, start);
        for (i, row) in chunk.chunks_mut(width).enumerate() {
            let v = start + i;
            while ptr[g + 1] as usize <= v {
                g += 1;
            }
            f(v, g, row);
        }
    };
    if work >= PAR_THRESHOLD {
        out.par_chunks_mut(ROWS_PER_TASK * width)
            .enumerate()
            .for_each(block);
    } else {
        out.chunks_mut(ROWS_PER_TASK * width)
            .enumerate()
            .for_each(block);
    }
}

/// `out[v, j] = k[v] · q[g(v)·m + j]` (`N x m`).
pub(crate) fn segment_scores<F: Float>(
    k: &Array2<F>,
    q: &Array2<F>,
    ptr: &[u32],
    m: usize,
) -> Array2<F> {
    let (n, d) = k.dim();
    if let Some(segs) = gemm_segments(ptr) {
        // Graph g's block is K_g Q_gᵀ.
        let mut out = Array2::zeros((n, m));
        for (g, lo, hi) in segs {
            gemm_rows(
                k.slice(s![lo..hi, ..]),
                q.slice(s![g * m..(g + 1) * m, ..]).t(),
                F::zero(),
                out.slice_mut(s![lo..hi, ..]),
            );
        }
        return out;
    }
    let (ks, qs) = (slice_of(k), slice_of(q));
    let mut out = vec![F::zero(); n * m];
    for_each_row(&mut out, m, ptr, n * m * d, |v, g, row| {
        let kv = &ks[v * d..(v + 1) * d];
        for (j, o) in row.iter_mut().enumerate() {
            let r = g * m + j;
            *o = dot(kv, &qs[r * d..(r + 1) * d]);
        }
    });
    Array2::from_shape_vec((n, m), out).expect("segment_scores shape")
}

/// `out[v] = Σ_j a[v, j] u[g(v)·M + j]` (`N x h`, `M = a.ncols()`).
pub(crate) fn segment_mix<F: Float>(a: &Array2<F>, u: &Array2<F>, ptr: &[u32]) -> Array2<F> {
    let mut out = Array2::zeros((a.nrows(), u.ncols()));
    segment_mix_add(&mut out, a, u, ptr);
    out
}

/// `acc[v] += Σ_j a[v, j] u[g(v)·M + j]` in place.
pub(crate) fn segment_mix_add<F: Float>(
    acc: &mut Array2<F>,
    a: &Array2<F>,
    u: &Array2<F>,
    ptr: &[u32],
) {
    let (n, m) = a.dim();
    let h = u.ncols();
    if let Some(segs) = gemm_segments(ptr) {
        // Graph g's block gains A_g U_g.
        for (g, lo, hi) in segs {
            gemm_rows(
                a.slice(s![lo..hi, ..]),
                u.slice(s![g * m..(g + 1) * m, ..]),
                F::one(),
                acc.slice_mut(s![lo..hi, ..]),
            );
        }
        return;
    }
    let (as_, us) = (slice_of(a), slice_of(u));
    let out = acc
        .as_slice_mut()
        .expect("accumulators are standard layout");
    for_each_row(out, h, ptr, n * m * h, |v, g, row| {
        for j in 0..m {
            let r = g * m + j;
            axpy(row, as_[v * m + j], &us[r * h..(r + 1) * h]);
        }
    });
}

/// Adds `Σ_{v in rows} a[v, :]ᵀ ⊗ x[v]` into `acc` (`M x h`).
fn accumulate<F: Float>(acc: &mut [F], a: &[F], x: &[F], rows: std::ops::Range<usize>, m: usize) {
    let h = acc.len().checked_div(m).unwrap_or(0);
    for v in rows {
        let xv = &x[v * h..(v + 1) * h];
        for j in 0..m {
            axpy(&mut acc[j * h..(j + 1) * h], a[v * m + j], xv);
        }
    }
}

/// `out[g·M + j] = Σ_{v in g} a[v, j] x[v]` (`(G·M) x h`, `M = a.ncols()`).
pub(crate) fn segment_weighted_sum<F: Float>(
    a: &Array2<F>,
    x: &Array2<F>,
    ptr: &[u32],
) -> Array2<F> {
    let (n, m) = a.dim();
    let h = x.ncols();
    let segs = ptr.len() - 1;
    if let Some(blocks) = gemm_segments(ptr) {
        // Graph g's block is A_gᵀ X_g.
        let mut out = Array2::zeros((segs * m, h));
        for (g, lo, hi) in blocks {
            gemm_rows(
                a.slice(s![lo..hi, ..]).t(),
                x.slice(s![lo..hi, ..]),
                F::zero(),
                out.slice_mut(s![g * m..(g + 1) * m, ..]),
            );
        }
        return out;
    }
    let (as_, xs) = (slice_of(a), slice_of(x));
    let mut out = vec![F::zero(); segs * m * h];
    if m == 0 || h == 0 {
        return Array2::from_shape_vec((segs * m, h), out).expect("shape");
    }
    let one = |(g, acc): (usize, &mut [F])| {
        let (lo, hi) = (ptr[g] as usize, ptr[g + 1] as usize);
        if (hi - lo) * m * h >= 4 * PAR_THRESHOLD {
            // A large graph: partial sums over blocks of rows, then a reduction.
            let partial = (lo..hi)
                .into_par_iter()
                .step_by(ROWS_PER_TASK * 4)
                .fold(
                    || vec![F::zero(); m * h],
                    |mut part, start| {
                        let end = (start + ROWS_PER_TASK * 4).min(hi);
                        accumulate(&mut part, &as_, &xs, start..end, m);
                        part
                    },
                )
                .reduce(
                    || vec![F::zero(); m * h],
                    |mut p, q| {
                        p.iter_mut().zip(&q).for_each(|(p, &q)| *p += q);
                        p
                    },
                );
            acc.copy_from_slice(&partial);
        } else {
            accumulate(acc, &as_, &xs, lo..hi, m);
        }
    };
    if n * m * h >= PAR_THRESHOLD {
        out.par_chunks_mut(m * h).enumerate().for_each(one);
    } else {
        out.chunks_mut(m * h).enumerate().for_each(one);
    }
    Array2::from_shape_vec((segs * m, h), out).expect("segment_weighted_sum shape")
}
