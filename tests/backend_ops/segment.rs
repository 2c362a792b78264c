//! Segment operations (reductions, softmax, broadcast, their gradients) and
//! the node–supernode kernels, on a small batch with an empty and a
//! single-row segment, on a large batch (2,000 segments, 100,000 rows, a few
//! long segments that the GPU reductions split into chunks) and on wide rows
//! (three levels of chunking).

use hdgcn::backend::{Backend, SegmentReduce};
use ndarray::{Array2, Axis};
use rand::{Rng, SeedableRng, rngs::StdRng, seq::SliceRandom};

use crate::{assert_close, down, r32, rand_array, reference, up};

backend_tests!(
    reduce_small_segments,
    reduce_large_batch,
    reduce_wide_rows_in_many_chunks,
    reduce_grad_matches_reference,
    reduce_grad_into_adds_to_the_slot,
    max_propagates_nan,
    softmax_matches_reference_and_sums_to_one,
    softmax_grad_matches_reference,
    large_segments_match_plain_loops,
    broadcast_matches_reference,
    rows_outside_the_segments_follow_the_cpu,
    scores_match_reference,
    mix_matches_reference,
    mix_add_accumulates_without_aliasing,
    weighted_sum_matches_reference,
    cross_attention_grads_match_plain_loops,
);

const OPS: [SegmentReduce; 3] = [SegmentReduce::Sum, SegmentReduce::Mean, SegmentReduce::Max];

/// Offsets of segments of the given sizes, starting at row 0.
fn offsets(sizes: &[usize]) -> Vec<u32> {
    let mut ptr = vec![0u32];
    for &s in sizes {
        ptr.push(ptr.last().unwrap() + s as u32);
    }
    ptr
}

/// Segments of 3, 0, 1, 7 and 5 rows (16 rows).
fn small_ptr() -> Vec<u32> {
    offsets(&[3, 0, 1, 7, 5])
}

/// 2,000 segments over 100,000 rows: mostly 0 to 40 rows (some empty), and
/// three long ones (30,000, 18,000 and 12,000 rows or so), the last segment
/// among them.
fn batch_ptr(seed: u64) -> Vec<u32> {
    let (segments, rows) = (2_000, 100_000);
    let mut rng = StdRng::seed_from_u64(seed);
    let mut sizes: Vec<usize> = (0..segments).map(|_| rng.random_range(0..=40)).collect();
    let long = [segments / 7, segments / 2, segments - 1];
    for &i in &long {
        sizes[i] = 0;
    }
    let rest = rows - sizes.iter().sum::<usize>();
    sizes[long[0]] = rest / 2;
    sizes[long[1]] = rest * 3 / 10;
    sizes[long[2]] = rest - rest / 2 - rest * 3 / 10;
    assert!(sizes.contains(&0), "the batch has empty segments");
    offsets(&sizes)
}

/// `rows x cols` pairwise distinct values in `[lo, lo + 1)`, exact in `f32`
/// (no ties for the arg-max).
fn distinct(rows: usize, cols: usize, seed: u64, lo: f64) -> Array2<f64> {
    let n = rows * cols;
    let mut perm: Vec<usize> = (0..n).collect();
    perm.shuffle(&mut StdRng::seed_from_u64(seed));
    let v: Vec<f64> = perm.iter().map(|&p| lo + p as f64 / n as f64).collect();
    r32(&Array2::from_shape_vec((rows, cols), v).unwrap())
}

/// Every reduction of `x` over `ptr` against the `f64` reference; for `Max`,
/// the arg-max (through the backward, with distinct upstream values) too.
fn check_reduce<B: Backend<Elem = f32>>(b: &B, x: &Array2<f64>, ptr: &[u32], what: &str) {
    let r = reference();
    let (p, pr) = (b.index_from_slice(ptr), r.index_from_slice(ptr));
    let segments = ptr.len() - 1;
    let cols = x.ncols();
    let tx = up(b, x);
    for op in OPS {
        let (got, arg) = b.segment_reduce(&tx, &p, op);
        let (want, arg_r) = r.segment_reduce(x, &pr, op);
        assert_close(&format!("{what} {op:?}"), &down(b, &got), &want);
        let (plain, _) = plain_reduce(x, ptr, op);
        assert_close(
            &format!("{what} {op:?}, plain loops"),
            &down(b, &got),
            &plain,
        );
        assert_eq!(
            arg.is_some(),
            op == SegmentReduce::Max,
            "{what} {op:?}: arg-max"
        );
        if let Some(arg) = arg {
            assert_eq!(b.index_len(&arg), segments * cols, "{what}: arg-max length");
            // dy[g, c] = 1 + g·cols + c: the backward puts each at its arg-max row.
            let dy = Array2::from_shape_fn((segments, cols), |(g, c)| (1 + g * cols + c) as f64);
            let got = down(
                b,
                &b.segment_reduce_grad(&up(b, &dy), &p, op, Some(&arg), x.nrows()),
            );
            let want = r.segment_reduce_grad(&dy, &pr, op, arg_r.as_ref(), x.nrows());
            if let Some((idx, g)) = got.indexed_iter().find(|&(i, g)| *g != want[i]) {
                panic!(
                    "{what}: arg-max differs at {idx:?}: gradient {g}, expected {}",
                    want[idx]
                );
            }
        }
    }
}

fn reduce_small_segments<B: Backend<Elem = f32>>(b: &B) {
    let ptr = small_ptr();
    let x = distinct(16, 4, 1, -0.5);
    check_reduce(b, &x, &ptr, "small");
    // The empty segment gives zeros.
    let (max, _) = b.segment_reduce(&up(b, &x), &b.index_from_slice(&ptr), SegmentReduce::Max);
    assert!(b.download(&max).row(1).iter().all(|&v| v == 0.0));
    // No segments at all; zero columns.
    check_reduce(b, &Array2::zeros((0, 3)), &[0], "no segments");
    check_reduce(b, &Array2::zeros((16, 0)), &ptr, "no columns");
}

fn reduce_large_batch<B: Backend<Elem = f32>>(b: &B) {
    let ptr = batch_ptr(2);
    for cols in [1, 5] {
        let x = distinct(100_000, cols, 3 + cols as u64, 0.5);
        check_reduce(b, &x, &ptr, &format!("batch, {cols} cols"));
    }
    // Ties: the first row of each segment is the arg-max, as in a sequential scan.
    check_reduce(
        b,
        &Array2::from_elem((100_000, 2), 0.25),
        &ptr,
        "batch, ties",
    );
}

fn reduce_wide_rows_in_many_chunks<B: Backend<Elem = f32>>(b: &B) {
    // 260 columns: 64-row chunks, so the 10,000-row segment is reduced over
    // three levels.
    let ptr = offsets(&[10_000, 0, 70, 1, 5_000]);
    let x = distinct(15_071, 260, 4, 0.5);
    check_reduce(b, &x, &ptr, "wide");
}

fn reduce_grad_matches_reference<B: Backend<Elem = f32>>(b: &B) {
    let r = reference();
    for (ptr, what) in [(small_ptr(), "small"), (batch_ptr(5), "batch")] {
        let rows = *ptr.last().unwrap() as usize;
        let (p, pr) = (b.index_from_slice(&ptr), r.index_from_slice(&ptr));
        let dy = r32(&rand_array(ptr.len() - 1, 3, 6, -1.0, 1.0));
        for op in [SegmentReduce::Sum, SegmentReduce::Mean] {
            let got = down(b, &b.segment_reduce_grad(&up(b, &dy), &p, op, None, rows));
            let want = r.segment_reduce_grad(&dy, &pr, op, None, rows);
            assert_close(&format!("{what} {op:?} grad"), &got, &want);
        }
    }
}

/// Segment reductions by plain loops over `f64` (independent of every
/// backend): values, and for `Max` the arg-max rows (first maximum, a NaN
/// winning over numbers; `u32::MAX` for an empty segment).
fn plain_reduce(x: &Array2<f64>, ptr: &[u32], op: SegmentReduce) -> (Array2<f64>, Vec<u32>) {
    let (g, cols) = (ptr.len() - 1, x.ncols());
    let mut out = Array2::zeros((g, cols));
    let mut arg = vec![u32::MAX; g * cols];
    for s in 0..g {
        let (lo, hi) = (ptr[s] as usize, ptr[s + 1] as usize);
        for c in 0..cols {
            if lo == hi {
                continue;
            }
            out[[s, c]] = match op {
                SegmentReduce::Sum => (lo..hi).map(|i| x[[i, c]]).sum(),
                SegmentReduce::Mean => (lo..hi).map(|i| x[[i, c]]).sum::<f64>() / (hi - lo) as f64,
                SegmentReduce::Max => {
                    let mut best = lo;
                    for i in lo..hi {
                        let (v, bv) = (x[[i, c]], x[[best, c]]);
                        if bv.is_nan() {
                            break;
                        }
                        if v.is_nan() || v > bv {
                            best = i;
                        }
                    }
                    arg[s * cols + c] = best as u32;
                    x[[best, c]]
                }
            };
        }
    }
    (out, arg)
}

fn reduce_grad_into_adds_to_the_slot<B: Backend<Elem = f32>>(b: &B) {
    for (ptr, what) in [(small_ptr(), "small"), (batch_ptr(7), "batch")] {
        let rows = *ptr.last().unwrap() as usize;
        let p = b.index_from_slice(&ptr);
        // Distinct values, and values with many ties (the first maximum
        // of a segment takes the gradient).
        let x = distinct(rows, 3, 8, -0.5);
        let tied = x.mapv(|v| (v * 4.0).floor());
        let dy = r32(&rand_array(ptr.len() - 1, 3, 9, -1.0, 1.0));
        let prev = r32(&rand_array(rows, 3, 10, -1.0, 1.0));
        for (x, op) in [(&x, OPS[0]), (&x, OPS[1]), (&x, OPS[2]), (&tied, OPS[2])] {
            let (_, arg) = b.segment_reduce(&up(b, x), &p, op);
            // By hand: each row of a segment gets dy (Sum), dy / size
            // (Mean), or the arg-max row alone gets it (Max).
            let (_, plain_arg) = plain_reduce(x, &ptr, op);
            let mut grad = Array2::<f64>::zeros((rows, 3));
            for s in 0..ptr.len() - 1 {
                let (lo, hi) = (ptr[s] as usize, ptr[s + 1] as usize);
                for c in 0..3 {
                    match op {
                        SegmentReduce::Sum => (lo..hi).for_each(|i| grad[[i, c]] += dy[[s, c]]),
                        SegmentReduce::Mean => {
                            let d = dy[[s, c]] / (hi - lo) as f64;
                            (lo..hi).for_each(|i| grad[[i, c]] += d)
                        }
                        SegmentReduce::Max if lo < hi => {
                            grad[[plain_arg[s * 3 + c] as usize, c]] += dy[[s, c]]
                        }
                        SegmentReduce::Max => {}
                    }
                }
            }
            let dyt = up(b, &dy);
            let mut empty = None;
            b.segment_reduce_grad_into(&mut empty, &dyt, &p, op, arg.as_ref(), rows);
            let got = down(b, &empty.expect("an empty slot is filled"));
            assert_close(&format!("{what} {op:?} into an empty slot"), &got, &grad);
            let mut slot = Some(up(b, &prev));
            b.segment_reduce_grad_into(&mut slot, &dyt, &p, op, arg.as_ref(), rows);
            let got = down(b, &slot.expect("the slot keeps its tensor"));
            assert_close(
                &format!("{what} {op:?} added to a slot"),
                &got,
                &(&prev + &grad),
            );
        }
    }
}

fn max_propagates_nan<B: Backend<Elem = f32>>(b: &B) {
    // As torch.max: a NaN anywhere in a segment is its maximum, and the
    // gradient goes to the first NaN. Column 0 of the short segment has a
    // NaN after its largest number, column 1 two NaNs; the long segment
    // (split into chunks on the GPU) has one NaN deep inside.
    let ptr = offsets(&[5, 20_000]);
    let mut x = distinct(20_005, 2, 41, 0.5);
    x[[0, 0]] = 100.0;
    x[[3, 0]] = f64::NAN;
    x[[1, 1]] = f64::NAN;
    x[[4, 1]] = f64::NAN;
    x[[17_777, 1]] = f64::NAN;
    let p = b.index_from_slice(&ptr);
    let (max, arg) = b.segment_reduce(&up(b, &x), &p, SegmentReduce::Max);
    let max = down(b, &max);
    for (g, c) in [(0, 0), (0, 1), (1, 1)] {
        assert!(
            max[[g, c]].is_nan(),
            "max of segment {g}, column {c} = {}",
            max[[g, c]]
        );
    }
    assert!(!max[[1, 0]].is_nan(), "segment 1, column 0 has no NaN");
    let dy = Array2::from_elem((2, 2), 1.0);
    let grad = down(
        b,
        &b.segment_reduce_grad(&up(b, &dy), &p, SegmentReduce::Max, arg.as_ref(), 20_005),
    );
    for (row, c) in [(3, 0), (1, 1), (17_777, 1)] {
        assert_eq!(grad[[row, c]], 1.0, "gradient of row {row}, column {c}");
    }
    assert_eq!(grad.sum(), 4.0, "one row per segment and column");
}

/// Per segment and column, the sum of `y` over the segment's rows.
fn segment_sums(y: &Array2<f64>, ptr: &[u32]) -> Vec<(usize, usize, f64)> {
    let mut out = Vec::new();
    for g in 0..ptr.len() - 1 {
        let (lo, hi) = (ptr[g] as usize, ptr[g + 1] as usize);
        if lo < hi {
            let s = y.slice(ndarray::s![lo..hi, ..]).sum_axis(Axis(0));
            out.extend(s.iter().enumerate().map(|(c, &v)| (g, c, v)));
        }
    }
    out
}

fn softmax_matches_reference_and_sums_to_one<B: Backend<Elem = f32>>(b: &B) {
    let r = reference();
    let cases = [
        // Large magnitudes: exp would overflow without the per-segment maximum.
        (
            small_ptr(),
            r32(&rand_array(16, 4, 7, -100.0, 100.0)),
            "small",
        ),
        (
            batch_ptr(8),
            r32(&rand_array(100_000, 3, 9, -5.0, 5.0)),
            "batch",
        ),
    ];
    for (ptr, x, what) in cases {
        let (p, pr) = (b.index_from_slice(&ptr), r.index_from_slice(&ptr));
        let got = down(b, &b.segment_softmax(&up(b, &x), &p));
        assert_close(
            &format!("{what} softmax"),
            &got,
            &r.segment_softmax(&x, &pr),
        );
        for (g, c, s) in segment_sums(&got, &ptr) {
            assert!(
                (s - 1.0).abs() < 1e-4,
                "{what}: segment {g}, column {c} sums to {s}"
            );
        }
    }
}

fn softmax_grad_matches_reference<B: Backend<Elem = f32>>(b: &B) {
    let r = reference();
    for (ptr, what) in [(small_ptr(), "small"), (batch_ptr(10), "batch")] {
        let rows = *ptr.last().unwrap() as usize;
        let (p, pr) = (b.index_from_slice(&ptr), r.index_from_slice(&ptr));
        let x = rand_array(rows, 3, 11, -3.0, 3.0);
        let y = r32(&r.segment_softmax(&x, &pr));
        let dy = r32(&rand_array(rows, 3, 12, -1.0, 1.0));
        let got = down(b, &b.segment_softmax_grad(&up(b, &y), &up(b, &dy), &p));
        let want = r.segment_softmax_grad(&y, &dy, &pr);
        assert_close(&format!("{what} softmax grad"), &got, &want);
    }
}

fn large_segments_match_plain_loops<B: Backend<Elem = f32>>(b: &B) {
    // Segments of 30,000 and 40,000 rows of 10 columns (large enough for
    // the CPU to reduce them in blocks on several threads) around small
    // ones; the reference is plain f64 loops, independent of every backend.
    let ptr = offsets(&[3, 30_000, 0, 7, 40_000, 5]);
    let (rows, cols) = (*ptr.last().unwrap() as usize, 10);
    let x = r32(&rand_array(rows, cols, 13, -8.0, 8.0));
    let dy = r32(&rand_array(rows, cols, 14, -1.0, 1.0));
    let p = b.index_from_slice(&ptr);
    let (mut soft, mut dx) = (Array2::zeros((rows, cols)), Array2::zeros((rows, cols)));
    for w in ptr.windows(2) {
        let (lo, hi) = (w[0] as usize, w[1] as usize);
        for c in 0..cols {
            let m = (lo..hi).fold(f64::NEG_INFINITY, |a, i| a.max(x[[i, c]]));
            let z: f64 = (lo..hi).map(|i| (x[[i, c]] - m).exp()).sum();
            (lo..hi).for_each(|i| soft[[i, c]] = (x[[i, c]] - m).exp() / z);
            let dot: f64 = (lo..hi).map(|i| dy[[i, c]] * soft[[i, c]]).sum();
            (lo..hi).for_each(|i| dx[[i, c]] = soft[[i, c]] * (dy[[i, c]] - dot));
        }
    }
    let got = down(b, &b.segment_softmax(&up(b, &x), &p));
    assert_close("large segments softmax", &got, &soft);
    for (g, c, s) in segment_sums(&got, &ptr) {
        assert!(
            (s - 1.0).abs() < 1e-4,
            "segment {g}, column {c} sums to {s}"
        );
    }
    let got = down(b, &b.segment_softmax_grad(&up(b, &soft), &up(b, &dy), &p));
    assert_close("large segments softmax grad", &got, &dx);
    for op in [SegmentReduce::Sum, SegmentReduce::Mean] {
        let (got, _) = b.segment_reduce(&up(b, &x), &p, op);
        let (want, _) = plain_reduce(&x, &ptr, op);
        assert_close(&format!("large segments {op:?}"), &down(b, &got), &want);
    }
}

fn broadcast_matches_reference<B: Backend<Elem = f32>>(b: &B) {
    let r = reference();
    for (ptr, what) in [(small_ptr(), "small"), (batch_ptr(13), "batch")] {
        let rows = *ptr.last().unwrap() as usize;
        let (p, pr) = (b.index_from_slice(&ptr), r.index_from_slice(&ptr));
        let x = r32(&rand_array(ptr.len() - 1, 5, 14, -1.0, 1.0));
        let got = down(b, &b.segment_broadcast(&up(b, &x), &p, rows));
        assert_close(
            &format!("{what} broadcast"),
            &got,
            &r.segment_broadcast(&x, &pr, rows),
        );
    }
}

/// Offsets that leave rows 0..2 and 9..12 outside every segment.
fn rows_outside_the_segments_follow_the_cpu<B: Backend<Elem = f32>>(b: &B) {
    let r = reference();
    let ptr = [2u32, 5, 5, 9];
    let (p, pr) = (b.index_from_slice(&ptr), r.index_from_slice(&ptr));
    let x = distinct(12, 3, 15, -0.5);
    let dy_seg = r32(&rand_array(3, 3, 16, -1.0, 1.0));
    let dy = r32(&rand_array(12, 3, 17, -1.0, 1.0));
    for op in OPS {
        let (got, arg) = b.segment_reduce(&up(b, &x), &p, op);
        let (want, arg_r) = r.segment_reduce(&x, &pr, op);
        assert_close(&format!("outside {op:?}"), &down(b, &got), &want);
        let got = b.segment_reduce_grad(&up(b, &dy_seg), &p, op, arg.as_ref(), 12);
        let want = r.segment_reduce_grad(&dy_seg, &pr, op, arg_r.as_ref(), 12);
        assert_close(&format!("outside {op:?} grad"), &down(b, &got), &want);
    }
    let y = down(b, &b.segment_softmax(&up(b, &x), &p));
    assert_close("outside softmax", &y, &r.segment_softmax(&x, &pr));
    let got = down(b, &b.segment_softmax_grad(&up(b, &y), &up(b, &dy), &p));
    let want = r.segment_softmax_grad(&y, &dy, &pr);
    assert_close("outside softmax grad", &got, &want);
    let got = down(b, &b.segment_broadcast(&up(b, &dy_seg), &p, 12));
    assert_close(
        "outside broadcast",
        &got,
        &r.segment_broadcast(&dy_seg, &pr, 12),
    );
}

fn scores_match_reference<B: Backend<Elem = f32>>(b: &B) {
    let r = reference();
    for (ptr, m, d, what) in [(small_ptr(), 3, 5, "small"), (batch_ptr(18), 4, 8, "batch")] {
        let (rows, segments) = (*ptr.last().unwrap() as usize, ptr.len() - 1);
        let (p, pr) = (b.index_from_slice(&ptr), r.index_from_slice(&ptr));
        let k = r32(&rand_array(rows, d, 19, -1.0, 1.0));
        let q = r32(&rand_array(segments * m, d, 20, -1.0, 1.0));
        let got = down(b, &b.segment_scores(&up(b, &k), &up(b, &q), &p, m));
        assert_eq!(got.dim(), (rows, m));
        assert_close(
            &format!("{what} scores"),
            &got,
            &r.segment_scores(&k, &q, &pr, m),
        );
    }
}

fn mix_matches_reference<B: Backend<Elem = f32>>(b: &B) {
    let r = reference();
    for (ptr, m, h, what) in [(small_ptr(), 3, 4, "small"), (batch_ptr(21), 4, 6, "batch")] {
        let (rows, segments) = (*ptr.last().unwrap() as usize, ptr.len() - 1);
        let (p, pr) = (b.index_from_slice(&ptr), r.index_from_slice(&ptr));
        let a = r32(&rand_array(rows, m, 22, 0.0, 1.0));
        let u = r32(&rand_array(segments * m, h, 23, -1.0, 1.0));
        let got = down(b, &b.segment_mix(&up(b, &a), &up(b, &u), &p));
        assert_close(&format!("{what} mix"), &got, &r.segment_mix(&a, &u, &pr));
    }
}

fn mix_add_accumulates_without_aliasing<B: Backend<Elem = f32>>(b: &B) {
    let r = reference();
    let ptr = small_ptr();
    let (p, pr) = (b.index_from_slice(&ptr), r.index_from_slice(&ptr));
    let a = r32(&rand_array(16, 3, 24, 0.0, 1.0));
    let u = r32(&rand_array(15, 4, 25, -1.0, 1.0));
    let x0 = r32(&rand_array(16, 4, 26, -1.0, 1.0));
    let want = &x0 + &r.segment_mix(&a, &u, &pr);
    let (ta, tu) = (up(b, &a), up(b, &u));
    let kept = up(b, &x0);
    let mut acc = kept.clone();
    b.segment_mix_add(&mut acc, &ta, &tu, &p);
    assert_close("mix_add", &down(b, &acc), &want);
    // The clone it came from is unchanged.
    assert_close("shared acc", &down(b, &kept), &x0);
    // A second accumulation into the now unshared tensor.
    b.segment_mix_add(&mut acc, &ta, &tu, &p);
    assert_close("mix_add twice", &down(b, &acc), &(&want + &(&want - &x0)));
}

fn weighted_sum_matches_reference<B: Backend<Elem = f32>>(b: &B) {
    let r = reference();
    let cases = [
        (small_ptr(), 3, 4, -1.0, "small"),
        // Positive terms over long segments keep the f32 sums accurate.
        (batch_ptr(27), 4, 6, 0.5, "batch"),
        (batch_ptr(28), 10, 32, 0.5, "batch, wide"),
    ];
    for (ptr, m, h, lo, what) in cases {
        let (rows, segments) = (*ptr.last().unwrap() as usize, ptr.len() - 1);
        let (p, pr) = (b.index_from_slice(&ptr), r.index_from_slice(&ptr));
        let a = r32(&rand_array(rows, m, 29, 0.0, 1.0));
        let x = r32(&rand_array(rows, h, 30, lo, 1.5));
        let got = down(b, &b.segment_weighted_sum(&up(b, &a), &up(b, &x), &p));
        assert_eq!(got.dim(), (segments * m, h));
        assert_close(
            &format!("{what} weighted sum"),
            &got,
            &r.segment_weighted_sum(&a, &x, &pr),
        );
    }
}

/// `x[v] · u[g(v)·m + j]` with plain loops (`N x m`).
fn scores_loops(x: &Array2<f64>, u: &Array2<f64>, ptr: &[u32], m: usize) -> Array2<f64> {
    let mut out = Array2::zeros((x.nrows(), m));
    for (g, w) in ptr.windows(2).enumerate() {
        for v in w[0] as usize..w[1] as usize {
            for j in 0..m {
                out[[v, j]] = (0..x.ncols()).map(|c| x[[v, c]] * u[[g * m + j, c]]).sum();
            }
        }
    }
    out
}

/// `Σ_j a[v, j] u[g(v)·m + j]` with plain loops (`N x h`).
fn mix_loops(a: &Array2<f64>, u: &Array2<f64>, ptr: &[u32]) -> Array2<f64> {
    let m = a.ncols();
    let mut out = Array2::zeros((a.nrows(), u.ncols()));
    for (g, w) in ptr.windows(2).enumerate() {
        for v in w[0] as usize..w[1] as usize {
            for c in 0..u.ncols() {
                out[[v, c]] = (0..m).map(|j| a[[v, j]] * u[[g * m + j, c]]).sum();
            }
        }
    }
    out
}

/// `Σ_{v in g} a[v, j] x[v]` with plain loops (`(G·m) x h`).
fn weighted_sum_loops(a: &Array2<f64>, x: &Array2<f64>, ptr: &[u32]) -> Array2<f64> {
    let m = a.ncols();
    let mut out = Array2::zeros(((ptr.len() - 1) * m, x.ncols()));
    for (g, w) in ptr.windows(2).enumerate() {
        for v in w[0] as usize..w[1] as usize {
            for j in 0..m {
                for c in 0..x.ncols() {
                    out[[g * m + j, c]] += a[[v, j]] * x[[v, c]];
                }
            }
        }
    }
    out
}

/// The backward kernels of the three node–supernode products (which a
/// backend may fuse into one pass) against their definitions written as
/// plain loops, for every combination of wanted gradients, into an empty
/// and into an existing accumulator: a small batch, a large batch, and one
/// graph of 3,000 rows with 20 supernodes (two blocks of scores) and 33
/// columns (partial register blocks).
fn cross_attention_grads_match_plain_loops<B: Backend<Elem = f32>>(b: &B) {
    let cases = [
        (small_ptr(), 3, 5, "small"),
        (batch_ptr(31), 4, 6, "batch"),
        (offsets(&[3_000]), 20, 33, "one large graph"),
    ];
    for (ptr, m, h, what) in cases {
        let (rows, segments) = (*ptr.last().unwrap() as usize, ptr.len() - 1);
        let p = b.index_from_slice(&ptr);
        // Node tensors: x (N x h), a (N x m), gn (N x h, the gradient of a
        // mix); supernode tensors u, gs ((G·m) x h); scores gradient ge (N x m).
        let x = r32(&rand_array(rows, h, 32, 0.25, 1.0));
        let a = r32(&rand_array(rows, m, 33, 0.0, 1.0));
        let gn = r32(&rand_array(rows, h, 34, 0.25, 1.0));
        let u = r32(&rand_array(segments * m, h, 35, -1.0, 1.0));
        let gs = r32(&rand_array(segments * m, h, 36, -1.0, 1.0));
        let ge = r32(&rand_array(rows, m, 37, 0.0, 1.0));
        let acc0 = r32(&rand_array(rows, h, 38, -1.0, 1.0));
        let (tx, ta, tgn, tu, tgs, tge) = (
            up(b, &x),
            up(b, &a),
            up(b, &gn),
            up(b, &u),
            up(b, &gs),
            up(b, &ge),
        );
        for want_other in [false, true] {
            for slot_kind in ["none", "empty", "existing"] {
                let tag = format!("{what}, other {want_other}, slot {slot_kind}");
                let mut slot = match slot_kind {
                    "existing" => Some(up(b, &acc0)),
                    _ => None,
                };
                let base = if slot_kind == "existing" {
                    acc0.clone()
                } else {
                    Array2::zeros((rows, h))
                };
                let check_slot = |slot: Option<B::Tensor>, mix: Array2<f64>, name: &str| {
                    if slot_kind == "none" {
                        assert!(slot.is_none(), "{tag}: {name} untouched");
                    } else {
                        let got = down(b, &slot.expect("slot filled"));
                        assert_close(&format!("{tag}: {name}"), &got, &(&base + &mix));
                    }
                };
                let use_slot = slot_kind != "none";

                // segment_scores(k = x, q = u) with gradient ge.
                let mut s = slot.clone();
                let dq = b.segment_scores_grad(
                    &tge,
                    &tx,
                    &tu,
                    &p,
                    use_slot.then_some(&mut s),
                    want_other,
                );
                check_slot(s, mix_loops(&ge, &u, &ptr), "scores: dk");
                assert_eq!(dq.is_some(), want_other, "{tag}: scores dq");
                if let Some(dq) = dq {
                    let want = weighted_sum_loops(&ge, &x, &ptr);
                    assert_close(&format!("{tag}: scores dq"), &down(b, &dq), &want);
                }

                // segment_weighted_sum(a, x) with gradient gs.
                let da = b.segment_weighted_sum_grad(
                    &tgs,
                    &ta,
                    &tx,
                    &p,
                    want_other,
                    use_slot.then_some(&mut slot),
                );
                check_slot(slot, mix_loops(&a, &gs, &ptr), "weighted sum: dx");
                assert_eq!(da.is_some(), want_other, "{tag}: weighted sum da");
                if let Some(da) = da {
                    let want = scores_loops(&x, &gs, &ptr, m);
                    assert_close(&format!("{tag}: weighted sum da"), &down(b, &da), &want);
                }
            }
            // segment_mix(a, u) with gradient gn.
            for want_du in [false, true] {
                let tag = format!("{what}, da {want_other}, du {want_du}");
                let (da, du) = b.segment_mix_grad(&tgn, &ta, &tu, &p, want_other, want_du);
                assert_eq!((da.is_some(), du.is_some()), (want_other, want_du), "{tag}");
                if let Some(da) = da {
                    let want = scores_loops(&gn, &u, &ptr, m);
                    assert_close(&format!("{tag}: mix da"), &down(b, &da), &want);
                }
                if let Some(du) = du {
                    let want = weighted_sum_loops(&a, &gn, &ptr);
                    assert_close(&format!("{tag}: mix du"), &down(b, &du), &want);
                }
            }
        }
    }
}
