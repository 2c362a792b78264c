//! Reductions (sum_to, sum_axis, sum_squares), softmax and log-softmax along
//! both axes with their gradients, layer norm and its gradient, and the
//! losses (nll, bce_with_logits) with their gradients.

use hdgcn::backend::{Axis, Backend};
use ndarray::{Array2, arr2};

use crate::{assert_close, down, r32, rand_array, reference, up};

backend_tests!(
    sum_to_every_broadcast_shape,
    broadcast_to_every_shape,
    sum_axis_both_axes,
    sum_over_rows_of_a_tall_tensor,
    sum_over_cols_of_a_wide_tensor,
    sum_squares_matches_f64,
    sum_squares_many_matches_each,
    softmax_both_axes_and_log,
    softmax_is_stable_for_large_logits,
    softmax_along_rows_of_a_tall_tensor,
    softmax_of_many_rows_matches_plain_loops,
    softmax_grad_matches_reference,
    layer_norm_matches_reference,
    layer_norm_grad_matches_reference,
    nll_matches_reference,
    nll_grad_matches_reference,
    bce_with_logits_is_stable,
    bce_with_logits_grad_matches_reference,
);

fn sum_to_every_broadcast_shape<B: Backend<Elem = f32>>(b: &B) {
    let r = reference();
    for (s, &(rows, cols)) in [(37, 13), (1, 13), (37, 1), (1, 1), (0, 5), (4, 0)]
        .iter()
        .enumerate()
    {
        let x = r32(&rand_array(rows, cols, 100 + s as u64, -1.0, 1.0));
        for (tr, tc) in [(rows, cols), (1, cols), (rows, 1), (1, 1)] {
            let got = b.sum_to(&up(b, &x), tr, tc);
            assert_eq!(b.shape(&got), r.shape(&r.sum_to(&x, tr, tc)));
            assert_close(
                &format!("{rows}x{cols} -> {tr}x{tc}"),
                &down(b, &got),
                &r.sum_to(&x, tr, tc),
            );
        }
    }
}

fn broadcast_to_every_shape<B: Backend<Elem = f32>>(b: &B) {
    for (s, &(rows, cols)) in [(37, 13), (1, 13), (37, 1), (1, 1), (0, 5), (4, 0)]
        .iter()
        .enumerate()
    {
        for (tr, tc) in [(1, cols), (rows, 1), (1, 1), (rows, cols)] {
            let t = r32(&rand_array(tr, tc, 300 + s as u64, -1.0, 1.0));
            let got = b.broadcast_to(&up(b, &t), rows, cols);
            assert_eq!(b.shape(&got), (rows, cols), "{tr}x{tc} -> {rows}x{cols}");
            // By hand: entry (i, j) reads t at (i, j), clamped to t's size.
            let want = Array2::from_shape_fn((rows, cols), |(i, j)| {
                t[[i.min(tr.max(1) - 1), j.min(tc.max(1) - 1)]]
            });
            assert_eq!(down(b, &got), want, "{tr}x{tc} -> {rows}x{cols}");
        }
    }
}

fn sum_axis_both_axes<B: Backend<Elem = f32>>(b: &B) {
    let r = reference();
    // Odd shapes, several column blocks (700 > 256) and chunks (300 rows).
    for (s, &(rows, cols)) in [(37, 13), (1, 1), (300, 700), (5, 257), (0, 3), (3, 0)]
        .iter()
        .enumerate()
    {
        let x = r32(&rand_array(rows, cols, 200 + s as u64, -1.0, 1.0));
        for axis in [Axis::Rows, Axis::Cols] {
            let got = down(b, &b.sum_axis(&up(b, &x), axis));
            assert_close(
                &format!("{rows}x{cols} {axis:?}"),
                &got,
                &r.sum_axis(&x, axis),
            );
        }
    }
}

/// Column sums (`1 x cols`) and row sums (`rows x 1`) in `f64`, by slices
/// (the large cases would be slow through ndarray in debug builds).
fn sums(x: &Array2<f64>) -> (Array2<f64>, Array2<f64>) {
    let (rows, cols) = x.dim();
    let data = x.as_slice().expect("standard layout");
    let mut col = vec![0.0; cols];
    let mut row = vec![0.0; rows];
    for (i, chunk) in data.chunks(cols.max(1)).enumerate().take(rows) {
        for (c, &v) in col.iter_mut().zip(chunk) {
            *c += v;
        }
        row[i] = chunk.iter().sum();
    }
    (
        Array2::from_shape_vec((1, cols), col).unwrap(),
        Array2::from_shape_vec((rows, 1), row).unwrap(),
    )
}

fn sum_over_rows_of_a_tall_tensor<B: Backend<Elem = f32>>(b: &B) {
    let x = r32(&rand_array(1_000_000, 3, 300, -1.0, 2.0));
    let (col, row) = sums(&x);
    let total = Array2::from_elem((1, 1), col.sum());
    let tx = up(b, &x);
    assert_close(
        "1e6x3 over rows",
        &down(b, &b.sum_axis(&tx, Axis::Rows)),
        &col,
    );
    assert_close("1e6x3 sum_to 1x3", &down(b, &b.sum_to(&tx, 1, 3)), &col);
    assert_close("1e6x3 sum_to 1x1", &down(b, &b.sum_to(&tx, 1, 1)), &total);
    assert_close(
        "1e6x3 over cols",
        &down(b, &b.sum_axis(&tx, Axis::Cols)),
        &row,
    );
}

fn sum_over_cols_of_a_wide_tensor<B: Backend<Elem = f32>>(b: &B) {
    let x = r32(&rand_array(3, 1_000_000, 301, -1.0, 2.0));
    let (col, row) = sums(&x);
    let tx = up(b, &x);
    assert_close(
        "3x1e6 over cols",
        &down(b, &b.sum_axis(&tx, Axis::Cols)),
        &row,
    );
    assert_close(
        "3x1e6 over rows",
        &down(b, &b.sum_axis(&tx, Axis::Rows)),
        &col,
    );
}

fn sum_squares_matches_f64<B: Backend<Elem = f32>>(b: &B) {
    for (s, &(rows, cols)) in [(37, 13), (1, 1), (2_000, 1_500), (0, 4)]
        .iter()
        .enumerate()
    {
        let x = r32(&rand_array(rows, cols, 400 + s as u64, -3.0, 3.0));
        let got = b.sum_squares(&up(b, &x));
        let want: f64 = x.as_slice().unwrap().iter().map(|v| v * v).sum();
        assert!(
            (got - want).abs() <= 1e-5 * want.abs(),
            "{rows}x{cols}: sum_squares {got}, expected {want}"
        );
    }
    // 9 million entries: more partials than are read back after one pass.
    let v = f64::from(0.3f32);
    let got = b.sum_squares(&b.full(3_000, 3_000, 0.3));
    let want = 9e6 * v * v;
    assert!(
        (got - want).abs() <= 1e-5 * want,
        "3000x3000: sum_squares {got}, expected {want}"
    );
}

fn sum_squares_many_matches_each<B: Backend<Elem = f32>>(b: &B) {
    // Odd byte counts between even ones, an empty tensor in the middle and
    // one needing several device passes: every result lands in its place.
    let xs: Vec<Array2<f64>> = [(3, 5), (1, 1), (0, 4), (37, 13), (2_000, 1_500), (2, 1)]
        .iter()
        .enumerate()
        .map(|(s, &(rows, cols))| r32(&rand_array(rows, cols, 900 + s as u64, -3.0, 3.0)))
        .collect();
    let ts: Vec<B::Tensor> = xs.iter().map(|x| up(b, x)).collect();
    let refs: Vec<&B::Tensor> = ts.iter().collect();
    let got = b.sum_squares_many(&refs);
    assert_eq!(got.len(), xs.len());
    for ((x, t), g) in xs.iter().zip(&ts).zip(&got) {
        let want: f64 = x.iter().map(|v| v * v).sum();
        assert!(
            (g - want).abs() <= 1e-5 * want.abs(),
            "{:?}: sum_squares_many {g}, expected {want}",
            x.dim()
        );
        assert_eq!(*g, b.sum_squares(t), "{:?}: same as one at a time", x.dim());
    }
    assert!(b.sum_squares_many(&[]).is_empty());
}

fn softmax_both_axes_and_log<B: Backend<Elem = f32>>(b: &B) {
    let r = reference();
    for (s, &(rows, cols)) in [(37, 13), (1, 1), (7, 300), (300, 7), (0, 3)]
        .iter()
        .enumerate()
    {
        let x = r32(&rand_array(rows, cols, 500 + s as u64, -4.0, 4.0));
        for axis in [Axis::Rows, Axis::Cols] {
            for log in [false, true] {
                let got = down(b, &b.softmax(&up(b, &x), axis, log));
                assert_close(
                    &format!("{rows}x{cols} {axis:?} log={log}"),
                    &got,
                    &r.softmax(&x, axis, log),
                );
            }
        }
    }
}

fn softmax_is_stable_for_large_logits<B: Backend<Elem = f32>>(b: &B) {
    let r = reference();
    let x = arr2(&[
        [1000.0, 999.0, -1000.0, 998.5],
        [-1000.0, -1001.0, -999.0, -1000.5],
        [88.0, 89.0, 90.0, 0.0],
    ]);
    for axis in [Axis::Rows, Axis::Cols] {
        for log in [false, true] {
            let got = down(b, &b.softmax(&up(b, &x), axis, log));
            assert!(
                got.iter().all(|v| v.is_finite()),
                "{axis:?} log={log}: {got}"
            );
            assert_close(
                &format!("large logits {axis:?} log={log}"),
                &got,
                &r.softmax(&x, axis, log),
            );
        }
    }
}

fn softmax_along_rows_of_a_tall_tensor<B: Backend<Elem = f32>>(b: &B) {
    // Column statistics over 20,000 rows take more than one pass (longer
    // columns exceed the accuracy of the CPU's serial f32 sums).
    let r = reference();
    let x = r32(&rand_array(20_000, 3, 600, -5.0, 5.0));
    for log in [false, true] {
        let got = down(b, &b.softmax(&up(b, &x), Axis::Rows, log));
        assert_close(
            &format!("20000x3 Rows log={log}"),
            &got,
            &r.softmax(&x, Axis::Rows, log),
        );
    }
}

fn softmax_of_many_rows_matches_plain_loops<B: Backend<Elem = f32>>(b: &B) {
    // 40,000 rows of 10 (MVCAttn's backward attention): enough entries for
    // the CPU to split the rows over threads. The reference is plain f64
    // loops per row, independent of every backend.
    let (rows, cols) = (40_000, 10);
    let x = r32(&rand_array(rows, cols, 640, -6.0, 6.0));
    let dy = r32(&rand_array(rows, cols, 641, -1.0, 1.0));
    for log in [false, true] {
        let mut want = x.clone();
        let mut want_dx = dy.clone();
        for ((mut lane, mut g), xl) in want
            .rows_mut()
            .into_iter()
            .zip(want_dx.rows_mut())
            .zip(x.rows())
        {
            let m = xl.iter().fold(f64::NEG_INFINITY, |a, &v| a.max(v));
            let lse = m + xl.iter().map(|&v| (v - m).exp()).sum::<f64>().ln();
            lane.iter_mut()
                .zip(xl)
                .for_each(|(o, &v)| *o = if log { v - lse } else { (v - lse).exp() });
            // dx = J^T dy: y (dy - <dy, y>) for softmax, dy - softmax * sum(dy) for log.
            let p: Vec<f64> = xl.iter().map(|&v| (v - lse).exp()).collect();
            let (sum_g, dot) = g
                .iter()
                .zip(&p)
                .fold((0.0, 0.0), |(s, d), (&g, &p)| (s + g, d + g * p));
            g.iter_mut()
                .zip(&p)
                .for_each(|(g, &p)| *g = if log { *g - p * sum_g } else { p * (*g - dot) });
        }
        let y = b.softmax(&up(b, &x), Axis::Cols, log);
        assert_close(&format!("many rows log={log}"), &down(b, &y), &want);
        let dx = b.softmax_grad(&up(b, &want), &up(b, &dy), Axis::Cols, log);
        assert_close(
            &format!("many rows grad log={log}"),
            &down(b, &dx),
            &want_dx,
        );
    }
}

fn softmax_grad_matches_reference<B: Backend<Elem = f32>>(b: &B) {
    let r = reference();
    for (s, &(rows, cols)) in [(37, 13), (7, 300), (300, 7), (50_000, 2)]
        .iter()
        .enumerate()
    {
        let x = r32(&rand_array(rows, cols, 700 + s as u64, -3.0, 3.0));
        let dy = r32(&rand_array(rows, cols, 720 + s as u64, -1.0, 1.0));
        for axis in [Axis::Rows, Axis::Cols] {
            for log in [false, true] {
                let y = r32(&r.softmax(&x, axis, log));
                let got = down(b, &b.softmax_grad(&up(b, &y), &up(b, &dy), axis, log));
                assert_close(
                    &format!("{rows}x{cols} {axis:?} log={log}"),
                    &got,
                    &r.softmax_grad(&y, &dy, axis, log),
                );
            }
        }
    }
}

/// Rows `c + s·u` with an offset mean `c`, a spread `s` and `u` in `[-1, 1]`
/// with both ends present, so every row's standard deviation is at least
/// about `s / 2` (a near-constant row would make `x - mean` ill-conditioned
/// in `f32` on every backend); row 1 (when there is one) is all zeros.
fn spread_rows(rows: usize, cols: usize, seed: u64) -> Array2<f64> {
    let u = rand_array(rows, cols, seed, -1.0, 1.0);
    let cs = rand_array(rows, 2, seed + 1, 0.0, 1.0);
    let mut x = Array2::from_shape_fn((rows, cols), |(i, j)| {
        let (c, s) = (4.0 * cs[[i, 0]] - 2.0, 0.5 + 1.5 * cs[[i, 1]]);
        let u = match j {
            0 if cols > 1 => -1.0,
            1 => 1.0,
            _ => u[[i, j]],
        };
        c + s * u
    });
    if rows > 1 {
        x.row_mut(1).fill(0.0);
    }
    r32(&x)
}

fn layer_norm_matches_reference<B: Backend<Elem = f32>>(b: &B) {
    let r = reference();
    for (s, &(rows, cols)) in [(37, 13), (5, 300), (1, 1), (1_000, 3), (0, 4)]
        .iter()
        .enumerate()
    {
        let x = spread_rows(rows, cols, 800 + s as u64);
        for eps in [1e-5, 0.1] {
            let (xh, rs) = b.layer_norm(&up(b, &x), eps);
            let (want_xh, want_rs) = r.layer_norm(&x, eps);
            let what = format!("{rows}x{cols} eps={eps}");
            assert_eq!(b.shape(&rs), (rows, 1), "{what}: rstd shape");
            assert_close(&format!("{what} x̂"), &down(b, &xh), &want_xh);
            assert_close(&format!("{what} rstd"), &down(b, &rs), &want_rs);
        }
    }
}

fn layer_norm_grad_matches_reference<B: Backend<Elem = f32>>(b: &B) {
    let r = reference();
    for (s, &(rows, cols)) in [(37, 13), (5, 300), (1_000, 3)].iter().enumerate() {
        let x = spread_rows(rows, cols, 900 + s as u64);
        let (xh, rs) = r.layer_norm(&x, 1e-5);
        let (xh, rs) = (r32(&xh), r32(&rs));
        let dxh = r32(&rand_array(rows, cols, 920 + s as u64, -1.0, 1.0));
        let got = down(
            b,
            &b.layer_norm_grad(&up(b, &xh), &up(b, &rs), &up(b, &dxh)),
        );
        assert_close(
            &format!("{rows}x{cols}"),
            &got,
            &r.layer_norm_grad(&xh, &rs, &dxh),
        );
    }
}

/// Log-probabilities (`rows x cols`) and targets (several per class; `n`
/// of them, `n <= rows`).
fn nll_case(rows: usize, cols: usize, n: usize, seed: u64) -> (Array2<f64>, Vec<u32>) {
    let r = reference();
    let logits = rand_array(rows, cols, seed, -3.0, 3.0);
    let logp = r32(&r.softmax(&logits, Axis::Cols, true));
    let target = (0..n).map(|i| ((i * 7 + i / 3) % cols) as u32).collect();
    (logp, target)
}

fn nll_matches_reference<B: Backend<Elem = f32>>(b: &B) {
    let r = reference();
    for (s, &(rows, cols, n)) in [
        (50, 7, 50),
        (50, 7, 30),
        (1, 1, 1),
        (100_000, 3, 100_000),
        (4, 3, 0),
    ]
    .iter()
    .enumerate()
    {
        let (logp, target) = nll_case(rows, cols, n, 1000 + s as u64);
        let got = b.nll(&up(b, &logp), &b.index_from_slice(&target));
        assert_eq!(b.shape(&got), (1, 1));
        let want = r.nll(&logp, &r.index_from_slice(&target));
        assert_close(&format!("nll {rows}x{cols} n={n}"), &down(b, &got), &want);
    }
}

fn nll_grad_matches_reference<B: Backend<Elem = f32>>(b: &B) {
    let r = reference();
    for (s, &(rows, cols, n)) in [(50, 7, 50), (50, 7, 30), (4, 3, 0)].iter().enumerate() {
        let (_, target) = nll_case(rows, cols, n, 1100 + s as u64);
        let dy = arr2(&[[0.75]]);
        let got = b.nll_grad(&up(b, &dy), &b.index_from_slice(&target), rows, cols);
        let want = r.nll_grad(&dy, &r.index_from_slice(&target), rows, cols);
        assert_close(
            &format!("nll_grad {rows}x{cols} n={n}"),
            &down(b, &got),
            &want,
        );
    }
}

fn bce_with_logits_is_stable<B: Backend<Elem = f32>>(b: &B) {
    let r = reference();
    // Large |z| with both labels, and fractional labels.
    let z = arr2(&[[100.0, -100.0, 40.0, -40.0], [0.0, 1e-3, -2.5, 3.0]]);
    let y = arr2(&[[1.0, 1.0, 0.0, 0.0], [0.5, 0.25, 1.0, 0.0]]);
    let got = down(b, &b.bce_with_logits(&up(b, &z), &up(b, &y)));
    assert_close("large |z|", &got, &r.bce_with_logits(&z, &y));
    // Confident and right everywhere: the loss is log(1 + e^-|z|) ~ e^-|z|,
    // lost entirely by a naive log(1 + x).
    let z = arr2(&[[30.0, -30.0, 25.0], [-20.0, 35.0, -28.0]]);
    let y = arr2(&[[1.0, 0.0, 1.0], [0.0, 1.0, 0.0]]);
    let got = down(b, &b.bce_with_logits(&up(b, &z), &up(b, &y)));
    assert_close("tiny losses", &got, &r.bce_with_logits(&z, &y));
    // Many entries (more than one pass).
    let z = r32(&rand_array(513, 700, 1200, -8.0, 8.0));
    let y = r32(&rand_array(513, 700, 1201, 0.0, 1.0));
    let got = down(b, &b.bce_with_logits(&up(b, &z), &up(b, &y)));
    assert_close("513x700", &got, &r.bce_with_logits(&z, &y));
}

fn bce_with_logits_grad_matches_reference<B: Backend<Elem = f32>>(b: &B) {
    let r = reference();
    let mut z = r32(&rand_array(37, 13, 1300, -6.0, 6.0));
    z[[0, 0]] = 100.0;
    z[[0, 1]] = -100.0;
    let y = r32(&rand_array(37, 13, 1301, 0.0, 1.0));
    let dy = arr2(&[[1.5]]);
    let got = down(
        b,
        &b.bce_with_logits_grad(&up(b, &z), &up(b, &y), &up(b, &dy)),
    );
    assert_close("bce grad", &got, &r.bce_with_logits_grad(&z, &y, &dy));
}
