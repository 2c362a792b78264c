//! Classification metrics with scikit-learn semantics.

use crate::{Error, Result};
use ndarray::Array2;

fn check(pred: &[usize], target: &[usize], op: &'static str) -> Result<()> {
    if pred.len() != target.len() {
        return Err(Error::shape(
            op,
            format!("pred of length {}", target.len()),
            format!("length {}", pred.len()),
        ));
    }
    if pred.is_empty() {
        return Err(Error::Empty(format!("{op}: no predictions")));
    }
    Ok(())
}

/// Fraction of positions where `pred[i] == target[i]`.
///
/// Errors: [`Error::ShapeMismatch`] for unequal lengths, [`Error::Empty`] for
/// empty input.
pub fn accuracy(pred: &[usize], target: &[usize]) -> Result<f64> {
    check(pred, target, "accuracy")?;
    let hits = pred.iter().zip(target).filter(|(p, t)| p == t).count();
    Ok(hits as f64 / pred.len() as f64)
}

/// Confusion matrix `C` with `C[[true, predicted]]` counts (rows = true class),
/// `num_classes x num_classes`.
///
/// Errors: as [`accuracy`], plus [`Error::IndexOutOfRange`] for a class id
/// `>= num_classes`.
pub fn confusion_matrix(
    pred: &[usize],
    target: &[usize],
    num_classes: usize,
) -> Result<Array2<usize>> {
    check(pred, target, "confusion_matrix")?;
    let mut m = Array2::zeros((num_classes, num_classes));
    for (&p, &t) in pred.iter().zip(target) {
        for (what, idx) in [("predicted class", p), ("target class", t)] {
            if idx >= num_classes {
                return Err(Error::IndexOutOfRange {
                    what,
                    index: idx,
                    len: num_classes,
                });
            }
        }
        m[[t, p]] += 1;
    }
    Ok(m)
}

/// Micro-averaged F1 (for single-label multi-class data this equals accuracy,
/// as in `sklearn.metrics.f1_score(average="micro")`).
///
/// Errors: as [`confusion_matrix`].
pub fn f1_micro(pred: &[usize], target: &[usize], num_classes: usize) -> Result<f64> {
    let m = confusion_matrix(pred, target, num_classes)?;
    let tp: usize = (0..num_classes).map(|c| m[[c, c]]).sum();
    // Micro precision = micro recall = tp / n, so F1 = tp / n.
    Ok(tp as f64 / pred.len() as f64)
}

/// Macro-averaged F1 with `sklearn.metrics.f1_score(average="macro",
/// zero_division=0)` semantics: the unweighted mean of per-class F1 over the
/// classes that occur in `target` or `pred`; a class with no true positives
/// scores 0.
///
/// Errors: as [`confusion_matrix`].
pub fn f1_macro(pred: &[usize], target: &[usize], num_classes: usize) -> Result<f64> {
    let m = confusion_matrix(pred, target, num_classes)?;
    let mut sum = 0.0;
    let mut present = 0usize;
    for c in 0..num_classes {
        let tp = m[[c, c]];
        let support = m.row(c).sum(); // tp + fn
        let predicted = m.column(c).sum(); // tp + fp
        if support == 0 && predicted == 0 {
            continue;
        }
        present += 1;
        // F1 = 2 tp / (2 tp + fp + fn); the denominator is > 0 here.
        sum += 2.0 * tp as f64 / (support + predicted) as f64;
    }
    // present >= 1 because the input is non-empty.
    Ok(sum / present as f64)
}
