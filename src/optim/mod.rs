//! Optimisers, gradient clipping and learning-rate schedules.
//!
//! Every optimiser follows one pattern: a plain configuration struct with
//! public fields whose [`Default`] matches the reference implementation's
//! defaults, chainable setters, `validate()` (every hyper-parameter checked,
//! [`Error::InvalidConfig`] naming the field) and `build()` into the
//! optimiser. The optimiser keeps its state (step count and slot tensors) per
//! [`ParamId`], creates the slots lazily on the parameter's backend, and runs
//! each update through [`Backend::optim_update`] with the matching
//! [`UpdateRule`], so it works on any backend.
//!
//! | optimiser | reference |
//! | --- | --- |
//! | [`Sgd`] | `torch.optim.SGD` |
//! | [`Adam`] | `torch.optim.Adam` (L2 weight decay) |
//! | [`AdamW`] | `torch.optim.AdamW` (decoupled weight decay) |
//! | [`AdaBelief`] | `adabelief_pytorch.AdaBelief` 0.2.x |
//!
//! The element-wise arithmetic is in [`kernels::update_slices`].
//! [`ExponentialMovingAverage`] keeps a running average of the weights for
//! evaluation (Polyak averaging).
//!
//! # Example
//!
//! ```
//! use hdgcn::autograd::{Param, Tape};
//! use hdgcn::backend::Cpu;
//! use hdgcn::optim::{AdamConfig, CosineAnnealing, LrSchedule, Optimizer, clip_grad_norm};
//! use ndarray::array;
//!
//! let cpu = Cpu::<f64>::new();
//! let w = Param::from_array(&cpu, &array![[0.0, 0.0]]);
//! let target = array![[1.0, -2.0]];
//! let mut opt = AdamConfig::default().lr(0.1).weight_decay(5e-4).build::<Cpu<f64>>()?;
//! let schedule = CosineAnnealing::new(0.1, 100, 0.0)?;
//! assert!(AdamConfig::default().beta1(1.0).validate().is_err());
//!
//! for epoch in 0..100 {
//!     opt.set_learning_rate(schedule.lr_at(epoch));
//!     let tape = Tape::new(&cpu);
//!     let loss = tape.param(&w).sub(&tape.constant_array(&target))?.square().sum_all();
//!     let mut grads = loss.backward()?;
//!     clip_grad_norm(&cpu, &mut grads, 1.0)?;
//!     opt.step(&[w.clone()], &grads)?;
//! }
//! let w = w.to_array();
//! assert!((w[[0, 0]] - 1.0).abs() < 1e-2 && (w[[0, 1]] + 2.0).abs() < 1e-2);
//! # Ok::<(), hdgcn::Error>(())
//! ```

mod ema;
pub mod kernels;
mod schedule;

use std::collections::{HashMap, HashSet};

use crate::autograd::{Gradients, Param, ParamId};
use crate::backend::{Backend, UnaryOp, UpdateRule};
use crate::error::{Error, Result, check_non_negative, check_positive};

pub use ema::ExponentialMovingAverage;
pub use schedule::{Constant, CosineAnnealing, LinearWarmup, LrSchedule, LrScheduleKind, StepLr};

/// A first-order optimiser.
pub trait Optimizer<B: Backend> {
    /// One update of every parameter in `params` that has a gradient in
    /// `grads`; parameters without a gradient are left alone (and their step
    /// count does not advance). State is kept per [`ParamId`]; a parameter
    /// listed twice is updated once.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] if the learning rate was set to an invalid
    /// value, [`Error::ShapeMismatch`] if a gradient (or stored state) does
    /// not have its parameter's shape. Nothing is updated on error.
    fn step(&mut self, params: &[Param<B>], grads: &Gradients<B>) -> Result<()>;

    /// Current learning rate.
    fn learning_rate(&self) -> f64;

    /// Sets the learning rate used by the following steps (see [`LrSchedule`]).
    /// An invalid value (negative, NaN) makes the next [`Optimizer::step`] fail.
    fn set_learning_rate(&mut self, lr: f64);
}

// ----- validation helpers -------------------------------------------------------

fn invalid(owner: &str, field: &str, rule: &str, v: impl std::fmt::Display) -> Error {
    Error::InvalidConfig(format!("{owner}: {field} must be {rule}, got {v}"))
}

fn check_nonneg(owner: &str, field: &str, v: f64) -> Result<()> {
    check_non_negative(format_args!("{owner}: {field}"), v)
}

fn check_beta(owner: &str, field: &str, v: f64) -> Result<()> {
    if (0.0..1.0).contains(&v) {
        Ok(())
    } else {
        Err(invalid(owner, field, "in [0, 1)", v))
    }
}

fn check_eps(owner: &str, field: &str, v: f64) -> Result<()> {
    check_positive(format_args!("{owner}: {field}"), v)
}

// ----- shared state and step --------------------------------------------------

/// Per-parameter state: step count and slot tensors.
type StateMap<B> = HashMap<ParamId, (u64, Vec<<B as Backend>::Tensor>)>;

fn apply_rule<B: Backend>(
    state: &mut StateMap<B>,
    rule: &UpdateRule,
    params: &[Param<B>],
    grads: &Gradients<B>,
) -> Result<()> {
    let need = rule.num_slots();
    // Validate everything before touching anything.
    let mut seen = HashSet::new();
    let mut todo = Vec::new();
    for p in params {
        if !seen.insert(p.id()) {
            continue;
        }
        let Some(g) = grads.get(p) else { continue };
        let backend = p.backend();
        let shape = p.shape();
        let gshape = backend.shape(g);
        if gshape != shape {
            return Err(Error::shape(
                "optimizer step (gradient)",
                format!("{shape:?}"),
                format!("{gshape:?}"),
            ));
        }
        if let Some((_, slots)) = state.get(&p.id()) {
            for s in slots {
                let sshape = backend.shape(s);
                if sshape != shape {
                    return Err(Error::shape(
                        "optimizer step (state of a reshaped parameter)",
                        format!("{sshape:?}"),
                        format!("{shape:?}"),
                    ));
                }
            }
        }
        todo.push((p, g, shape));
    }
    for (p, g, (rows, cols)) in todo {
        let backend = p.backend();
        let entry = state.entry(p.id()).or_insert_with(|| (0, Vec::new()));
        while entry.1.len() < need {
            entry
                .1
                .push(backend.full(rows, cols, <B::Elem as num_traits::Zero>::zero()));
        }
        entry.0 += 1;
        let mut value = p.value_mut();
        backend.optim_update(rule, entry.0, &mut value, g, &mut entry.1[..need]);
    }
    Ok(())
}

/// Implements the boilerplate shared by the four optimisers.
macro_rules! optimizer_common {
    ($opt:ident, $config:ident, $name:literal) => {
        impl $config {
            /// Builds the optimiser after validating the configuration.
            ///
            /// # Errors
            ///
            /// [`Error::InvalidConfig`] naming the first invalid field.
            pub fn build<B: Backend>(self) -> Result<$opt<B>> {
                $opt::new(self)
            }

            /// Sets the learning rate.
            pub fn lr(mut self, lr: f64) -> Self {
                self.lr = lr;
                self
            }

            /// Sets the weight decay.
            pub fn weight_decay(mut self, weight_decay: f64) -> Self {
                self.weight_decay = weight_decay;
                self
            }
        }

        impl<B: Backend> $opt<B> {
            /// Validates `config` and creates the optimiser with empty state.
            ///
            /// # Errors
            ///
            /// [`Error::InvalidConfig`] naming the first invalid field.
            pub fn new(config: $config) -> Result<Self> {
                config.validate()?;
                Ok($opt {
                    config,
                    state: HashMap::new(),
                })
            }

            /// The configuration (with the current learning rate).
            pub fn config(&self) -> &$config {
                &self.config
            }

            /// Forgets all per-parameter state (step counts and moments).
            pub fn reset(&mut self) {
                self.state.clear();
            }

            /// Number of updates applied so far to `p` (0 if never updated).
            pub fn step_count(&self, p: &Param<B>) -> u64 {
                self.state.get(&p.id()).map_or(0, |(t, _)| *t)
            }
        }

        impl<B: Backend> Optimizer<B> for $opt<B> {
            fn step(&mut self, params: &[Param<B>], grads: &Gradients<B>) -> Result<()> {
                check_nonneg($name, "lr", self.config.lr)?;
                let rule = self.config.rule();
                apply_rule(&mut self.state, &rule, params, grads)
            }

            fn learning_rate(&self) -> f64 {
                self.config.lr
            }

            fn set_learning_rate(&mut self, lr: f64) {
                self.config.lr = lr;
            }
        }
    };
}

// ----- SGD ------------------------------------------------------------------------

/// Configuration of [`Sgd`]; the defaults are `torch.optim.SGD`'s.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SgdConfig {
    /// Learning rate (default `1e-3`), finite and `>= 0`.
    pub lr: f64,
    /// Momentum factor (default 0: no momentum buffer), finite and `>= 0`.
    pub momentum: f64,
    /// Dampening of the momentum (default 0), in `[0, 1]`.
    pub dampening: f64,
    /// Nesterov momentum (default `false`); needs `momentum > 0` and `dampening == 0`.
    pub nesterov: bool,
    /// L2 penalty added to the gradient (default 0), finite and `>= 0`.
    pub weight_decay: f64,
}

impl Default for SgdConfig {
    fn default() -> Self {
        SgdConfig {
            lr: 1e-3,
            momentum: 0.0,
            dampening: 0.0,
            nesterov: false,
            weight_decay: 0.0,
        }
    }
}

impl SgdConfig {
    /// Checks every hyper-parameter.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] naming the first invalid field.
    pub fn validate(&self) -> Result<()> {
        check_nonneg("Sgd", "lr", self.lr)?;
        check_nonneg("Sgd", "momentum", self.momentum)?;
        if !(0.0..=1.0).contains(&self.dampening) {
            return Err(invalid("Sgd", "dampening", "in [0, 1]", self.dampening));
        }
        check_nonneg("Sgd", "weight_decay", self.weight_decay)?;
        if self.nesterov && (self.momentum <= 0.0 || self.dampening != 0.0) {
            return Err(Error::InvalidConfig(format!(
                "Sgd: nesterov requires momentum > 0 and dampening == 0, got momentum {} and dampening {}",
                self.momentum, self.dampening
            )));
        }
        Ok(())
    }

    /// Sets the momentum factor.
    pub fn momentum(mut self, momentum: f64) -> Self {
        self.momentum = momentum;
        self
    }

    /// Sets the dampening.
    pub fn dampening(mut self, dampening: f64) -> Self {
        self.dampening = dampening;
        self
    }

    /// Enables or disables Nesterov momentum.
    pub fn nesterov(mut self, nesterov: bool) -> Self {
        self.nesterov = nesterov;
        self
    }

    /// The fused update rule.
    pub fn rule(&self) -> UpdateRule {
        UpdateRule::Sgd {
            lr: self.lr,
            momentum: self.momentum,
            dampening: self.dampening,
            nesterov: self.nesterov,
            weight_decay: self.weight_decay,
        }
    }
}

/// Stochastic gradient descent with momentum, as `torch.optim.SGD`.
///
/// ```
/// use hdgcn::optim::SgdConfig;
///
/// let config = SgdConfig::default().lr(0.1).momentum(0.9).nesterov(true);
/// config.validate()?;
/// // Nesterov with dampening is rejected, naming the field:
/// let err = config.dampening(0.5).validate().unwrap_err();
/// assert!(err.to_string().contains("nesterov"));
/// # Ok::<(), hdgcn::Error>(())
/// ```
#[derive(Debug)]
pub struct Sgd<B: Backend> {
    config: SgdConfig,
    state: StateMap<B>,
}

optimizer_common!(Sgd, SgdConfig, "Sgd");

// ----- Adam / AdamW -------------------------------------------------------------------

/// Configuration of [`Adam`]; the defaults are `torch.optim.Adam`'s.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdamConfig {
    /// Learning rate (default `1e-3`), finite and `>= 0`.
    pub lr: f64,
    /// First-moment decay (default 0.9), in `[0, 1)`.
    pub beta1: f64,
    /// Second-moment decay (default 0.999), in `[0, 1)`.
    pub beta2: f64,
    /// Added to the bias-corrected `sqrt(v)` (default `1e-8`), finite and `> 0`.
    pub eps: f64,
    /// L2 penalty added to the gradient (default 0), finite and `>= 0`.
    pub weight_decay: f64,
}

impl Default for AdamConfig {
    fn default() -> Self {
        AdamConfig {
            lr: 1e-3,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 0.0,
        }
    }
}

/// Configuration of [`AdamW`]; the defaults are `torch.optim.AdamW`'s
/// (note `weight_decay = 0.01`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdamWConfig {
    /// Learning rate (default `1e-3`), finite and `>= 0`.
    pub lr: f64,
    /// First-moment decay (default 0.9), in `[0, 1)`.
    pub beta1: f64,
    /// Second-moment decay (default 0.999), in `[0, 1)`.
    pub beta2: f64,
    /// Added to the bias-corrected `sqrt(v)` (default `1e-8`), finite and `> 0`.
    pub eps: f64,
    /// Decoupled weight decay, `p *= 1 - lr * weight_decay` (default 0.01),
    /// finite and `>= 0`.
    pub weight_decay: f64,
}

impl Default for AdamWConfig {
    fn default() -> Self {
        AdamWConfig {
            lr: 1e-3,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-8,
            weight_decay: 1e-2,
        }
    }
}

macro_rules! adam_like_config {
    ($config:ident, $name:literal, $decoupled:expr) => {
        impl $config {
            /// Checks every hyper-parameter.
            ///
            /// # Errors
            ///
            /// [`Error::InvalidConfig`] naming the first invalid field.
            pub fn validate(&self) -> Result<()> {
                check_nonneg($name, "lr", self.lr)?;
                check_beta($name, "beta1", self.beta1)?;
                check_beta($name, "beta2", self.beta2)?;
                check_eps($name, "eps", self.eps)?;
                check_nonneg($name, "weight_decay", self.weight_decay)
            }

            /// Sets the first-moment decay.
            pub fn beta1(mut self, beta1: f64) -> Self {
                self.beta1 = beta1;
                self
            }

            /// Sets the second-moment decay.
            pub fn beta2(mut self, beta2: f64) -> Self {
                self.beta2 = beta2;
                self
            }

            /// Sets epsilon.
            pub fn eps(mut self, eps: f64) -> Self {
                self.eps = eps;
                self
            }

            /// The fused update rule.
            pub fn rule(&self) -> UpdateRule {
                UpdateRule::Adam {
                    lr: self.lr,
                    beta1: self.beta1,
                    beta2: self.beta2,
                    eps: self.eps,
                    weight_decay: self.weight_decay,
                    decoupled: $decoupled,
                }
            }
        }
    };
}

adam_like_config!(AdamConfig, "Adam", false);
adam_like_config!(AdamWConfig, "AdamW", true);

/// Adam, as `torch.optim.Adam` (weight decay as an L2 term in the gradient).
///
/// ```
/// use hdgcn::optim::AdamConfig;
///
/// let config = AdamConfig { lr: 0.01, ..AdamConfig::default() };
/// config.validate()?;
/// let err = AdamConfig { eps: 0.0, ..config }.validate().unwrap_err();
/// assert!(err.to_string().contains("eps"));
/// # Ok::<(), hdgcn::Error>(())
/// ```
#[derive(Debug)]
pub struct Adam<B: Backend> {
    config: AdamConfig,
    state: StateMap<B>,
}

optimizer_common!(Adam, AdamConfig, "Adam");

/// AdamW, as `torch.optim.AdamW` (decoupled weight decay).
///
/// ```
/// use hdgcn::optim::AdamWConfig;
///
/// assert_eq!(AdamWConfig::default().weight_decay, 0.01);
/// let err = AdamWConfig::default().beta2(f64::NAN).validate().unwrap_err();
/// assert!(err.to_string().contains("beta2"));
/// ```
#[derive(Debug)]
pub struct AdamW<B: Backend> {
    config: AdamWConfig,
    state: StateMap<B>,
}

optimizer_common!(AdamW, AdamWConfig, "AdamW");

// ----- AdaBelief ----------------------------------------------------------------------

/// Configuration of [`AdaBelief`]; the defaults are `adabelief-pytorch`
/// 0.2.x's (`eps = 1e-16`, `weight_decouple = True`, `rectify = True`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AdaBeliefConfig {
    /// Learning rate (default `1e-3`), finite and `>= 0`.
    pub lr: f64,
    /// First-moment decay (default 0.9), in `[0, 1)`.
    pub beta1: f64,
    /// Belief decay (default 0.999), in `[0, 1)`.
    pub beta2: f64,
    /// Epsilon (default `1e-16`), finite and `> 0`; added both inside the
    /// belief `s` and to the denominator.
    pub eps: f64,
    /// Weight decay (default 0), finite and `>= 0`.
    pub weight_decay: f64,
    /// Decoupled weight decay `p *= 1 - lr * weight_decay` (default `true`);
    /// `false` adds an L2 term to the gradient.
    pub weight_decouple: bool,
    /// RAdam-style rectification (default `true`); degenerates to SGD with
    /// momentum while the variance estimate is unreliable.
    pub rectify: bool,
}

impl Default for AdaBeliefConfig {
    fn default() -> Self {
        AdaBeliefConfig {
            lr: 1e-3,
            beta1: 0.9,
            beta2: 0.999,
            eps: 1e-16,
            weight_decay: 0.0,
            weight_decouple: true,
            rectify: true,
        }
    }
}

impl AdaBeliefConfig {
    /// Checks every hyper-parameter.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidConfig`] naming the first invalid field.
    pub fn validate(&self) -> Result<()> {
        check_nonneg("AdaBelief", "lr", self.lr)?;
        check_beta("AdaBelief", "beta1", self.beta1)?;
        check_beta("AdaBelief", "beta2", self.beta2)?;
        check_eps("AdaBelief", "eps", self.eps)?;
        check_nonneg("AdaBelief", "weight_decay", self.weight_decay)
    }

    /// Sets the first-moment decay.
    pub fn beta1(mut self, beta1: f64) -> Self {
        self.beta1 = beta1;
        self
    }

    /// Sets the belief decay.
    pub fn beta2(mut self, beta2: f64) -> Self {
        self.beta2 = beta2;
        self
    }

    /// Sets epsilon.
    pub fn eps(mut self, eps: f64) -> Self {
        self.eps = eps;
        self
    }

    /// Chooses decoupled (`true`) or L2 (`false`) weight decay.
    pub fn weight_decouple(mut self, weight_decouple: bool) -> Self {
        self.weight_decouple = weight_decouple;
        self
    }

    /// Enables or disables rectification.
    pub fn rectify(mut self, rectify: bool) -> Self {
        self.rectify = rectify;
        self
    }

    /// The fused update rule.
    pub fn rule(&self) -> UpdateRule {
        UpdateRule::AdaBelief {
            lr: self.lr,
            beta1: self.beta1,
            beta2: self.beta2,
            eps: self.eps,
            weight_decay: self.weight_decay,
            decoupled: self.weight_decouple,
            rectify: self.rectify,
        }
    }
}

/// AdaBelief, as `adabelief_pytorch.AdaBelief` 0.2.x
/// (`fixed_decay=False`, `amsgrad=False`, `degenerated_to_sgd=True`).
///
/// ```
/// use hdgcn::optim::AdaBeliefConfig;
///
/// let config = AdaBeliefConfig::default().lr(1e-2).rectify(false);
/// config.validate()?;
/// assert_eq!(config.eps, 1e-16);
/// let err = config.lr(-1.0).validate().unwrap_err();
/// assert!(err.to_string().contains("lr"));
/// # Ok::<(), hdgcn::Error>(())
/// ```
#[derive(Debug)]
pub struct AdaBelief<B: Backend> {
    config: AdaBeliefConfig,
    state: StateMap<B>,
}

optimizer_common!(AdaBelief, AdaBeliefConfig, "AdaBelief");

// ----- choosing an optimiser by name ------------------------------------------------

/// An optimiser chosen by name, as a training configuration or a command
/// line names it; [`OptimizerKind::build`] makes it with the reference
/// implementation's defaults for every other hyper-parameter.
///
/// ```
/// use hdgcn::backend::Cpu;
/// use hdgcn::optim::{Optimizer, OptimizerKind};
///
/// assert_eq!("AdaBelief".parse::<OptimizerKind>()?, OptimizerKind::AdaBelief);
/// let opt = OptimizerKind::AdamW.build::<Cpu<f32>>(0.01, 5e-4)?;
/// assert_eq!(opt.learning_rate(), 0.01);
/// assert!("lamb".parse::<OptimizerKind>().unwrap_err().to_string().contains("'lamb'"));
/// # Ok::<(), hdgcn::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OptimizerKind {
    /// [`Sgd`] without momentum.
    Sgd,
    /// [`Adam`] (L2 weight decay).
    #[default]
    Adam,
    /// [`AdamW`] (decoupled weight decay).
    AdamW,
    /// [`AdaBelief`] (decoupled weight decay, rectified), as HDGCN uses it.
    AdaBelief,
}

crate::named::named_enum!(OptimizerKind, "optimizer", {
    Sgd => "sgd",
    Adam => "adam",
    AdamW => "adamw",
    AdaBelief => "adabelief",
});

impl OptimizerKind {
    /// The optimiser with learning rate `lr` and weight decay
    /// `weight_decay`, every other hyper-parameter at its default.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for a negative or non-finite `lr` or
    /// `weight_decay`.
    pub fn build<B: Backend>(self, lr: f64, weight_decay: f64) -> Result<Box<dyn Optimizer<B>>> {
        Ok(match self {
            OptimizerKind::Sgd => Box::new(
                SgdConfig::default()
                    .lr(lr)
                    .weight_decay(weight_decay)
                    .build::<B>()?,
            ),
            OptimizerKind::Adam => Box::new(
                AdamConfig::default()
                    .lr(lr)
                    .weight_decay(weight_decay)
                    .build::<B>()?,
            ),
            OptimizerKind::AdamW => Box::new(
                AdamWConfig::default()
                    .lr(lr)
                    .weight_decay(weight_decay)
                    .build::<B>()?,
            ),
            OptimizerKind::AdaBelief => Box::new(
                AdaBeliefConfig::default()
                    .lr(lr)
                    .weight_decay(weight_decay)
                    .build::<B>()?,
            ),
        })
    }
}

// ----- gradient clipping ------------------------------------------------------------

/// The total L2 norm of all gradients together, as `clip_grad_norm_`
/// measures it (the norm of the per-parameter norms, in parameter order).
///
/// ```
/// use hdgcn::autograd::{Param, Tape};
/// use hdgcn::backend::Cpu;
/// use hdgcn::optim::grad_norm;
/// use ndarray::array;
///
/// let cpu = Cpu::<f64>::new();
/// let w = Param::from_array(&cpu, &array![[1.0, 2.0]]);
/// let tape = Tape::new(&cpu);
/// // d/dw of 3 * sum(w) is 3 everywhere: norm sqrt(3² + 3²).
/// let grads = tape.param(&w).sum_all().scale(3.0).backward()?;
/// assert!((grad_norm(&cpu, &grads) - 18f64.sqrt()).abs() < 1e-12);
/// # Ok::<(), hdgcn::Error>(())
/// ```
pub fn grad_norm<B: Backend>(backend: &B, grads: &Gradients<B>) -> f64 {
    // Deterministic order; torch takes the norm of the per-tensor norms.
    // One read-back for all parameters (`sum_squares_many`).
    let mut ids: Vec<ParamId> = grads.by_param.keys().copied().collect();
    ids.sort_unstable();
    let tensors: Vec<&B::Tensor> = ids.iter().map(|id| &grads.by_param[id]).collect();
    backend
        .sum_squares_many(&tensors)
        .into_iter()
        .map(|ss| {
            let n = ss.sqrt();
            n * n
        })
        .sum::<f64>()
        .sqrt()
}

/// Clips gradients by their total L2 norm, as `torch.nn.utils.clip_grad_norm_`.
///
/// The norm is [`grad_norm`]; if `max_norm / (norm + 1e-6) < 1` every
/// gradient is multiplied by that factor. Returns the total norm before
/// clipping. A non-finite norm is returned as is and leaves the gradients
/// unchanged (check it to skip a bad step).
///
/// # Errors
/// [`Error::InvalidConfig`] unless `max_norm` is finite and positive (a
/// negative bound would flip every gradient, a NaN one skip clipping).
pub fn clip_grad_norm<B: Backend>(
    backend: &B,
    grads: &mut Gradients<B>,
    max_norm: f64,
) -> Result<f64> {
    check_positive("clip_grad_norm: max_norm", max_norm)?;
    let total = grad_norm(backend, grads);
    let coef = max_norm / (total + 1e-6);
    if coef < 1.0 {
        for t in grads.tensors_mut() {
            *t = backend.unary(UnaryOp::Affine(coef, 0.0), t);
        }
    }
    Ok(total)
}
