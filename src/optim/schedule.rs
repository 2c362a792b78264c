//! Learning-rate schedules (closed forms of the `torch.optim.lr_scheduler` ones).

use super::check_nonneg;
use crate::error::{Error, Result};

/// A learning rate as a function of the epoch (0-based).
///
/// Apply it with [`Optimizer::set_learning_rate`](super::Optimizer::set_learning_rate)
/// at the start of each epoch.
pub trait LrSchedule {
    /// The learning rate for `epoch` (the first epoch is 0).
    fn lr_at(&self, epoch: usize) -> f64;
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
        check_nonneg("Constant", "lr", lr)?;
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
        check_nonneg("StepLr", "base_lr", base_lr)?;
        check_nonneg("StepLr", "gamma", gamma)?;
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
        check_nonneg("CosineAnnealing", "base_lr", base_lr)?;
        check_nonneg("CosineAnnealing", "eta_min", eta_min)?;
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

/// A learning-rate schedule chosen by name, relative to a training run's
/// base learning rate and number of epochs: what
/// [`GraphTrainConfig`](crate::train::GraphTrainConfig) and
/// [`NodeTrainConfig`](crate::train::NodeTrainConfig) follow, and what the
/// examples' `--lr-schedule` flag reads.
///
/// [`schedule`](Self::schedule) turns it into one of the schedules above;
/// `Cosine` anneals over the whole run (`t_max` = the epoch budget).
///
/// ```
/// use hdgcn::optim::{LrSchedule, LrScheduleKind};
///
/// let kind: LrScheduleKind = "cosine".parse()?;
/// let s = kind.schedule(0.01, 40)?;
/// assert_eq!(s.lr_at(0), 0.01);
/// assert!((s.lr_at(20) - 0.005).abs() < 1e-15);
/// let step: LrScheduleKind = "step:10:0.5".parse()?;
/// assert_eq!(step, LrScheduleKind::Step { step_size: 10, gamma: 0.5 });
/// assert_eq!(step.to_string().parse::<LrScheduleKind>()?, step);
/// assert!("linear".parse::<LrScheduleKind>().is_err());
/// # Ok::<(), hdgcn::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum LrScheduleKind {
    /// The base learning rate at every epoch ([`Constant`]).
    #[default]
    Constant,
    /// [`CosineAnnealing`] from the base learning rate down to `eta_min`
    /// over the run's epochs.
    Cosine {
        /// The learning rate the curve ends at.
        eta_min: f64,
    },
    /// [`StepLr`]: multiply by `gamma` every `step_size` epochs.
    Step {
        /// Epochs between two decays (`>= 1`).
        step_size: usize,
        /// Multiplicative decay factor.
        gamma: f64,
    },
}

impl LrScheduleKind {
    /// The schedule for a run with learning rate `base_lr` and at most
    /// `epochs` epochs.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for a negative or non-finite rate, `eta_min`
    /// or `gamma`, `step_size = 0`, or `epochs = 0` with `Cosine`.
    pub fn schedule(&self, base_lr: f64, epochs: usize) -> Result<Box<dyn LrSchedule>> {
        Ok(match *self {
            LrScheduleKind::Constant => Box::new(Constant::new(base_lr)?),
            LrScheduleKind::Cosine { eta_min } => {
                Box::new(CosineAnnealing::new(base_lr, epochs, eta_min)?)
            }
            LrScheduleKind::Step { step_size, gamma } => {
                Box::new(StepLr::new(base_lr, step_size, gamma)?)
            }
        })
    }
}

impl std::str::FromStr for LrScheduleKind {
    type Err = Error;

    /// Parses `constant`, `cosine` (down to 0), `cosine:ETA_MIN` or
    /// `step:STEP_SIZE:GAMMA` (names in any case). The values are checked
    /// when the schedule is built.
    fn from_str(s: &str) -> Result<Self> {
        let bad = |why: &str| {
            Error::InvalidConfig(format!(
                "learning-rate schedule '{s}': {why} (constant | cosine | cosine:ETA_MIN | step:STEP_SIZE:GAMMA)"
            ))
        };
        let parts: Vec<&str> = s.split(':').collect();
        let number = |p: &str, what: &str| {
            p.trim()
                .parse::<f64>()
                .map_err(|_| bad(&format!("{what} '{p}' is not a number")))
        };
        match (parts[0].to_ascii_lowercase().as_str(), &parts[1..]) {
            ("constant", []) => Ok(LrScheduleKind::Constant),
            ("cosine", []) => Ok(LrScheduleKind::Cosine { eta_min: 0.0 }),
            ("cosine", [eta_min]) => Ok(LrScheduleKind::Cosine {
                eta_min: number(eta_min, "ETA_MIN")?,
            }),
            ("step", [size, gamma]) => Ok(LrScheduleKind::Step {
                step_size: size
                    .trim()
                    .parse()
                    .map_err(|_| bad(&format!("STEP_SIZE '{size}' is not a whole number")))?,
                gamma: number(gamma, "GAMMA")?,
            }),
            ("constant" | "cosine" | "step", _) => Err(bad("wrong number of values")),
            _ => Err(bad("unknown schedule")),
        }
    }
}

impl std::fmt::Display for LrScheduleKind {
    /// The form [`FromStr`](std::str::FromStr) reads back.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LrScheduleKind::Constant => f.write_str("constant"),
            LrScheduleKind::Cosine { eta_min } if *eta_min == 0.0 => f.write_str("cosine"),
            LrScheduleKind::Cosine { eta_min } => write!(f, "cosine:{eta_min}"),
            LrScheduleKind::Step { step_size, gamma } => write!(f, "step:{step_size}:{gamma}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_build_the_named_schedules() {
        let c = LrScheduleKind::Constant.schedule(0.3, 5).unwrap();
        assert_eq!(
            (0..10).map(|e| c.lr_at(e)).collect::<Vec<_>>(),
            vec![0.3; 10]
        );
        // Cosine over the run: hand-computed points of 0.1 + 0.9 (1 + cos(pi e / 4)) / 2.
        let k = LrScheduleKind::Cosine { eta_min: 0.1 };
        let s = k.schedule(1.0, 4).unwrap();
        let want = [
            1.0,
            0.1 + 0.45 * (1.0 + 0.5f64.sqrt()),
            0.55,
            0.1 + 0.45 * (1.0 - 0.5f64.sqrt()),
            0.1,
        ];
        for (e, w) in want.iter().enumerate() {
            assert!(
                (s.lr_at(e) - w).abs() < 1e-15,
                "epoch {e}: {} vs {w}",
                s.lr_at(e)
            );
        }
        let s = LrScheduleKind::Step {
            step_size: 2,
            gamma: 0.1,
        }
        .schedule(1.0, 9)
        .unwrap();
        let got: Vec<f64> = (0..5).map(|e| s.lr_at(e)).collect();
        assert_eq!(got[..2], [1.0, 1.0]);
        assert!((got[2] - 0.1).abs() < 1e-15 && (got[3] - 0.1).abs() < 1e-15);
        assert!((got[4] - 0.01).abs() < 1e-15);
    }

    #[test]
    fn kinds_reject_bad_values() {
        assert!(
            LrScheduleKind::Cosine { eta_min: 0.0 }
                .schedule(0.1, 0)
                .is_err()
        );
        assert!(
            LrScheduleKind::Cosine { eta_min: -1.0 }
                .schedule(0.1, 5)
                .is_err()
        );
        assert!(
            LrScheduleKind::Step {
                step_size: 0,
                gamma: 0.5
            }
            .schedule(0.1, 5)
            .is_err()
        );
        assert!(
            LrScheduleKind::Step {
                step_size: 1,
                gamma: f64::NAN
            }
            .schedule(0.1, 5)
            .is_err()
        );
        assert!(LrScheduleKind::Constant.schedule(f64::INFINITY, 5).is_err());
    }

    #[test]
    fn kinds_parse_and_print() {
        for (text, kind) in [
            ("constant", LrScheduleKind::Constant),
            ("Cosine", LrScheduleKind::Cosine { eta_min: 0.0 }),
            ("cosine:1e-5", LrScheduleKind::Cosine { eta_min: 1e-5 }),
            (
                "STEP:30:0.1",
                LrScheduleKind::Step {
                    step_size: 30,
                    gamma: 0.1,
                },
            ),
        ] {
            let parsed: LrScheduleKind = text.parse().unwrap();
            assert_eq!(parsed, kind, "{text}");
            assert_eq!(parsed.to_string().parse::<LrScheduleKind>().unwrap(), kind);
        }
        for (text, needle) in [
            ("linear", "unknown schedule"),
            ("cosine:abc", "ETA_MIN 'abc'"),
            ("step:3", "wrong number"),
            ("step:1.5:0.1", "STEP_SIZE '1.5'"),
            ("constant:1", "wrong number"),
            ("", "unknown schedule"),
        ] {
            let e = text.parse::<LrScheduleKind>().unwrap_err().to_string();
            assert!(
                e.contains(needle) && e.contains(&format!("'{text}'")),
                "{text}: {e}"
            );
        }
    }
}
