//! Reductions, softmax, layer norm and losses (`shaders/reduce.wgsl`).
//!
//! Sums along an axis, the column statistics of a softmax along
//! [`Axis::Rows`] and the scalar losses run as *multi-pass* reductions: each
//! pass lets every 256-invocation workgroup fold a chunk of (at most
//! [`ITEMS`] entries per invocation of) each lane and combine its
//! invocations through workgroup memory, writing one partial per chunk; the
//! partials are reduced again until one chunk is left. A sum over the rows of
//! a `1,000,000 x 3` tensor thus takes two passes of many workgroups rather
//! than three serial loops over a million entries, and is summed pairwise
//! enough to stay accurate in `f32`.
//!
//! Row-wise softmax, its gradient, layer norm and its gradient are fused
//! single kernels: a power-of-two group of invocations per row (up to the
//! whole workgroup for wide rows) reduces its statistics in workgroup memory
//! and writes the result in the same kernel.

use super::context::Buf;
use super::{Kernel, Wgpu, WgpuIndex, WgpuTensor, elementwise, f, u};
use crate::backend::Axis;

const SRC: &str = include_str!("shaders/reduce.wgsl");

const fn k(entry: &'static str) -> Kernel {
    Kernel {
        module: "reduce",
        source: SRC,
        entry,
    }
}

/// Invocations per workgroup (`WG` in the prelude).
const WG: usize = super::context::WG as usize;
/// Entries one invocation folds serially per pass of a multi-pass reduction.
const ITEMS: usize = 32;
/// `sum_squares` reads back at most this many partials and adds them in `f64`.
const HOST_PARTIALS: usize = 1024;

/// Reduction modes (the `mode` codes of `shaders/reduce.wgsl`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// `Σ x`
    Sum = 0,
    /// `Σ x²`
    SumSq = 1,
    /// `max x`
    Max = 2,
    /// `Σ exp(x - shift)`, the shift per output lane from the second input.
    ExpShift = 3,
    /// `Σ x·y`
    Dot = 4,
    /// `Σ bce_with_logits(x, y)`
    Bce = 5,
}

impl Mode {
    fn two_inputs(self) -> bool {
        matches!(self, Mode::ExpShift | Mode::Dot | Mode::Bce)
    }

    /// Mode of the passes after the first (over partials).
    fn next(self) -> Mode {
        if self == Mode::Max {
            Mode::Max
        } else {
            Mode::Sum
        }
    }
}

/// Invocations per lane group: the next power of two of `len`, at most a workgroup.
fn group_width(len: usize) -> usize {
    len.next_power_of_two().clamp(1, WG)
}

/// One pass over the `x.rows x x.cols` matrix along `axis`. Returns the
/// partials (`chunks x cols` for `Axis::Rows`, `rows x chunks` for
/// `Axis::Cols`) and the number of chunks; `scale` multiplies the partials
/// when there is a single chunk (the final pass).
fn pass(
    b: &Wgpu,
    x: &WgpuTensor,
    y: Option<&WgpuTensor>,
    axis: Axis,
    mode: Mode,
    scale: f64,
) -> (WgpuTensor, usize) {
    let (rows, cols) = (x.rows, x.cols);
    let (width, chunk_len, chunks, groups, out) = match axis {
        Axis::Rows => {
            let cw = group_width(cols);
            let chunk_len = WG / cw * ITEMS;
            let chunks = rows.div_ceil(chunk_len);
            let col_blocks = cols.div_ceil(cw);
            (
                cw,
                chunk_len,
                chunks,
                chunks * col_blocks,
                b.alloc(chunks, cols),
            )
        }
        Axis::Cols => {
            let rw = group_width(cols);
            let chunk_len = rw * ITEMS;
            let chunks = cols.div_ceil(chunk_len);
            let row_blocks = rows.div_ceil(WG / rw);
            (
                rw,
                chunk_len,
                chunks,
                chunks * row_blocks,
                b.alloc(rows, chunks),
            )
        }
    };
    // col_reduce reads the number of column blocks where row_reduce reads chunks.
    let blocks = match axis {
        Axis::Rows => cols.div_ceil(width),
        Axis::Cols => chunks,
    };
    let scale = if chunks == 1 { scale } else { 1.0 };
    let params = [
        u(rows),
        u(cols),
        u(width),
        u(chunk_len),
        u(blocks),
        mode as u32,
        f(scale),
    ];
    let entry = match (axis, mode.two_inputs()) {
        (Axis::Rows, false) => "col_reduce",
        (Axis::Rows, true) => "col_reduce2",
        (Axis::Cols, false) => "row_reduce",
        (Axis::Cols, true) => "row_reduce2",
    };
    match y {
        Some(y) => b.ctx.dispatch_grid(
            &k(entry),
            &params,
            &[&out.buf, &x.buf, &y.buf],
            [groups as u64, 1],
        ),
        None => b
            .ctx
            .dispatch_grid(&k(entry), &params, &[&out.buf, &x.buf], [groups as u64, 1]),
    }
    (out, chunks)
}

/// Reduces `x` along `axis` (`Rows`: to `1 x cols`; `Cols`: to `rows x 1`)
/// in `mode`, with `y` the second input of a two-input mode, and multiplies
/// the result by `scale`. An empty reduction gives zeros.
fn reduce(
    b: &Wgpu,
    x: &WgpuTensor,
    y: Option<&WgpuTensor>,
    axis: Axis,
    mode: Mode,
    scale: f64,
) -> WgpuTensor {
    assert_eq!(y.is_some(), mode.two_inputs(), "second input of {mode:?}");
    let (len, (rows, cols)) = match axis {
        Axis::Rows => (x.rows, (1, x.cols)),
        Axis::Cols => (x.cols, (x.rows, 1)),
    };
    if len == 0 || rows * cols == 0 {
        return elementwise::full(b, rows, cols, 0.0);
    }
    let (mut cur, mut chunks) = pass(b, x, y, axis, mode, scale);
    while chunks > 1 {
        (cur, chunks) = pass(b, &cur, None, axis, mode.next(), scale);
    }
    cur
}

/// `x` viewed as one `1 x len` row (shares the buffer).
fn flat(x: &WgpuTensor) -> WgpuTensor {
    WgpuTensor {
        buf: x.buf.clone(),
        rows: 1,
        cols: x.len(),
    }
}

/// Sums `t` down to `rows x cols`, each either `t`'s size or 1.
pub(super) fn sum_to(b: &Wgpu, t: &WgpuTensor, rows: usize, cols: usize) -> WgpuTensor {
    let over_rows = rows == 1 && t.rows != 1;
    let over_cols = cols == 1 && t.cols != 1;
    match (over_rows, over_cols) {
        (false, false) => t.clone(),
        (true, false) => reduce(b, t, None, Axis::Rows, Mode::Sum, 1.0),
        (false, true) => reduce(b, t, None, Axis::Cols, Mode::Sum, 1.0),
        (true, true) => reduce(b, &flat(t), None, Axis::Cols, Mode::Sum, 1.0),
    }
}

/// Sum over `axis`, kept 2-D (`Rows`: `1 x cols`; `Cols`: `rows x 1`).
pub(super) fn sum_axis(b: &Wgpu, x: &WgpuTensor, axis: Axis) -> WgpuTensor {
    reduce(b, x, None, axis, Mode::Sum, 1.0)
}

/// Sum of squares of all entries: reduced on the device to at most
/// [`HOST_PARTIALS`] partials, which are added in `f64` on the host.
pub(super) fn sum_squares(b: &Wgpu, x: &WgpuTensor) -> f64 {
    sum_squares_many(b, &[x])[0]
}

/// [`sum_squares`] of several tensors: every tensor is reduced on the
/// device, then all the partials come back in one read.
pub(super) fn sum_squares_many(b: &Wgpu, xs: &[&WgpuTensor]) -> Vec<f64> {
    let partials: Vec<Option<WgpuTensor>> = xs
        .iter()
        .map(|x| {
            if x.len() == 0 {
                return None;
            }
            let (mut cur, mut chunks) = pass(b, &flat(x), None, Axis::Cols, Mode::SumSq, 1.0);
            while chunks > HOST_PARTIALS {
                (cur, chunks) = pass(b, &cur, None, Axis::Cols, Mode::Sum, 1.0);
            }
            Some(cur)
        })
        .collect();
    let reads: Vec<(&Buf, u64)> = partials
        .iter()
        .flatten()
        .map(|t| (&*t.buf, t.bytes()))
        .collect();
    let mut bytes = b.ctx.read_many(&reads).into_iter();
    partials
        .iter()
        .map(|t| match t {
            None => 0.0,
            Some(_) => {
                let v: Vec<f32> =
                    bytemuck::pod_collect_to_vec(&bytes.next().expect("one read each"));
                v.iter().map(|&p| f64::from(p)).sum()
            }
        })
        .collect()
}

/// Softmax (`log`: log-softmax) along `axis`: one fused kernel per row for
/// `Cols`; column maxima and exponential sums by multi-pass reductions, then
/// an element-wise pass, for `Rows`.
pub(super) fn softmax(b: &Wgpu, x: &WgpuTensor, axis: Axis, log: bool) -> WgpuTensor {
    let out = b.alloc(x.rows, x.cols);
    let n = x.len();
    if n == 0 {
        return out;
    }
    match axis {
        Axis::Cols => {
            let rw = group_width(x.cols);
            b.ctx.dispatch_grid(
                &k("softmax_rows"),
                &[u(x.rows), u(x.cols), u(rw), u32::from(log)],
                &[&out.buf, &x.buf],
                [x.rows.div_ceil(WG / rw) as u64, 1],
            );
        }
        Axis::Rows => {
            let m = reduce(b, x, None, Axis::Rows, Mode::Max, 1.0);
            let s = reduce(b, x, Some(&m), Axis::Rows, Mode::ExpShift, 1.0);
            b.ctx.dispatch(
                &k("softmax_apply_cols"),
                &[u(n), u(x.cols), u32::from(log)],
                &[&out.buf, &x.buf, &m.buf, &s.buf],
                n as u64,
            );
        }
    }
    out
}

/// Backward of [`softmax`] from its output `y`.
pub(super) fn softmax_grad(
    b: &Wgpu,
    y: &WgpuTensor,
    dy: &WgpuTensor,
    axis: Axis,
    log: bool,
) -> WgpuTensor {
    assert_eq!((y.rows, y.cols), (dy.rows, dy.cols), "softmax_grad shapes");
    let out = b.alloc(y.rows, y.cols);
    let n = y.len();
    if n == 0 {
        return out;
    }
    match axis {
        Axis::Cols => {
            let rw = group_width(y.cols);
            b.ctx.dispatch_grid(
                &k("softmax_grad_rows"),
                &[u(y.rows), u(y.cols), u(rw), u32::from(log)],
                &[&out.buf, &y.buf, &dy.buf],
                [y.rows.div_ceil(WG / rw) as u64, 1],
            );
        }
        Axis::Rows => {
            let s = if log {
                reduce(b, dy, None, Axis::Rows, Mode::Sum, 1.0)
            } else {
                reduce(b, dy, Some(y), Axis::Rows, Mode::Dot, 1.0)
            };
            b.ctx.dispatch(
                &k("softmax_grad_apply_cols"),
                &[u(n), u(y.cols), u32::from(log)],
                &[&out.buf, &y.buf, &dy.buf, &s.buf],
                n as u64,
            );
        }
    }
    out
}

/// Row-wise standardisation `(x̂, rstd)` (biased variance, two passes over
/// each row in one fused kernel).
pub(super) fn layer_norm(b: &Wgpu, x: &WgpuTensor, eps: f64) -> (WgpuTensor, WgpuTensor) {
    let xhat = b.alloc(x.rows, x.cols);
    let rstd = b.alloc(x.rows, 1);
    if x.rows > 0 {
        let rw = group_width(x.cols);
        b.ctx.dispatch_grid(
            &k("layer_norm_rows"),
            &[u(x.rows), u(x.cols), u(rw), f(x.cols.max(1) as f64), f(eps)],
            &[&xhat.buf, &x.buf, &rstd.buf],
            [x.rows.div_ceil(WG / rw) as u64, 1],
        );
    }
    (xhat, rstd)
}

/// Backward of [`layer_norm`] with respect to `x`.
pub(super) fn layer_norm_grad(
    b: &Wgpu,
    xhat: &WgpuTensor,
    rstd: &WgpuTensor,
    dxhat: &WgpuTensor,
) -> WgpuTensor {
    assert_eq!(
        (xhat.rows, xhat.cols),
        (dxhat.rows, dxhat.cols),
        "layer_norm_grad shapes"
    );
    assert_eq!(rstd.len(), xhat.rows, "layer_norm_grad: rstd is rows x 1");
    let out = b.alloc(xhat.rows, xhat.cols);
    if xhat.len() > 0 {
        let rw = group_width(xhat.cols);
        b.ctx.dispatch_grid(
            &k("layer_norm_grad_rows"),
            &[
                u(xhat.rows),
                u(xhat.cols),
                u(rw),
                f(xhat.cols.max(1) as f64),
            ],
            &[&out.buf, &xhat.buf, &rstd.buf, &dxhat.buf],
            [xhat.rows.div_ceil(WG / rw) as u64, 1],
        );
    }
    out
}

/// Mean negative log-likelihood of the targets (`1 x 1`; 0 without targets).
pub(super) fn nll(b: &Wgpu, logp: &WgpuTensor, target: &WgpuIndex) -> WgpuTensor {
    let n = target.len;
    if n == 0 {
        return elementwise::full(b, 1, 1, 0.0);
    }
    assert!(n <= logp.rows, "nll: {n} targets for {} rows", logp.rows);
    let picked = b.alloc(1, n);
    b.ctx.dispatch(
        &k("nll_gather"),
        &[u(n), u(logp.cols)],
        &[&picked.buf, &logp.buf, &target.buf],
        n as u64,
    );
    reduce(b, &picked, None, Axis::Cols, Mode::Sum, -1.0 / n as f64)
}

/// Backward of [`nll`]: `-dy / n` at each target, zero elsewhere (`rows x cols`).
pub(super) fn nll_grad(
    b: &Wgpu,
    dy: &WgpuTensor,
    target: &WgpuIndex,
    rows: usize,
    cols: usize,
) -> WgpuTensor {
    let out = b.alloc(rows, cols);
    let len = out.len();
    let n = target.len;
    b.ctx.dispatch(
        &k("nll_grad"),
        &[u(len), u(cols), u(n), f(n as f64)],
        &[&out.buf, &dy.buf, &target.buf],
        len as u64,
    );
    out
}

/// Mean binary cross-entropy with logits over all entries (`1 x 1`), in the
/// stable form `max(z, 0) - z·y + log(1 + exp(-|z|))`.
pub(super) fn bce_with_logits(b: &Wgpu, z: &WgpuTensor, y: &WgpuTensor) -> WgpuTensor {
    assert_eq!(z.len(), y.len(), "bce_with_logits shapes");
    let n = z.len();
    if n == 0 {
        return elementwise::full(b, 1, 1, 0.0);
    }
    reduce(
        b,
        &flat(z),
        Some(&flat(y)),
        Axis::Cols,
        Mode::Bce,
        1.0 / n as f64,
    )
}

/// Backward of [`bce_with_logits`]: `(sigmoid(z) - y) · dy / n`.
pub(super) fn bce_with_logits_grad(
    b: &Wgpu,
    z: &WgpuTensor,
    y: &WgpuTensor,
    dy: &WgpuTensor,
) -> WgpuTensor {
    assert_eq!(z.len(), y.len(), "bce_with_logits_grad shapes");
    let out = b.alloc(z.rows, z.cols);
    let n = z.len();
    b.ctx.dispatch(
        &k("bce_grad"),
        &[u(n), f(n.max(1) as f64)],
        &[&out.buf, &z.buf, &y.buf, &dy.buf],
        n as u64,
    );
    out
}
