//! CSR storage and sparse x dense kernels for the CPU backend.
//!
//! * `S · X`: row-parallel; each output row accumulates `v · X[j]` over the
//!   row's stored entries (`X` rows are contiguous, the inner loop is a
//!   vectorised AXPY).
//! * `Sᵀ · X`: for a symmetric `S` (undirected graph operators) this is
//!   `S · X`. Otherwise, when the output is small (`cols x width`, e.g. the
//!   weight gradient `Xᵀ dZ` of sparse features), every thread scatters its
//!   share of `S`'s rows into a private accumulator that stays in cache, and
//!   the accumulators are summed; for large outputs a transposed index
//!   (built once, shared by all copies of the structure) drives a gather.

use std::mem::MaybeUninit;
use std::sync::{Arc, OnceLock};

use rayon::prelude::*;
use sprs::CsMat;

use crate::backend::rng;
use crate::float::Float;

/// Work (multiply-adds) below which kernels stay on one thread.
pub(crate) const PAR_THRESHOLD: usize = 1 << 16;

/// Output entries up to which `Sᵀ · X` scatters into per-thread accumulators.
const SCATTER_MAX_OUTPUT: usize = 1 << 19;

/// Transposed structure of a [`CpuCsr`]: for every stored entry of `Sᵀ`
/// (in CSR order), the position of the same entry in `S`'s storage.
#[derive(Debug)]
pub(crate) struct TransposeIndex {
    indptr: Vec<usize>,
    indices: Vec<u32>,
    perm: Vec<u32>,
}

#[derive(Debug)]
struct Structure {
    rows: usize,
    cols: usize,
    indptr: Vec<usize>,
    indices: Vec<u32>,
    transpose: OnceLock<TransposeIndex>,
}

/// A CSR matrix on the CPU. The structure (and its lazily built transpose)
/// is shared between copies with different values, such as dropout masks of
/// the same sparse input.
#[derive(Debug, Clone)]
pub struct CpuCsr<F> {
    structure: Arc<Structure>,
    data: Arc<Vec<F>>,
    /// Whether the matrix equals its transpose (values included).
    symmetric: bool,
}

impl<F: Float> CpuCsr<F> {
    /// Builds from a sprs matrix (CSC is converted to CSR).
    pub fn from_csmat(m: &CsMat<F>) -> Self {
        let csr;
        let m = if m.is_csr() {
            m
        } else {
            csr = m.to_csr();
            &csr
        };
        let (rows, cols) = m.shape();
        let structure = Structure {
            rows,
            cols,
            indptr: m.indptr().to_proper().into_owned(),
            indices: m.indices().iter().map(|&j| j as u32).collect(),
            transpose: OnceLock::new(),
        };
        let mut out = CpuCsr {
            structure: Arc::new(structure),
            data: Arc::new(m.data().to_vec()),
            symmetric: false,
        };
        out.symmetric = rows == cols && out.is_symmetric();
        out
    }

    /// Whether every stored `(i, j, v)` has a stored `(j, i, v)`. With the
    /// column indices of every row strictly increasing (as sprs keeps them)
    /// each entry's mirror is found by a binary search in row `j`, so no
    /// transposed index is built (a symmetric matrix never needs one:
    /// `Sᵀ · X` is `S · X`); otherwise the transposed index is built and
    /// compared.
    fn is_symmetric(&self) -> bool {
        let s = &self.structure;
        let row = |i: usize| s.indptr[i]..s.indptr[i + 1];
        let sorted = |i: usize| s.indices[row(i)].windows(2).all(|w| w[0] < w[1]);
        let mirrored = |i: usize| {
            row(i).all(|p| {
                let j = s.indices[p] as usize;
                let r = row(j);
                let start = r.start;
                s.indices[r]
                    .binary_search(&(i as u32))
                    .is_ok_and(|q| self.data[start + q] == self.data[p])
            })
        };
        let check = |f: &(dyn Fn(usize) -> bool + Sync)| {
            if self.nnz() >= PAR_THRESHOLD {
                (0..s.rows).into_par_iter().all(f)
            } else {
                (0..s.rows).all(f)
            }
        };
        if check(&sorted) {
            return check(&mirrored);
        }
        let t = self.transpose_index();
        s.indptr == t.indptr
            && s.indices == t.indices
            && t.perm
                .iter()
                .enumerate()
                .all(|(q, &p)| self.data[q] == self.data[p as usize])
    }

    /// `(rows, cols)`.
    pub fn shape(&self) -> (usize, usize) {
        (self.structure.rows, self.structure.cols)
    }

    /// Number of stored entries.
    pub fn nnz(&self) -> usize {
        self.data.len()
    }

    /// Stored values, in storage order.
    pub fn data(&self) -> &[F] {
        &self.data
    }

    /// Same structure, new values (symmetry is not assumed).
    pub fn with_data(&self, data: Vec<F>) -> Self {
        debug_assert_eq!(data.len(), self.data.len());
        CpuCsr {
            structure: self.structure.clone(),
            data: Arc::new(data),
            symmetric: false,
        }
    }

    /// Dropout on the stored values (see `Backend::sparse_dropout`).
    pub fn dropout(&self, p: f64, seed: u64) -> Self {
        let scale = F::from_f64_lossy(1.0 / (1.0 - p));
        let pf = p as f32;
        let mut data = vec![F::zero(); self.nnz()];
        let src = &self.data[..];
        // Each stored entry's mask is a function of its position alone, so
        // any split gives the same values.
        super::parallel::for_each_part(&mut data, 1, |start, chunk| {
            rng::fill_mask(
                chunk,
                Some(&src[start..start + chunk.len()]),
                start as u32,
                seed,
                pf,
                scale,
            )
        });
        self.with_data(data)
    }

    fn transpose_index(&self) -> &TransposeIndex {
        let s = &self.structure;
        s.transpose.get_or_init(|| {
            let nnz = s.indices.len();
            let mut counts = vec![0usize; s.cols + 1];
            for &j in s.indices.iter() {
                counts[j as usize + 1] += 1;
            }
            for c in 0..s.cols {
                counts[c + 1] += counts[c];
            }
            let indptr = counts.clone();
            let mut next = counts;
            let mut indices = vec![0u32; nnz];
            let mut perm = vec![0u32; nnz];
            for i in 0..s.rows {
                for p in s.indptr[i]..s.indptr[i + 1] {
                    let j = s.indices[p] as usize;
                    let q = next[j];
                    next[j] += 1;
                    indices[q] = i as u32;
                    perm[q] = p as u32;
                }
            }
            TransposeIndex {
                indptr,
                indices,
                perm,
            }
        })
    }

    /// `S · x` (or `Sᵀ · x`), `x` row-major with `width` columns.
    pub fn spmm(&self, x: &[F], width: usize, transpose: bool) -> Vec<F> {
        let (rows, cols) = self.shape();
        if width == 0 {
            return Vec::new();
        }
        if !transpose || self.symmetric {
            return filled(rows * width, |out| {
                self.gather_rows(
                    out,
                    x,
                    width,
                    &self.structure.indptr,
                    &self.structure.indices,
                    None,
                )
            });
        }
        if cols * width <= SCATTER_MAX_OUTPUT {
            return self.scatter_transposed(x, width);
        }
        let t = self.transpose_index();
        filled(cols * width, |out| {
            self.gather_rows(out, x, width, &t.indptr, &t.indices, Some(&t.perm))
        })
    }

    /// `out[i] = Σ_p data[perm(p)] · x[indices[p]]` over `indptr[i]..indptr[i+1]`.
    fn gather_rows(
        &self,
        out: &mut [MaybeUninit<F>],
        x: &[F],
        width: usize,
        indptr: &[usize],
        indices: &[u32],
        perm: Option<&[u32]>,
    ) {
        let data = &self.data[..];
        let parallel = self.nnz() * width >= PAR_THRESHOLD;
        // `indices` hold column indices of the operand `x` (for the
        // transposed index, row indices of `S`): all below `operand_rows`.
        let operand_rows = if perm.is_some() {
            self.structure.rows
        } else {
            self.structure.cols
        };
        assert_eq!(
            x.len(),
            operand_rows * width,
            "dense operand does not match the sparse matrix"
        );
        assert_eq!(indptr.len(), out.len() / width + 1);
        assert_eq!(indices.len(), data.len());
        // SAFETY: both structures are valid CSR by construction (`from_csmat`
        // and `transpose_index`): `indptr` is non-decreasing and ends at
        // `nnz`, every index is below `operand_rows`, whose rows `x` holds
        // (asserted above), and every `perm` entry is below `nnz`.
        unsafe {
            match perm {
                None => gather_kernel(
                    out,
                    x,
                    width,
                    indptr,
                    indices,
                    |p| *data.get_unchecked(p),
                    parallel,
                ),
                Some(perm) => gather_kernel(
                    out,
                    x,
                    width,
                    indptr,
                    indices,
                    |p| *data.get_unchecked(*perm.get_unchecked(p) as usize),
                    parallel,
                ),
            }
        }
    }

    /// `Sᵀ · x` by scattering `S`'s rows into per-thread accumulators.
    fn scatter_transposed(&self, x: &[F], width: usize) -> Vec<F> {
        let s = &self.structure;
        let data = &self.data[..];
        let out_len = s.cols * width;
        let scatter = |range: std::ops::Range<usize>, acc: &mut [F]| {
            scatter_dispatch(range, acc, x, width, &s.indptr, &s.indices, data)
        };
        let threads = rayon::current_num_threads();
        if self.nnz() * width < PAR_THRESHOLD || threads == 1 {
            let mut out = vec![F::zero(); out_len];
            scatter(0..s.rows, &mut out);
            return out;
        }
        // Split rows into `threads` ranges of about equal stored entries.
        let nnz = self.nnz();
        let mut bounds = vec![0usize];
        for t in 1..threads {
            let target = nnz * t / threads;
            let r = s.indptr.partition_point(|&p| p < target).min(s.rows);
            bounds.push(r.max(*bounds.last().expect("non-empty")));
        }
        bounds.push(s.rows);
        // The calling thread takes part (`parallel.rs`): a rayon iterator
        // would put it to sleep until a worker had run the ranges.
        let ranges: Vec<(usize, usize)> = bounds.windows(2).map(|w| (w[0], w[1])).collect();
        let partials = super::reduce::map_blocks(ranges, |_, (lo, hi)| {
            let mut acc = vec![F::zero(); out_len];
            scatter(lo..hi, &mut acc);
            acc
        });
        let mut iter = partials.into_iter();
        let mut out = iter.next().expect("at least one partial");
        for part in iter {
            super::parallel::for_each_part(&mut out, 1, |start, o| {
                for (o, &p) in o.iter_mut().zip(&part[start..]) {
                    *o += p;
                }
            });
        }
        out
    }
}

/// Whether the CPU has AVX2 and FMA (detected once, at run time).
#[inline]
pub(super) fn has_avx2_fma() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        static DETECTED: OnceLock<bool> = OnceLock::new();
        *DETECTED
            .get_or_init(|| is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma"))
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// A vector of `len` entries, every one of which `fill` writes (the output
/// is never zero-filled first).
fn filled<F: Float>(len: usize, fill: impl FnOnce(&mut [MaybeUninit<F>])) -> Vec<F> {
    let mut v: Vec<F> = Vec::with_capacity(len);
    fill(&mut v.spare_capacity_mut()[..len]);
    // SAFETY: `fill` (a gather kernel) writes all `len` entries: every row
    // chunk of the output is visited and every column of it written.
    unsafe { v.set_len(len) };
    v
}

/// Columns `c..c + L` of output row `i`: `Σ_{p in a..b} value(p) · x[indices[p], c..c + L]`,
/// accumulated in `L` registers (`width - c` may be less than `L` only for
/// the last, partial block: then only that many lanes are read and written).
///
/// # Safety
/// `a <= b <= indices.len()`, every `indices[a..b]` is below
/// `x.len() / width`, and `value(p)` is valid for every `p` in `a..b`.
#[inline(always)]
// The storage position `p` feeds both `indices` and the `value` closure.
#[allow(clippy::too_many_arguments, clippy::needless_range_loop)]
unsafe fn gather_lanes<F: Float, V: Fn(usize) -> F, const L: usize, const FUSED: bool>(
    o: &mut [MaybeUninit<F>],
    x: &[F],
    width: usize,
    c: usize,
    a: usize,
    b: usize,
    indices: &[u32],
    value: &V,
) {
    let n = (width - c).min(L);
    let mut acc = [F::zero(); L];
    let fma = |v: F, s: F, acc: F| {
        if FUSED {
            v.mul_add(s, acc)
        } else {
            acc + v * s
        }
    };
    let row = |p: usize| -> &[F; L] {
        debug_assert!(p < indices.len());
        // SAFETY: `p < b <= indices.len()` and `indices[p] < x.len() / width`
        // (this function's contract), so `start + L <= x.len()` for a full
        // block (`c + L <= width`); the bounds checks cost a fifth of the
        // kernel's time on Cora's operator.
        unsafe {
            let j = *indices.get_unchecked(p) as usize;
            let start = j * width + c;
            debug_assert!(start + L <= x.len(), "column index {j} out of range");
            &*(x.as_ptr().add(start) as *const [F; L])
        }
    };
    if n == L && L <= 32 {
        // Narrow blocks: two independent accumulator sets hide the
        // multiply-add latency of the chain over a row's entries.
        let mut acc2 = [F::zero(); L];
        let mut p = a;
        while p + 1 < b {
            let (s0, s1) = (row(p), row(p + 1));
            let (v0, v1) = (value(p), value(p + 1));
            for l in 0..L {
                acc[l] = fma(v0, s0[l], acc[l]);
                acc2[l] = fma(v1, s1[l], acc2[l]);
            }
            p += 2;
        }
        if p < b {
            let (s0, v0) = (row(p), value(p));
            for l in 0..L {
                acc[l] = fma(v0, s0[l], acc[l]);
            }
        }
        for l in 0..L {
            acc[l] += acc2[l];
        }
    } else if n == L {
        for p in a..b {
            prefetch_row::<F, L>(x, width, c, indices, p + PREFETCH_AHEAD);
            let (src, v) = (row(p), value(p));
            for l in 0..L {
                acc[l] = fma(v, src[l], acc[l]);
            }
        }
    } else {
        for p in a..b {
            let j = indices[p] as usize;
            let src = &x[j * width + c..j * width + c + n];
            let v = value(p);
            for (acc, &s) in acc.iter_mut().zip(src) {
                *acc = fma(v, s, *acc);
            }
        }
    }
    for (o, &v) in o[c..c + n].iter_mut().zip(&acc) {
        o.write(v);
    }
}

/// Stored entries ahead of the current one whose operand rows
/// [`prefetch_row`] requests: rows of wide blocks (64 lanes, four cache lines
/// of `f32`) do not stay in a core's cache and neighbours are random.
const PREFETCH_AHEAD: usize = 4;

/// Asks the CPU to start loading columns `c..c + L` of the operand row of
/// stored entry `p` (if there is one); a hint only, never a fault.
#[inline(always)]
fn prefetch_row<F: Float, const L: usize>(
    x: &[F],
    width: usize,
    c: usize,
    indices: &[u32],
    p: usize,
) {
    #[cfg(target_arch = "x86_64")]
    if let Some(&j) = indices.get(p) {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        let base = x.as_ptr().wrapping_add(j as usize * width + c) as *const i8;
        let bytes = L * std::mem::size_of::<F>();
        let mut off = 0;
        while off < bytes {
            // SAFETY: a prefetch never dereferences or faults; the address
            // is only computed (`wrapping_add`), never read from.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(base.wrapping_add(off)) };
            off += 64;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (x, width, c, indices, p);
}

/// Rows `first..` of `out[i] = Σ_{p in row i} value(p) · x[indices[p]]`:
/// columns in register blocks of 64 (one pass over a row's neighbours reads
/// four adjacent cache lines of each), then 16, then a partial block.
// The storage position `p` feeds both `indices` and the `value` closure.
///
/// # Safety
/// `indptr` is non-decreasing with `indptr[first + rows] <= indices.len()`
/// for the chunk's `rows`, every stored index is below `x.len() / width`, and
/// `value(p)` is valid for every stored position `p`.
#[allow(clippy::needless_range_loop)]
#[inline(always)]
unsafe fn gather_block<F: Float, V: Fn(usize) -> F, const FUSED: bool>(
    first: usize,
    chunk: &mut [MaybeUninit<F>],
    x: &[F],
    width: usize,
    indptr: &[usize],
    indices: &[u32],
    value: &V,
) {
    let wide = width / 64 * 64;
    for (k, o) in chunk.chunks_exact_mut(width).enumerate() {
        let i = first + k;
        let (a, b) = (indptr[i], indptr[i + 1]);
        debug_assert!(a <= b && b <= indices.len());
        let mut c = 0;
        // SAFETY: `a..b` is a row's storage range (this function's contract).
        unsafe {
            while c < wide {
                gather_lanes::<F, V, 64, FUSED>(o, x, width, c, a, b, indices, value);
                c += 64;
            }
            while c < width {
                gather_lanes::<F, V, 16, FUSED>(o, x, width, c, a, b, indices, value);
                c += 16;
            }
        }
    }
}

/// [`gather_block`] compiled for AVX2 + FMA.
///
/// # Safety
/// The CPU supports AVX2 and FMA; otherwise as [`gather_block`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn gather_block_avx2<F: Float, V: Fn(usize) -> F>(
    first: usize,
    chunk: &mut [MaybeUninit<F>],
    x: &[F],
    width: usize,
    indptr: &[usize],
    indices: &[u32],
    value: &V,
) {
    // SAFETY: forwarded from the caller.
    unsafe { gather_block::<F, V, true>(first, chunk, x, width, indptr, indices, value) }
}

/// Row-wise gather kernel: `out[i] = Σ_{p in row i} value(p) · x[indices[p]]`,
/// in blocks of rows over rayon when `parallel`, with AVX2/FMA when available.
/// Writes every entry of `out`.
///
/// # Safety
/// `indptr` (one entry per output row plus one) is non-decreasing and ends
/// at most at `indices.len()`, every stored index is below `x.len() / width`,
/// and `value(p)` is valid for every stored position `p`.
unsafe fn gather_kernel<F: Float, V: Fn(usize) -> F + Sync>(
    out: &mut [MaybeUninit<F>],
    x: &[F],
    width: usize,
    indptr: &[usize],
    indices: &[u32],
    value: V,
    parallel: bool,
) {
    let rows = out.len() / width;
    let fast = has_avx2_fma();
    let block = |first: usize, chunk: &mut [MaybeUninit<F>]| {
        #[cfg(target_arch = "x86_64")]
        if fast {
            // SAFETY: the CPU supports AVX2 and FMA (checked at run time);
            // the structure is valid (this function's contract).
            unsafe { gather_block_avx2(first, chunk, x, width, indptr, indices, &value) };
            return;
        }
        let _ = fast;
        // SAFETY: as above.
        unsafe { gather_block::<F, V, false>(first, chunk, x, width, indptr, indices, &value) }
    };
    if parallel {
        // Blocks of rows keep scheduling overhead negligible.
        let rows_per_task = (rows / (4 * rayon::current_num_threads())).max(64);
        super::parallel::for_each_chunk(out, rows_per_task * width, |c, chunk| {
            block(c * rows_per_task, chunk)
        });
    } else {
        block(0, out);
    }
}

/// Rows `range` of `S` scattered into `acc`: `acc[j] += S[i, j] · x[i]`.
#[inline(always)]
fn scatter_block<F: Float, const FUSED: bool>(
    range: std::ops::Range<usize>,
    acc: &mut [F],
    x: &[F],
    width: usize,
    indptr: &[usize],
    indices: &[u32],
    data: &[F],
) {
    const LANES: usize = 16;
    let full = width / LANES * LANES;
    for i in range {
        let (a, b) = (indptr[i], indptr[i + 1]);
        // Blocks of 16 columns of `x[i]` stay in registers.
        for c in (0..full).step_by(LANES) {
            let xi: [F; LANES] = x[i * width + c..i * width + c + LANES]
                .try_into()
                .expect("16 lanes");
            for (&j, &v) in indices[a..b].iter().zip(&data[a..b]) {
                let j = j as usize;
                let o: &mut [F; LANES] = (&mut acc[j * width + c..j * width + c + LANES])
                    .try_into()
                    .expect("16 lanes");
                for l in 0..LANES {
                    o[l] = if FUSED {
                        v.mul_add(xi[l], o[l])
                    } else {
                        o[l] + v * xi[l]
                    };
                }
            }
        }
        if full < width {
            let xi = &x[i * width + full..(i + 1) * width];
            for (&j, &v) in indices[a..b].iter().zip(&data[a..b]) {
                let j = j as usize;
                axpy::<F, FUSED>(&mut acc[j * width + full..(j + 1) * width], v, xi);
            }
        }
    }
}

/// [`scatter_block`] compiled for AVX2 + FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn scatter_block_avx2<F: Float>(
    range: std::ops::Range<usize>,
    acc: &mut [F],
    x: &[F],
    width: usize,
    indptr: &[usize],
    indices: &[u32],
    data: &[F],
) {
    scatter_block::<F, true>(range, acc, x, width, indptr, indices, data)
}

fn scatter_dispatch<F: Float>(
    range: std::ops::Range<usize>,
    acc: &mut [F],
    x: &[F],
    width: usize,
    indptr: &[usize],
    indices: &[u32],
    data: &[F],
) {
    #[cfg(target_arch = "x86_64")]
    if has_avx2_fma() {
        // SAFETY: the CPU supports AVX2 and FMA (checked at run time).
        unsafe { scatter_block_avx2(range, acc, x, width, indptr, indices, data) };
        return;
    }
    scatter_block::<F, false>(range, acc, x, width, indptr, indices, data)
}

/// `o += v * src`; with `FUSED`, as fused multiply-adds (only used where
/// the CPU has FMA, else `mul_add` would be a slow library call).
#[inline(always)]
fn axpy<F: Float, const FUSED: bool>(o: &mut [F], v: F, src: &[F]) {
    if FUSED {
        for (o, &s) in o.iter_mut().zip(src) {
            *o = v.mul_add(s, *o);
        }
    } else {
        for (o, &s) in o.iter_mut().zip(src) {
            *o += v * s;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::Array2;
    use rand::{Rng, SeedableRng, rngs::StdRng};

    fn random_sparse(rng: &mut StdRng, r: usize, c: usize, density: f64) -> Array2<f64> {
        Array2::from_shape_fn((r, c), |_| {
            if rng.random_bool(density) {
                rng.random_range(-1.0..1.0)
            } else {
                0.0
            }
        })
    }

    fn max_err(a: &[f64], b: &[f64]) -> f64 {
        a.iter()
            .zip(b)
            .map(|(x, y)| (x - y).abs())
            .fold(0.0, f64::max)
    }

    #[test]
    fn spmm_and_transpose_match_dense() {
        // 3 x 4 matrix with an empty row and an empty column.
        let dense = ndarray::arr2(&[
            [1.0, 0.0, 2.0, 0.0],
            [0.0, 0.0, 0.0, 0.0],
            [0.0, -3.0, 4.0, 0.0],
        ]);
        let m = CsMat::csr_from_dense(dense.view(), 0.0);
        let s = CpuCsr::from_csmat(&m);
        let x4 = Array2::from_shape_fn((4, 2), |(i, j)| (i * 2 + j) as f64 + 0.5);
        let y = s.spmm(x4.as_slice().unwrap(), 2, false);
        assert_eq!(y, dense.dot(&x4).into_raw_vec_and_offset().0);
        let x3 = Array2::from_shape_fn((3, 2), |(i, j)| (i as f64) - (j as f64) * 0.25);
        let yt = s.spmm(x3.as_slice().unwrap(), 2, true);
        assert_eq!(yt, dense.t().dot(&x3).into_raw_vec_and_offset().0);
        let s2 = s.with_data(vec![2.0, 4.0, -6.0, 8.0]);
        let yt2 = s2.spmm(x3.as_slice().unwrap(), 2, true);
        let expect: Vec<f64> = yt.iter().map(|v| 2.0 * v).collect();
        assert_eq!(yt2, expect);
    }

    #[test]
    fn every_kernel_path_matches_dense_on_large_inputs() {
        let mut rng = StdRng::seed_from_u64(9);
        // Large enough for the parallel paths; wide enough output for the
        // gather-transpose path; small for the scatter path.
        for &(r, c, w) in &[(3000, 40, 17), (400, 3000, 200), (50, 30, 3)] {
            let dense = random_sparse(&mut rng, r, c, 0.05);
            let s = CpuCsr::from_csmat(&CsMat::csr_from_dense(dense.view(), 0.0));
            assert!(!s.symmetric);
            let x = Array2::from_shape_fn((c, w), |_| rng.random_range(-1.0..1.0));
            let y = s.spmm(x.as_slice().unwrap(), w, false);
            assert!(max_err(&y, dense.dot(&x).as_slice().unwrap()) < 1e-12);
            let xt = Array2::from_shape_fn((r, w), |_| rng.random_range(-1.0..1.0));
            let yt = s.spmm(xt.as_slice().unwrap(), w, true);
            assert!(
                max_err(
                    &yt,
                    dense.t().dot(&xt).as_standard_layout().as_slice().unwrap()
                ) < 1e-12
            );
        }
    }

    #[test]
    fn symmetric_matrices_are_detected_and_reuse_the_forward_kernel() {
        let mut rng = StdRng::seed_from_u64(10);
        let a = random_sparse(&mut rng, 300, 300, 0.05);
        let sym = &a + &a.t();
        let s = CpuCsr::from_csmat(&CsMat::csr_from_dense(sym.view(), 0.0));
        assert!(s.symmetric);
        let x = Array2::from_shape_fn((300, 5), |_| rng.random_range(-1.0..1.0));
        let yt = s.spmm(x.as_slice().unwrap(), 5, true);
        assert!(max_err(&yt, sym.t().dot(&x).as_slice().unwrap()) < 1e-12);
        // Found without building the transposed index, and none is built
        // for the transposed product either.
        assert!(s.structure.transpose.get().is_none());
        // Same structure, non-symmetric values (an entry off the diagonal
        // changed on one side only): not symmetric, as a new matrix too.
        let mut vals = s.data().to_vec();
        let (i, p) = (0..300)
            .find_map(|i| {
                (s.structure.indptr[i]..s.structure.indptr[i + 1])
                    .find(|&p| s.structure.indices[p] as usize != i)
                    .map(|p| (i, p))
            })
            .unwrap();
        let j = s.structure.indices[p] as usize;
        vals[p] += 1.0;
        assert!(!s.with_data(vals.clone()).symmetric);
        let mut changed = sym.clone();
        changed[[i, j]] += 1.0;
        let c = CpuCsr::from_csmat(&CsMat::csr_from_dense(changed.view(), 0.0));
        assert!(!c.symmetric);
        // A mirror missing from the structure: not symmetric.
        let mut one_sided = sym.clone();
        one_sided[[i, j]] = 0.0;
        assert!(!CpuCsr::from_csmat(&CsMat::csr_from_dense(one_sided.view(), 0.0)).symmetric);
        // Both sides changed alike: symmetric again; and large enough for
        // the parallel check.
        changed[[j, i]] += 1.0;
        assert!(CpuCsr::from_csmat(&CsMat::csr_from_dense(changed.view(), 0.0)).symmetric);
        let big = random_sparse(&mut rng, 3000, 3000, 0.01);
        let big_sym = &big + &big.t();
        let b = CpuCsr::from_csmat(&CsMat::csr_from_dense(big_sym.view(), 0.0));
        assert!(b.nnz() >= PAR_THRESHOLD && b.symmetric);
        let mut big_asym = big_sym.clone();
        let (bi, bj) = (0..3000)
            .flat_map(|i| (0..3000).map(move |j| (i, j)))
            .find(|&(i, j)| i != j && big_sym[[i, j]] != 0.0)
            .unwrap();
        big_asym[[bi, bj]] *= 2.0;
        assert!(!CpuCsr::from_csmat(&CsMat::csr_from_dense(big_asym.view(), 0.0)).symmetric);
    }

    #[test]
    fn dropout_keeps_structure_and_scales_survivors() {
        let mut rng = StdRng::seed_from_u64(11);
        let a = random_sparse(&mut rng, 200, 100, 0.3);
        let s = CpuCsr::from_csmat(&CsMat::csr_from_dense(a.view(), 0.0));
        let d = s.dropout(0.25, 5);
        let mut kept = 0;
        for (i, (&v, &o)) in d.data().iter().zip(s.data()).enumerate() {
            if rng::keep(5, i as u32, 0.25) {
                assert!((v - o / 0.75).abs() < 1e-15);
                kept += 1;
            } else {
                assert_eq!(v, 0.0);
            }
        }
        let frac = kept as f64 / s.nnz() as f64;
        assert!((frac - 0.75).abs() < 0.03, "kept fraction {frac}");
    }
}
