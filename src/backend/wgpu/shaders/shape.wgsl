// Shape kernels: strided block copies and accumulations (concatenation and
// slices along columns, slice gradients), row gathers and row scatters
// through an inverse index (no atomics).

@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<storage, read> a: array<f32>;
@group(0) @binding(3) var<storage, read> ia: array<u32>;
@group(0) @binding(4) var<storage, read> ib: array<u32>;

// copy_block: out[dst_off + r * dst_stride + c] = a[src_off + r * src_stride + c]
// for r < n / cols, c < cols. P = [n, cols, src_stride, src_off, dst_stride, dst_off]
@compute @workgroup_size(256)
fn copy_block(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = linear_id(gid, nwg);
    if (i >= pu(0u)) { return; }
    let cols = pu(1u);
    let r = i / cols;
    let c = i - r * cols;
    out[pu(5u) + r * pu(4u) + c] = a[pu(3u) + r * pu(2u) + c];
}

// add_block: as copy_block, accumulating into `out`.
// P = [n, cols, src_stride, src_off, dst_stride, dst_off]
@compute @workgroup_size(256)
fn add_block(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = linear_id(gid, nwg);
    if (i >= pu(0u)) { return; }
    let cols = pu(1u);
    let r = i / cols;
    let c = i - r * cols;
    let o = pu(5u) + r * pu(4u) + c;
    out[o] = out[o] + a[pu(3u) + r * pu(2u) + c];
}

// gather_rows: out[r, c] = a[ia[r], c]. P = [n, cols]
@compute @workgroup_size(256)
fn gather_rows(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = linear_id(gid, nwg);
    if (i >= pu(0u)) { return; }
    let cols = pu(1u);
    let r = i / cols;
    let c = i - r * cols;
    out[i] = a[ia[r] * cols + c];
}

// scatter_rows: out[r, c] = Σ a[ib[q], c] over q in ia[r]..ia[r+1] (the
// positions holding index r, ascending); zero for r >= ptr_rows.
// P = [n, cols, ptr_rows]
@compute @workgroup_size(256)
fn scatter_rows(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = linear_id(gid, nwg);
    if (i >= pu(0u)) { return; }
    let cols = pu(1u);
    let r = i / cols;
    let c = i - r * cols;
    var acc = 0.0;
    if (r < pu(2u)) {
        let hi = ia[r + 1u];
        for (var q = ia[r]; q < hi; q = q + 1u) {
            acc = acc + a[ib[q] * cols + c];
        }
    }
    out[i] = acc;
}
