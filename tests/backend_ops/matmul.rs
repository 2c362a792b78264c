//! Dense products: all four transpose combinations, shapes that are not
//! multiples of the tile, an empty inner dimension, a long inner dimension
//! (split over workgroups) and outputs taller than one grid dimension.

use hdgcn::backend::Backend;
use ndarray::Array2;

use crate::{assert_close, down, r32, rand_array, up};

backend_tests!(
    matmul_all_transposes_odd_shapes,
    matmul_spans_several_tiles,
    matmul_empty_inner_dimension_is_zero,
    matmul_long_inner_dimension,
    matmul_tall,
    matmul_beyond_65535_row_tiles,
    dropout_matmul_is_the_masked_product,
);

/// `op(a) · op(x)` in `f64` by the definition (fast in debug builds, unlike
/// a blocked product).
fn product(a: &Array2<f64>, x: &Array2<f64>, ta: bool, tb: bool) -> Array2<f64> {
    let a = if ta { a.t() } else { a.view() };
    let x = if tb { x.t() } else { x.view() };
    let (a, x) = (
        a.as_standard_layout(),
        x.t().as_standard_layout().into_owned(),
    );
    let (m, k, n) = (a.nrows(), a.ncols(), x.nrows());
    let (a, x) = (a.as_slice().unwrap(), x.as_slice().unwrap());
    Array2::from_shape_fn((m, n), |(i, j)| {
        let (ra, rx) = (&a[i * k..(i + 1) * k], &x[j * k..(j + 1) * k]);
        ra.iter().zip(rx).map(|(p, q)| p * q).sum()
    })
}

/// `op(a)` is `m x k`, `op(x)` is `k x n`; the stored operands are shaped
/// accordingly and the product is compared with the `f64` reference.
fn check_product<B: Backend<Elem = f32>>(b: &B, m: usize, k: usize, n: usize, seed: u64) {
    for ta in [false, true] {
        for tb in [false, true] {
            let a = if ta {
                r32(&rand_array(k, m, seed, -1.0, 1.0))
            } else {
                r32(&rand_array(m, k, seed, -1.0, 1.0))
            };
            let x = if tb {
                r32(&rand_array(n, k, seed + 1, -1.0, 1.0))
            } else {
                r32(&rand_array(k, n, seed + 1, -1.0, 1.0))
            };
            let got = b.matmul(&up(b, &a), &up(b, &x), ta, tb);
            assert_eq!(b.shape(&got), (m, n), "shape ta={ta} tb={tb}");
            let want = product(&a, &x, ta, tb);
            assert_close(
                &format!("{m}x{k}·{k}x{n} ta={ta} tb={tb}"),
                &down(b, &got),
                &want,
            );
        }
    }
}

fn matmul_all_transposes_odd_shapes<B: Backend<Elem = f32>>(b: &B) {
    check_product(b, 37, 13, 29, 1);
    check_product(b, 1, 1, 1, 2);
    check_product(b, 1, 7, 3, 3);
    check_product(b, 5, 3, 1, 4);
}

fn matmul_spans_several_tiles<B: Backend<Elem = f32>>(b: &B) {
    // Every dimension crosses tile boundaries; k is not a multiple of 16.
    check_product(b, 130, 71, 150, 5);
    check_product(b, 64, 16, 64, 6);
    check_product(b, 65, 17, 63, 7);
}

fn matmul_empty_inner_dimension_is_zero<B: Backend<Elem = f32>>(b: &B) {
    for ta in [false, true] {
        for tb in [false, true] {
            let a = if ta {
                b.full(0, 5, 1.0)
            } else {
                b.full(5, 0, 1.0)
            };
            let x = if tb {
                b.full(7, 0, 1.0)
            } else {
                b.full(0, 7, 1.0)
            };
            let got = b.download(&b.matmul(&a, &x, ta, tb));
            assert_eq!(got, Array2::<f32>::zeros((5, 7)), "ta={ta} tb={tb}");
        }
    }
    // Empty outputs.
    let e = b.matmul(&b.full(0, 3, 1.0), &b.full(3, 4, 1.0), false, false);
    assert_eq!(b.shape(&e), (0, 4));
    let e = b.matmul(&b.full(2, 3, 1.0), &b.full(3, 0, 1.0), false, false);
    assert_eq!(b.shape(&e), (2, 0));
}

fn matmul_long_inner_dimension<B: Backend<Elem = f32>>(b: &B) {
    // Weight-gradient shape: few output tiles, long k (split over workgroups).
    check_product(b, 37, 8_000, 5, 8);
    check_product(b, 40, 2_100, 20, 9);
}

fn matmul_tall<B: Backend<Elem = f32>>(b: &B) {
    let a = r32(&rand_array(300_000, 8, 10, -1.0, 1.0));
    let x = r32(&rand_array(8, 4, 11, -1.0, 1.0));
    let got = down(b, &b.matmul(&up(b, &a), &up(b, &x), false, false));
    let want = product(&a, &x, false, false);
    assert_close("300000x8·8x4", &got, &want);
    // Transposed tall operand: (8 x 300000)ᵀ.
    let at = a.t().as_standard_layout().into_owned();
    let got = down(b, &b.matmul(&up(b, &at), &up(b, &x), true, false));
    assert_close("(8x300000)ᵀ·8x4", &got, &want);
}

fn matmul_beyond_65535_row_tiles<B: Backend<Elem = f32>>(b: &B) {
    // 65,536 + 1 tiles of 64 rows: the row-tile grid is split.
    let m = 64 * 65_536 + 5;
    let a = Array2::from_shape_fn((m, 2), |(i, j)| ((i % 1000) as f64) * 0.5 + j as f64);
    let x = ndarray::arr2(&[[2.0], [-1.0]]);
    let got = down(b, &b.matmul(&up(b, &a), &up(b, &x), false, false));
    let want = Array2::from_shape_fn((m, 1), |(i, _)| ((i % 1000) as f64) * 0.5 - 1.0);
    assert_close("tall split grid", &got, &want);
}

/// `dropout(x) · w` and `dropout(x)ᵀ · g` (fused on the CPU backend, the
/// trait's default elsewhere) against the `f64` product of the backend's
/// own mask times `x`, on shapes that are not multiples of any block.
fn dropout_matmul_is_the_masked_product<B: Backend<Elem = f32>>(b: &B) {
    for (i, &(n, d, m)) in [(1, 1, 1), (37, 5, 3), (700, 130, 9)].iter().enumerate() {
        let seed = 40 + i as u64;
        let x = r32(&rand_array(n, d, seed, -1.0, 1.0));
        let w = r32(&rand_array(d, m, seed + 1, -1.0, 1.0));
        let g = r32(&rand_array(n, m, seed + 2, -1.0, 1.0));
        let p = 0.3;
        let mask = down(b, &b.dropout_mask(n, d, p, seed));
        let xd = &x * &mask;
        let (tx, tw, tg) = (up(b, &x), up(b, &w), up(b, &g));
        let fwd = down(b, &b.dropout_matmul(&tx, p, seed, &tw));
        assert_close(
            &format!("dropout(x)·w {n}x{d}x{m}"),
            &fwd,
            &product(&xd, &w, false, false),
        );
        let grad = down(b, &b.dropout_t_matmul(&tx, p, seed, &tg));
        assert_close(
            &format!("dropout(x)ᵀ·g {n}x{d}x{m}"),
            &grad,
            &product(&xd, &g, true, false),
        );
    }
}
