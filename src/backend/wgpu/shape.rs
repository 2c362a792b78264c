//! Shape manipulation: concat, slices, gathers and scatters (`shaders/shape.wgsl`).
//!
//! Contiguous blocks (concatenation and slices along rows) are buffer
//! copies; column blocks are strided copies on the device. Row scatters sum
//! through the index's inverse map (built on the host once per index), so
//! every output entry is written by exactly one invocation, without atomics.

use super::context::Buf;
use super::{Kernel, Wgpu, WgpuIndex, WgpuTensor, elementwise, u};
use crate::backend::Axis;

const SRC: &str = include_str!("shaders/shape.wgsl");

const fn k(entry: &'static str) -> Kernel {
    Kernel {
        module: "shape",
        source: SRC,
        entry,
    }
}

/// A `rows x cols` block of `src` starting at entry `src_off` (row stride
/// `src_stride`) copied (or, with `add`, added) into `dst` at entry `dst_off`
/// (row stride `dst_stride`).
#[allow(clippy::too_many_arguments)]
fn block(
    b: &Wgpu,
    add: bool,
    dst: &Buf,
    dst_off: usize,
    dst_stride: usize,
    src: &Buf,
    src_off: usize,
    src_stride: usize,
    rows: usize,
    cols: usize,
) {
    let n = rows * cols;
    if n == 0 {
        return;
    }
    let entry = if add { "add_block" } else { "copy_block" };
    b.ctx.dispatch(
        &k(entry),
        &[
            u(n),
            u(cols),
            u(src_stride),
            u(src_off),
            u(dst_stride),
            u(dst_off),
        ],
        &[dst, src],
        n as u64,
    );
}

/// Concatenation along rows (buffer copies) or columns (strided copies).
/// No parts give a `0 x 0` tensor.
pub(super) fn concat(b: &Wgpu, parts: &[&WgpuTensor], axis: Axis) -> WgpuTensor {
    let Some(first) = parts.first() else {
        return b.alloc(0, 0);
    };
    match axis {
        Axis::Rows => {
            let cols = first.cols;
            assert!(
                parts.iter().all(|p| p.cols == cols),
                "concat along rows needs equal column counts"
            );
            let rows = parts.iter().map(|p| p.rows).sum();
            let out = b.alloc(rows, cols);
            let mut off = 0u64;
            for p in parts {
                b.ctx.copy(&p.buf, 0, &out.buf, off, p.bytes());
                off += p.bytes();
            }
            out
        }
        Axis::Cols => {
            let rows = first.rows;
            assert!(
                parts.iter().all(|p| p.rows == rows),
                "concat along columns needs equal row counts"
            );
            let cols = parts.iter().map(|p| p.cols).sum();
            let out = b.alloc(rows, cols);
            let mut off = 0;
            for p in parts {
                block(
                    b, false, &out.buf, off, cols, &p.buf, 0, p.cols, rows, p.cols,
                );
                off += p.cols;
            }
            out
        }
    }
}

/// Rows (a buffer copy) or columns (a strided copy) `start..end` of `x`.
pub(super) fn slice(b: &Wgpu, x: &WgpuTensor, axis: Axis, start: usize, end: usize) -> WgpuTensor {
    assert!(start <= end, "slice: start {start} > end {end}");
    match axis {
        Axis::Rows => {
            assert!(end <= x.rows, "slice: rows {start}..{end} of {}", x.rows);
            let out = b.alloc(end - start, x.cols);
            b.ctx.copy(
                &x.buf,
                4 * (start * x.cols) as u64,
                &out.buf,
                0,
                out.bytes(),
            );
            out
        }
        Axis::Cols => {
            assert!(end <= x.cols, "slice: columns {start}..{end} of {}", x.cols);
            let w = end - start;
            let out = b.alloc(x.rows, w);
            if w == x.cols {
                b.ctx.copy(&x.buf, 0, &out.buf, 0, out.bytes());
            } else {
                block(b, false, &out.buf, 0, w, &x.buf, start, x.cols, x.rows, w);
            }
            out
        }
    }
}

/// `acc[rows or columns start..] += src`, in place (copy on write).
pub(super) fn slice_add_assign(
    b: &Wgpu,
    acc: &mut WgpuTensor,
    src: &WgpuTensor,
    axis: Axis,
    start: usize,
) {
    let dst_off = match axis {
        Axis::Rows => {
            assert!(
                src.cols == acc.cols && start + src.rows <= acc.rows,
                "slice_add_assign: {} x {} at row {start} of {} x {}",
                src.rows,
                src.cols,
                acc.rows,
                acc.cols
            );
            start * acc.cols
        }
        Axis::Cols => {
            assert!(
                src.rows == acc.rows && start + src.cols <= acc.cols,
                "slice_add_assign: {} x {} at column {start} of {} x {}",
                src.rows,
                src.cols,
                acc.rows,
                acc.cols
            );
            start
        }
    };
    if src.len() == 0 {
        return;
    }
    b.make_unique(acc);
    block(
        b, true, &acc.buf, dst_off, acc.cols, &src.buf, 0, src.cols, src.rows, src.cols,
    );
}

/// Rows `x[idx[i]]` (indices are checked against `x`'s rows on the host copy).
pub(super) fn gather_rows(b: &Wgpu, x: &WgpuTensor, idx: &WgpuIndex) -> WgpuTensor {
    if let Some(&bad) = b.host(idx).iter().find(|&&i| i as usize >= x.rows) {
        panic!("gather_rows: index {bad} out of range for {} rows", x.rows);
    }
    let out = b.alloc(idx.len, x.cols);
    let n = out.len();
    b.ctx.dispatch(
        &k("gather_rows"),
        &[u(n), u(x.cols)],
        &[&out.buf, &x.buf, &idx.buf],
        n as u64,
    );
    out
}

/// The inverse of an index vector: `ptr` (`max + 2` entries, `[0]` for an
/// empty index) and `pos`, the positions holding each value in ascending
/// order.
fn inverse_map(idx: &[u32]) -> (Vec<u32>, Vec<u32>) {
    let m = idx.iter().max().map_or(0, |&v| v as usize + 1);
    let mut ptr = vec![0u32; m + 1];
    for &r in idx {
        ptr[r as usize + 1] += 1;
    }
    for r in 0..m {
        ptr[r + 1] += ptr[r];
    }
    let mut next = ptr.clone();
    let mut pos = vec![0u32; idx.len()];
    for (i, &r) in idx.iter().enumerate() {
        pos[next[r as usize] as usize] = u(i);
        next[r as usize] += 1;
    }
    (ptr, pos)
}

/// `out[idx[i]] += src[i]` into a zero `rows x src.cols` tensor: each output
/// entry sums its sources through the inverse map (in ascending position
/// order, as the CPU does), without atomics.
pub(super) fn scatter_add_rows(
    b: &Wgpu,
    src: &WgpuTensor,
    idx: &WgpuIndex,
    rows: usize,
) -> WgpuTensor {
    assert_eq!(
        idx.len, src.rows,
        "scatter_add_rows: one index per source row"
    );
    let Some(&max) = b.host(idx).iter().max() else {
        return elementwise::full(b, rows, src.cols, 0.0);
    };
    assert!(
        (max as usize) < rows,
        "scatter_add_rows: index {max} out of range for {rows} rows"
    );
    let (ptr, pos) = idx.inverse.get_or_init(|| {
        let (ptr, pos) = inverse_map(b.host(idx));
        (b.upload_u32(&ptr), b.upload_u32(&pos))
    });
    let out = b.alloc(rows, src.cols);
    let n = out.len();
    b.ctx.dispatch(
        &k("scatter_rows"),
        &[u(n), u(src.cols), max + 1],
        &[&out.buf, &src.buf, ptr.as_ref(), pos.as_ref()],
        n as u64,
    );
    out
}

#[cfg(test)]
mod tests {
    use super::inverse_map;

    #[test]
    fn inverse_map_lists_positions_in_order() {
        let (ptr, pos) = inverse_map(&[2, 0, 2, 3, 0]);
        assert_eq!(ptr, vec![0, 2, 2, 4, 5]);
        assert_eq!(pos, vec![1, 4, 0, 2, 3]);
        assert_eq!(inverse_map(&[]), (vec![0], vec![]));
    }
}
