//! Classification metrics with scikit-learn semantics.

use std::collections::BTreeMap;

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

fn check_classes(pred: &[usize], target: &[usize], num_classes: usize) -> Result<()> {
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
    }
    Ok(())
}

/// Per-class `(true positives, support = tp + fn, predicted = tp + fp)` of
/// the classes that occur, in class order (a map, so a large class id
/// costs nothing).
fn class_counts(pred: &[usize], target: &[usize]) -> BTreeMap<usize, (usize, usize, usize)> {
    let mut c: BTreeMap<usize, (usize, usize, usize)> = BTreeMap::new();
    for (&p, &t) in pred.iter().zip(target) {
        let e = c.entry(t).or_default();
        if p == t {
            e.0 += 1;
        }
        e.1 += 1;
        c.entry(p).or_default().2 += 1;
    }
    c
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
    check_classes(pred, target, num_classes)?;
    // Reserve first: an impossible size is an error, not an abort.
    let too_many = || {
        Error::InvalidConfig(format!(
            "confusion_matrix: {num_classes} classes is too many"
        ))
    };
    let len = num_classes.checked_mul(num_classes).ok_or_else(too_many)?;
    let mut counts: Vec<usize> = Vec::new();
    counts.try_reserve_exact(len).map_err(|_| too_many())?;
    counts.resize(len, 0);
    let mut m =
        Array2::from_shape_vec((num_classes, num_classes), counts).expect("num_classes² entries");
    for (&p, &t) in pred.iter().zip(target) {
        m[[t, p]] += 1;
    }
    Ok(m)
}

/// Micro-averaged F1 (for single-label multi-class data this equals accuracy,
/// as in `sklearn.metrics.f1_score(average="micro")`).
///
/// Errors: as [`confusion_matrix`].
pub fn f1_micro(pred: &[usize], target: &[usize], num_classes: usize) -> Result<f64> {
    check(pred, target, "f1_micro")?;
    check_classes(pred, target, num_classes)?;
    let tp = pred.iter().zip(target).filter(|(p, t)| p == t).count();
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
    check(pred, target, "f1_macro")?;
    check_classes(pred, target, num_classes)?;
    let mut sum = 0.0;
    let mut present = 0usize;
    for (tp, support, predicted) in class_counts(pred, target).into_values() {
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

/// Precision, recall, F1 and support of one class.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClassScores {
    /// `tp / (tp + fp)`, 0 when the class is never predicted.
    pub precision: f64,
    /// `tp / (tp + fn)`, 0 when the class never occurs.
    pub recall: f64,
    /// `2 tp / (2 tp + fp + fn)`, 0 when the class neither occurs nor is predicted.
    pub f1: f64,
    /// Number of targets of the class (`tp + fn`).
    pub support: usize,
}

/// Per-class F1 for classes `0..num_classes`
/// (`sklearn.metrics.f1_score(average=None, labels=range(num_classes),
/// zero_division=0)`).
///
/// Errors: as [`confusion_matrix`].
pub fn f1_per_class(pred: &[usize], target: &[usize], num_classes: usize) -> Result<Vec<f64>> {
    Ok(ClassificationReport::new(pred, target, num_classes)?
        .per_class
        .iter()
        .map(|c| c.f1)
        .collect())
}

/// Accuracy, macro-F1 and per-class scores of a classification, from its
/// confusion matrix (the ABSA metrics of math notes §9).
#[derive(Debug, Clone, PartialEq)]
pub struct ClassificationReport {
    /// [`accuracy`].
    pub accuracy: f64,
    /// [`f1_macro`]: the mean F1 over the classes that occur in the
    /// targets or the predictions.
    pub macro_f1: f64,
    /// Scores of each class `0..num_classes`, in order.
    pub per_class: Vec<ClassScores>,
    /// [`confusion_matrix`]: rows are true classes, columns predicted ones.
    pub confusion: Array2<usize>,
}

impl ClassificationReport {
    /// The report of `pred` against `target` over `num_classes` classes.
    ///
    /// Errors: as [`confusion_matrix`].
    pub fn new(pred: &[usize], target: &[usize], num_classes: usize) -> Result<Self> {
        let confusion = confusion_matrix(pred, target, num_classes)?;
        let ratio = |a: usize, b: usize| if b == 0 { 0.0 } else { a as f64 / b as f64 };
        let per_class = (0..num_classes)
            .map(|c| {
                let tp = confusion[[c, c]];
                let support = confusion.row(c).sum();
                let predicted = confusion.column(c).sum();
                ClassScores {
                    precision: ratio(tp, predicted),
                    recall: ratio(tp, support),
                    f1: ratio(2 * tp, support + predicted),
                    support,
                }
            })
            .collect();
        Ok(ClassificationReport {
            accuracy: accuracy(pred, target)?,
            macro_f1: f1_macro(pred, target, num_classes)?,
            per_class,
            confusion,
        })
    }
}
