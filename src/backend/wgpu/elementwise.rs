//! Element-wise kernels (`shaders/elementwise.wgsl`) and fused optimiser
//! updates (`shaders/optim.wgsl`).

use std::sync::Arc;

use super::{Kernel, Wgpu, WgpuIndex, WgpuTensor, f, u};
use crate::backend::{BinaryOp, UnaryOp, UpdateRule, broadcast_dim};
use crate::optim::kernels::AdaBeliefMode;

const SRC: &str = include_str!("shaders/elementwise.wgsl");
const OPTIM: &str = include_str!("shaders/optim.wgsl");

const fn k(entry: &'static str) -> Kernel {
    Kernel {
        module: "elementwise",
        source: SRC,
        entry,
    }
}

const fn opt(entry: &'static str) -> Kernel {
    Kernel {
        module: "optim",
        source: OPTIM,
        entry,
    }
}

pub(super) fn full(b: &Wgpu, rows: usize, cols: usize, value: f32) -> WgpuTensor {
    let out = b.alloc(rows, cols);
    let n = out.len();
    b.ctx
        .dispatch(&k("fill"), &[u(n), value.to_bits()], &[&out.buf], n as u64);
    out
}

/// Row and column strides of `t` read at the broadcast shape.
fn strides(t: &WgpuTensor) -> (u32, u32) {
    let rs = if t.rows == 1 { 0 } else { u(t.cols) };
    let cs = u32::from(t.cols != 1);
    (rs, cs)
}

pub(super) fn binary(b: &Wgpu, op: BinaryOp, x: &WgpuTensor, y: &WgpuTensor) -> WgpuTensor {
    let (rows, cols) = (broadcast_dim(x.rows, y.rows), broadcast_dim(x.cols, y.cols));
    let out = b.alloc(rows, cols);
    let code = match op {
        BinaryOp::Add => 0,
        BinaryOp::Sub => 1,
        BinaryOp::Mul => 2,
        BinaryOp::Div => 3,
    };
    let (ars, acs) = strides(x);
    let (brs, bcs) = strides(y);
    let n = out.len();
    b.ctx.dispatch(
        &k("binary"),
        &[u(n), u(cols), code, ars, acs, brs, bcs],
        &[&out.buf, &x.buf, &y.buf],
        n as u64,
    );
    out
}

pub(super) fn add_assign(b: &Wgpu, acc: &mut WgpuTensor, t: &WgpuTensor) {
    assert_eq!((acc.rows, acc.cols), (t.rows, t.cols), "add_assign shapes");
    b.make_unique(acc);
    let n = acc.len();
    b.ctx
        .dispatch(&k("add_assign"), &[u(n)], &[&acc.buf, &t.buf], n as u64);
}

fn code(op: UnaryOp) -> (u32, f64, f64) {
    match op {
        UnaryOp::Relu => (0, 0.0, 0.0),
        UnaryOp::LeakyRelu(s) => (1, s, 0.0),
        UnaryOp::Elu(a) => (2, a, 0.0),
        UnaryOp::Sigmoid => (3, 0.0, 0.0),
        UnaryOp::Tanh => (4, 0.0, 0.0),
        UnaryOp::Gelu => (5, 0.0, 0.0),
        UnaryOp::Exp => (6, 0.0, 0.0),
        UnaryOp::Log => (7, 0.0, 0.0),
        UnaryOp::Neg => (8, 0.0, 0.0),
        UnaryOp::Square => (9, 0.0, 0.0),
        UnaryOp::Affine(a, c) => (10, a, c),
    }
}

pub(super) fn unary(b: &Wgpu, op: UnaryOp, x: &WgpuTensor) -> WgpuTensor {
    let out = b.alloc(x.rows, x.cols);
    let (c, s, t) = code(op);
    let n = out.len();
    b.ctx.dispatch(
        &k("unary"),
        &[u(n), c, f(s), f(t)],
        &[&out.buf, &x.buf],
        n as u64,
    );
    out
}

pub(super) fn unary_grad(
    b: &Wgpu,
    op: UnaryOp,
    x: &WgpuTensor,
    y: &WgpuTensor,
    dy: &WgpuTensor,
) -> WgpuTensor {
    let out = b.alloc(x.rows, x.cols);
    let (c, s, _) = code(op);
    let n = out.len();
    b.ctx.dispatch(
        &k("unary_grad"),
        &[u(n), c, f(s)],
        &[&out.buf, &x.buf, &y.buf, &dy.buf],
        n as u64,
    );
    out
}

pub(super) fn positive_mask(b: &Wgpu, y: &WgpuTensor) -> WgpuIndex {
    let n = y.len();
    let words = n.div_ceil(32);
    let bits = Arc::new(b.ctx.alloc(4 * words as u64));
    b.ctx.dispatch(
        &k("positive_mask"),
        &[u(n), u(words)],
        &[&bits, &y.buf],
        words as u64,
    );
    b.device_index(bits, words)
}

pub(super) fn masked_grad_owned(b: &Wgpu, mut dy: WgpuTensor, mask: &WgpuIndex) -> WgpuTensor {
    let n = dy.len();
    assert_eq!(mask.len, n.div_ceil(32), "mask of another shape");
    b.make_unique(&mut dy);
    b.ctx
        .dispatch(&k("masked_grad"), &[u(n)], &[&dy.buf, &mask.buf], n as u64);
    dy
}

pub(super) fn dropout_mask(b: &Wgpu, rows: usize, cols: usize, p: f64, seed: u64) -> WgpuTensor {
    let out = b.alloc(rows, cols);
    let n = out.len();
    let scale = 1.0 / (1.0 - p);
    b.ctx.dispatch(
        &k("dropout_mask"),
        &[u(n), seed as u32, (seed >> 32) as u32, f(p), f(scale)],
        &[&out.buf],
        n as u64,
    );
    out
}

pub(super) fn optim_update(
    b: &Wgpu,
    rule: &UpdateRule,
    step: u64,
    param: &mut WgpuTensor,
    grad: &WgpuTensor,
    slots: &mut [WgpuTensor],
) {
    assert!(
        slots.len() >= rule.num_slots(),
        "optim_update: {} slots given, {} needed",
        slots.len(),
        rule.num_slots()
    );
    b.make_unique(param);
    for s in slots.iter_mut().take(rule.num_slots()) {
        assert_eq!((s.rows, s.cols), (param.rows, param.cols), "slot shape");
        b.make_unique(s);
    }
    let n = param.len();
    let pow = |beta: f64| beta.powf(step as f64);
    let flag = |v: bool| u32::from(v);
    match *rule {
        UpdateRule::Sgd {
            lr,
            momentum,
            dampening,
            nesterov,
            weight_decay,
        } => {
            if momentum == 0.0 {
                b.ctx.dispatch(
                    &opt("sgd_plain"),
                    &[u(n), f(lr), f(weight_decay)],
                    &[&param.buf, &grad.buf],
                    n as u64,
                );
            } else {
                b.ctx.dispatch(
                    &opt("sgd_momentum"),
                    &[
                        u(n),
                        f(lr),
                        f(weight_decay),
                        f(momentum),
                        f(1.0 - dampening),
                        flag(step <= 1),
                        flag(nesterov),
                    ],
                    &[&param.buf, &grad.buf, &slots[0].buf],
                    n as u64,
                );
            }
        }
        UpdateRule::Adam {
            lr,
            beta1,
            beta2,
            eps,
            weight_decay,
            decoupled,
        } => {
            let bias_c1 = 1.0 - pow(beta1);
            let bias_c2 = 1.0 - pow(beta2);
            b.ctx.dispatch(
                &opt("adam"),
                &[
                    u(n),
                    f(lr / bias_c1),
                    f(bias_c2.sqrt()),
                    f(1.0 - lr * weight_decay),
                    f(weight_decay),
                    f(1.0 - beta1),
                    f(beta2),
                    f(1.0 - beta2),
                    f(eps),
                    flag(decoupled),
                ],
                &[&param.buf, &grad.buf, &slots[0].buf, &slots[1].buf],
                n as u64,
            );
        }
        UpdateRule::AdaBelief {
            lr,
            beta1,
            beta2,
            eps,
            weight_decay,
            decoupled,
            rectify,
        } => {
            let (sgd, scale, denom_div) =
                match crate::optim::kernels::adabelief_mode(lr, beta1, beta2, rectify, step) {
                    AdaBeliefMode::Adaptive { scale, denom_div } => (false, scale, denom_div),
                    AdaBeliefMode::Sgd { scale } => (true, scale, 1.0),
                };
            b.ctx.dispatch(
                &opt("adabelief"),
                &[
                    u(n),
                    f(1.0 - lr * weight_decay),
                    f(weight_decay),
                    f(beta1),
                    f(1.0 - beta1),
                    f(beta2),
                    f(1.0 - beta2),
                    f(eps),
                    flag(decoupled),
                    flag(sgd),
                    f(scale),
                    f(denom_div),
                ],
                &[&param.buf, &grad.buf, &slots[0].buf, &slots[1].buf],
                n as u64,
            );
        }
    }
}
