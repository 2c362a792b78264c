//! Dense matrix products (`shaders/matmul.wgsl`).
//!
//! One workgroup computes a 64 x 64 tile of the output from 16-deep slices
//! of both operands staged in workgroup memory; transposed operands are read
//! in place (no transposed copy). When the output has few tiles but the inner
//! dimension is long (the weight gradient `Xᵀ · dY` of a layer over many
//! nodes, say), the inner dimension is split over several workgroups whose
//! partial products a second kernel sums in a fixed order (deterministic).

use super::{Kernel, Wgpu, WgpuTensor, u};

const SRC: &str = include_str!("shaders/matmul.wgsl");

const fn k(entry: &'static str) -> Kernel {
    Kernel {
        module: "matmul",
        source: SRC,
        entry,
    }
}

/// Output tile edge (rows and columns) of one workgroup.
const TILE: usize = 64;
/// Depth of the staged slices; split-K chunks are multiples of it.
const BK: usize = 16;
/// Workgroups worth filling the device with before splitting the inner dimension.
const TARGET_GROUPS: usize = 512;
/// Inner-dimension length below which a product is never split.
const MIN_SPLIT_K: usize = 2048;
/// Smallest inner-dimension chunk per split.
const MIN_CHUNK: usize = 512;
/// Most splits of one product.
const MAX_SPLITS: usize = 64;

/// Number of inner-dimension splits for an `m x n` output with inner size `k`.
fn split_count(m: usize, n: usize, k: usize, tiles: usize, max_elems: usize) -> usize {
    if k < MIN_SPLIT_K || tiles >= TARGET_GROUPS / 2 {
        return 1;
    }
    let mut splits = (TARGET_GROUPS / tiles)
        .min(k / MIN_CHUNK)
        .clamp(1, MAX_SPLITS);
    while splits > 1 && splits.saturating_mul(m * n) > max_elems {
        splits /= 2;
    }
    splits
}

/// `op(a) · op(x)`, `op` transposing when `ta` / `tb` is set.
pub(super) fn matmul(b: &Wgpu, a: &WgpuTensor, x: &WgpuTensor, ta: bool, tb: bool) -> WgpuTensor {
    let (m, ka) = if ta {
        (a.cols, a.rows)
    } else {
        (a.rows, a.cols)
    };
    let (kb, n) = if tb {
        (x.cols, x.rows)
    } else {
        (x.rows, x.cols)
    };
    assert_eq!(ka, kb, "matmul: inner dimensions {ka} and {kb} differ");
    let kk = ka;
    let out = b.alloc(m, n);
    if m == 0 || n == 0 {
        return out;
    }
    let (tm, tn) = (m.div_ceil(TILE), n.div_ceil(TILE));
    let max_elems = usize::try_from(b.max_tensor_len()).unwrap_or(usize::MAX);
    let mut splits = split_count(m, n, kk, tm * tn, max_elems);
    let chunk = if splits > 1 {
        let c = kk.div_ceil(splits).next_multiple_of(BK);
        splits = kk.div_ceil(c);
        c
    } else {
        kk
    };
    let max_y = b.ctx.limits.max_compute_workgroups_per_dimension as usize;
    assert!(
        tn * splits <= max_y,
        "matmul: {n} output columns exceed this adapter's grid ({max_y} tiles of {TILE})"
    );
    let params = [
        u(m),
        u(n),
        u(kk),
        u32::from(ta),
        u32::from(tb),
        u(chunk),
        u(tn),
    ];
    let grid = [tm as u64, (tn * splits) as u64];
    if splits == 1 {
        b.ctx
            .dispatch_grid(&k("matmul"), &params, &[&out.buf, &a.buf, &x.buf], grid);
    } else {
        let partial = b.alloc(splits * m, n);
        b.ctx
            .dispatch_grid(&k("matmul"), &params, &[&partial.buf, &a.buf, &x.buf], grid);
        let len = m * n;
        b.ctx.dispatch(
            &k("sum_splits"),
            &[u(len), u(splits)],
            &[&out.buf, &partial.buf],
            len as u64,
        );
    }
    out
}
