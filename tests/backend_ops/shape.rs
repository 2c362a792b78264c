//! Shape kernels: concatenation, slices, slice accumulation (in place,
//! copy on write), row gathers and row scatters, against ndarray
//! references, with empty tensors and empty index vectors.

use hdgcn::backend::{Axis, Backend};
use ndarray::{Array2, Axis as NdAxis, concatenate, s};

use crate::{assert_close, down, r32, rand_array, up};

backend_tests!(
    concat_along_rows_and_columns,
    slices_along_rows_and_columns,
    slice_add_assign_accumulates_in_place,
    gather_rows_with_repeats_and_empty_index,
    scatter_add_rows_sums_repeats,
    upload_owned_is_upload,
);

/// `upload_owned` gives the tensor `upload` gives, for an array in
/// standard layout and for a transposed (column-major) one.
fn upload_owned_is_upload<B: Backend<Elem = f32>>(b: &B) {
    let x = rand_array(6, 4, 9, -1.0, 1.0).mapv(|v| v as f32);
    let want = x.mapv(f64::from);
    assert_close("standard", &down(b, &b.upload_owned(x.clone())), &want);
    let xt = x.t().to_owned();
    let transposed = x.clone().reversed_axes();
    assert!(!transposed.is_standard_layout());
    assert_close(
        "transposed",
        &down(b, &b.upload_owned(transposed)),
        &xt.mapv(f64::from),
    );
    assert_eq!(b.shape(&b.upload_owned(Array2::zeros((0, 3)))), (0, 3));
}

fn concat_along_rows_and_columns<B: Backend<Elem = f32>>(b: &B) {
    let a = r32(&rand_array(5, 3, 1, -1.0, 1.0));
    let c = r32(&rand_array(2, 3, 2, -1.0, 1.0));
    let e = Array2::<f64>::zeros((0, 3));
    let (ta, tc, te) = (up(b, &a), up(b, &c), up(b, &e));
    let got = down(b, &b.concat(&[&ta, &te, &tc, &ta], Axis::Rows));
    let want = concatenate(NdAxis(0), &[a.view(), e.view(), c.view(), a.view()]).unwrap();
    assert_close("rows", &got, &want);

    let d = r32(&rand_array(5, 1, 3, -1.0, 1.0));
    let f = r32(&rand_array(5, 7, 4, -1.0, 1.0));
    let z = Array2::<f64>::zeros((5, 0));
    let (td, tf, tz) = (up(b, &d), up(b, &f), up(b, &z));
    let got = down(b, &b.concat(&[&ta, &td, &tz, &tf], Axis::Cols));
    let want = concatenate(NdAxis(1), &[a.view(), d.view(), z.view(), f.view()]).unwrap();
    assert_close("cols", &got, &want);
    // A single part, and parts without rows.
    assert_close("single", &down(b, &b.concat(&[&tf], Axis::Cols)), &f);
    let e2 = b.full(0, 4, 0.0);
    let got = b.concat(&[&te, &e2], Axis::Cols);
    assert_eq!(b.shape(&got), (0, 7));
    let got = b.concat(&[&te, &te], Axis::Rows);
    assert_eq!(b.shape(&got), (0, 3));
}

fn slices_along_rows_and_columns<B: Backend<Elem = f32>>(b: &B) {
    let x = r32(&rand_array(9, 6, 5, -1.0, 1.0));
    let tx = up(b, &x);
    for (start, end) in [(0, 9), (2, 5), (8, 9), (4, 4), (0, 1)] {
        let got = down(b, &b.slice(&tx, Axis::Rows, start, end));
        assert_close(
            &format!("rows {start}..{end}"),
            &got,
            &x.slice(s![start..end, ..]).to_owned(),
        );
    }
    for (start, end) in [(0, 6), (1, 4), (5, 6), (3, 3), (0, 2)] {
        let got = down(b, &b.slice(&tx, Axis::Cols, start, end));
        assert_close(
            &format!("cols {start}..{end}"),
            &got,
            &x.slice(s![.., start..end]).to_owned(),
        );
    }
    let empty = b.full(0, 6, 0.0);
    assert_eq!(b.shape(&b.slice(&empty, Axis::Cols, 1, 3)), (0, 2));
    assert_eq!(b.shape(&b.slice(&empty, Axis::Rows, 0, 0)), (0, 6));
}

fn slice_add_assign_accumulates_in_place<B: Backend<Elem = f32>>(b: &B) {
    let x = r32(&rand_array(8, 7, 6, -1.0, 1.0));
    let tx = up(b, &x);

    let src = r32(&rand_array(3, 7, 7, -1.0, 1.0));
    let mut acc = tx.clone();
    b.slice_add_assign(&mut acc, &up(b, &src), Axis::Rows, 4);
    let mut want = x.clone();
    want.slice_mut(s![4..7, ..]).scaled_add(1.0, &src);
    assert_close("rows 4..7", &down(b, &acc), &want);

    let src = r32(&rand_array(8, 2, 8, -1.0, 1.0));
    b.slice_add_assign(&mut acc, &up(b, &src), Axis::Cols, 5);
    want.slice_mut(s![.., 5..7]).scaled_add(1.0, &src);
    assert_close("then cols 5..7", &down(b, &acc), &want);

    // The tensor the accumulator was cloned from is unchanged.
    assert_close("source", &down(b, &tx), &x);

    // Slice gradients round trip: adding every column slice of x into zeros.
    let mut zero = b.full(8, 7, 0.0);
    for (start, end) in [(0, 3), (3, 4), (4, 7)] {
        let part = b.slice(&tx, Axis::Cols, start, end);
        b.slice_add_assign(&mut zero, &part, Axis::Cols, start);
    }
    assert_close("column round trip", &down(b, &zero), &x);
    // Empty sources change nothing.
    let before = down(b, &acc);
    b.slice_add_assign(&mut acc, &b.full(0, 7, 1.0), Axis::Rows, 8);
    b.slice_add_assign(&mut acc, &b.full(8, 0, 1.0), Axis::Cols, 3);
    assert_eq!(down(b, &acc), before);
}

fn gather_rows_with_repeats_and_empty_index<B: Backend<Elem = f32>>(b: &B) {
    let x = r32(&rand_array(10, 5, 9, -1.0, 1.0));
    let tx = up(b, &x);
    let idx = [3u32, 0, 9, 3, 3, 7, 0];
    let got = down(b, &b.gather_rows(&tx, &b.index_from_slice(&idx)));
    let want = x.select(NdAxis(0), &idx.map(|i| i as usize));
    assert_close("gather", &got, &want);
    let none = b.gather_rows(&tx, &b.index_from_slice(&[]));
    assert_eq!(b.shape(&none), (0, 5));
    // Gathering from a tensor without columns.
    let thin = b.gather_rows(&b.full(4, 0, 0.0), &b.index_from_slice(&[1, 2]));
    assert_eq!(b.shape(&thin), (2, 0));
}

fn scatter_reference(src: &Array2<f64>, idx: &[u32], rows: usize) -> Array2<f64> {
    let mut out = Array2::zeros((rows, src.ncols()));
    for (r, &i) in src.rows().into_iter().zip(idx) {
        let mut o = out.row_mut(i as usize);
        o += &r;
    }
    out
}

fn scatter_add_rows_sums_repeats<B: Backend<Elem = f32>>(b: &B) {
    // Repeated indices, an index never used, and rows beyond the largest index.
    let idx = [4u32, 1, 4, 0, 4, 2, 1];
    let rows = 9;
    let index = b.index_from_slice(&idx);
    for (k, cols) in [1usize, 3, 17].into_iter().enumerate() {
        let src = r32(&rand_array(idx.len(), cols, 10 + k as u64, -1.0, 1.0));
        let got = down(b, &b.scatter_add_rows(&up(b, &src), &index, rows));
        assert_close(
            &format!("scatter cols {cols}"),
            &got,
            &scatter_reference(&src, &idx, rows),
        );
    }
    // The same index (and its cached inverse) with a different output size.
    let src = r32(&rand_array(idx.len(), 2, 20, -1.0, 1.0));
    let got = down(b, &b.scatter_add_rows(&up(b, &src), &index, 5));
    assert_close("scatter rows 5", &got, &scatter_reference(&src, &idx, 5));
    // An empty index gives zeros; so does an empty output width.
    let got = down(
        b,
        &b.scatter_add_rows(&b.full(0, 3, 0.0), &b.index_from_slice(&[]), 4),
    );
    assert_eq!(got, Array2::<f64>::zeros((4, 3)));
    let got = b.scatter_add_rows(&b.full(7, 0, 0.0), &index, 6);
    assert_eq!(b.shape(&got), (6, 0));
    let got = b.scatter_add_rows(&b.full(0, 2, 0.0), &b.index_from_slice(&[]), 0);
    assert_eq!(b.shape(&got), (0, 2));
    // Gather then scatter is the adjoint pair: <gather(x), y> = <x, scatter(y)>.
    let x = r32(&rand_array(6, 4, 30, -1.0, 1.0));
    let many: Vec<u32> = (0..200).map(|i| (i * 7 % 6) as u32).collect();
    let gi = b.index_from_slice(&many);
    let y = r32(&rand_array(many.len(), 4, 31, -1.0, 1.0));
    let g = down(b, &b.gather_rows(&up(b, &x), &gi));
    let sc = down(b, &b.scatter_add_rows(&up(b, &y), &gi, 6));
    let lhs: f64 = (&g * &y).sum();
    let rhs: f64 = (&x * &sc).sum();
    assert!(
        (lhs - rhs).abs() <= 1e-4 * lhs.abs().max(1.0),
        "{lhs} vs {rhs}"
    );
}
