//! Dense products of the sizes a GNN layer makes (`n x 64` by `64 x 64`)
//! without packing: register blocks of 6 output rows read straight from a
//! row-major `a` and a row-major `b` small enough to stay in cache.
//!
//! Every output entry is one chain of fused multiply-adds over `k` in
//! order, from zero, which is what `matrixmultiply`'s kernel computes when
//! `k` fits one of its depth blocks (256): the products are the same to
//! the bit (`tests` below checks this against `general_mat_mul`). Larger
//! or strided operands go to `matrixmultiply`.

use std::mem::MaybeUninit;

use ndarray::ArrayView2;

use crate::float::Float;

/// Output rows of a register block.
const ROWS: usize = 6;

/// The deepest `k` taken here: `matrixmultiply`'s depth block, within
/// which it, too, sums over `k` in one chain.
const MAX_DEPTH: usize = 256;

/// The largest `b` (entries) taken here: 64 KiB of `f32`, kept in L1/L2
/// while every row block of `a` passes over it.
const MAX_B: usize = 1 << 14;

/// Whether [`gemm_into`] takes `a · b`: a row-major `a`, a row-major `b`
/// of at most [`MAX_B`] entries, `k <= MAX_DEPTH`, on a CPU with AVX2 and
/// FMA.
pub(super) fn applies<F: Float>(a: &ArrayView2<'_, F>, b: &ArrayView2<'_, F>) -> bool {
    a.is_standard_layout() && takes(b)
}

/// Whether [`gemm_into`] takes `b` as the right operand of a product with
/// any row-major `a` of `b.nrows()` columns.
pub(super) fn takes<F: Float>(b: &ArrayView2<'_, F>) -> bool {
    let (k, n) = b.dim();
    b.is_standard_layout() && takes_dims(k, n)
}

/// Whether a row-major `k x n` right operand would be taken (so that a
/// transposed one is worth copying row-major).
pub(super) fn takes_dims(k: usize, n: usize) -> bool {
    k <= MAX_DEPTH && k * n <= MAX_B && super::sparse::has_avx2_fma()
}

/// `out = a · b` for the row-major `m x k` `a` and `k x n` `b`, `out` the
/// row-major `m x n` result (every entry written, so it may be
/// uninitialised before).
///
/// # Panics
/// If the operands are not as [`applies`] requires or `out` is not `m x n`.
pub(super) fn gemm_into<F: Float>(
    a: ArrayView2<'_, F>,
    b: ArrayView2<'_, F>,
    out: &mut [MaybeUninit<F>],
) {
    assert!(applies(&a, &b), "gemm_into: operands it does not take");
    let (m, k) = a.dim();
    let n = b.ncols();
    assert_eq!(b.nrows(), k, "gemm_into: inner dimensions");
    assert_eq!(out.len(), m * n, "gemm_into: output size");
    let (a, b) = (
        a.to_slice().expect("standard layout"),
        b.to_slice().expect("standard layout"),
    );
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: AVX2 and FMA are present (`applies`); the slices have
        // the sizes checked above.
        if size_of::<F>() == 4 {
            unsafe { gemm_avx2::<F, 16, 8>(a, b, out, m, k, n) }
        } else {
            unsafe { gemm_avx2::<F, 8, 4>(a, b, out, m, k, n) }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    unreachable!("`applies` is false without AVX2");
}

/// One block of `R x C` outputs: `c[r][j] = Σ_p a[r][p] · b[p][j]`, one
/// fused chain per entry, `p` in order.
///
/// # Safety
/// `a` has `R` rows of `k` entries at stride `lda`, `b` has `k` rows of
/// `C` entries at stride `ldb`, `c` has `R` rows of `C` writable entries at
/// stride `ldc`.
#[inline(always)]
#[allow(clippy::too_many_arguments, clippy::needless_range_loop)]
unsafe fn block<F: Float, const R: usize, const C: usize>(
    a: *const F,
    lda: usize,
    b: *const F,
    ldb: usize,
    c: *mut F,
    ldc: usize,
    k: usize,
) {
    let mut acc = [[F::zero(); C]; R];
    for p in 0..k {
        // SAFETY: row `p < k` of `b`, `C` entries (the caller's contract).
        let brow = unsafe { &*(b.add(p * ldb) as *const [F; C]) };
        for r in 0..R {
            // SAFETY: entry `p < k` of row `r < R` of `a`.
            let av = unsafe { *a.add(r * lda + p) };
            for j in 0..C {
                acc[r][j] = av.mul_add(brow[j], acc[r][j]);
            }
        }
    }
    for r in 0..R {
        for j in 0..C {
            // SAFETY: entry `j < C` of row `r < R` of `c`.
            unsafe { *c.add(r * ldc + j) = acc[r][j] };
        }
    }
}

/// Row blocks of [`ROWS`] (then single rows), column strips of `W`, `H`
/// (half of `W`, then single columns), compiled for AVX2 + FMA.
///
/// # Safety
/// The CPU has AVX2 and FMA; `a` is `m x k`, `b` is `k x n`, `out` is
/// `m x n`, all row-major.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn gemm_avx2<F: Float, const W: usize, const H: usize>(
    a: &[F],
    b: &[F],
    out: &mut [MaybeUninit<F>],
    m: usize,
    k: usize,
    n: usize,
) {
    debug_assert!(a.len() == m * k && b.len() == k * n && out.len() == m * n);
    // Written through raw pointers only, entry by entry.
    let (ap, bp, cp) = (a.as_ptr(), b.as_ptr(), out.as_mut_ptr() as *mut F);
    let mut i = 0;
    while i < m {
        let rows = if m - i >= ROWS { ROWS } else { 1 };
        let mut j = 0;
        while j < n {
            let left = n - j;
            // SAFETY: rows `i..i + rows <= m`, columns `j..j + width <= n`
            // of row-major arrays of the stated sizes.
            unsafe {
                let (a0, b0, c0) = (ap.add(i * k), bp.add(j), cp.add(i * n + j));
                let width = match (rows, left) {
                    (ROWS, l) if l >= W => {
                        block::<F, ROWS, W>(a0, k, b0, n, c0, n, k);
                        W
                    }
                    (ROWS, l) if l >= H => {
                        block::<F, ROWS, H>(a0, k, b0, n, c0, n, k);
                        H
                    }
                    (ROWS, _) => {
                        block::<F, ROWS, 1>(a0, k, b0, n, c0, n, k);
                        1
                    }
                    (_, l) if l >= W => {
                        block::<F, 1, W>(a0, k, b0, n, c0, n, k);
                        W
                    }
                    (_, l) if l >= H => {
                        block::<F, 1, H>(a0, k, b0, n, c0, n, k);
                        H
                    }
                    _ => {
                        block::<F, 1, 1>(a0, k, b0, n, c0, n, k);
                        1
                    }
                };
                j += width;
            }
        }
        i += rows;
    }
}

#[cfg(test)]
mod tests {
    use ndarray::{Array2, linalg::general_mat_mul};
    use rand::{Rng, SeedableRng, rngs::StdRng};

    use super::*;

    fn random<F: Float>(rng: &mut StdRng, r: usize, c: usize) -> Array2<F> {
        Array2::from_shape_fn((r, c), |_| {
            F::from_f64(rng.random_range(-1.0..1.0)).unwrap()
        })
    }

    /// The same bits as `general_mat_mul` (`matrixmultiply`) for every
    /// shape this kernel takes: full and partial row blocks and column
    /// strips, `k` from 1 to 256, and within 1e-5 of an `f64` product.
    fn same_as_matrixmultiply<F: Float>() {
        if !crate::backend::cpu::sparse::has_avx2_fma() {
            eprintln!("skipped: the CPU has no AVX2 + FMA, the kernel is not used");
            return;
        }
        let mut rng = StdRng::seed_from_u64(11);
        let shapes = [
            (1, 1, 1),
            (6, 64, 64),
            (7, 13, 21),
            (1150, 64, 64),
            (640, 64, 64),
            (5, 256, 9),
            (13, 1, 17),
            (64, 64, 10),
            (100, 100, 100),
            (3, 200, 40),
        ];
        for (m, k, n) in shapes {
            let a = random::<F>(&mut rng, m, k);
            let b = random::<F>(&mut rng, k, n);
            assert!(applies(&a.view(), &b.view()), "{m} x {k} x {n}");
            let mut want = Array2::<F>::zeros((m, n));
            general_mat_mul(F::one(), &a, &b, F::zero(), &mut want);
            // Filled with NaN: every entry must be written.
            let mut got = vec![MaybeUninit::new(F::nan()); m * n];
            gemm_into(a.view(), b.view(), &mut got);
            // SAFETY: every entry was initialised (with NaN, then the product).
            let got: Vec<F> = got
                .into_iter()
                .map(|v| unsafe { v.assume_init() })
                .collect();
            for (idx, (g, w)) in got.iter().zip(want.iter()).enumerate() {
                assert!(
                    g.to_f64().unwrap().to_bits() == w.to_f64().unwrap().to_bits(),
                    "{m} x {k} x {n}, entry {idx}: {g:?} against {w:?}"
                );
            }
            let exact = a
                .mapv(|v| v.to_f64().unwrap())
                .dot(&b.mapv(|v| v.to_f64().unwrap()));
            for (g, e) in got.iter().zip(exact.iter()) {
                assert!((g.to_f64().unwrap() - e).abs() <= 1e-5 * (1.0 + e.abs()));
            }
        }
    }

    #[test]
    fn f32_products_are_matrixmultiplys() {
        same_as_matrixmultiply::<f32>();
    }

    #[test]
    fn f64_products_are_matrixmultiplys() {
        same_as_matrixmultiply::<f64>();
    }

    #[test]
    fn strided_deep_or_wide_operands_are_not_taken() {
        let a = Array2::<f32>::zeros((10, 300));
        let b = Array2::<f32>::zeros((300, 8));
        assert!(!applies(&a.view(), &b.view()), "k above 256");
        let a = Array2::<f32>::zeros((10, 64));
        let b = Array2::<f32>::zeros((8, 64));
        assert!(!applies(&a.view(), &b.t()), "a transposed b");
        assert!(!applies(&a.t(), &a.view()), "a transposed a");
        let b = Array2::<f32>::zeros((64, 512));
        assert!(!applies(&a.view(), &b.view()), "b above 2^14 entries");
    }
}
