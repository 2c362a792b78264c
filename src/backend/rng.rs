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
