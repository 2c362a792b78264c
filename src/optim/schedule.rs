//! Learning-rate schedules (closed forms of the `torch.optim.lr_scheduler` ones).

use crate::error::{Error, Result};

/// A learning rate as a function of the epoch (0-based).
///
/// Apply it with [`Optimizer::set_learning_rate`](super::Optimizer::set_learning_rate)
/// at the start of each epoch.
pub trait LrSchedule {
    /// The learning rate for `epoch` (the first epoch is 0).
    fn lr_at(&self, epoch: usize) -> f64;
}

fn check_lr(owner: &str, field: &str, v: f64) -> Result<()> {
    if v.is_finite() && v >= 0.0 {
        Ok(())
    } else {
        Err(Error::InvalidConfig(format!(
            "{owner}: {field} must be finite and >= 0, got {v}"
        )))
    }
}

/// A constant learning rate.
///
/// ```
/// use hdgcn::optim::{Constant, LrSchedule};
/// let s = Constant::new(0.01)?;
/// assert_eq!(s.lr_at(1000), 0.01);
/// # Ok::<(), hdgcn::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Constant {
    lr: f64,
}

impl Constant {
    /// A schedule returning `lr` at every epoch; `lr` must be finite and `>= 0`.
    pub fn new(lr: f64) -> Result<Self> {
        check_lr("Constant", "lr", lr)?;
        Ok(Constant { lr })
    }
}

impl LrSchedule for Constant {
    fn lr_at(&self, _epoch: usize) -> f64 {
        self.lr
    }
}

/// Step decay, as `torch.optim.lr_scheduler.StepLR`:
/// `base_lr · gamma^⌊epoch / step_size⌋`.
///
/// ```
/// use hdgcn::optim::{LrSchedule, StepLr};
/// let s = StepLr::new(0.1, 10, 0.5)?;
/// assert_eq!(s.lr_at(9), 0.1);
/// assert_eq!(s.lr_at(10), 0.05);
/// # Ok::<(), hdgcn::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepLr {
    base_lr: f64,
    step_size: usize,
    gamma: f64,
}

impl StepLr {
    /// Validates the parameters: `base_lr` and `gamma` finite and `>= 0`,
    /// `step_size >= 1`.
    pub fn new(base_lr: f64, step_size: usize, gamma: f64) -> Result<Self> {
        check_lr("StepLr", "base_lr", base_lr)?;
        check_lr("StepLr", "gamma", gamma)?;
        if step_size == 0 {
            return Err(Error::InvalidConfig(
                "StepLr: step_size must be >= 1, got 0".into(),
            ));
        }
        Ok(StepLr {
            base_lr,
            step_size,
            gamma,
        })
    }

    /// Initial learning rate.
    pub fn base_lr(&self) -> f64 {
        self.base_lr
    }

    /// Epochs between two decays.
    pub fn step_size(&self) -> usize {
        self.step_size
    }

    /// Multiplicative decay factor.
    pub fn gamma(&self) -> f64 {
        self.gamma
    }
}

impl LrSchedule for StepLr {
    fn lr_at(&self, epoch: usize) -> f64 {
        self.base_lr * self.gamma.powf((epoch / self.step_size) as f64)
    }
}

/// Cosine annealing without restarts, as the closed form of
/// `torch.optim.lr_scheduler.CosineAnnealingLR`:
/// `eta_min + (base_lr − eta_min)(1 + cos(π · epoch / t_max)) / 2`.
///
/// Like torch's, the curve is periodic: past `t_max` it rises again.
///
/// ```
/// use hdgcn::optim::{CosineAnnealing, LrSchedule};
/// let s = CosineAnnealing::new(0.1, 10, 0.0)?;
/// assert_eq!(s.lr_at(0), 0.1);
/// assert!((s.lr_at(5) - 0.05).abs() < 1e-15);
/// assert!(s.lr_at(10).abs() < 1e-15);
/// # Ok::<(), hdgcn::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CosineAnnealing {
    base_lr: f64,
    t_max: usize,
    eta_min: f64,
}

impl CosineAnnealing {
    /// Validates the parameters: `base_lr` and `eta_min` finite and `>= 0`,
    /// `t_max >= 1`.
    pub fn new(base_lr: f64, t_max: usize, eta_min: f64) -> Result<Self> {
        check_lr("CosineAnnealing", "base_lr", base_lr)?;
        check_lr("CosineAnnealing", "eta_min", eta_min)?;
        if t_max == 0 {
            return Err(Error::InvalidConfig(
                "CosineAnnealing: t_max must be >= 1, got 0".into(),
            ));
        }
        Ok(CosineAnnealing {
            base_lr,
            t_max,
            eta_min,
        })
    }

    /// Learning rate at epoch 0.
    pub fn base_lr(&self) -> f64 {
        self.base_lr
    }

    /// Half period, in epochs.
    pub fn t_max(&self) -> usize {
        self.t_max
    }

    /// Minimum learning rate (reached at `t_max`).
    pub fn eta_min(&self) -> f64 {
        self.eta_min
    }
}

impl LrSchedule for CosineAnnealing {
    fn lr_at(&self, epoch: usize) -> f64 {
        self.eta_min
            + (self.base_lr - self.eta_min)
                * (1.0 + (std::f64::consts::PI * epoch as f64 / self.t_max as f64).cos())
                / 2.0
    }
}
