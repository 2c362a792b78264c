// Reductions, softmax, layer norm and losses.
//
// Two layouts of a 256-invocation workgroup recur:
// - row groups: `rw` (a power of two) invocations per row, `256 / rw` rows
//   per workgroup; invocation `t` is lane `t % rw` of row `t / rw`;
// - column groups: `cw` (a power of two) columns per workgroup, `256 / cw`
//   lanes down each column; invocation `t` is lane `t / cw` of column `t % cw`.
// Each lane folds its strided share serially, then `group_reduce` combines
// the lanes through workgroup memory.

@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<storage, read> a: array<f32>;
@group(0) @binding(3) var<storage, read> b: array<f32>;
@group(0) @binding(4) var<storage, read> c: array<f32>;
// Aliases of binding 3 for the entry points that write a second output
// (layer_norm) or read indices (nll); no entry point uses two of them.
@group(0) @binding(3) var<storage, read_write> out2: array<f32>;
@group(0) @binding(3) var<storage, read> idx: array<u32>;

const F32_MAX: f32 = 3.40282347e38;

var<workgroup> sh: array<f32, 256>;

// Reduction modes (`Mode` in reduce.rs). One input: 0 sum, 1 sum of squares, 2 max.
// Two inputs: 3 Σ exp(a - shift) with the shift read from `b` at the lane's
// output index, 4 Σ a·b, 5 Σ bce_with_logits(a, b).
const SUM_SQ: u32 = 1u;
const MAX: u32 = 2u;
const EXP_SHIFT: u32 = 3u;
const DOT: u32 = 4u;

fn combine(is_max: bool, x: f32, y: f32) -> f32 {
    if (is_max) {
        return max(x, y);
    }
    return x + y;
}

fn identity(is_max: bool) -> f32 {
    return select(0.0, -F32_MAX, is_max);
}

// Combines `v` over the `n` (a power of two) invocations of a group: member
// `lane` is invocation `t`, members are `step` apart and member 0 is `base`.
// Every invocation gets its group's result. Call in uniform control flow.
fn group_reduce(t: u32, lane: u32, base: u32, step: u32, n: u32, v: f32, is_max: bool) -> f32 {
    sh[t] = v;
    workgroupBarrier();
    for (var s = n >> 1u; s > 0u; s = s >> 1u) {
        if (lane < s) {
            sh[t] = combine(is_max, sh[t], sh[t + s * step]);
        }
        workgroupBarrier();
    }
    let r = sh[base];
    workgroupBarrier();
    return r;
}

// The softmax shift: the maximum, or 0 when it is infinite (as the CPU).
fn finite_or_zero(m: f32) -> f32 {
    return select(m, 0.0, abs(m) > F32_MAX);
}

// log(1 + e) for e in [0, 1], accurate for tiny e.
fn log1p_unit(e: f32) -> f32 {
    if (e < 1e-3) {
        return e * (1.0 - e * (0.5 - e * (1.0 / 3.0)));
    }
    return log(1.0 + e);
}

// max(z, 0) - z·y + log(1 + exp(-|z|)): binary cross-entropy with logits.
fn bce_term(z: f32, y: f32) -> f32 {
    return max(z, 0.0) - z * y + log1p_unit(exp(-abs(z)));
}

fn sigmoid(x: f32) -> f32 {
    if (x >= 0.0) {
        return 1.0 / (1.0 + exp(-x));
    }
    let e = exp(x);
    return e / (1.0 + e);
}

fn term1(mode: u32, x: f32) -> f32 {
    if (mode == SUM_SQ) {
        return x * x;
    }
    return x;
}

// Term of a two-input mode at entry `i`; `o` indexes the shift (mode 3).
fn term2(mode: u32, i: u32, o: u32) -> f32 {
    let x = a[i];
    switch mode {
        case EXP_SHIFT: { return exp(x - finite_or_zero(b[o])); }
        case DOT: { return x * b[i]; }
        default: { return bce_term(x, b[i]); }
    }
}

// ----- multi-pass reductions ------------------------------------------------
//
// col_reduce: per column, over a chunk of rows. P = [rows, cols, cw, rows_per_chunk,
// col_blocks, mode, scale]. Workgroup g: column block g % col_blocks, chunk
// g / col_blocks; writes out[chunk * cols + col] (the next pass's input).

@compute @workgroup_size(256)
fn col_reduce(
    @builtin(local_invocation_id) lid: vec3<u32>,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    let rows = pu(0u);
    let cols = pu(1u);
    let cw = pu(2u);
    let lanes = WG / cw;
    let mode = pu(5u);
    let is_max = mode == MAX;
    let t = lid.x;
    let cl = t % cw;
    let lane = t / cw;
    let g = group_x(wid, nwg);
    let col = (g % pu(4u)) * cw + cl;
    let chunk = g / pu(4u);
    let r0 = chunk * pu(3u);
    let r1 = min(rows, r0 + pu(3u));
    var acc = identity(is_max);
    if (col < cols) {
        for (var r = r0 + lane; r < r1; r += lanes) {
            acc = combine(is_max, acc, term1(mode, a[r * cols + col]));
        }
    }
    let total = group_reduce(t, lane, cl, cw, lanes, acc, is_max);
    if (lane == 0u && col < cols) {
        out[chunk * cols + col] = total * pf(6u);
    }
}

// col_reduce2: col_reduce of a two-input mode (sums only).
@compute @workgroup_size(256)
fn col_reduce2(
    @builtin(local_invocation_id) lid: vec3<u32>,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    let rows = pu(0u);
    let cols = pu(1u);
    let cw = pu(2u);
    let lanes = WG / cw;
    let mode = pu(5u);
    let t = lid.x;
    let cl = t % cw;
    let lane = t / cw;
    let g = group_x(wid, nwg);
    let col = (g % pu(4u)) * cw + cl;
    let chunk = g / pu(4u);
    let r0 = chunk * pu(3u);
    let r1 = min(rows, r0 + pu(3u));
    var acc = 0.0;
    if (col < cols) {
        for (var r = r0 + lane; r < r1; r += lanes) {
            acc += term2(mode, r * cols + col, col);
        }
    }
    let total = group_reduce(t, lane, cl, cw, lanes, acc, false);
    if (lane == 0u && col < cols) {
        out[chunk * cols + col] = total * pf(6u);
    }
}

// row_reduce: per row, over a chunk of columns. P = [rows, cols, rw,
// cols_per_chunk, chunks, mode, scale]. Workgroup g: row block g / chunks,
// chunk g % chunks; writes out[row * chunks + chunk] (the next pass's input).
@compute @workgroup_size(256)
fn row_reduce(
    @builtin(local_invocation_id) lid: vec3<u32>,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    let rows = pu(0u);
    let cols = pu(1u);
    let rw = pu(2u);
    let chunks = pu(4u);
    let mode = pu(5u);
    let is_max = mode == MAX;
    let t = lid.x;
    let lane = t % rw;
    let rl = t / rw;
    let g = group_x(wid, nwg);
    let row = (g / chunks) * (WG / rw) + rl;
    let chunk = g % chunks;
    let c0 = chunk * pu(3u);
    let c1 = min(cols, c0 + pu(3u));
    var acc = identity(is_max);
    if (row < rows) {
        for (var k = c0 + lane; k < c1; k += rw) {
            acc = combine(is_max, acc, term1(mode, a[row * cols + k]));
        }
    }
    let total = group_reduce(t, lane, rl * rw, 1u, rw, acc, is_max);
    if (lane == 0u && row < rows) {
        out[row * chunks + chunk] = total * pf(6u);
    }
}

// row_reduce2: row_reduce of a two-input mode (sums only).
@compute @workgroup_size(256)
fn row_reduce2(
    @builtin(local_invocation_id) lid: vec3<u32>,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    let rows = pu(0u);
    let cols = pu(1u);
    let rw = pu(2u);
    let chunks = pu(4u);
    let mode = pu(5u);
    let t = lid.x;
    let lane = t % rw;
    let rl = t / rw;
    let g = group_x(wid, nwg);
    let row = (g / chunks) * (WG / rw) + rl;
    let chunk = g % chunks;
    let c0 = chunk * pu(3u);
    let c1 = min(cols, c0 + pu(3u));
    var acc = 0.0;
    if (row < rows) {
        for (var k = c0 + lane; k < c1; k += rw) {
            acc += term2(mode, row * cols + k, row);
        }
    }
    let total = group_reduce(t, lane, rl * rw, 1u, rw, acc, false);
    if (lane == 0u && row < rows) {
        out[row * chunks + chunk] = total * pf(6u);
    }
}

// ----- fused per-row kernels (row groups) -------------------------------------

// softmax_rows: softmax (log: log-softmax) of each row. P = [rows, cols, rw, log]
@compute @workgroup_size(256)
fn softmax_rows(
    @builtin(local_invocation_id) lid: vec3<u32>,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    let rows = pu(0u);
    let cols = pu(1u);
    let rw = pu(2u);
    let t = lid.x;
    let lane = t % rw;
    let rl = t / rw;
    let row = group_x(wid, nwg) * (WG / rw) + rl;
    let ok = row < rows;
    let base = row * cols;
    var m = -F32_MAX;
    if (ok) {
        for (var k = lane; k < cols; k += rw) {
            m = max(m, a[base + k]);
        }
    }
    m = finite_or_zero(group_reduce(t, lane, rl * rw, 1u, rw, m, true));
    var s = 0.0;
    if (ok) {
        for (var k = lane; k < cols; k += rw) {
            s += exp(a[base + k] - m);
        }
    }
    s = group_reduce(t, lane, rl * rw, 1u, rw, s, false);
    if (ok) {
        if (pu(3u) != 0u) {
            let lse = m + log(s);
            for (var k = lane; k < cols; k += rw) {
                out[base + k] = a[base + k] - lse;
            }
        } else {
            for (var k = lane; k < cols; k += rw) {
                out[base + k] = exp(a[base + k] - m) / s;
            }
        }
    }
}

// softmax_grad_rows: a = y, b = dy. P = [rows, cols, rw, log]
@compute @workgroup_size(256)
fn softmax_grad_rows(
    @builtin(local_invocation_id) lid: vec3<u32>,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    let rows = pu(0u);
    let cols = pu(1u);
    let rw = pu(2u);
    let log_sm = pu(3u) != 0u;
    let t = lid.x;
    let lane = t % rw;
    let rl = t / rw;
    let row = group_x(wid, nwg) * (WG / rw) + rl;
    let ok = row < rows;
    let base = row * cols;
    var s = 0.0;
    if (ok) {
        for (var k = lane; k < cols; k += rw) {
            if (log_sm) {
                s += b[base + k];
            } else {
                s += b[base + k] * a[base + k];
            }
        }
    }
    s = group_reduce(t, lane, rl * rw, 1u, rw, s, false);
    if (ok) {
        for (var k = lane; k < cols; k += rw) {
            let y = a[base + k];
            let g = b[base + k];
            if (log_sm) {
                out[base + k] = g - exp(y) * s;
            } else {
                out[base + k] = y * (g - s);
            }
        }
    }
}

// layer_norm_rows: out = x̂, out2 = rstd (rows x 1). P = [rows, cols, rw, n, eps]
// with n = max(cols, 1) as f32.
@compute @workgroup_size(256)
fn layer_norm_rows(
    @builtin(local_invocation_id) lid: vec3<u32>,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    let rows = pu(0u);
    let cols = pu(1u);
    let rw = pu(2u);
    let n = pf(3u);
    let t = lid.x;
    let lane = t % rw;
    let rl = t / rw;
    let row = group_x(wid, nwg) * (WG / rw) + rl;
    let ok = row < rows;
    let base = row * cols;
    var s = 0.0;
    if (ok) {
        for (var k = lane; k < cols; k += rw) {
            s += a[base + k];
        }
    }
    let mean = group_reduce(t, lane, rl * rw, 1u, rw, s, false) / n;
    var q = 0.0;
    if (ok) {
        for (var k = lane; k < cols; k += rw) {
            let d = a[base + k] - mean;
            q += d * d;
        }
    }
    let variance = group_reduce(t, lane, rl * rw, 1u, rw, q, false) / n;
    let rs = 1.0 / sqrt(variance + pf(4u));
    if (ok) {
        for (var k = lane; k < cols; k += rw) {
            out[base + k] = (a[base + k] - mean) * rs;
        }
        if (lane == 0u) {
            out2[row] = rs;
        }
    }
}

// layer_norm_grad_rows: a = x̂, b = rstd, c = dx̂. P = [rows, cols, rw, n]
@compute @workgroup_size(256)
fn layer_norm_grad_rows(
    @builtin(local_invocation_id) lid: vec3<u32>,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    let rows = pu(0u);
    let cols = pu(1u);
    let rw = pu(2u);
    let n = pf(3u);
    let t = lid.x;
    let lane = t % rw;
    let rl = t / rw;
    let row = group_x(wid, nwg) * (WG / rw) + rl;
    let ok = row < rows;
    let base = row * cols;
    var sg = 0.0;
    var sgx = 0.0;
    if (ok) {
        for (var k = lane; k < cols; k += rw) {
            let g = c[base + k];
            sg += g;
            sgx += g * a[base + k];
        }
    }
    let mean_g = group_reduce(t, lane, rl * rw, 1u, rw, sg, false) / n;
    let mean_gx = group_reduce(t, lane, rl * rw, 1u, rw, sgx, false) / n;
    if (ok) {
        let rs = b[row];
        for (var k = lane; k < cols; k += rw) {
            out[base + k] = rs * (c[base + k] - mean_g - a[base + k] * mean_gx);
        }
    }
}

// ----- element-wise finishing kernels -----------------------------------------

// softmax_apply_cols: softmax along Rows from per-column statistics:
// a = x, b = column maxima, c = Σ exp(x - shift). P = [n, cols, log]
@compute @workgroup_size(256)
fn softmax_apply_cols(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = linear_id(gid, nwg);
    if (i >= pu(0u)) { return; }
    let j = i % pu(1u);
    let m = finite_or_zero(b[j]);
    if (pu(2u) != 0u) {
        out[i] = a[i] - (m + log(c[j]));
    } else {
        out[i] = exp(a[i] - m) / c[j];
    }
}

// softmax_grad_apply_cols: a = y, b = dy, c = per-column Σ dy (log) or Σ dy·y.
// P = [n, cols, log]
@compute @workgroup_size(256)
fn softmax_grad_apply_cols(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = linear_id(gid, nwg);
    if (i >= pu(0u)) { return; }
    let s = c[i % pu(1u)];
    if (pu(2u) != 0u) {
        out[i] = b[i] - exp(a[i]) * s;
    } else {
        out[i] = a[i] * (b[i] - s);
    }
}

// nll_gather: out[i] = logp[i, target[i]]. a = logp. P = [n, cols]
@compute @workgroup_size(256)
fn nll_gather(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = linear_id(gid, nwg);
    if (i >= pu(0u)) { return; }
    out[i] = a[i * pu(1u) + idx[i]];
}

// nll_grad: -dy / n at (i, target[i]) for i < n, else 0. a = dy.
// P = [len, cols, n, n as f32]
@compute @workgroup_size(256)
fn nll_grad(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = linear_id(gid, nwg);
    if (i >= pu(0u)) { return; }
    let r = i / pu(1u);
    let k = i - r * pu(1u);
    var v = 0.0;
    if (r < pu(2u)) {
        if (idx[r] == k) {
            v = -a[0] / pf(3u);
        }
    }
    out[i] = v;
}

// bce_grad: (sigmoid(z) - y) · dy / n. a = z, b = y, c = dy. P = [len, n as f32]
@compute @workgroup_size(256)
fn bce_grad(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = linear_id(gid, nwg);
    if (i >= pu(0u)) { return; }
    out[i] = (sigmoid(a[i]) - b[i]) * (c[0] / pf(1u));
}
