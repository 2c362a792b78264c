// Segment kernels: rows grouped contiguously by segment, with offsets `sptr`
// (G + 1 entries; segment g owns rows sptr[g]..sptr[g + 1]). Two families:
//
// * Chunk reductions (chunk_sum, chunk_max, chunk_stats): one workgroup per
//   chunk of rows bnd[w]..bnd[w + 1] reduces each of `width` entries over the
//   chunk's rows, and writes row w of a `chunks x width` result. When every
//   segment is short the chunks are the segments themselves and the result is
//   final; otherwise the host splits long segments into chunks and reduces the
//   partial results again, grouped by segment (`level` > 0).
//   Inside a workgroup, `lanes` invocations share each entry when the width
//   is small (each takes every lanes-th row; then one combines the lanes in
//   workgroup memory); for wide rows each invocation loops over its entries.
// * Per-row kernels: one invocation per output entry, which finds the segment
//   of its row by binary search in `sptr`. Rows outside sptr[0]..sptr[G]
//   belong to no segment.
//
// Each entry point uses a prefix 1..k of the bindings below; variables that
// share a binding number belong to different entry points.

@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<storage, read> sptr: array<u32>;
@group(0) @binding(2) var<storage, read_write> out_idx: array<u32>;
@group(0) @binding(2) var<storage, read_write> out_s: array<f32>;
@group(0) @binding(3) var<storage, read> xa: array<f32>;
@group(0) @binding(4) var<storage, read> xb: array<f32>;
@group(0) @binding(4) var<storage, read> xi: array<u32>;
@group(0) @binding(5) var<storage, read> xc: array<f32>;
@group(0) @binding(5) var<storage, read> bnd: array<u32>;

// Arg-max of an empty segment / "no row".
const NONE: u32 = 0xffffffffu;

var<workgroup> sh_v: array<f32, 256>;
var<workgroup> sh_s: array<f32, 256>;
var<workgroup> sh_i: array<u32, 256>;

// ----- chunk reductions ----------------------------------------------------

// Term of row v, entry e of a sum. mode 0: a[v, e]; 1: a[v, e] * b[v, e];
// 2: a[v, e / h] * b[v, e % h] (a: rows x width/h, b: rows x h).
fn sum_term(mode: u32, v: u32, e: u32, width: u32, h: u32) -> f32 {
    switch mode {
        case 0u: {
            return xa[v * width + e];
        }
        case 1u: {
            let i = v * width + e;
            return xa[i] * xb[i];
        }
        default: {
            let j = e / h;
            return xa[v * (width / h) + j] * xb[v * h + (e - j * h)];
        }
    }
}

// chunk_sum: out[w, e] = Σ_rows term (divided by the length of segment w
// when `mean`, on the final level). Bindings: out, sptr (the original
// offsets, for `mean`), a, b, bnd.
// P = [width, mode, h, lanes, mean, chunks]
@compute @workgroup_size(256)
fn chunk_sum(
    @builtin(local_invocation_id) lid: vec3<u32>,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    let w = group_x(wid, nwg);
    if (w >= pu(5u)) { return; }
    let width = pu(0u);
    let mode = pu(1u);
    let h = pu(2u);
    let lanes = pu(3u);
    let lo = bnd[w];
    let hi = bnd[w + 1u];
    var den = 1.0;
    if (pu(4u) != 0u) {
        let n = sptr[w + 1u] - sptr[w];
        if (n > 0u) { den = f32(n); }
    }
    let t = lid.x;
    if (lanes > 1u) {
        let lane = t / width;
        let e = t - lane * width;
        var acc = 0.0;
        if (lane < lanes) {
            for (var v = lo + lane; v < hi; v += lanes) {
                acc += sum_term(mode, v, e, width, h);
            }
        }
        sh_v[t] = acc;
        workgroupBarrier();
        if (t < width) {
            var s = sh_v[t];
            for (var l = 1u; l < lanes; l++) {
                s += sh_v[l * width + t];
            }
            out[w * width + t] = s / den;
        }
    } else {
        for (var e = t; e < width; e += WG) {
            var acc = 0.0;
            for (var v = lo; v < hi; v++) {
                acc += sum_term(mode, v, e, width, h);
            }
            out[w * width + e] = acc / den;
        }
    }
}

// Whether candidate (v, i) beats the best so far (bv, bi): larger, or equal
// with a smaller row (the first maximum, as a sequential scan finds it).
// NaN beats every number (the first NaN wins), as on the CPU and in
// torch.max; it is tested on the bits, before any float comparison.
fn better(v: f32, i: u32, bv: f32, bi: u32) -> bool {
    if (i == NONE) { return false; }
    if (bi == NONE) { return true; }
    let vn = is_nan_bits(v);
    let bn = is_nan_bits(bv);
    if (vn || bn) { return vn && (!bn || i < bi); }
    return v > bv || (v == bv && i < bi);
}

// chunk_max: out[w, e] = max over rows, out_idx[w, e] = its row (0 and NONE
// for no rows). Level 0 reads values x (binding 3) and uses row numbers;
// later levels read partial maxima (binding 3) and their rows (binding 4).
// Bindings: out, out_idx, values, rows, bnd. P = [width, lanes, level, chunks]
@compute @workgroup_size(256)
fn chunk_max(
    @builtin(local_invocation_id) lid: vec3<u32>,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    let w = group_x(wid, nwg);
    if (w >= pu(3u)) { return; }
    let width = pu(0u);
    let lanes = pu(1u);
    let partial = pu(2u) != 0u;
    let lo = bnd[w];
    let hi = bnd[w + 1u];
    let t = lid.x;
    if (lanes > 1u) {
        let lane = t / width;
        let e = t - lane * width;
        var bv = 0.0;
        var bi = NONE;
        if (lane < lanes) {
            for (var v = lo + lane; v < hi; v += lanes) {
                let k = v * width + e;
                let val = xa[k];
                var i = v;
                if (partial) { i = xi[k]; }
                if (better(val, i, bv, bi)) {
                    bv = val;
                    bi = i;
                }
            }
        }
        sh_v[t] = bv;
        sh_i[t] = bi;
        workgroupBarrier();
        if (t < width) {
            for (var l = 1u; l < lanes; l++) {
                let k = l * width + t;
                if (better(sh_v[k], sh_i[k], bv, bi)) {
                    bv = sh_v[k];
                    bi = sh_i[k];
                }
            }
            out[w * width + t] = bv;
            out_idx[w * width + t] = bi;
        }
    } else {
        for (var e = t; e < width; e += WG) {
            var bv = 0.0;
            var bi = NONE;
            for (var v = lo; v < hi; v++) {
                let k = v * width + e;
                let val = xa[k];
                var i = v;
                if (partial) { i = xi[k]; }
                if (better(val, i, bv, bi)) {
                    bv = val;
                    bi = i;
                }
            }
            out[w * width + e] = bv;
            out_idx[w * width + e] = bi;
        }
    }
}

// Merges softmax statistics (max m, Σ exp(x - m)); s == 0 means "no rows".
fn merge_stats(a: vec2<f32>, b: vec2<f32>) -> vec2<f32> {
    if (b.y == 0.0) { return a; }
    if (a.y == 0.0) { return b; }
    let m = max(a.x, b.x);
    return vec2<f32>(m, a.y * exp(a.x - m) + b.y * exp(b.x - m));
}

// Adds one value x to softmax statistics (one exp per value).
fn push_stats(a: vec2<f32>, x: f32) -> vec2<f32> {
    if (a.y == 0.0) { return vec2<f32>(x, 1.0); }
    if (x > a.x) { return vec2<f32>(x, a.y * exp(a.x - x) + 1.0); }
    return vec2<f32>(a.x, a.y + exp(x - a.x));
}

// The statistics of row v, entry e: level 0 pushes x, later levels merge
// partial statistics (m from binding 3, s from binding 4).
fn stats_step(a: vec2<f32>, partial: bool, k: u32) -> vec2<f32> {
    if (partial) { return merge_stats(a, vec2<f32>(xa[k], xb[k])); }
    return push_stats(a, xa[k]);
}

// chunk_stats: softmax statistics over rows: out = max, out_s = Σ exp(x -
// max) (both 0 for no rows). Bindings: out, out_s, x or m, x or s, bnd.
// P = [width, lanes, level, chunks]
@compute @workgroup_size(256)
fn chunk_stats(
    @builtin(local_invocation_id) lid: vec3<u32>,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    let w = group_x(wid, nwg);
    if (w >= pu(3u)) { return; }
    let width = pu(0u);
    let lanes = pu(1u);
    let partial = pu(2u) != 0u;
    let lo = bnd[w];
    let hi = bnd[w + 1u];
    let t = lid.x;
    if (lanes > 1u) {
        let lane = t / width;
        let e = t - lane * width;
        var st = vec2<f32>(0.0, 0.0);
        if (lane < lanes) {
            for (var v = lo + lane; v < hi; v += lanes) {
                st = stats_step(st, partial, v * width + e);
            }
        }
        sh_v[t] = st.x;
        sh_s[t] = st.y;
        workgroupBarrier();
        if (t < width) {
            for (var l = 1u; l < lanes; l++) {
                let k = l * width + t;
                st = merge_stats(st, vec2<f32>(sh_v[k], sh_s[k]));
            }
            out[w * width + t] = select(st.x, 0.0, st.y == 0.0);
            out_s[w * width + t] = st.y;
        }
    } else {
        for (var e = t; e < width; e += WG) {
            var st = vec2<f32>(0.0, 0.0);
            for (var v = lo; v < hi; v++) {
                st = stats_step(st, partial, v * width + e);
            }
            out[w * width + e] = select(st.x, 0.0, st.y == 0.0);
            out_s[w * width + e] = st.y;
        }
    }
}

// ----- per-row kernels -------------------------------------------------------

// The segment of row v among g segments (the one with sptr[s] <= v <
// sptr[s + 1], skipping empty ones), or NONE outside sptr[0]..sptr[g].
fn segment_of(v: u32, g: u32) -> u32 {
    if (g == 0u || v < sptr[0] || v >= sptr[g]) { return NONE; }
    var lo = 0u;
    var hi = g;
    // Invariant: sptr[lo] <= v < sptr[hi].
    while (hi - lo > 1u) {
        let mid = (lo + hi) / 2u;
        if (sptr[mid] <= v) { lo = mid; } else { hi = mid; }
    }
    return lo;
}

// seg_broadcast: out[v, c] = src[g(v), c] (times 1 / len(g(v)) when `mean`;
// 0 outside the segments). Bindings: out, sptr, src. P = [n, cols, G, mean]
@compute @workgroup_size(256)
fn seg_broadcast(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = linear_id(gid, nwg);
    if (i >= pu(0u)) { return; }
    let cols = pu(1u);
    let v = i / cols;
    let c = i - v * cols;
    let g = segment_of(v, pu(2u));
    if (g == NONE) {
        out[i] = 0.0;
        return;
    }
    var val = xa[g * cols + c];
    if (pu(3u) != 0u) {
        val = val * (1.0 / f32(sptr[g + 1u] - sptr[g]));
    }
    out[i] = val;
}

// seg_max_grad: out[v, c] = dy[g(v), c] where v is the arg-max of (g(v), c),
// else 0. Bindings: out, sptr, dy, argmax. P = [n, cols, G]
@compute @workgroup_size(256)
fn seg_max_grad(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = linear_id(gid, nwg);
    if (i >= pu(0u)) { return; }
    let cols = pu(1u);
    let v = i / cols;
    let c = i - v * cols;
    let g = segment_of(v, pu(2u));
    var val = 0.0;
    if (g != NONE && xi[g * cols + c] == v) {
        val = xa[g * cols + c];
    }
    out[i] = val;
}

// seg_softmax: out[v, c] = exp(x[v, c] - m[g, c]) / s[g, c] (x outside the
// segments). Bindings: out, sptr, x, m, s. P = [n, cols, G]
@compute @workgroup_size(256)
fn seg_softmax(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = linear_id(gid, nwg);
    if (i >= pu(0u)) { return; }
    let cols = pu(1u);
    let v = i / cols;
    let c = i - v * cols;
    let g = segment_of(v, pu(2u));
    let x = xa[i];
    if (g == NONE) {
        out[i] = x;
        return;
    }
    let k = g * cols + c;
    out[i] = exp(x - xb[k]) / xc[k];
}

// seg_softmax_grad: out[v, c] = y[v, c] * (dy[v, c] - dot[g, c]) (dy outside
// the segments). Bindings: out, sptr, y, dy, dot. P = [n, cols, G]
@compute @workgroup_size(256)
fn seg_softmax_grad(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = linear_id(gid, nwg);
    if (i >= pu(0u)) { return; }
    let cols = pu(1u);
    let v = i / cols;
    let c = i - v * cols;
    let g = segment_of(v, pu(2u));
    let d = xb[i];
    if (g == NONE) {
        out[i] = d;
        return;
    }
    out[i] = xa[i] * (d - xc[g * cols + c]);
}

// seg_scores: out[v, j] = k[v] · q[g(v) * m + j] (0 outside the segments).
// Bindings: out, sptr, k, q. P = [n, m, d, G]
@compute @workgroup_size(256)
fn seg_scores(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = linear_id(gid, nwg);
    if (i >= pu(0u)) { return; }
    let m = pu(1u);
    let d = pu(2u);
    let v = i / m;
    let j = i - v * m;
    let g = segment_of(v, pu(3u));
    var acc = 0.0;
    if (g != NONE) {
        let kr = v * d;
        let qr = (g * m + j) * d;
        for (var t = 0u; t < d; t++) {
            acc += xa[kr + t] * xb[qr + t];
        }
    }
    out[i] = acc;
}

// seg_mix: out[v, c] (+)= Σ_j a[v, j] u[g(v) * M + j, c] (nothing added
// outside the segments). Bindings: out, sptr, a, u. P = [n, h, M, G, add]
@compute @workgroup_size(256)
fn seg_mix(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = linear_id(gid, nwg);
    if (i >= pu(0u)) { return; }
    let h = pu(1u);
    let mm = pu(2u);
    let v = i / h;
    let c = i - v * h;
    let g = segment_of(v, pu(3u));
    var acc = 0.0;
    if (g != NONE) {
        for (var j = 0u; j < mm; j++) {
            acc += xa[v * mm + j] * xb[(g * mm + j) * h + c];
        }
    }
    if (pu(4u) != 0u) {
        acc = out[i] + acc;
    }
    out[i] = acc;
}
