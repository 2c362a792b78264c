//! Element-wise CPU kernels with broadcasting.
//!
//! Every kernel computes each entry on its own, so large tensors are split
//! over the pool ([`for_each_part`]) and the loops are compiled a second
//! time with AVX2 ([`simd`]) without changing a single result: Rust never
//! fuses a multiply and an add on its own, so the wider code performs the
//! same operations on each entry.

use std::mem::MaybeUninit;

use ndarray::{Array2, Zip};

use super::parallel::{
    PART_MIN, PART_MIN_COSTLY, for_each_chunk, for_each_part, for_each_part_from, part_len,
};
use super::sparse::has_avx2_fma;
use super::std_layout;
use crate::backend::{BinaryOp, UnaryOp, broadcast_dim};
use crate::float::Float;

#[inline]
pub(crate) fn sigmoid<F: Float>(x: F) -> F {
    if x >= F::zero() {
        F::one() / (F::one() + (-x).exp())
    } else {
        let e = x.exp();
        e / (F::one() + e)
    }
}

fn c<F: Float>(v: f64) -> F {
    F::from_f64_lossy(v)
}

/// Runs `body` compiled with AVX2 and FMA enabled where the CPU has them
/// (the loops in it are inlined into that copy), else as it is.
#[inline(always)]
pub(super) fn simd<R>(body: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    {
        #[target_feature(enable = "avx2,fma")]
        fn wide<R>(body: impl FnOnce() -> R) -> R {
            body()
        }
        if has_avx2_fma() {
            // SAFETY: the CPU has AVX2 and FMA (checked at run time).
            return unsafe { wide(body) };
        }
    }
    body()
}

/// `dst[i] = f(src[i])`. The loops of this module are functions of their
/// slices (not closures over them) so that, once inlined, the compiler knows
/// the output does not overlap the inputs and vectorises them.
#[inline(always)]
fn map_into<F: Copy, G: Fn(F) -> F>(dst: &mut [MaybeUninit<F>], src: &[F], f: &G) {
    for (o, &v) in dst.iter_mut().zip(src) {
        o.write(f(v));
    }
}

/// `dst[i] = f(a[i], b[i])`.
#[inline(always)]
fn zip_into<F: Copy, G: Fn(F, F) -> F>(dst: &mut [MaybeUninit<F>], a: &[F], b: &[F], f: &G) {
    for ((o, &x), &y) in dst.iter_mut().zip(a).zip(b) {
        o.write(f(x, y));
    }
}

/// `dst[i] = g[i] * d(x[i], y[i])`.
#[inline(always)]
fn grad_into<F: Float, D: Fn(F, F) -> F>(
    dst: &mut [MaybeUninit<F>],
    g: &[F],
    x: &[F],
    y: &[F],
    d: &D,
) {
    for (o, (&g, (&x, &y))) in dst.iter_mut().zip(g.iter().zip(x.iter().zip(y))) {
        o.write(g * d(x, y));
    }
}

/// `g[i] *= d(x[i], y[i])`.
#[inline(always)]
fn grad_in_place<F: Float, D: Fn(F, F) -> F>(g: &mut [F], x: &[F], y: &[F], d: &D) {
    for (g, (&x, &y)) in g.iter_mut().zip(x.iter().zip(y)) {
        *g *= d(x, y);
    }
}

/// `acc[i] += t[i]`.
#[inline(always)]
fn add_into<F: Float>(acc: &mut [F], t: &[F]) {
    for (a, &b) in acc.iter_mut().zip(t) {
        *a += b;
    }
}

/// Mask words of `ys` (see [`positive_mask`]).
#[inline(always)]
fn mask_words<F: Float>(words: &mut [u32], ys: &[F]) {
    for (w, chunk) in words.iter_mut().zip(ys.chunks(32)) {
        *w = chunk
            .iter()
            .enumerate()
            .fold(0u32, |w, (j, &v)| w | (u32::from(v > F::zero()) << j));
    }
}

/// `g *= mask` (see [`masked_grad_owned`]).
#[inline(always)]
fn apply_mask<F: Float>(g: &mut [F], words: &[u32]) {
    for (chunk, &w) in g.chunks_mut(32).zip(words) {
        for (j, g) in chunk.iter_mut().enumerate() {
            // A product, as `unary_grad` computes it: NaN * 0 stays NaN.
            *g *= if (w >> j) & 1 == 1 {
                F::one()
            } else {
                F::zero()
            };
        }
    }
}

/// A new row-major `dim` array whose entries `f(start, part)` writes, part by
/// part (see [`for_each_part`]; `f` must write every entry of its part).
fn build<F: Float>(
    dim: (usize, usize),
    align: usize,
    f: impl Fn(usize, &mut [MaybeUninit<F>]) + Sync,
) -> Array2<F> {
    let len = dim.0 * dim.1;
    let mut out = Vec::with_capacity(len);
    for_each_part(&mut out.spare_capacity_mut()[..len], align, f);
    // SAFETY: the parts cover all `len` entries and `f` wrote each of them.
    unsafe { out.set_len(len) };
    Array2::from_shape_vec(dim, out).expect("dim.0 * dim.1 entries")
}

/// `f` applied to every element. The op is matched once per call, outside
/// this loop, so that each op's loop is compiled (and vectorised) on its own.
fn map<F: Float>(x: &Array2<F>, f: impl Fn(F) -> F + Sync) -> Array2<F> {
    let Some(xs) = x.as_slice() else {
        return std_layout(x.mapv(f));
    };
    build(x.dim(), 1, |start, part| {
        simd(|| map_into(part, &xs[start..], &f))
    })
}

/// A slice kernel (`Float::tanh_slice` and the like) over every element.
fn map_slices<F: Float>(x: &Array2<F>, f: fn(&[F], &mut [F])) -> Array2<F> {
    let x = x.as_standard_layout();
    let src = x.as_slice().expect("standard layout");
    let mut out = vec![F::zero(); src.len()];
    for_each_part_from(&mut out, 1, PART_MIN_COSTLY, |start, part| {
        f(&src[start..start + part.len()], part)
    });
    Array2::from_shape_vec(x.dim(), out).expect("same length")
}

/// `f(a, b)` element by element, with broadcasting.
fn zip_map<F: Float>(a: &Array2<F>, b: &Array2<F>, f: impl Fn(F, F) -> F + Sync) -> Array2<F> {
    let (ad, bd) = (a.dim(), b.dim());
    if let (Some(xs), Some(ys)) = (a.as_slice(), b.as_slice()) {
        if ad == bd {
            return build(ad, 1, |start, part| {
                simd(|| zip_into(part, &xs[start..], &ys[start..], &f))
            });
        }
        // A row broadcast over the rows of the other operand (a bias).
        if ad.1 > 0 && bd == (1, ad.1) {
            return broadcast_row(xs, ys, ad, &f);
        }
        if bd.1 > 0 && ad == (1, bd.1) {
            return broadcast_row(ys, xs, bd, |y, x| f(x, y));
        }
    }
    if ad == bd {
        return std_layout(Zip::from(a).and(b).map_collect(|&x, &y| f(x, y)));
    }
    let shape = (
        broadcast_dim(a.nrows(), b.nrows()),
        broadcast_dim(a.ncols(), b.ncols()),
    );
    let av = a.broadcast(shape).expect("broadcast checked by caller");
    let bv = b.broadcast(shape).expect("broadcast checked by caller");
    std_layout(Zip::from(&av).and(&bv).map_collect(|&x, &y| f(x, y)))
}

/// `f(full[i, j], row[j])` for a row-major `full` of shape `dim` and a row
/// of `dim.1 > 0` entries.
fn broadcast_row<F: Float>(
    full: &[F],
    row: &[F],
    dim: (usize, usize),
    f: impl Fn(F, F) -> F + Sync,
) -> Array2<F> {
    let c = dim.1;
    build(dim, c, |start, part| {
        let full = &full[start..];
        simd(|| {
            for (o, x) in part.chunks_exact_mut(c).zip(full.chunks_exact(c)) {
                zip_into(o, x, row, &f);
            }
        })
    })
}

/// `acc += t` entry by entry (same shape).
pub(crate) fn add_assign<F: Float>(acc: &mut Array2<F>, t: &Array2<F>) {
    match (acc.as_slice_mut(), t.as_slice()) {
        (Some(a), Some(b)) => {
            for_each_part(a, 1, |start, part| simd(|| add_into(part, &b[start..])))
        }
        _ => *acc += t,
    }
}

pub(crate) fn binary<F: Float>(op: BinaryOp, a: &Array2<F>, b: &Array2<F>) -> Array2<F> {
    match op {
        BinaryOp::Add => zip_map(a, b, move |x, y| x + y),
        BinaryOp::Sub => zip_map(a, b, move |x, y| x - y),
        BinaryOp::Mul => zip_map(a, b, move |x, y| x * y),
        BinaryOp::Div => zip_map(a, b, move |x, y| x / y),
    }
}

pub(crate) fn unary<F: Float>(op: UnaryOp, x: &Array2<F>) -> Array2<F> {
    let zero = F::zero();
    match op {
        // Not `v.max(0)`, which turns NaN into 0: NaN propagates, as in PyTorch.
        UnaryOp::Relu => map(x, move |v| if v < zero { zero } else { v }),
        UnaryOp::LeakyRelu(s) => {
            let s = c::<F>(s);
            map(x, move |v| if v > zero { v } else { v * s })
        }
        UnaryOp::Elu(a) => {
            let a = c::<F>(a);
            map(x, move |v| if v > zero { v } else { a * v.exp_m1() })
        }
        UnaryOp::Sigmoid => map_slices(x, F::sigmoid_slice),
        UnaryOp::Tanh => map_slices(x, F::tanh_slice),
        UnaryOp::Gelu => {
            let half = c::<F>(0.5);
            let inv_sqrt2 = c::<F>(std::f64::consts::FRAC_1_SQRT_2);
            map(x, move |v| v * half * (F::one() + (v * inv_sqrt2).erf()))
        }
        UnaryOp::Exp => map(x, move |v| v.exp()),
        UnaryOp::Log => map(x, move |v| v.ln()),
        UnaryOp::Neg => map(x, move |v| -v),
        UnaryOp::Square => map(x, move |v| v * v),
        UnaryOp::Affine(a, b) => {
            let (a, b) = (c::<F>(a), c::<F>(b));
            map(x, move |v| a * v + b)
        }
    }
}

/// `dy * d(x, y)` element by element, `d` the op's derivative at input `x`
/// with output `y`; matched once per call like [`map`].
fn grad_map<F: Float>(
    x: &Array2<F>,
    y: &Array2<F>,
    dy: &Array2<F>,
    d: impl Fn(F, F) -> F + Sync,
) -> Array2<F> {
    // Plain slices when all three are row-major: ndarray's four-way `Zip`
    // is not vectorised, and this is a large part of every backward pass.
    if let (Some(gs), Some(xs), Some(ys)) = (dy.as_slice(), x.as_slice(), y.as_slice()) {
        return build(dy.dim(), 1, |start, part| {
            simd(|| grad_into(part, &gs[start..], &xs[start..], &ys[start..], &d))
        });
    }
    std_layout(
        Zip::from(dy)
            .and(x)
            .and(y)
            .map_collect(|&g, &x, &y| g * d(x, y)),
    )
}

/// Runs `$body` with `$d` bound to `f'` of `$op` as a closure of the input
/// and the output (a closure type per arm, so each loop is inlined).
macro_rules! with_derivative {
    ($op:expr, $f:ty, |$d:ident| $body:expr) => {{
        let (zero, one) = (<$f>::zero(), <$f>::one());
        match $op {
            UnaryOp::Relu => {
                let $d = move |x: $f, _: $f| if x > zero { one } else { zero };
                $body
            }
            UnaryOp::LeakyRelu(s) => {
                let s = c::<$f>(s);
                let $d = move |x: $f, _: $f| if x > zero { one } else { s };
                $body
            }
            UnaryOp::Elu(a) => {
                let a = c::<$f>(a);
                let $d = move |x: $f, y: $f| if x > zero { one } else { y + a };
                $body
            }
            UnaryOp::Sigmoid => {
                let $d = move |_: $f, y: $f| y * (one - y);
                $body
            }
            UnaryOp::Tanh => {
                let $d = move |_: $f, y: $f| one - y * y;
                $body
            }
            UnaryOp::Gelu => {
                let half = c::<$f>(0.5);
                let inv_sqrt2 = c::<$f>(std::f64::consts::FRAC_1_SQRT_2);
                let inv_sqrt2pi = c::<$f>(1.0 / (2.0 * std::f64::consts::PI).sqrt());
                let $d = move |x: $f, _: $f| {
                    let cdf = half * (one + (x * inv_sqrt2).erf());
                    let pdf = (-half * x * x).exp() * inv_sqrt2pi;
                    cdf + x * pdf
                };
                $body
            }
            UnaryOp::Exp => {
                let $d = move |_: $f, y: $f| y;
                $body
            }
            UnaryOp::Log => {
                let $d = move |x: $f, _: $f| one / x;
                $body
            }
            UnaryOp::Neg => {
                let $d = move |_: $f, _: $f| -one;
                $body
            }
            UnaryOp::Square => {
                let two = c::<$f>(2.0);
                let $d = move |x: $f, _: $f| two * x;
                $body
            }
            UnaryOp::Affine(a, _) => {
                let a = c::<$f>(a);
                let $d = move |_: $f, _: $f| a;
                $body
            }
        }
    }};
}

pub(crate) fn unary_grad<F: Float>(
    op: UnaryOp,
    x: &Array2<F>,
    y: &Array2<F>,
    dy: &Array2<F>,
) -> Array2<F> {
    with_derivative!(op, F, |d| grad_map(x, y, dy, d))
}

/// [`unary_grad`] written over `dy` where all three are row-major and of
/// one shape (the same values: `dy * f'(x, y)` entry by entry), a new
/// array otherwise.
pub(crate) fn unary_grad_owned<F: Float>(
    op: UnaryOp,
    x: &Array2<F>,
    y: &Array2<F>,
    mut dy: Array2<F>,
) -> Array2<F> {
    if x.dim() == dy.dim()
        && y.dim() == dy.dim()
        && let (Some(xs), Some(ys)) = (x.as_slice(), y.as_slice())
        && let Some(gs) = dy.as_slice_mut()
    {
        with_derivative!(op, F, |d| {
            for_each_part(gs, 1, |start, part| {
                simd(|| grad_in_place(part, &xs[start..], &ys[start..], &d))
            })
        });
        return dy;
    }
    unary_grad(op, x, y, &dy)
}

/// Bit `i % 32` of word `i / 32` set where the `i`-th element (row-major)
/// of `y` is positive. Large tensors are split over the pool.
pub(crate) fn positive_mask<F: Float>(y: &Array2<F>) -> Vec<u32> {
    let y = y.as_standard_layout();
    let ys = y.as_slice().expect("standard layout");
    let mut words = vec![0u32; ys.len().div_ceil(32)];
    // Parts of whole words, split as the entries they cover would be.
    let words_per_part = part_len(ys.len(), 32, PART_MIN).map_or(words.len(), |e| e / 32);
    for_each_chunk(&mut words, words_per_part, |i, ws| {
        let start = i * words_per_part * 32;
        let end = (start + ws.len() * 32).min(ys.len());
        simd(|| mask_words(ws, &ys[start..end]))
    });
    words
}

/// `dy` times the 0/1 mask of [`positive_mask`], written over `dy`. Large
/// tensors are split over the pool.
///
/// # Panics
/// If the mask does not have `ceil(len / 32)` words (the tape passes the
/// mask of its own output, of the gradient's shape).
pub(crate) fn masked_grad_owned<F: Float>(dy: Array2<F>, mask: &[u32]) -> Array2<F> {
    let mut dy = std_layout(dy);
    let gs = dy.as_slice_mut().expect("standard layout");
    assert_eq!(mask.len(), gs.len().div_ceil(32), "mask of another shape");
    for_each_part(gs, 32, |start, part| {
        simd(|| apply_mask(part, &mask[start / 32..]))
    });
    dy
}
