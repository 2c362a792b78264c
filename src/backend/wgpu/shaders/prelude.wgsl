// Prelude of every hdgcn shader: the parameter block and dispatch helpers.

struct Params {
    w: array<vec4<u32>, 4>,
}

@group(0) @binding(0) var<uniform> P: Params;

const WG: u32 = 256u;

// Parameter word `i` as u32.
fn pu(i: u32) -> u32 {
    return P.w[i >> 2u][i & 3u];
}

// Parameter word `i` as f32.
fn pf(i: u32) -> f32 {
    return bitcast<f32>(pu(i));
}

// Linear invocation index of a one-dimensional dispatch split over x and z.
fn linear_id(gid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return gid.x + gid.z * nwg.x * WG;
}

// Workgroup index along the (possibly split) first grid dimension.
fn group_x(wid: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return wid.x + wid.z * nwg.x;
}

// Whether `x` is NaN, read off its bits: a float comparison such as `x != x`
// or `x < 0.0` may be compiled under the assumption that no NaN occurs
// (the NVIDIA Vulkan driver turns `select(x, 0.0, x < 0.0)` into a max that
// returns 0 for NaN), an integer test may not.
fn is_nan_bits(x: f32) -> bool {
    return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u;
}

// The counter-based hash of `backend::rng` (bit-identical), shared by every
// dropout kernel so that all backends draw the same masks.
fn pcg_hash(x: u32) -> u32 {
    let state = x * 747796405u + 2891336453u;
    let word = ((state >> ((state >> 28u) + 4u)) ^ state) * 277803737u;
    return (word >> 22u) ^ word;
}

// `rng::uniform(seed, i)`: uniform in [0, 1) from the seed's halves and a counter.
fn uniform01(lo: u32, hi: u32, i: u32) -> f32 {
    let h = pcg_hash((pcg_hash(i ^ lo) + hi) ^ 0x9E3779B9u);
    return f32(h >> 8u) * (1.0 / 16777216.0);
}
