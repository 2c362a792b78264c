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

impl<S: LrSchedule + ?Sized> LrSchedule for Box<S> {
    fn lr_at(&self, epoch: usize) -> f64 {
        (**self).lr_at(epoch)
    }
}

/// A linear warm-up in front of another schedule: for the first `warmup`
/// epochs the rate climbs in equal steps towards the inner schedule's
/// first rate, `inner.lr_at(0) · (epoch + 1) / (warmup + 1)`; from epoch
/// `warmup` on it is `inner.lr_at(epoch − warmup)`, so the inner schedule
/// starts where the warm-up ends (the shape of Hugging Face's
/// `get_cosine_schedule_with_warmup`, at epoch granularity and without
/// an epoch at rate 0).
///
/// ```
/// use hdgcn::optim::{CosineAnnealing, LinearWarmup, LrSchedule};
/// // 3 warm-up epochs, then a cosine over the 7 epochs left of 10.
/// let s = LinearWarmup::new(3, CosineAnnealing::new(0.004, 7, 0.0)?);
/// assert_eq!(s.lr_at(0), 0.001);
/// assert!((s.lr_at(2) - 0.003).abs() < 1e-15);
/// assert_eq!(s.lr_at(3), 0.004);
/// assert!(s.lr_at(10).abs() < 1e-15);
/// # Ok::<(), hdgcn::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LinearWarmup<S> {
    warmup: usize,
    inner: S,
}

impl<S: LrSchedule> LinearWarmup<S> {
    /// `warmup` epochs of linear warm-up, then `inner` (0: `inner` alone).
    pub fn new(warmup: usize, inner: S) -> Self {
        LinearWarmup { warmup, inner }
    }

    /// Number of warm-up epochs.
    pub fn warmup(&self) -> usize {
        self.warmup
    }

    /// The schedule after the warm-up.
    pub fn inner(&self) -> &S {
        &self.inner
    }
}

impl<S: LrSchedule> LrSchedule for LinearWarmup<S> {
    fn lr_at(&self, epoch: usize) -> f64 {
        if epoch < self.warmup {
            self.inner.lr_at(0) * (epoch + 1) as f64 / (self.warmup + 1) as f64
        } else {
            self.inner.lr_at(epoch - self.warmup)
        }
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

    /// [`schedule`](Self::schedule) after `warmup` epochs of
    /// [`LinearWarmup`]: the named schedule runs over the `epochs − warmup`
    /// epochs left (a cosine reaches `eta_min` at epoch `epochs`, as
    /// without warm-up), and
    /// `warmup = 0` is `schedule(base_lr, epochs)` exactly.
    ///
    /// ```
    /// use hdgcn::optim::{LrSchedule, LrScheduleKind};
    /// // 3 warm-up epochs of 41, then a cosine over the other 38.
    /// let s = LrScheduleKind::Cosine { eta_min: 0.0 }.schedule_with_warmup(0.004, 41, 3)?;
    /// for (e, want) in [0.001, 0.002, 0.003, 0.004].into_iter().enumerate() {
    ///     assert!((s.lr_at(e) - want).abs() < 1e-15);
    /// }
    /// assert!((s.lr_at(3 + 19) - 0.002).abs() < 1e-15);
    /// assert!(LrScheduleKind::Constant.schedule_with_warmup(0.1, 3, 3).is_err());
    /// # Ok::<(), hdgcn::Error>(())
    /// ```
    ///
    /// # Errors
    /// As [`schedule`](Self::schedule), and [`Error::InvalidConfig`] for
    /// `warmup >= epochs` (no epoch left for the schedule itself).
    pub fn schedule_with_warmup(
        &self,
        base_lr: f64,
        epochs: usize,
        warmup: usize,
    ) -> Result<Box<dyn LrSchedule>> {
        if warmup == 0 {
            return self.schedule(base_lr, epochs);
        }
        if warmup >= epochs {
            return Err(Error::InvalidConfig(format!(
                "learning-rate warm-up of {warmup} epochs leaves none of the {epochs} epochs \
                 for the '{self}' schedule: it must be below the epochs"
            )));
        }
        Ok(Box::new(LinearWarmup::new(
            warmup,
            self.schedule(base_lr, epochs - warmup)?,
        )))
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

crate::named::serde_by_name!(LrScheduleKind);

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
    fn warmup_climbs_linearly_then_hands_over() {
        // Hand-computed: base 0.6, 2 warm-up epochs (0.2, 0.4), then step
        // decay by 0.5 every 2 epochs counted from the end of the warm-up.
        let s = LrScheduleKind::Step {
            step_size: 2,
            gamma: 0.5,
        }
        .schedule_with_warmup(0.6, 8, 2)
        .unwrap();
        let want = [0.2, 0.4, 0.6, 0.6, 0.3, 0.3, 0.15, 0.15];
        for (e, w) in want.iter().enumerate() {
            assert!((s.lr_at(e) - w).abs() < 1e-15, "epoch {e}: {}", s.lr_at(e));
        }
        // The cosine anneals over the epochs left: it reaches eta_min at
        // epoch `epochs` (warm-up 4 + t_max 6 = 10), as without warm-up.
        let c = LrScheduleKind::Cosine { eta_min: 0.01 }
            .schedule_with_warmup(1.0, 10, 4)
            .unwrap();
        assert!((c.lr_at(3) - 0.8).abs() < 1e-15);
        assert!((c.lr_at(4) - 1.0).abs() < 1e-15);
        assert!((c.lr_at(7) - 0.505).abs() < 1e-15);
        assert!((c.lr_at(10) - 0.01).abs() < 1e-15);
        // No warm-up: the schedule itself, at every epoch.
        let k = LrScheduleKind::Cosine { eta_min: 0.0 };
        let (a, b) = (
            k.schedule_with_warmup(0.1, 12, 0).unwrap(),
            k.schedule(0.1, 12).unwrap(),
        );
        assert!((0..30).all(|e| a.lr_at(e) == b.lr_at(e)));
    }

    #[test]
    fn warmup_must_leave_epochs() {
        for (warmup, epochs) in [(5, 5), (6, 5), (1, 1)] {
            let Err(e) = LrScheduleKind::Constant.schedule_with_warmup(0.1, epochs, warmup) else {
                panic!("a warm-up of {warmup} in {epochs} epochs was accepted");
            };
            let e = e.to_string();
            assert!(
                e.contains(&format!("warm-up of {warmup} epochs"))
                    && e.contains(&format!("{epochs} epochs")),
                "{e}"
            );
        }
        assert!(
            LrScheduleKind::Constant
                .schedule_with_warmup(-1.0, 5, 2)
                .is_err()
        );
        assert_eq!(
            LrScheduleKind::Constant
                .schedule_with_warmup(0.1, 2, 1)
                .unwrap()
                .lr_at(0),
            0.05
        );
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
