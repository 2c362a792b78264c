//! Sparse kernels: `S · X` and `Sᵀ · X` against dense `f64` products (CSR
//! and CSC inputs, empty rows and columns, rectangular shapes, several
//! widths, a matrix with five million stored entries), and dropout on the
//! stored values against the shared counter hash.

use hdgcn::backend::{Backend, rng};
use ndarray::Array2;
use rand::{Rng, SeedableRng, rngs::StdRng};
use sprs::{CsMat, TriMat};

use crate::{assert_close, down, r32, rand_array, up};

backend_tests!(
    spmm_matches_dense_both_ways,
    spmm_accepts_csc_input,
    spmm_of_an_empty_matrix_is_zero,
    symmetric_matrices_and_their_dropout,
    sparse_dropout_is_the_shared_counter_hash,
    spmm_with_five_million_stored_entries,
);

/// A `rows x cols` matrix (entries rounded to `f32`) with about `density`
/// of its entries stored; rows 0, rows / 2 and the last, and column
/// cols / 3, are empty.
fn random_sparse(rows: usize, cols: usize, density: f64, seed: u64) -> Array2<f64> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut a = Array2::from_shape_fn((rows, cols), |_| {
        if rng.random_bool(density) {
            f64::from(rng.random_range(-1.0f32..1.0))
        } else {
            0.0
        }
    });
    // Empty rows and columns (first, last and one in the middle).
    for r in [0, rows / 2, rows - 1] {
        a.row_mut(r).fill(0.0);
    }
    a.column_mut(cols / 3).fill(0.0);
    a
}

fn csr(dense: &Array2<f64>) -> CsMat<f32> {
    CsMat::csr_from_dense(dense.mapv(|v| v as f32).view(), 0.0)
}

/// Both products of `s` (holding `dense`) with random inputs of width `w`.
fn check_products<B: Backend<Elem = f32>>(
    b: &B,
    what: &str,
    s: &B::Sparse,
    dense: &Array2<f64>,
    w: usize,
) {
    let (rows, cols) = dense.dim();
    assert_eq!(b.sparse_shape(s), (rows, cols), "{what}: shape");
    let x = r32(&rand_array(cols, w, 7 * w as u64 + 1, -1.0, 1.0));
    let got = down(b, &b.spmm(s, &up(b, &x), false));
    assert_close(&format!("{what}: S·X width {w}"), &got, &dense.dot(&x));
    let xt = r32(&rand_array(rows, w, 7 * w as u64 + 2, -1.0, 1.0));
    let got = down(b, &b.spmm(s, &up(b, &xt), true));
    assert_close(
        &format!("{what}: Sᵀ·X width {w}"),
        &got,
        &dense.t().dot(&xt),
    );
}

const WIDTHS: [usize; 6] = [1, 3, 4, 5, 16, 64];

fn spmm_matches_dense_both_ways<B: Backend<Elem = f32>>(b: &B) {
    for (k, &(rows, cols, density)) in [
        (37, 37, 0.2),
        (23, 61, 0.15),
        (61, 23, 0.3),
        (300, 200, 0.05),
    ]
    .iter()
    .enumerate()
    {
        let dense = random_sparse(rows, cols, density, 100 + k as u64);
        let m = csr(&dense);
        let s = b.sparse_from_csmat(&m);
        assert_eq!(b.sparse_nnz(&s), m.nnz());
        for w in WIDTHS {
            check_products(b, &format!("{rows}x{cols}"), &s, &dense, w);
        }
    }
}

fn spmm_accepts_csc_input<B: Backend<Elem = f32>>(b: &B) {
    let dense = random_sparse(29, 41, 0.2, 7);
    let m = CsMat::csc_from_dense(dense.mapv(|v| v as f32).view(), 0.0);
    assert!(m.is_csc());
    let s = b.sparse_from_csmat(&m);
    assert_eq!(b.sparse_nnz(&s), m.nnz());
    for w in [1, 3, 16] {
        check_products(b, "CSC", &s, &dense, w);
    }
    // A matrix assembled from triplets, converted to CSC.
    let mut tri = TriMat::new((5, 4));
    for &(i, j, v) in &[(0, 3, 1.5f32), (4, 0, -2.0), (2, 2, 0.25), (0, 0, 3.0)] {
        tri.add_triplet(i, j, v);
    }
    let m = tri.to_csc::<usize>();
    let s = b.sparse_from_csmat(&m);
    let dense = m.to_dense().mapv(f64::from);
    check_products(b, "triplets", &s, &dense, 2);
}

fn spmm_of_an_empty_matrix_is_zero<B: Backend<Elem = f32>>(b: &B) {
    // No stored entries: products are zero (every output entry is written).
    let m = CsMat::<f32>::zero((6, 9));
    let s = b.sparse_from_csmat(&m);
    assert_eq!(b.sparse_nnz(&s), 0);
    let x = r32(&rand_array(9, 5, 1, -1.0, 1.0));
    assert_eq!(
        down(b, &b.spmm(&s, &up(b, &x), false)),
        Array2::<f64>::zeros((6, 5))
    );
    let xt = r32(&rand_array(6, 3, 2, -1.0, 1.0));
    assert_eq!(
        down(b, &b.spmm(&s, &up(b, &xt), true)),
        Array2::<f64>::zeros((9, 3))
    );
    // Zero-width and zero-row operands.
    let none = b.spmm(&s, &b.full(9, 0, 0.0), false);
    assert_eq!(b.shape(&none), (6, 0));
    let m = CsMat::<f32>::zero((0, 4));
    let s = b.sparse_from_csmat(&m);
    let out = b.spmm(&s, &b.full(4, 2, 1.0), false);
    assert_eq!(b.shape(&out), (0, 2));
    let out = b.spmm(&s, &b.full(0, 2, 1.0), true);
    assert_eq!(down(b, &out), Array2::<f64>::zeros((4, 2)));
}

/// A symmetric operator (whose transpose a backend may share with it):
/// products both ways, and dropout, which breaks the symmetry.
fn symmetric_matrices_and_their_dropout<B: Backend<Elem = f32>>(b: &B) {
    let a = random_sparse(40, 40, 0.1, 31);
    let sym = &a + &a.t();
    let m = csr(&sym);
    let s = b.sparse_from_csmat(&m);
    for w in [1, 6] {
        check_products(b, "symmetric", &s, &sym, w);
    }
    let (p, seed) = (0.5, 77);
    let d = b.sparse_dropout(&s, p, seed);
    let want = dropped(&m, p, seed);
    assert_ne!(want, want.t(), "the dropped matrix is no longer symmetric");
    for w in [1, 6] {
        check_products(b, "symmetric after dropout", &d, &want, w);
    }
    // The source is untouched, in both directions.
    check_products(b, "symmetric source", &s, &sym, 3);
}

/// The matrix `dense` after dropout: stored entry `i` (in CSR order) kept and
/// scaled when `rng::keep(seed, i, p)`, else zero.
fn dropped(m: &CsMat<f32>, p: f64, seed: u64) -> Array2<f64> {
    let csr = m.to_csr();
    let scale = (1.0 / (1.0 - p)) as f32;
    let mut out = Array2::zeros(csr.shape());
    for (i, (&v, (r, c))) in csr.iter().enumerate() {
        if rng::keep(seed, i as u32, p as f32) {
            out[[r, c]] = f64::from(v * scale);
        }
    }
    out
}

fn sparse_dropout_is_the_shared_counter_hash<B: Backend<Elem = f32>>(b: &B) {
    let (p, seed) = (0.35, 0xfeed_0123_4567_89ab_u64);
    let dense = random_sparse(47, 33, 0.4, 21);
    for csc in [false, true] {
        let m = if csc {
            CsMat::csc_from_dense(dense.mapv(|v| v as f32).view(), 0.0)
        } else {
            csr(&dense)
        };
        let s = b.sparse_from_csmat(&m);
        let d = b.sparse_dropout(&s, p, seed);
        assert_eq!(b.sparse_nnz(&d), b.sparse_nnz(&s));
        assert_eq!(b.sparse_shape(&d), (47, 33));
        let want = dropped(&m, p, seed);
        // The product with an identity reads the stored values back.
        let eye_c = up(b, &Array2::eye(33));
        let eye_r = up(b, &Array2::eye(47));
        let got = down(b, &b.spmm(&d, &eye_c, false));
        assert_close(&format!("dropout (csc: {csc})"), &got, &want);
        // Dropped entries are exactly zero.
        for ((g, w), orig) in got.iter().zip(want.iter()).zip(dense.iter()) {
            assert_eq!(*g == 0.0, *w == 0.0 || *orig == 0.0);
        }
        let got_t = down(b, &b.spmm(&d, &eye_r, true));
        assert_close(
            &format!("dropout, Sᵀ (csc: {csc})"),
            &got_t,
            &want.t().to_owned(),
        );
        // The source keeps its values.
        assert_close(
            "source after dropout",
            &down(b, &b.spmm(&s, &eye_c, false)),
            &dense,
        );
        // Through general products in both directions.
        let x = r32(&rand_array(33, 5, 3, -1.0, 1.0));
        assert_close(
            "dropout S·X",
            &down(b, &b.spmm(&d, &up(b, &x), false)),
            &want.dot(&x),
        );
        let xt = r32(&rand_array(47, 5, 4, -1.0, 1.0));
        assert_close(
            "dropout Sᵀ·X",
            &down(b, &b.spmm(&d, &up(b, &xt), true)),
            &want.t().dot(&xt),
        );
        // A second draw with another seed differs, p = 0 keeps everything.
        let other = down(
            b,
            &b.spmm(&b.sparse_dropout(&s, p, seed + 1), &eye_c, false),
        );
        assert_ne!(other, got);
        let all = down(b, &b.spmm(&b.sparse_dropout(&s, 0.0, seed), &eye_c, false));
        assert_close("p = 0", &all, &dense);
    }
}

/// A cheap deterministic stream (SplitMix64) for the large case: debug
/// builds would spend most of the test drawing from `StdRng`.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `[-1, 1)`, exactly representable in `f32`.
    fn sym(&mut self) -> f32 {
        (self.next() >> 40) as f32 * (2.0 / 16_777_216.0) - 1.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// 500,000 rows with 10 stored entries each (random columns) times a thin
/// dense matrix, both ways; a sample of output rows checked on the host.
fn spmm_with_five_million_stored_entries<B: Backend<Elem = f32>>(b: &B) {
    let (rows, cols, per_row, w) = (500_000usize, 300_000usize, 10usize, 4usize);
    let mut rng = SplitMix(5);
    let stripe = cols / per_row;
    let mut indptr = Vec::with_capacity(rows + 1);
    let mut indices = Vec::with_capacity(rows * per_row);
    let mut data = Vec::with_capacity(rows * per_row);
    indptr.push(0);
    for _ in 0..rows {
        // One column per stripe keeps each row's columns sorted and distinct.
        for k in 0..per_row {
            indices.push(k * stripe + rng.below(stripe));
            data.push(rng.sym());
        }
        indptr.push(indices.len());
    }
    let m = CsMat::new((rows, cols), indptr, indices, data);
    assert!(m.nnz() >= 5_000_000);
    let s = b.sparse_from_csmat(&m);
    let x = Array2::from_shape_fn((cols, w), |_| rng.sym());
    let xt = Array2::from_shape_fn((rows, w), |_| rng.sym());
    let y = b.download(&b.spmm(&s, &b.upload(x.view()), false));
    let yt = b.download(&b.spmm(&s, &b.upload(xt.view()), true));
    assert_eq!(y.dim(), (rows, w));
    assert_eq!(yt.dim(), (cols, w));

    // S · X on sampled rows.
    let sample_rows: Vec<usize> = (0..rows).step_by(997).chain([rows - 1]).collect();
    let mut want = Array2::<f64>::zeros((sample_rows.len(), w));
    let mut got = Array2::<f64>::zeros((sample_rows.len(), w));
    for (k, &r) in sample_rows.iter().enumerate() {
        let row = m.outer_view(r).expect("row");
        for (j, &v) in row.iter() {
            for c in 0..w {
                want[[k, c]] += f64::from(v) * f64::from(x[[j, c]]);
            }
        }
        for c in 0..w {
            got[[k, c]] = f64::from(y[[r, c]]);
        }
    }
    assert_close("S·X sampled rows", &got, &want);

    // Sᵀ · X on sampled columns of S (one pass over the stored entries).
    let sample_cols: Vec<usize> = (0..cols).step_by(641).chain([cols - 1]).collect();
    let mut slot = vec![usize::MAX; cols];
    for (k, &c) in sample_cols.iter().enumerate() {
        slot[c] = k;
    }
    let mut want = Array2::<f64>::zeros((sample_cols.len(), w));
    for (&v, (r, j)) in m.iter() {
        let k = slot[j];
        if k != usize::MAX {
            for c in 0..w {
                want[[k, c]] += f64::from(v) * f64::from(xt[[r, c]]);
            }
        }
    }
    let got = Array2::from_shape_fn((sample_cols.len(), w), |(k, c)| {
        f64::from(yt[[sample_cols[k], c]])
    });
    assert_close("Sᵀ·X sampled columns", &got, &want);
}
