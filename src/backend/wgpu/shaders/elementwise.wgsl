// Element-wise kernels: fill, broadcast binary ops, activations and their
// gradients, dropout masks and the fused optimiser updates.

@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<storage, read> a: array<f32>;
@group(0) @binding(3) var<storage, read> b: array<f32>;
@group(0) @binding(4) var<storage, read> c: array<f32>;

// fill: P = [n, value]
@compute @workgroup_size(256)
fn fill(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = linear_id(gid, nwg);
    if (i >= pu(0u)) { return; }
    out[i] = pf(1u);
}

// binary: P = [n, cols, op, a_row_stride, a_col_stride, b_row_stride, b_col_stride]
@compute @workgroup_size(256)
fn binary(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = linear_id(gid, nwg);
    if (i >= pu(0u)) { return; }
    let cols = pu(1u);
    let r = i / cols;
    let k = i - r * cols;
    let x = a[r * pu(3u) + k * pu(4u)];
    let y = b[r * pu(5u) + k * pu(6u)];
    var v: f32;
    switch pu(2u) {
        case 0u: { v = x + y; }
        case 1u: { v = x - y; }
        case 2u: { v = x * y; }
        default: { v = x / y; }
    }
    out[i] = v;
}

// add_assign: out += a. P = [n]
@compute @workgroup_size(256)
fn add_assign(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = linear_id(gid, nwg);
    if (i >= pu(0u)) { return; }
    out[i] = out[i] + a[i];
}

fn sigmoid(x: f32) -> f32 {
    if (x >= 0.0) {
        return 1.0 / (1.0 + exp(-x));
    }
    let e = exp(x);
    return e / (1.0 + e);
}

fn tanh_stable(x: f32) -> f32 {
    let e = exp(-2.0 * abs(x));
    return sign(x) * (1.0 - e) / (1.0 + e);
}

fn expm1(x: f32) -> f32 {
    if (abs(x) < 1e-3) {
        return x + x * x * (0.5 + x / 6.0);
    }
    return exp(x) - 1.0;
}

// Φ(x) = (1 + erf(x / √2)) / 2 through erfc (Numerical Recipes' erfcc,
// fractional error below 1.2e-7 everywhere), accurate for negative x too.
fn normal_cdf(x: f32) -> f32 {
    let z = abs(x) * 0.70710678118654752;
    let t = 1.0 / (1.0 + 0.5 * z);
    let ans = t * exp(-z * z - 1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418
        + t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587
        + t * (-0.82215223 + t * 0.17087277)))))))));
    // erfc(z) = ans for the positive argument.
    if (x >= 0.0) {
        return 1.0 - 0.5 * ans;
    }
    return 0.5 * ans;
}

// Op codes: 0 relu, 1 leaky_relu(s), 2 elu(alpha), 3 sigmoid, 4 tanh, 5 gelu,
// 6 exp, 7 log, 8 neg, 9 square, 10 affine(a, b).
fn apply(op: u32, x: f32, s: f32, t: f32) -> f32 {
    switch op {
        case 0u: { return select(max(x, 0.0), x, is_nan_bits(x)); } // NaN propagates, as on the CPU
        case 1u: { return select(x * s, x, x > 0.0); }
        case 2u: { return select(s * expm1(x), x, x > 0.0); }
        case 3u: { return sigmoid(x); }
        case 4u: { return tanh_stable(x); }
        case 5u: { return x * normal_cdf(x); }
        case 6u: { return exp(x); }
        case 7u: { return log(x); }
        case 8u: { return -x; }
        case 9u: { return x * x; }
        default: { return s * x + t; }
    }
}

fn derivative(op: u32, x: f32, y: f32, s: f32) -> f32 {
    switch op {
        case 0u: { return select(0.0, 1.0, x > 0.0); }
        case 1u: { return select(s, 1.0, x > 0.0); }
        case 2u: { return select(y + s, 1.0, x > 0.0); }
        case 3u: { return y * (1.0 - y); }
        case 4u: { return 1.0 - y * y; }
        case 5u: { return normal_cdf(x) + x * exp(-0.5 * x * x) * 0.3989422804014327; }
        case 6u: { return y; }
        case 7u: { return 1.0 / x; }
        case 8u: { return -1.0; }
        case 9u: { return 2.0 * x; }
        default: { return s; }
    }
}

// unary: out = f(a). P = [n, op, s, t]
@compute @workgroup_size(256)
fn unary(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = linear_id(gid, nwg);
    if (i >= pu(0u)) { return; }
    out[i] = apply(pu(1u), a[i], pf(2u), pf(3u));
}

// unary_grad: out = c * f'(a) given y = b. P = [n, op, s]
@compute @workgroup_size(256)
fn unary_grad(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = linear_id(gid, nwg);
    if (i >= pu(0u)) { return; }
    out[i] = c[i] * derivative(pu(1u), a[i], b[i], pf(2u));
}

// The packed masks of ReLU's backward (bit i % 32 of word i / 32), bound in
// place of `out` and `a` by the two kernels below only.
@group(0) @binding(1) var<storage, read_write> out_bits: array<u32>;
@group(0) @binding(2) var<storage, read> mask_bits: array<u32>;

// Whether `x` is positive, read off its bits (see `is_nan_bits`): the
// positive floats are 0x00000001 ..= 0x7f800000 (+inf), NaN lies above.
fn is_positive_bits(x: f32) -> bool {
    let v = bitcast<u32>(x);
    return v > 0u && v <= 0x7f800000u;
}

// positive_mask: out_bits[w] = where a[32w + j] > 0. P = [n, words]
@compute @workgroup_size(256)
fn positive_mask(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let w = linear_id(gid, nwg);
    if (w >= pu(1u)) { return; }
    let n = pu(0u);
    let start = w * 32u;
    var word = 0u;
    for (var j = 0u; j < 32u; j = j + 1u) {
        let i = start + j;
        if (i < n && is_positive_bits(a[i])) {
            word = word | (1u << j);
        }
    }
    out_bits[w] = word;
}

// masked_grad: out[i] *= bit i of mask_bits (a product: NaN * 0 stays NaN).
// P = [n]
@compute @workgroup_size(256)
fn masked_grad(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = linear_id(gid, nwg);
    if (i >= pu(0u)) { return; }
    let bit = (mask_bits[i >> 5u] >> (i & 31u)) & 1u;
    out[i] = out[i] * f32(bit);
}

// dropout_mask: P = [n, seed_lo, seed_hi, p, scale]
@compute @workgroup_size(256)
fn dropout_mask(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = linear_id(gid, nwg);
    if (i >= pu(0u)) { return; }
    out[i] = select(0.0, pf(4u), uniform01(pu(1u), pu(2u), i) >= pf(3u));
}
