//! Element-wise CPU kernels with broadcasting.

use ndarray::{Array2, Zip};

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

/// `f` applied to every element. The op is matched once per call, outside
/// this loop, so that each op's loop is compiled (and vectorised) on its own.
fn map<F: Float>(x: &Array2<F>, f: impl Fn(F) -> F) -> Array2<F> {
    std_layout(x.mapv(f))
}

/// A slice kernel (`Float::tanh_slice` and the like) over every element.
fn map_slices<F: Float>(x: &Array2<F>, f: fn(&[F], &mut [F])) -> Array2<F> {
    let x = x.as_standard_layout();
    let src = x.as_slice().expect("standard layout");
    let mut out = vec![F::zero(); src.len()];
    f(src, &mut out);
    Array2::from_shape_vec(x.dim(), out).expect("same length")
}

/// `f(a, b)` element by element, with broadcasting.
fn zip_map<F: Float>(a: &Array2<F>, b: &Array2<F>, f: impl Fn(F, F) -> F) -> Array2<F> {
    if a.dim() == b.dim() {
        if let (Some(xs), Some(ys)) = (a.as_slice(), b.as_slice()) {
            let out = xs.iter().zip(ys).map(|(&x, &y)| f(x, y)).collect();
            return Array2::from_shape_vec(a.dim(), out).expect("same length");
        }
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

pub(crate) fn binary<F: Float>(op: BinaryOp, a: &Array2<F>, b: &Array2<F>) -> Array2<F> {
    match op {
        BinaryOp::Add => zip_map(a, b, |x, y| x + y),
        BinaryOp::Sub => zip_map(a, b, |x, y| x - y),
        BinaryOp::Mul => zip_map(a, b, |x, y| x * y),
        BinaryOp::Div => zip_map(a, b, |x, y| x / y),
    }
}

pub(crate) fn unary<F: Float>(op: UnaryOp, x: &Array2<F>) -> Array2<F> {
    let zero = F::zero();
    match op {
        // Not `v.max(0)`, which turns NaN into 0: NaN propagates, as in PyTorch.
        UnaryOp::Relu => map(x, |v| if v < zero { zero } else { v }),
        UnaryOp::LeakyRelu(s) => {
            let s = c::<F>(s);
            map(x, |v| if v > zero { v } else { v * s })
        }
        UnaryOp::Elu(a) => {
            let a = c::<F>(a);
            map(x, |v| if v > zero { v } else { a * v.exp_m1() })
        }
        UnaryOp::Sigmoid => map_slices(x, F::sigmoid_slice),
        UnaryOp::Tanh => map_slices(x, F::tanh_slice),
        UnaryOp::Gelu => {
            let half = c::<F>(0.5);
            let inv_sqrt2 = c::<F>(std::f64::consts::FRAC_1_SQRT_2);
            map(x, |v| v * half * (F::one() + (v * inv_sqrt2).erf()))
        }
        UnaryOp::Exp => map(x, |v| v.exp()),
        UnaryOp::Log => map(x, |v| v.ln()),
        UnaryOp::Neg => map(x, |v| -v),
        UnaryOp::Square => map(x, |v| v * v),
        UnaryOp::Affine(a, b) => {
            let (a, b) = (c::<F>(a), c::<F>(b));
            map(x, |v| a * v + b)
        }
    }
}

/// `dy * d(x, y)` element by element, `d` the op's derivative at input `x`
/// with output `y`; matched once per call like [`map`].
fn grad_map<F: Float>(
    x: &Array2<F>,
    y: &Array2<F>,
    dy: &Array2<F>,
    d: impl Fn(F, F) -> F,
) -> Array2<F> {
    // Plain slices when all three are row-major: ndarray's four-way `Zip`
    // is not vectorised, and this is a large part of every backward pass.
    if let (Some(gs), Some(xs), Some(ys)) = (dy.as_slice(), x.as_slice(), y.as_slice()) {
        let out = gs
            .iter()
            .zip(xs.iter().zip(ys))
            .map(|(&g, (&x, &y))| g * d(x, y))
            .collect();
        return Array2::from_shape_vec(dy.dim(), out).expect("same length");
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
                let $d = |x: $f, _: $f| if x > zero { one } else { zero };
                $body
            }
            UnaryOp::LeakyRelu(s) => {
                let s = c::<$f>(s);
                let $d = |x: $f, _: $f| if x > zero { one } else { s };
                $body
            }
            UnaryOp::Elu(a) => {
                let a = c::<$f>(a);
                let $d = |x: $f, y: $f| if x > zero { one } else { y + a };
                $body
            }
            UnaryOp::Sigmoid => {
                let $d = |_: $f, y: $f| y * (one - y);
                $body
            }
            UnaryOp::Tanh => {
                let $d = |_: $f, y: $f| one - y * y;
                $body
            }
            UnaryOp::Gelu => {
                let half = c::<$f>(0.5);
                let inv_sqrt2 = c::<$f>(std::f64::consts::FRAC_1_SQRT_2);
                let inv_sqrt2pi = c::<$f>(1.0 / (2.0 * std::f64::consts::PI).sqrt());
                let $d = |x: $f, _: $f| {
                    let cdf = half * (one + (x * inv_sqrt2).erf());
                    let pdf = (-half * x * x).exp() * inv_sqrt2pi;
                    cdf + x * pdf
                };
                $body
            }
            UnaryOp::Exp => {
                let $d = |_: $f, y: $f| y;
                $body
            }
            UnaryOp::Log => {
                let $d = |x: $f, _: $f| one / x;
                $body
            }
            UnaryOp::Neg => {
                let $d = |_: $f, _: $f| -one;
                $body
            }
            UnaryOp::Square => {
                let two = c::<$f>(2.0);
                let $d = |x: $f, _: $f| two * x;
                $body
            }
            UnaryOp::Affine(a, _) => {
                let a = c::<$f>(a);
                let $d = |_: $f, _: $f| a;
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
            for (g, (&x, &y)) in gs.iter_mut().zip(xs.iter().zip(ys)) {
                *g *= d(x, y);
            }
        });
        return dy;
    }
    unary_grad(op, x, y, &dy)
}

/// Mask words per parallel task: 2^17 entries.
const MASK_WORDS_PER_TASK: usize = 1 << 12;

/// Bit `i % 32` of word `i / 32` set where the `i`-th element (row-major)
/// of `y` is positive. Large tensors are split over the pool.
pub(crate) fn positive_mask<F: Float>(y: &Array2<F>) -> Vec<u32> {
    let y = y.as_standard_layout();
    let ys = y.as_slice().expect("standard layout");
    let zero = F::zero();
    let mut words = vec![0u32; ys.len().div_ceil(32)];
    let per_task = MASK_WORDS_PER_TASK;
    super::parallel::for_each_chunk(&mut words, per_task, |t, ws| {
        let start = t * per_task * 32;
        let end = (start + ws.len() * 32).min(ys.len());
        for (w, chunk) in ws.iter_mut().zip(ys[start..end].chunks(32)) {
            *w = chunk
                .iter()
                .enumerate()
                .fold(0u32, |w, (j, &v)| w | (u32::from(v > zero) << j));
        }
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
    let (zero, one) = (F::zero(), F::one());
    let per_task = MASK_WORDS_PER_TASK;
    super::parallel::for_each_chunk(gs, per_task * 32, |t, part| {
        let words = &mask[t * per_task..];
        for (chunk, &w) in part.chunks_mut(32).zip(words) {
            for (j, g) in chunk.iter_mut().enumerate() {
                // A product, as `unary_grad` computes it: NaN * 0 stays NaN.
                *g *= if (w >> j) & 1 == 1 { one } else { zero };
            }
        }
    });
    dy
}
