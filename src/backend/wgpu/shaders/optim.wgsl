// Fused optimiser updates, in place on the parameter (`p`) and its state
// slots; the same arithmetic as `optim::kernels::update_slices`.

@group(0) @binding(1) var<storage, read_write> p: array<f32>;
@group(0) @binding(2) var<storage, read> g: array<f32>;
@group(0) @binding(3) var<storage, read_write> s0: array<f32>;
@group(0) @binding(4) var<storage, read_write> s1: array<f32>;

// sgd_plain: P = [n, lr, wd]
@compute @workgroup_size(256)
fn sgd_plain(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = linear_id(gid, nwg);
    if (i >= pu(0u)) { return; }
    let d = g[i] + p[i] * pf(2u);
    p[i] = p[i] + d * -pf(1u);
}

// sgd_momentum: P = [n, lr, wd, mu, damp, first_step, nesterov]
@compute @workgroup_size(256)
fn sgd_momentum(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = linear_id(gid, nwg);
    if (i >= pu(0u)) { return; }
    var d = g[i] + p[i] * pf(2u);
    if (pu(5u) != 0u) {
        s0[i] = d;
    } else {
        s0[i] = s0[i] * pf(3u) + d * pf(4u);
    }
    if (pu(6u) != 0u) {
        d = d + s0[i] * pf(3u);
    } else {
        d = s0[i];
    }
    p[i] = p[i] + d * -pf(1u);
}

// adam: P = [n, step_size, bias_c2_sqrt, decay, wd, w1, b2, w2, eps, decoupled]
@compute @workgroup_size(256)
fn adam(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = linear_id(gid, nwg);
    if (i >= pu(0u)) { return; }
    var x = p[i];
    var gr = g[i];
    if (pu(9u) != 0u) {
        x = x * pf(3u);
    } else {
        gr = gr + x * pf(4u);
    }
    let m = s0[i] + pf(5u) * (gr - s0[i]);
    let v = s1[i] * pf(6u) + pf(7u) * gr * gr;
    s0[i] = m;
    s1[i] = v;
    let denom = sqrt(v) / pf(2u) + pf(8u);
    p[i] = x + -pf(1u) * m / denom;
}

// adabelief: P = [n, decay, wd, b1, w1, b2, w2, eps, decoupled, sgd_mode, scale, denom_div]
@compute @workgroup_size(256)
fn adabelief(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = linear_id(gid, nwg);
    if (i >= pu(0u)) { return; }
    var x = p[i];
    var gr = g[i];
    if (pu(8u) != 0u) {
        x = x * pf(1u);
    } else {
        gr = gr + x * pf(2u);
    }
    let m = s0[i] * pf(3u) + gr * pf(4u);
    let r = gr - m;
    var s = s1[i] * pf(5u) + pf(6u) * r * r;
    s = s + pf(7u);
    s0[i] = m;
    s1[i] = s;
    if (pu(9u) != 0u) {
        p[i] = x + m * -pf(10u);
    } else {
        let denom = sqrt(s) / pf(11u) + pf(7u);
        p[i] = x + -pf(10u) * m / denom;
    }
}
