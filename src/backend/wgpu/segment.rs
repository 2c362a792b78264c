//! Segment (per-graph) operations and node–supernode attention kernels
//! (`shaders/segment.wgsl`).
//!
//! Two kinds of kernels:
//!
//! * **Reductions over the rows of each segment** (`segment_reduce`, the
//!   statistics of `segment_softmax`, the dot products of its backward,
//!   `segment_weighted_sum`) run one workgroup per *chunk* of rows. When every
//!   segment has at most [`chunk_rows`] rows, the chunks are the segments and
//!   one dispatch writes the `G x width` result. Otherwise long segments are
//!   split into chunks (offsets built on the host from the segment pointer's
//!   host copy), the chunks' partial results are written as rows grouped by
//!   segment, and the same reduction runs again over them, until every
//!   segment fits one chunk. A graph of 10^6 rows is thus reduced by
//!   thousands of workgroups, and a batch of many small graphs by one
//!   workgroup per graph, without float atomics.
//! * **Per-row kernels** (`segment_broadcast`, the element-wise halves of
//!   softmax and the backward passes, `segment_scores`, `segment_mix`) run one
//!   invocation per output entry and find their row's segment by binary search
//!   in the segment pointer, so no `N`-long row-to-segment map is built.
//!
//! Rows outside `ptr[0]..ptr[G]` follow the CPU backend: they are left as the
//! input by the softmax kernels, zero in broadcasts and reduction gradients,
//! and zero (nothing added) in the attention kernels.

use std::sync::Arc;

use super::context::WG;
use super::{Buf, Kernel, Wgpu, WgpuIndex, WgpuTensor, u};
use crate::backend::SegmentReduce;

const SRC: &str = include_str!("shaders/segment.wgsl");

const fn k(entry: &'static str) -> Kernel {
    Kernel {
        module: "segment",
        source: SRC,
        entry,
    }
}

/// Work (rows × entries) one chunk workgroup reduces: 64 values per invocation.
const CHUNK_WORK: usize = 64 * WG as usize;

/// Rows per chunk for rows of `width` entries (at least 64).
fn chunk_rows(width: usize) -> usize {
    (CHUNK_WORK / width.max(1)).max(64)
}

/// Invocations sharing one entry of a chunk reduction (1 for wide rows).
fn lanes(width: usize) -> u32 {
    u((WG as usize / width.max(1)).max(1))
}

/// Number of segments of `ptr`.
fn segments(ptr: &WgpuIndex) -> usize {
    assert!(ptr.len >= 1, "segment offsets need G + 1 >= 1 entries");
    ptr.len - 1
}

/// Splits the segments of `ptr` into chunks of at most `k` rows: the chunks'
/// row offsets (`P + 1`, contiguous) and, per segment, its range of chunks
/// (`G + 1`). `None` when every segment already fits one chunk.
fn split(ptr: &[u32], k: usize) -> Option<(Vec<u32>, Vec<u32>)> {
    if ptr.windows(2).all(|w| ((w[1] - w[0]) as usize) <= k) {
        return None;
    }
    let mut bounds = Vec::new();
    let mut chunk_ptr = Vec::with_capacity(ptr.len());
    chunk_ptr.push(0);
    for w in ptr.windows(2) {
        bounds.extend((w[0]..w[1]).step_by(k));
        chunk_ptr.push(u(bounds.len()));
    }
    bounds.push(*ptr.last().expect("non-empty offsets"));
    Some((bounds, chunk_ptr))
}

/// What a chunk reduction computes for each (segment, entry).
#[derive(Debug, Clone, Copy)]
enum Reduction {
    /// `Σ_rows term`, with `mode` 0: `a[v, e]`; 1: `a[v, e] · b[v, e]`;
    /// 2: `a[v, e / h] · b[v, e % h]`. Divided by the segment's length when `mean`.
    Sum { mode: u32, h: u32, mean: bool },
    /// Maximum and the row holding it (first one on ties; `u32::MAX` when empty).
    Max,
    /// Softmax statistics: maximum `m` and `Σ exp(x - m)`.
    Stats,
}

/// Reduces the rows of each segment of `ptr` to a `G x width` result (and a
/// second one, the arg-max rows or the sums of exponentials, for `Max` and
/// `Stats`). Inputs `a`, `b` are read as the [`Reduction`] says; `b` is
/// unused (but bound) for `Max`, `Stats` and `Sum` mode 0.
fn segmented(
    b: &Wgpu,
    red: Reduction,
    a: &WgpuTensor,
    bb: &WgpuTensor,
    width: usize,
    ptr: &WgpuIndex,
) -> (WgpuTensor, Option<WgpuTensor>) {
    let g = segments(ptr);
    let two = !matches!(red, Reduction::Sum { .. });
    let out = b.alloc(g, width);
    let out2 = two.then(|| b.alloc(g, width));
    if g == 0 || width == 0 {
        return (out, out2);
    }
    let rows_per_chunk = chunk_rows(width);
    let lanes = lanes(width);
    // The current level: its rows (x, then partial results) and their grouping.
    let mut groups = b.host(ptr).to_vec();
    let mut groups_buf = ptr.buf.clone();
    let (mut xa, mut xb) = (a.buf.clone(), bb.buf.clone());
    let mut level = 0u32;
    loop {
        let chunked = split(&groups, rows_per_chunk);
        let (bnd, chunks, o1, o2) = match &chunked {
            None => (
                groups_buf.clone(),
                g,
                out.buf.clone(),
                out2.as_ref().map(|t| t.buf.clone()),
            ),
            Some((bounds, _)) => {
                let n = bounds.len() - 1;
                let part = || Arc::new(b.ctx.alloc(4 * (n * width) as u64));
                (b.upload_u32(bounds), n, part(), two.then(part))
            }
        };
        let last = chunked.is_none();
        let partial = u32::from(level > 0);
        let grid = [chunks as u64, 1];
        match red {
            Reduction::Sum { mode, h, mean } => b.ctx.dispatch_grid(
                &k("chunk_sum"),
                &[
                    u(width),
                    if level > 0 { 0 } else { mode },
                    h,
                    lanes,
                    u32::from(mean && last),
                    u(chunks),
                ],
                &[&o1, &ptr.buf, &xa, &xb, &bnd],
                grid,
            ),
            Reduction::Max | Reduction::Stats => {
                let entry = if matches!(red, Reduction::Max) {
                    "chunk_max"
                } else {
                    "chunk_stats"
                };
                let o2 = o2.as_ref().expect("two outputs");
                b.ctx.dispatch_grid(
                    &k(entry),
                    &[u(width), lanes, partial, u(chunks)],
                    &[&o1, o2, &xa, &xb, &bnd],
                    grid,
                );
            }
        }
        let Some((_, chunk_ptr)) = chunked else {
            break;
        };
        // Next level: the partial results, grouped by segment.
        groups_buf = b.upload_u32(&chunk_ptr);
        groups = chunk_ptr;
        xb = o2.unwrap_or_else(|| o1.clone());
        xa = o1;
        level += 1;
    }
    (out, out2)
}

/// Records a per-row kernel over `n` output entries.
fn per_row(b: &Wgpu, entry: &'static str, params: &[u32], bufs: &[&Buf], n: usize) {
    b.ctx.dispatch(&k(entry), params, bufs, n as u64);
}

/// [`Backend::segment_reduce`](crate::backend::Backend::segment_reduce).
///
/// For `Max`, the arg-max index is computed and kept on the device (the
/// backward reads it there); its host copy is read back here, since
/// [`WgpuIndex`] always carries one.
pub(super) fn reduce(
    b: &Wgpu,
    x: &WgpuTensor,
    ptr: &WgpuIndex,
    op: SegmentReduce,
) -> (WgpuTensor, Option<WgpuIndex>) {
    match op {
        SegmentReduce::Sum | SegmentReduce::Mean => {
            let red = Reduction::Sum {
                mode: 0,
                h: 0,
                mean: op == SegmentReduce::Mean,
            };
            (segmented(b, red, x, x, x.cols, ptr).0, None)
        }
        SegmentReduce::Max => {
            let (out, arg) = segmented(b, Reduction::Max, x, x, x.cols, ptr);
            let arg = arg.expect("max has an arg-max");
            let len = arg.len();
            (out, Some(b.device_index(arg.buf, len)))
        }
    }
}

/// [`Backend::segment_reduce_grad`](crate::backend::Backend::segment_reduce_grad).
pub(super) fn reduce_grad(
    b: &Wgpu,
    dy: &WgpuTensor,
    ptr: &WgpuIndex,
    op: SegmentReduce,
    argmax: Option<&WgpuIndex>,
    rows: usize,
) -> WgpuTensor {
    let g = segments(ptr);
    assert_eq!(
        dy.rows, g,
        "segment_reduce_grad: dy must have one row per segment"
    );
    let cols = dy.cols;
    let out = b.alloc(rows, cols);
    let n = out.len();
    match op {
        SegmentReduce::Sum | SegmentReduce::Mean => per_row(
            b,
            "seg_broadcast",
            &[u(n), u(cols), u(g), u32::from(op == SegmentReduce::Mean)],
            &[&out.buf, &ptr.buf, &dy.buf],
            n,
        ),
        SegmentReduce::Max => {
            let arg = argmax.expect("max backward needs argmax");
            assert_eq!(arg.len, g * cols, "arg-max length");
            per_row(
                b,
                "seg_max_grad",
                &[u(n), u(cols), u(g)],
                &[&out.buf, &ptr.buf, &dy.buf, &arg.buf],
                n,
            );
        }
    }
    out
}

/// [`Backend::segment_softmax`](crate::backend::Backend::segment_softmax):
/// per-segment statistics (chunk reduction), then one pass over the entries.
pub(super) fn softmax(b: &Wgpu, x: &WgpuTensor, ptr: &WgpuIndex) -> WgpuTensor {
    let g = segments(ptr);
    let (m, s) = segmented(b, Reduction::Stats, x, x, x.cols, ptr);
    let s = s.expect("stats have sums");
    let out = b.alloc(x.rows, x.cols);
    let n = out.len();
    per_row(
        b,
        "seg_softmax",
        &[u(n), u(x.cols), u(g)],
        &[&out.buf, &ptr.buf, &x.buf, &m.buf, &s.buf],
        n,
    );
    out
}

/// [`Backend::segment_softmax_grad`](crate::backend::Backend::segment_softmax_grad):
/// `y ∘ (dy - Σ_segment dy ∘ y)`.
pub(super) fn softmax_grad(
    b: &Wgpu,
    y: &WgpuTensor,
    dy: &WgpuTensor,
    ptr: &WgpuIndex,
) -> WgpuTensor {
    assert_eq!((y.rows, y.cols), (dy.rows, dy.cols), "softmax_grad shapes");
    let g = segments(ptr);
    let red = Reduction::Sum {
        mode: 1,
        h: 0,
        mean: false,
    };
    let (dot, _) = segmented(b, red, dy, y, y.cols, ptr);
    let out = b.alloc(y.rows, y.cols);
    let n = out.len();
    per_row(
        b,
        "seg_softmax_grad",
        &[u(n), u(y.cols), u(g)],
        &[&out.buf, &ptr.buf, &y.buf, &dy.buf, &dot.buf],
        n,
    );
    out
}

/// [`Backend::segment_broadcast`](crate::backend::Backend::segment_broadcast).
pub(super) fn broadcast(b: &Wgpu, x: &WgpuTensor, ptr: &WgpuIndex, rows: usize) -> WgpuTensor {
    let g = segments(ptr);
    assert_eq!(x.rows, g, "segment_broadcast: one row per segment");
    let out = b.alloc(rows, x.cols);
    let n = out.len();
    per_row(
        b,
        "seg_broadcast",
        &[u(n), u(x.cols), u(g), 0],
        &[&out.buf, &ptr.buf, &x.buf],
        n,
    );
    out
}

/// [`Backend::segment_scores`](crate::backend::Backend::segment_scores).
pub(super) fn scores(
    b: &Wgpu,
    k: &WgpuTensor,
    q: &WgpuTensor,
    ptr: &WgpuIndex,
    m: usize,
) -> WgpuTensor {
    let g = segments(ptr);
    assert_eq!(k.cols, q.cols, "segment_scores: k and q widths");
    assert_eq!(q.rows, g * m, "segment_scores: q must have G·m rows");
    let out = b.alloc(k.rows, m);
    let n = out.len();
    per_row(
        b,
        "seg_scores",
        &[u(n), u(m), u(k.cols), u(g)],
        &[&out.buf, &ptr.buf, &k.buf, &q.buf],
        n,
    );
    out
}

/// Records `out (+)= segment_mix(a, uu)` (`add` keeps `out`'s contents).
fn mix_into(
    b: &Wgpu,
    out: &WgpuTensor,
    a: &WgpuTensor,
    uu: &WgpuTensor,
    ptr: &WgpuIndex,
    add: bool,
) {
    let g = segments(ptr);
    assert_eq!(uu.rows, g * a.cols, "segment_mix: u must have G·M rows");
    assert_eq!(
        (out.rows, out.cols),
        (a.rows, uu.cols),
        "segment_mix shapes"
    );
    let n = out.len();
    per_row(
        b,
        "seg_mix",
        &[u(n), u(uu.cols), u(a.cols), u(g), u32::from(add)],
        &[&out.buf, &ptr.buf, &a.buf, &uu.buf],
        n,
    );
}

/// [`Backend::segment_mix`](crate::backend::Backend::segment_mix).
pub(super) fn mix(b: &Wgpu, a: &WgpuTensor, uu: &WgpuTensor, ptr: &WgpuIndex) -> WgpuTensor {
    let out = b.alloc(a.rows, uu.cols);
    mix_into(b, &out, a, uu, ptr, false);
    out
}

/// [`Backend::segment_mix_add`](crate::backend::Backend::segment_mix_add):
/// in place, after un-sharing `acc`.
pub(super) fn mix_add(
    b: &Wgpu,
    acc: &mut WgpuTensor,
    a: &WgpuTensor,
    uu: &WgpuTensor,
    ptr: &WgpuIndex,
) {
    b.make_unique(acc);
    mix_into(b, acc, a, uu, ptr, true);
}

/// [`Backend::segment_weighted_sum`](crate::backend::Backend::segment_weighted_sum):
/// a chunk reduction of the outer products `a[v]ᵀ ⊗ x[v]` (`M·h` entries per row).
pub(super) fn weighted_sum(
    b: &Wgpu,
    a: &WgpuTensor,
    x: &WgpuTensor,
    ptr: &WgpuIndex,
) -> WgpuTensor {
    assert_eq!(a.rows, x.rows, "segment_weighted_sum: a and x rows");
    let (m, h) = (a.cols, x.cols);
    let red = Reduction::Sum {
        mode: 2,
        h: u(h),
        mean: false,
    };
    let (out, _) = segmented(b, red, a, x, m * h, ptr);
    WgpuTensor {
        buf: out.buf,
        rows: out.rows * m,
        cols: h,
    }
}
