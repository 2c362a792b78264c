//! Counter-based random numbers shared by all backends.
//!
//! Dropout masks must be reproducible from a seed and identical on every
//! backend, and they must be generated in parallel. Both follow from a
//! counter-based generator: the `i`-th number of stream `seed` is a pure
//! function of `(seed, i)`, computed with 32-bit integer operations only so
//! that a GPU shader computes the very same bits.

/// One round of the PCG output permutation used as an integer hash.
#[inline]
pub fn pcg_hash(x: u32) -> u32 {
    let state = x.wrapping_mul(747_796_405).wrapping_add(2_891_336_453);
    let word = ((state >> ((state >> 28) + 4)) ^ state).wrapping_mul(277_803_737);
    (word >> 22) ^ word
}

/// The `i`-th uniform number in `[0, 1)` of stream `seed` (24 random bits).
#[inline]
pub fn uniform(seed: u64, i: u32) -> f32 {
    let lo = seed as u32;
    let hi = (seed >> 32) as u32;
    let h = pcg_hash(pcg_hash(i ^ lo).wrapping_add(hi) ^ 0x9E37_79B9);
    (h >> 8) as f32 * (1.0 / 16_777_216.0)
}

/// Whether entry `i` of a dropout mask with drop probability `p` is kept.
#[inline]
pub fn keep(seed: u64, i: u32, p: f32) -> bool {
    uniform(seed, i) >= p
}

/// Writes `scale` where [`keep`]`(seed, start + k, p)` holds and 0 elsewhere,
/// for every `k` in `0..out.len()`, multiplied by `src[k]` when given.
/// Branch-free, so it vectorises (with AVX2 where the CPU has it).
pub fn fill_mask<F: crate::Float>(
    out: &mut [F],
    src: Option<&[F]>,
    start: u32,
    seed: u64,
    p: f32,
    scale: F,
) {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU supports AVX2 (checked at run time).
        unsafe { fill_mask_avx2(out, src, start, seed, p, scale) };
        return;
    }
    fill_mask_body(out, src, start, seed, p, scale)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn fill_mask_avx2<F: crate::Float>(
    out: &mut [F],
    src: Option<&[F]>,
    start: u32,
    seed: u64,
    p: f32,
    scale: F,
) {
    fill_mask_body(out, src, start, seed, p, scale)
}

#[inline(always)]
fn fill_mask_body<F: crate::Float>(
    out: &mut [F],
    src: Option<&[F]>,
    start: u32,
    seed: u64,
    p: f32,
    scale: F,
) {
    let zero = F::zero();
    match src {
        None => {
            for (k, o) in out.iter_mut().enumerate() {
                *o = if keep(seed, start.wrapping_add(k as u32), p) {
                    scale
                } else {
                    zero
                };
            }
        }
        Some(src) => {
            for (k, (o, &s)) in out.iter_mut().zip(src).enumerate() {
                let m = if keep(seed, start.wrapping_add(k as u32), p) {
                    scale
                } else {
                    zero
                };
                *o = s * m;
            }
        }
    }
}

/// `data[k] *= m_k` for the mask [`fill_mask`] writes (`scale` where
/// [`keep`]`(seed, start + k, p)` holds, 0 elsewhere): the values
/// `fill_mask` writes with `src = data`, to the bit, without a second
/// buffer.
pub fn mask_in_place<F: crate::Float>(data: &mut [F], start: u32, seed: u64, p: f32, scale: F) {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU supports AVX2 (checked at run time).
        unsafe { mask_in_place_avx2(data, start, seed, p, scale) };
        return;
    }
    mask_in_place_body(data, start, seed, p, scale)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn mask_in_place_avx2<F: crate::Float>(data: &mut [F], start: u32, seed: u64, p: f32, scale: F) {
    mask_in_place_body(data, start, seed, p, scale)
}

#[inline(always)]
fn mask_in_place_body<F: crate::Float>(data: &mut [F], start: u32, seed: u64, p: f32, scale: F) {
    let zero = F::zero();
    for (k, o) in data.iter_mut().enumerate() {
        let m = if keep(seed, start.wrapping_add(k as u32), p) {
            scale
        } else {
            zero
        };
        *o *= m;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniform_is_in_range_and_roughly_uniform() {
        let n = 200_000u32;
        let mut buckets = [0usize; 10];
        for i in 0..n {
            let u = uniform(42, i);
            assert!((0.0..1.0).contains(&u));
            buckets[(u * 10.0) as usize] += 1;
        }
        for b in buckets {
            let frac = b as f64 / n as f64;
            assert!((frac - 0.1).abs() < 0.005, "bucket fraction {frac}");
        }
    }

    #[test]
    fn fill_mask_agrees_with_keep() {
        let mut out = vec![0.0f64; 1000];
        let src: Vec<f64> = (0..1000).map(|i| i as f64).collect();
        fill_mask(&mut out, None, 77, 9, 0.3, 2.0);
        for (k, &o) in out.iter().enumerate() {
            assert_eq!(
                o,
                if keep(9, 77 + k as u32, 0.3) {
                    2.0
                } else {
                    0.0
                }
            );
        }
        fill_mask(&mut out, Some(&src), 5, 9, 0.3, 2.0);
        for (k, &o) in out.iter().enumerate() {
            assert_eq!(
                o,
                if keep(9, 5 + k as u32, 0.3) {
                    2.0 * k as f64
                } else {
                    0.0
                }
            );
        }
    }

    #[test]
    fn streams_differ_by_seed_and_repeat_for_same_seed() {
        let a: Vec<f32> = (0..64).map(|i| uniform(1, i)).collect();
        let b: Vec<f32> = (0..64).map(|i| uniform(2, i)).collect();
        let c: Vec<f32> = (0..64).map(|i| uniform(1, i)).collect();
        assert_ne!(a, b);
        assert_eq!(a, c);
        let hi: Vec<f32> = (0..64).map(|i| uniform(1 | (7 << 32), i)).collect();
        assert_ne!(a, hi);
    }
}
