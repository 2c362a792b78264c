//! Finite-difference gradient checks (central differences, `f64`).
//!
//! Used by the crate's own tests for every op and layer, and public so that
//! a crate adding its own layer can check it the same way.
//!
//! ```
//! use hdgcn::autograd::gradcheck::check_inputs;
//! let x = ndarray::arr2(&[[0.3, -1.2], [2.0, 0.5]]);
//! let report = check_inputs(&[x], |_tape, v| Ok(v[0].tanh().square().sum_all()), 1e-6).unwrap();
//! assert!(report.max_error < 1e-7, "{report:?}");
//! ```

use ndarray::Array2;

use super::{Param, Tape, Var};
use crate::backend::{Backend, Cpu};
use crate::error::{Error, Result};

/// Outcome of a gradient check.
#[derive(Debug, Clone)]
pub struct GradCheckReport {
    /// Largest `|analytic - numeric| / max(1, |numeric|)` over all entries.
    pub max_error: f64,
    /// Where the largest error occurred (`"input 0 [2, 1]"`).
    pub worst: String,
    /// Number of entries compared.
    pub checked: usize,
}

impl GradCheckReport {
    fn new() -> Self {
        GradCheckReport {
            max_error: 0.0,
            worst: String::new(),
            checked: 0,
        }
    }

    fn compare(&mut self, what: String, analytic: f64, numeric: f64) {
        let err = (analytic - numeric).abs() / numeric.abs().max(1.0);
        self.checked += 1;
        if err > self.max_error || err.is_nan() {
            self.max_error = if err.is_nan() { f64::INFINITY } else { err };
            self.worst = format!("{what}: analytic {analytic:e}, numeric {numeric:e}");
        }
    }
}

type Cpu64 = Cpu<f64>;

fn eval_scalar(out: Result<Var<Cpu64>>) -> Result<f64> {
    out?.scalar()
}

/// Checks the gradients of the scalar `f(tape, inputs)` with respect to
/// each input against central differences with step `h`.
///
/// `f` must be deterministic: it is evaluated on tapes with the same seed,
/// so dropout draws the same masks every time.
pub fn check_inputs<F>(inputs: &[Array2<f64>], f: F, h: f64) -> Result<GradCheckReport>
where
    F: Fn(&Tape<Cpu64>, &[Var<Cpu64>]) -> Result<Var<Cpu64>>,
{
    let cpu = Cpu64::new();
    let tape = Tape::with_seed(&cpu, 7);
    let vars: Vec<Var<Cpu64>> = inputs
        .iter()
        .map(|a| tape.input(cpu.upload(a.view())))
        .collect();
    let out = f(&tape, &vars)?;
    let grads = out.backward()?;
    let mut report = GradCheckReport::new();
    for (k, a) in inputs.iter().enumerate() {
        let analytic = grads
            .wrt(&vars[k])
            .cloned()
            .unwrap_or_else(|| Array2::zeros(a.dim()));
        for idx in ndarray::indices(a.dim()) {
            let (i, j) = idx;
            let eval = |delta: f64| -> Result<f64> {
                let mut perturbed: Vec<Array2<f64>> = inputs.to_vec();
                perturbed[k][[i, j]] += delta;
                let t = Tape::with_seed(&cpu, 7);
                let vs: Vec<Var<Cpu64>> = perturbed.iter().map(|a| t.constant(a.clone())).collect();
                eval_scalar(f(&t, &vs))
            };
            let numeric = (eval(h)? - eval(-h)?) / (2.0 * h);
            report.compare(format!("input {k} [{i}, {j}]"), analytic[[i, j]], numeric);
        }
    }
    Ok(report)
}

/// Checks the gradients of the scalar `f(tape)` with respect to every
/// parameter in `params` against central differences with step `h`.
pub fn check_params<F>(params: &[(String, Param<Cpu64>)], f: F, h: f64) -> Result<GradCheckReport>
where
    F: Fn(&Tape<Cpu64>) -> Result<Var<Cpu64>>,
{
    let cpu = Cpu64::new();
    let tape = Tape::with_seed(&cpu, 7);
    let out = f(&tape)?;
    let grads = out.backward()?;
    drop(tape);
    let mut report = GradCheckReport::new();
    for (name, p) in params {
        let base = p.to_array();
        let analytic = grads
            .get(p)
            .cloned()
            .unwrap_or_else(|| Array2::zeros(base.dim()));
        for (i, j) in ndarray::indices(base.dim()) {
            let eval = |delta: f64| -> Result<f64> {
                let mut v = base.clone();
                v[[i, j]] += delta;
                p.set(v)?;
                let t = Tape::with_seed(&cpu, 7);
                let r = eval_scalar(f(&t));
                p.set(base.clone())?;
                r
            };
            let numeric = (eval(h)? - eval(-h)?) / (2.0 * h);
            report.compare(format!("{name} [{i}, {j}]"), analytic[[i, j]], numeric);
        }
    }
    if report.checked == 0 {
        return Err(Error::Empty("gradient check over no parameters".into()));
    }
    Ok(report)
}
