// Sparse (CSR) kernels: S · X row-parallel (the transpose product runs the
// same kernel on the stored CSR of Sᵀ), and dropout on the stored values.

@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<storage, read> a: array<f32>;
@group(0) @binding(3) var<storage, read> ia: array<u32>;
@group(0) @binding(4) var<storage, read> ib: array<u32>;
@group(0) @binding(5) var<storage, read> v: array<f32>;

// spmm: out = S · a, S in CSR (indptr = ia, indices = ib, values = v);
// `a` is `cols x w`, `out` is `rows x w`. One invocation per (row, chunk of
// four output columns): the row's indices and values are read once per chunk.
// P = [rows * chunks, w, chunks]
@compute @workgroup_size(256)
fn spmm(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = linear_id(gid, nwg);
    if (i >= pu(0u)) { return; }
    let w = pu(1u);
    let chunks = pu(2u);
    let r = i / chunks;
    let c0 = (i - r * chunks) * 4u;
    let cnt = min(4u, w - c0);
    let lo = ia[r];
    let hi = ia[r + 1u];
    var acc = vec4<f32>(0.0);
    if (cnt == 4u) {
        for (var p = lo; p < hi; p = p + 1u) {
            let base = ib[p] * w + c0;
            acc = acc + v[p] * vec4<f32>(a[base], a[base + 1u], a[base + 2u], a[base + 3u]);
        }
    } else {
        for (var p = lo; p < hi; p = p + 1u) {
            let base = ib[p] * w + c0;
            let s = v[p];
            for (var t = 0u; t < cnt; t = t + 1u) {
                acc[t] = acc[t] + s * a[base + t];
            }
        }
    }
    let o = r * w + c0;
    for (var t = 0u; t < cnt; t = t + 1u) {
        out[o + t] = acc[t];
    }
}

// dropout: out[i] = a[i] * (keep(seed, i, p) ? scale : 0).
// P = [nnz, seed_lo, seed_hi, p, scale]
@compute @workgroup_size(256)
fn dropout(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = linear_id(gid, nwg);
    if (i >= pu(0u)) { return; }
    let m = select(0.0, pf(4u), uniform01(pu(1u), pu(2u), i) >= pf(3u));
    out[i] = a[i] * m;
}

// permute: out[k] = a[ia[k]] (the transpose's values from the matrix's).
// P = [nnz]
@compute @workgroup_size(256)
fn permute(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let k = linear_id(gid, nwg);
    if (k >= pu(0u)) { return; }
    out[k] = a[ia[k]];
}
