//! Reference CPU arithmetic of every [`UpdateRule`].
//!
//! [`update_slices`] is the exact element-wise arithmetic of the fused
//! optimiser updates, written to follow the reference Python implementations
//! operation by operation (same order of operations, same place for every
//! epsilon), so that an `f64` run agrees with them to rounding:
//!
//! * [`UpdateRule::Sgd`]: `torch.optim.SGD` (L2 weight decay added to the
//!   gradient, momentum buffer initialised to the first gradient, dampening
//!   from the second step on, Nesterov look-ahead).
//! * [`UpdateRule::Adam`]: `torch.optim.Adam` (`decoupled: false`, L2 weight
//!   decay) and `torch.optim.AdamW` (`decoupled: true`, `p *= 1 - lr * wd`
//!   before the moment updates), without AMSGrad.
//! * [`UpdateRule::AdaBelief`]: `adabelief-pytorch` 0.2.x, with
//!   `fixed_decay=False`, `amsgrad=False` and `degenerated_to_sgd=True`.
//!
//! Backends without their own kernels (the CPU backend) call
//! [`update_slices`] on the tensors' contiguous data.

use crate::backend::UpdateRule;
use crate::float::Float;

/// Applies one update of `rule` to `param` in place, element by element.
///
/// * `step` is the 1-based index of this update for this parameter (the
///   bias corrections and SGD's momentum initialisation depend on it).
/// * `grad` has `param.len()` entries.
/// * `slots` holds [`UpdateRule::num_slots`] state buffers of `param.len()`
///   entries each, zero before the first step: SGD's momentum buffer, Adam's
///   `(m, v)` or AdaBelief's `(m, s)`.
///
/// The arithmetic, for a parameter `p`, gradient `g` and step `t`:
///
/// | rule | update |
/// | --- | --- |
/// | SGD | `d = g + wd·p`; `b = d` at `t = 1`, else `b = μ·b + (1 − τ)·d`; `d = d + μ·b` (Nesterov) or `d = b`; `p −= lr·d` |
/// | Adam | `g += wd·p` (L2) or `p *= 1 − lr·wd` (decoupled); `m += (1 − β1)(g − m)`; `v = β2·v + (1 − β2)·g²`; `p −= lr/(1 − β1ᵗ) · m / (√v / √(1 − β2ᵗ) + ε)` |
/// | AdaBelief | decay as Adam; `m = β1·m + (1 − β1)·g`; `s = β2·s + (1 − β2)(g − m)² + ε`; `p −= lr/(1 − β1ᵗ) · m / (√s / √(1 − β2ᵗ) + ε)` |
///
/// Rectified AdaBelief replaces the last step by RAdam's: with
/// `ρ∞ = 2/(1 − β2) − 1` and `ρₜ = ρ∞ − 2tβ2ᵗ/(1 − β2ᵗ)`, if `ρₜ ≥ 5` then
/// `r = √((1 − β2ᵗ)(ρₜ − 4)(ρₜ − 2)ρ∞ / ((ρ∞ − 4)ρₜ(ρ∞ − 2))) / (1 − β1ᵗ)` and
/// `p −= lr·r · m / (√s + ε)`; otherwise the update degenerates to SGD with
/// momentum, `p −= lr/(1 − β1ᵗ) · m`. Note that AdaBelief adds `ε` twice:
/// once into the stored `s` (so it accumulates across steps) and once to the
/// denominator.
///
/// # Panics
///
/// If `grad` or a slot does not have `param.len()` entries, or fewer slots
/// than the rule needs are given (a bug in the caller).
///
/// # Example
///
/// ```
/// use hdgcn::backend::UpdateRule;
/// use hdgcn::optim::kernels::update_slices;
///
/// let rule = UpdateRule::Sgd {
///     lr: 0.1,
///     momentum: 0.0,
///     dampening: 0.0,
///     nesterov: false,
///     weight_decay: 0.0,
/// };
/// let mut p = [1.0_f64, -2.0];
/// update_slices(&rule, 1, &mut p, &[0.5, 1.0], &mut []);
/// assert_eq!(p, [0.95, -2.1]);
/// ```
pub fn update_slices<F: Float>(
    rule: &UpdateRule,
    step: u64,
    param: &mut [F],
    grad: &[F],
    slots: &mut [&mut [F]],
) {
    let n = param.len();
    assert_eq!(grad.len(), n, "update_slices: gradient length");
    assert!(
        slots.len() >= rule.num_slots(),
        "update_slices: {} slots given, {} needed",
        slots.len(),
        rule.num_slots()
    );
    for s in slots.iter().take(rule.num_slots()) {
        assert_eq!(s.len(), n, "update_slices: slot length");
    }
    let c = |v: f64| F::from_f64_lossy(v);
    // Python's `beta ** step` (a float power, i.e. C `pow`).
    let pow = |b: f64| b.powf(step as f64);

    match *rule {
        UpdateRule::Sgd {
            lr,
            momentum,
            dampening,
            nesterov,
            weight_decay,
        } => {
            let (lr, mu, wd, damp) = (c(lr), c(momentum), c(weight_decay), c(1.0 - dampening));
            if momentum == 0.0 {
                for (p, &g) in param.iter_mut().zip(grad) {
                    let d = if weight_decay != 0.0 { g + *p * wd } else { g };
                    *p += d * -lr;
                }
                return;
            }
            let buf = &mut *slots[0];
            for ((p, &g), b) in param.iter_mut().zip(grad).zip(buf.iter_mut()) {
                let mut d = if weight_decay != 0.0 { g + *p * wd } else { g };
                if step <= 1 {
                    *b = d;
                } else {
                    *b = *b * mu + d * damp;
                }
                if nesterov {
                    d += *b * mu;
                } else {
                    d = *b;
                }
                *p += d * -lr;
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
            let step_size = c(lr / bias_c1);
            let bias_c2_sqrt = c(bias_c2.sqrt());
            let decay = c(1.0 - lr * weight_decay);
            let (wd, w1, b2, w2, eps) = (
                c(weight_decay),
                c(1.0 - beta1),
                c(beta2),
                c(1.0 - beta2),
                c(eps),
            );
            let (m, rest) = slots.split_at_mut(1);
            let (m, v) = (&mut *m[0], &mut *rest[0]);
            for (((p, &g), m), v) in param
                .iter_mut()
                .zip(grad)
                .zip(m.iter_mut())
                .zip(v.iter_mut())
            {
                let mut g = g;
                if weight_decay != 0.0 {
                    if decoupled {
                        *p *= decay;
                    } else {
                        g += *p * wd;
                    }
                }
                // torch: exp_avg.lerp_(grad, 1 - beta1)
                *m = *m + w1 * (g - *m);
                // torch: exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                *v = *v * b2 + w2 * g * g;
                // torch: denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
                let denom = v.sqrt() / bias_c2_sqrt + eps;
                // torch: param.addcdiv_(exp_avg, denom, value=-step_size)
                *p += -step_size * *m / denom;
            }
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
            let decay = c(1.0 - lr * weight_decay);
            let (wd, b1, w1, b2, w2, eps_f) = (
                c(weight_decay),
                c(beta1),
                c(1.0 - beta1),
                c(beta2),
                c(1.0 - beta2),
                c(eps),
            );
            let mode = adabelief_mode(lr, beta1, beta2, rectify, step);
            let (m, rest) = slots.split_at_mut(1);
            let (m, s) = (&mut *m[0], &mut *rest[0]);
            let k = AdaBeliefConsts {
                decay,
                wd,
                b1,
                w1,
                b2,
                w2,
                eps: eps_f,
            };
            // One loop per case, each without branches, so that it
            // vectorises; the arithmetic of every element is the same as in
            // one loop with the cases inside.
            // adabelief-pytorch decays whenever weight_decouple is set.
            let decay_kind = if decoupled {
                Decay::Decoupled
            } else if weight_decay != 0.0 {
                Decay::Coupled
            } else {
                Decay::None
            };
            match mode {
                AdaBeliefMode::Adaptive { scale, denom_div } => {
                    let (neg_scale, div) = (c(-scale), c(denom_div));
                    adabelief_loop(param, grad, m, s, &k, decay_kind, |m, s| {
                        let denom = s.sqrt() / div + k.eps;
                        neg_scale * m / denom
                    })
                }
                AdaBeliefMode::Sgd { scale } => {
                    let neg_scale = c(-scale);
                    adabelief_loop(param, grad, m, s, &k, decay_kind, |m, _| m * neg_scale)
                }
            }
        }
    }
}

/// How weight decay enters an update.
#[derive(Clone, Copy)]
enum Decay {
    /// `p *= 1 - lr · wd` before the update.
    Decoupled,
    /// `g += wd · p`.
    Coupled,
    /// None.
    None,
}

/// AdaBelief's per-element constants, in the element type.
struct AdaBeliefConsts<F> {
    decay: F,
    wd: F,
    b1: F,
    w1: F,
    b2: F,
    w2: F,
    eps: F,
}

/// AdaBelief's moments and the step `delta(m, s)` over the slices, with the
/// weight-decay cases fixed for the whole loop. Runs under AVX2 where the
/// CPU has it (the same operations in the same order, so the same values).
#[inline(always)]
fn adabelief_loop<F: Float>(
    param: &mut [F],
    grad: &[F],
    m: &mut [F],
    s: &mut [F],
    k: &AdaBeliefConsts<F>,
    decay: Decay,
    delta: impl Fn(F, F) -> F + Copy,
) {
    #[inline(always)]
    fn body<F: Float, const DECOUPLED: bool, const COUPLED: bool>(
        param: &mut [F],
        grad: &[F],
        m: &mut [F],
        s: &mut [F],
        k: &AdaBeliefConsts<F>,
        delta: impl Fn(F, F) -> F,
    ) {
        for (((p, &g), m), s) in param
            .iter_mut()
            .zip(grad)
            .zip(m.iter_mut())
            .zip(s.iter_mut())
        {
            let mut g = g;
            if DECOUPLED {
                *p *= k.decay;
            } else if COUPLED {
                g += *p * k.wd;
            }
            // exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
            *m = *m * k.b1 + g * k.w1;
            let r = g - *m;
            // exp_avg_var.mul_(beta2).addcmul_(r, r, value=1 - beta2); then .add_(eps) in place
            *s = *s * k.b2 + k.w2 * r * r;
            *s += k.eps;
            *p += delta(*m, *s);
        }
    }
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn body_avx2<F: Float, const DECOUPLED: bool, const COUPLED: bool>(
        param: &mut [F],
        grad: &[F],
        m: &mut [F],
        s: &mut [F],
        k: &AdaBeliefConsts<F>,
        delta: impl Fn(F, F) -> F,
    ) {
        body::<F, DECOUPLED, COUPLED>(param, grad, m, s, k, delta)
    }
    fn run<F: Float, const DECOUPLED: bool, const COUPLED: bool>(
        param: &mut [F],
        grad: &[F],
        m: &mut [F],
        s: &mut [F],
        k: &AdaBeliefConsts<F>,
        delta: impl Fn(F, F) -> F,
    ) {
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2 (checked at run time).
            unsafe { body_avx2::<F, DECOUPLED, COUPLED>(param, grad, m, s, k, delta) };
            return;
        }
        body::<F, DECOUPLED, COUPLED>(param, grad, m, s, k, delta)
    }
    match decay {
        Decay::Decoupled => run::<F, true, false>(param, grad, m, s, k, delta),
        Decay::Coupled => run::<F, false, true>(param, grad, m, s, k, delta),
        Decay::None => run::<F, false, false>(param, grad, m, s, k, delta),
    }
}

/// How AdaBelief's moments turn into an update at a given step.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum AdaBeliefMode {
    /// `p -= scale * m / (sqrt(s) / denom_div + eps)`.
    Adaptive {
        /// Step scale (learning rate with bias or rectification factors).
        scale: f64,
        /// Divisor of `sqrt(s)` (the second bias correction, or 1 when rectified).
        denom_div: f64,
    },
    /// Rectified warm-up degenerated to SGD with momentum: `p -= scale * m`.
    Sgd {
        /// Step scale.
        scale: f64,
    },
}

/// The AdaBelief update mode of step `step` (from 1), shared by every backend.
pub(crate) fn adabelief_mode(
    lr: f64,
    beta1: f64,
    beta2: f64,
    rectify: bool,
    step: u64,
) -> AdaBeliefMode {
    // Python's `beta ** step` (a float power, i.e. C `pow`).
    let pow = |b: f64| b.powf(step as f64);
    let bias_c1 = 1.0 - pow(beta1);
    let bias_c2 = 1.0 - pow(beta2);
    if !rectify {
        return AdaBeliefMode::Adaptive {
            scale: lr / bias_c1,
            denom_div: bias_c2.sqrt(),
        };
    }
    let beta2_t = pow(beta2);
    let n_sma_max = 2.0 / (1.0 - beta2) - 1.0;
    let n_sma = n_sma_max - 2.0 * step as f64 * beta2_t / (1.0 - beta2_t);
    if n_sma >= 5.0 {
        let r = ((1.0 - beta2_t) * (n_sma - 4.0) / (n_sma_max - 4.0) * (n_sma - 2.0) / n_sma
            * n_sma_max
            / (n_sma_max - 2.0))
            .sqrt()
            / (1.0 - pow(beta1));
        AdaBeliefMode::Adaptive {
            scale: r * lr,
            denom_div: 1.0,
        }
    } else {
        // degenerated_to_sgd=True
        AdaBeliefMode::Sgd {
            scale: 1.0 / (1.0 - pow(beta1)) * lr,
        }
    }
}
