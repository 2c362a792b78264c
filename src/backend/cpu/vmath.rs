//! Vectorised `f32` transcendental functions: `tanh` and the logistic
//! sigmoid over slices.
//!
//! Each value is computed in `f64` with a branch-free exponential (range
//! reduction by `ln 2`, a degree-11 Taylor polynomial, the power of two
//! built from its bits) and rounded to `f32` once. The `f64` result is
//! within about 1e-13 relative of the exact value, so the `f32` result is
//! the correctly rounded one except where the exact value lies within that
//! distance of a rounding boundary (then it is one ulp off). The loops have
//! no branches and no calls, so they compile to SIMD code (AVX2 where the
//! CPU has it); libm's `tanhf` and `expf` are called once per element.

/// `1.5 · 2^52`: adding it rounds an `f64` below `2^51` in magnitude to an
/// integer, which is then held in the low bits of the sum.
const ROUND_MAGIC: f64 = 6_755_399_441_055_744.0;
/// `ln 2` split so that `n · LN2_HI` is exact for `|n| < 2^20` (fdlibm's).
const LN2_HI: f64 = f64::from_bits(0x3fe6_2e42_fee0_0000);
const LN2_LO: f64 = f64::from_bits(0x3dea_39ef_3579_3c76);

/// `exp(y)` for `y` in `[-700, 700]`, branch-free.
#[inline(always)]
fn exp_f64(y: f64) -> f64 {
    let t = y * std::f64::consts::LOG2_E + ROUND_MAGIC;
    let nf = t - ROUND_MAGIC;
    let n = t.to_bits().wrapping_sub(ROUND_MAGIC.to_bits()) as i64;
    let r = (y - nf * LN2_HI) - nf * LN2_LO;
    // Σ_{k=0}^{11} r^k / k! (|r| <= ln 2 / 2: remainder below 7e-15).
    let mut p = 1.0 / 39_916_800.0;
    p = p * r + 1.0 / 3_628_800.0;
    p = p * r + 1.0 / 362_880.0;
    p = p * r + 1.0 / 40_320.0;
    p = p * r + 1.0 / 5_040.0;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    let scale = f64::from_bits((n.wrapping_add(1023) as u64) << 52);
    p * scale
}

/// `tanh(x)` computed in `f64`.
#[inline(always)]
fn tanh_one(x: f32) -> f32 {
    let xd = x as f64;
    // |x| >= 20 gives 1 in f64 already; clamping keeps the exponent in range
    // (and maps ±inf to ±1).
    let a = xd.abs().min(20.0);
    let e = exp_f64(-2.0 * a);
    let big = (1.0 - e) / (1.0 + e);
    // Below 2^-12, 1 - e loses too many digits; x - x³/3 is exact to f32
    // precision there.
    let small = a - a * a * a * (1.0 / 3.0);
    let mag = if a < 1.0 / 4096.0 { small } else { big };
    let r = mag.copysign(xd) as f32;
    // NaN in, NaN out (the clamp above would have turned it into 20).
    if x.is_nan() { x } else { r }
}

/// `1 / (1 + exp(-x))` computed in `f64`.
#[inline(always)]
fn sigmoid_one(x: f32) -> f32 {
    // Beyond ±200 the result is 0 or 1 in f32 (the smallest subnormal is
    // reached near -103).
    let y = (-(x as f64)).clamp(-200.0, 200.0);
    let r = (1.0 / (1.0 + exp_f64(y))) as f32;
    if x.is_nan() { x } else { r }
}

#[inline(always)]
fn tanh_body(src: &[f32], dst: &mut [f32]) {
    for (d, &s) in dst.iter_mut().zip(src) {
        *d = tanh_one(s);
    }
}

#[inline(always)]
fn sigmoid_body(src: &[f32], dst: &mut [f32]) {
    for (d, &s) in dst.iter_mut().zip(src) {
        *d = sigmoid_one(s);
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn tanh_avx2(src: &[f32], dst: &mut [f32]) {
    tanh_body(src, dst)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn sigmoid_avx2(src: &[f32], dst: &mut [f32]) {
    sigmoid_body(src, dst)
}

/// `dst[i] = tanh(src[i])` (see the module documentation for accuracy).
///
/// # Panics
/// If the slices differ in length (an internal invariant).
pub(crate) fn tanh_f32(src: &[f32], dst: &mut [f32]) {
    assert_eq!(src.len(), dst.len(), "tanh_f32: slice lengths");
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU supports AVX2 (checked at run time).
        unsafe { tanh_avx2(src, dst) };
        return;
    }
    tanh_body(src, dst)
}

/// `dst[i] = 1 / (1 + exp(-src[i]))` (see the module documentation).
///
/// # Panics
/// If the slices differ in length (an internal invariant).
pub(crate) fn sigmoid_f32(src: &[f32], dst: &mut [f32]) {
    assert_eq!(src.len(), dst.len(), "sigmoid_f32: slice lengths");
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU supports AVX2 (checked at run time).
        unsafe { sigmoid_avx2(src, dst) };
        return;
    }
    sigmoid_body(src, dst)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Distance in units in the last place between two finite `f32`s of
    /// the same sign (or zero).
    fn ulps(a: f32, b: f32) -> u32 {
        let key = |v: f32| {
            let bits = v.to_bits() as i64;
            if bits < 0x8000_0000 {
                bits
            } else {
                0x8000_0000 - bits
            }
        };
        (key(a) - key(b)).unsigned_abs() as u32
    }

    /// Every 997th `f32` bit pattern of the finite range, both signs: more
    /// than 4 million values, from subnormals to the largest.
    fn samples() -> impl Iterator<Item = f32> {
        (0..0x7f80_0000_u32)
            .step_by(997)
            .flat_map(|b| [f32::from_bits(b), -f32::from_bits(b)])
    }

    fn check(name: &str, fast: fn(&[f32], &mut [f32]), reference: fn(f64) -> f64) {
        let xs: Vec<f32> = samples().collect();
        let mut ys = vec![0.0_f32; xs.len()];
        fast(&xs, &mut ys);
        let mut off = 0_usize;
        for (&x, &y) in xs.iter().zip(&ys) {
            // The correctly rounded value, from libm's f64 function.
            let want = reference(x as f64) as f32;
            let d = ulps(y, want);
            assert!(d <= 1, "{name}({x:e}) = {y:e}, correctly rounded {want:e}");
            off += usize::from(d != 0);
        }
        // One ulp only where the exact value is next to a rounding boundary.
        assert!(
            off * 100_000 < xs.len(),
            "{name}: {off} of {} values not correctly rounded",
            xs.len()
        );
    }

    #[test]
    fn tanh_is_correctly_rounded_but_for_rare_ties() {
        check("tanh", tanh_f32, f64::tanh);
    }

    #[test]
    fn sigmoid_is_correctly_rounded_but_for_rare_ties() {
        check("sigmoid", sigmoid_f32, |x| 1.0 / (1.0 + (-x).exp()));
    }

    #[test]
    fn special_values() {
        let xs = [
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            0.0,
            -0.0,
            f32::MIN_POSITIVE,
            1e-40,
            -1e-40,
            9.0,
            -9.0,
            88.0,
            -88.0,
            -103.0,
            -104.0,
            f32::MAX,
            f32::MIN,
        ];
        let mut t = [0.0_f32; 16];
        let mut s = [0.0_f32; 16];
        tanh_f32(&xs, &mut t);
        sigmoid_f32(&xs, &mut s);
        assert!(t[0].is_nan() && s[0].is_nan());
        assert_eq!((t[1], t[2]), (1.0, -1.0));
        assert_eq!((s[1], s[2]), (1.0, 0.0));
        // tanh keeps the sign of zero, as libm does.
        assert_eq!(t[3].to_bits(), 0.0_f32.to_bits());
        assert_eq!(t[4].to_bits(), (-0.0_f32).to_bits());
        assert_eq!((s[3], s[4]), (0.5, 0.5));
        for (i, &x) in xs.iter().enumerate().skip(5) {
            let want_t = (x as f64).tanh() as f32;
            let want_s = (1.0 / (1.0 + (-(x as f64)).exp())) as f32;
            assert_eq!(t[i].to_bits(), want_t.to_bits(), "tanh({x:e})");
            assert_eq!(s[i].to_bits(), want_s.to_bits(), "sigmoid({x:e})");
        }
    }
}
