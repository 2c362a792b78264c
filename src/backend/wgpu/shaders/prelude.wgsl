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
