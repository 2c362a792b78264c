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

pub(crate) fn binary<F: Float>(op: BinaryOp, a: &Array2<F>, b: &Array2<F>) -> Array2<F> {
    let shape = (
        broadcast_dim(a.nrows(), b.nrows()),
        broadcast_dim(a.ncols(), b.ncols()),
    );
    let f = |x: F, y: F| match op {
        BinaryOp::Add => x + y,
        BinaryOp::Sub => x - y,
        BinaryOp::Mul => x * y,
        BinaryOp::Div => x / y,
    };
    if a.dim() == b.dim() {
        let mut out = a.clone();
        out.zip_mut_with(b, |x, &y| *x = f(*x, y));
        return out;
    }
    let av = a.broadcast(shape).expect("broadcast checked by caller");
    let bv = b.broadcast(shape).expect("broadcast checked by caller");
    std_layout(Zip::from(&av).and(&bv).map_collect(|&x, &y| f(x, y)))
}

pub(crate) fn unary<F: Float>(op: UnaryOp, x: &Array2<F>) -> Array2<F> {
    let half = c::<F>(0.5);
    let inv_sqrt2 = c::<F>(std::f64::consts::FRAC_1_SQRT_2);
    x.mapv(|v| match op {
        // Not `v.max(0)`, which turns NaN into 0: NaN propagates, as in PyTorch.
        UnaryOp::Relu => {
            if v < F::zero() {
                F::zero()
            } else {
                v
            }
        }
        UnaryOp::LeakyRelu(s) => {
            if v > F::zero() {
                v
            } else {
                v * c(s)
            }
        }
        UnaryOp::Elu(a) => {
            if v > F::zero() {
                v
            } else {
                c::<F>(a) * v.exp_m1()
            }
        }
        UnaryOp::Sigmoid => sigmoid(v),
        UnaryOp::Tanh => v.tanh(),
        UnaryOp::Gelu => v * half * (F::one() + (v * inv_sqrt2).erf()),
        UnaryOp::Exp => v.exp(),
        UnaryOp::Log => v.ln(),
        UnaryOp::Neg => -v,
        UnaryOp::Square => v * v,
        UnaryOp::Affine(a, b) => c::<F>(a) * v + c::<F>(b),
    })
}

pub(crate) fn unary_grad<F: Float>(
    op: UnaryOp,
    x: &Array2<F>,
    y: &Array2<F>,
    dy: &Array2<F>,
) -> Array2<F> {
    let half = c::<F>(0.5);
    let inv_sqrt2 = c::<F>(std::f64::consts::FRAC_1_SQRT_2);
    let inv_sqrt2pi = c::<F>(1.0 / (2.0 * std::f64::consts::PI).sqrt());
    let two = c::<F>(2.0);
    let mut out = dy.clone();
    Zip::from(&mut out).and(x).and(y).for_each(|g, &x, &y| {
        let d = match op {
            UnaryOp::Relu => {
                if x > F::zero() {
                    F::one()
                } else {
                    F::zero()
                }
            }
            UnaryOp::LeakyRelu(s) => {
                if x > F::zero() {
                    F::one()
                } else {
                    c(s)
                }
            }
            UnaryOp::Elu(a) => {
                if x > F::zero() {
                    F::one()
                } else {
                    y + c::<F>(a)
                }
            }
            UnaryOp::Sigmoid => y * (F::one() - y),
            UnaryOp::Tanh => F::one() - y * y,
            UnaryOp::Gelu => {
                let cdf = half * (F::one() + (x * inv_sqrt2).erf());
                let pdf = (-half * x * x).exp() * inv_sqrt2pi;
                cdf + x * pdf
            }
            UnaryOp::Exp => y,
            UnaryOp::Log => F::one() / x,
            UnaryOp::Neg => -F::one(),
            UnaryOp::Square => two * x,
            UnaryOp::Affine(a, _) => c(a),
        };
        *g *= d;
    });
    out
}
