// Dense products `out = op(a) · op(b)` (`op` transposes when its flag is
// set): 64 x 64 output tiles per workgroup of 16 x 16 invocations, each
// computing a 4 x 4 block, with 16-deep slices of both operands staged in
// workgroup memory. The inner dimension may be split over several
// workgroups (split-K) that write partial products, summed by `sum_splits`.

@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<storage, read> a: array<f32>;
@group(0) @binding(3) var<storage, read> b: array<f32>;

const BM: u32 = 64u;
const BN: u32 = 64u;
const BK: u32 = 16u;
// Row stride of the staged slices, padded against bank conflicts.
const LDS: u32 = 65u;

// Staged slices, k-major: `sa[kq * LDS + i] = op(a)[row0 + i, kt + kq]`,
// `sb[kq * LDS + j] = op(b)[kt + kq, col0 + j]`.
var<workgroup> sa: array<f32, 1040>;
var<workgroup> sb: array<f32, 1040>;

// matmul: P = [m, n, k, trans_a, trans_b, k_chunk, tiles_n]
// Grid: (tiles over m, tiles_n * splits). Output `split * m * n + row * n + col`.
@compute @workgroup_size(16, 16)
fn matmul(
    @builtin(local_invocation_id) lid: vec3<u32>,
    @builtin(workgroup_id) wid: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
) {
    let m = pu(0u);
    let n = pu(1u);
    let kk = pu(2u);
    let ta = pu(3u) != 0u;
    let tb = pu(4u) != 0u;
    let kc = pu(5u);
    let tn = pu(6u);
    let row0 = group_x(wid, nwg) * BM;
    let col0 = (wid.y % tn) * BN;
    let split = wid.y / tn;
    let k0 = split * kc;
    let k1 = min(kk, k0 + kc);
    let t = lid.y * 16u + lid.x;

    var acc: array<vec4<f32>, 4>;
    for (var r = 0u; r < 4u; r++) {
        acc[r] = vec4<f32>(0.0);
    }

    for (var kt = k0; kt < k1; kt += BK) {
        // Stage the slices, reading along each operand's contiguous axis.
        for (var e = 0u; e < 4u; e++) {
            let idx = t + e * 256u;
            var i: u32;
            var kq: u32;
            if (ta) {
                i = idx % BM;
                kq = idx / BM;
            } else {
                kq = idx % BK;
                i = idx / BK;
            }
            let gi = row0 + i;
            let gk = kt + kq;
            var v = 0.0;
            if (gi < m && gk < k1) {
                if (ta) {
                    v = a[gk * m + gi];
                } else {
                    v = a[gi * kk + gk];
                }
            }
            sa[kq * LDS + i] = v;
        }
        for (var e = 0u; e < 4u; e++) {
            let idx = t + e * 256u;
            var j: u32;
            var kq: u32;
            if (tb) {
                kq = idx % BK;
                j = idx / BK;
            } else {
                j = idx % BN;
                kq = idx / BN;
            }
            let gj = col0 + j;
            let gk = kt + kq;
            var v = 0.0;
            if (gj < n && gk < k1) {
                if (tb) {
                    v = b[gj * kk + gk];
                } else {
                    v = b[gk * n + gj];
                }
            }
            sb[kq * LDS + j] = v;
        }
        workgroupBarrier();
        for (var kq = 0u; kq < BK; kq++) {
            let base = kq * LDS;
            let bv = vec4<f32>(
                sb[base + lid.x],
                sb[base + lid.x + 16u],
                sb[base + lid.x + 32u],
                sb[base + lid.x + 48u],
            );
            for (var r = 0u; r < 4u; r++) {
                acc[r] += sa[base + lid.y + 16u * r] * bv;
            }
        }
        workgroupBarrier();
    }

    let off = split * m * n;
    for (var r = 0u; r < 4u; r++) {
        let row = row0 + lid.y + 16u * r;
        if (row < m) {
            for (var c = 0u; c < 4u; c++) {
                let col = col0 + lid.x + 16u * c;
                if (col < n) {
                    out[off + row * n + col] = acc[r][c];
                }
            }
        }
    }
}

// sum_splits: out[i] = Σ_s a[s * len + i]. P = [len, splits]
@compute @workgroup_size(256)
fn sum_splits(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = linear_id(gid, nwg);
    let len = pu(0u);
    if (i >= len) { return; }
    var s = 0.0;
    for (var p = 0u; p < pu(1u); p++) {
        s += a[p * len + i];
    }
    out[i] = s;
}
