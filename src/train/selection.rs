//! Model selection on validation data, shared by the training loops: the
//! best epoch so far, a host copy of its parameters, and early stopping.

use ndarray::Array2;

use crate::autograd::Param;
use crate::backend::Backend;
use crate::error::{Error, Result};
use crate::named::named_enum;
use crate::optim::ExponentialMovingAverage;

/// Which validation score picks the epoch (and resets the early-stopping
/// patience) in [`train_node_classifier`] and [`train_graph_classifier`].
///
/// ```
/// use hdgcn::train::SelectBy;
///
/// assert_eq!(SelectBy::default(), SelectBy::Accuracy);
/// assert_eq!("loss".parse::<SelectBy>()?, SelectBy::Loss);
/// assert_eq!("ACC".parse::<SelectBy>()?, SelectBy::Accuracy);
/// assert!("f1".parse::<SelectBy>().unwrap_err().to_string().contains("'f1'"));
/// # Ok::<(), hdgcn::Error>(())
/// ```
///
/// [`train_node_classifier`]: super::train_node_classifier
/// [`train_graph_classifier`]: super::train_graph_classifier
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SelectBy {
    /// The highest validation accuracy; ties go to the lower validation
    /// loss (as PyTorch Geometric's examples report test accuracy at the
    /// best validation accuracy).
    #[default]
    Accuracy,
    /// The lowest validation loss (the plain cross-entropy, also under
    /// label smoothing); ties go to the higher accuracy. GCNII's
    /// `full-supervised.py` selects and stops early this way on the
    /// geom-gcn full-supervised splits.
    Loss,
}

named_enum!(SelectBy, "selection metric", {
    Accuracy => "accuracy" | "acc",
    Loss => "loss",
});

impl SelectBy {
    /// Whether validation `(acc, loss)` beats the best so far `(best_acc,
    /// best_loss)` under this metric. A NaN loss counts as the highest, so
    /// it never beats a number and any number beats it.
    fn better(self, acc: f64, loss: f64, best_acc: f64, best_loss: f64) -> bool {
        let key = |l: f64| if l.is_nan() { f64::INFINITY } else { l };
        let (loss, best_loss) = (key(loss), key(best_loss));
        match self {
            SelectBy::Accuracy => acc > best_acc || (acc == best_acc && loss < best_loss),
            SelectBy::Loss => loss < best_loss || (loss == best_loss && acc > best_acc),
        }
    }
}

/// The epoch a training run selected, after [`Selection::restore`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Selected {
    /// The selected epoch (0-based).
    pub epoch: usize,
    /// Its validation accuracy.
    pub val_acc: f64,
    /// Its validation loss.
    pub val_loss: f64,
}

/// The best validation epoch so far (by a [`SelectBy`] metric) with a
/// host copy of its parameters, and the epochs since it.
pub(crate) struct Selection<E> {
    best: Option<(Selected, Vec<Array2<E>>)>,
    since_best: usize,
    patience: Option<usize>,
    by: SelectBy,
}

impl<E: Clone> Selection<E> {
    /// Nothing selected yet; picks by `by` and stops after `patience`
    /// epochs without a better one (`None`: never).
    pub fn new(patience: Option<usize>, by: SelectBy) -> Self {
        Selection {
            best: None,
            since_best: 0,
            patience,
            by,
        }
    }

    /// Validates `epoch`: runs `evaluate` (accuracy, loss) on the averaged
    /// weights when `ema` is given, and copies the parameters when the
    /// result beats the best so far. With an average the optimiser's
    /// weights are swapped back before anything, an evaluation error
    /// included, is returned. Returns the epoch's accuracy and loss.
    pub fn validate<B: Backend<Elem = E>>(
        &mut self,
        epoch: usize,
        params: &[Param<B>],
        mut ema: Option<&mut ExponentialMovingAverage<B>>,
        evaluate: impl FnOnce() -> Result<(f64, f64)>,
    ) -> Result<(f64, f64)> {
        if let Some(ema) = ema.as_deref_mut() {
            ema.swap(params)?;
        }
        let evaluated = evaluate().map(|(val_acc, val_loss)| {
            let better = self
                .best
                .as_ref()
                .is_none_or(|(b, _)| self.by.better(val_acc, val_loss, b.val_acc, b.val_loss));
            if better {
                let values = params.iter().map(|p| p.to_array()).collect();
                let selected = Selected {
                    epoch,
                    val_acc,
                    val_loss,
                };
                self.best = Some((selected, values));
                self.since_best = 0;
            } else {
                self.since_best += 1;
            }
            (val_acc, val_loss)
        });
        if let Some(ema) = ema {
            ema.swap(params)?;
        }
        evaluated
    }

    /// Whether `patience` epochs have passed without a better one.
    pub fn should_stop(&self) -> bool {
        self.patience.is_some_and(|p| self.since_best >= p)
    }

    /// Sets `params` to the selected epoch's values and says which epoch
    /// that was; [`Error::Empty`] if no epoch was validated,
    /// [`Error::ShapeMismatch`] (and nothing assigned) if a parameter's
    /// shape differs from the saved value's.
    pub fn restore<B: Backend<Elem = E>>(
        self,
        backend: &B,
        params: &[Param<B>],
    ) -> Result<Selected> {
        let (selected, values) = self
            .best
            .ok_or_else(|| Error::Empty("no epoch was validated".into()))?;
        // Every shape is checked before anything is assigned.
        for (p, v) in params.iter().zip(&values) {
            let (want, got) = (p.shape(), v.dim());
            if want != got {
                return Err(Error::shape(
                    "restoring the selected parameters",
                    format!("({}, {})", want.0, want.1),
                    format!("({}, {})", got.0, got.1),
                ));
            }
        }
        for (p, v) in params.iter().zip(&values) {
            p.set(backend.upload(v.view()))?;
        }
        Ok(selected)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::Cpu;
    use ndarray::array;

    fn param(cpu: &Cpu<f64>, v: f64) -> Param<Cpu<f64>> {
        Param::from_array(cpu, &array![[v]])
    }

    #[test]
    fn keeps_the_best_epoch_breaks_ties_by_loss_and_restores_its_values() {
        let cpu = Cpu::<f64>::new();
        let p = param(&cpu, 0.0);
        let params = [p.clone()];
        let mut sel = Selection::new(Some(2), SelectBy::Accuracy);
        // (value of the parameter, validation accuracy, loss) per epoch.
        let epochs = [
            (1.0, 0.5, 1.0),
            (2.0, 0.7, 0.9),
            (3.0, 0.7, 0.8),
            (4.0, 0.7, 0.85),
        ];
        for (epoch, &(v, acc, loss)) in epochs.iter().enumerate() {
            p.set(cpu.upload(array![[v]].view())).unwrap();
            let got = sel
                .validate(epoch, &params, None, || Ok((acc, loss)))
                .unwrap();
            assert_eq!(got, (acc, loss));
        }
        // Epoch 2 ties epoch 1 on accuracy with a lower loss; epoch 3 is worse.
        assert!(!sel.should_stop(), "one epoch since the best, patience 2");
        p.set(cpu.upload(array![[5.0]].view())).unwrap();
        sel.validate(4, &params, None, || Ok((0.6, 0.5))).unwrap();
        assert!(sel.should_stop(), "two epochs since the best");
        let s = sel.restore(&cpu, &params).unwrap();
        assert_eq!(
            s,
            Selected {
                epoch: 2,
                val_acc: 0.7,
                val_loss: 0.8
            }
        );
        assert_eq!(p.to_array(), array![[3.0]]);
    }

    #[test]
    fn by_loss_keeps_the_lowest_loss_breaks_ties_by_accuracy_and_counts_patience_by_it() {
        let cpu = Cpu::<f64>::new();
        let p = param(&cpu, 0.0);
        let params = [p.clone()];
        let mut sel = Selection::new(Some(2), SelectBy::Loss);
        // (value of the parameter, validation accuracy, loss) per epoch:
        // epoch 1 has the best accuracy, epoch 2 the lowest loss, epoch 3
        // ties it with a higher accuracy, epoch 4 a NaN loss.
        let epochs = [
            (1.0, 0.5, 1.0),
            (2.0, 0.9, 0.9),
            (3.0, 0.6, 0.7),
            (4.0, 0.7, 0.7),
            (5.0, 1.0, f64::NAN),
        ];
        for (epoch, &(v, acc, loss)) in epochs.iter().enumerate() {
            p.set(cpu.upload(array![[v]].view())).unwrap();
            sel.validate(epoch, &params, None, || Ok((acc, loss)))
                .unwrap();
        }
        assert!(!sel.should_stop(), "one epoch since the best, patience 2");
        p.set(cpu.upload(array![[6.0]].view())).unwrap();
        // A higher accuracy at a higher loss is not better by loss.
        sel.validate(5, &params, None, || Ok((1.0, 0.8))).unwrap();
        assert!(sel.should_stop(), "two epochs since the best");
        let s = sel.restore(&cpu, &params).unwrap();
        assert_eq!(
            s,
            Selected {
                epoch: 3,
                val_acc: 0.7,
                val_loss: 0.7
            }
        );
        assert_eq!(p.to_array(), array![[4.0]]);

        // A NaN loss first is beaten by the first number.
        let mut sel = Selection::new(None, SelectBy::Loss);
        for (epoch, loss) in [f64::NAN, 2.0, f64::NAN].into_iter().enumerate() {
            sel.validate(epoch, &params, None, || Ok((0.5, loss)))
                .unwrap();
        }
        assert_eq!(sel.restore(&cpu, &params).unwrap().epoch, 1);
    }

    #[test]
    fn validates_the_averaged_weights_and_swaps_back_even_on_an_error() {
        let cpu = Cpu::<f64>::new();
        let p = param(&cpu, 0.0);
        let params = [p.clone()];
        let mut ema = ExponentialMovingAverage::new(&params, 0.5).unwrap();
        p.set(cpu.upload(array![[2.0]].view())).unwrap();
        ema.update(&params).unwrap(); // average 1.0
        let mut sel = Selection::new(None, SelectBy::Accuracy);
        let seen = std::cell::Cell::new(f64::NAN);
        sel.validate(0, &params, Some(&mut ema), || {
            seen.set(p.to_array()[[0, 0]]);
            Ok((0.5, 1.0))
        })
        .unwrap();
        assert_eq!(seen.get(), 1.0, "evaluated on the average");
        assert_eq!(
            p.to_array(),
            array![[2.0]],
            "the optimiser's weights are back"
        );
        let err = sel
            .validate(1, &params, Some(&mut ema), || Err(Error::Empty("x".into())))
            .unwrap_err();
        assert!(matches!(err, Error::Empty(_)));
        assert_eq!(p.to_array(), array![[2.0]], "swapped back after the error");
        assert!(!sel.should_stop(), "no patience: never stops");
        // The selected values are the average's.
        sel.restore(&cpu, &params).unwrap();
        assert_eq!(p.to_array(), array![[1.0]]);
    }

    #[test]
    fn restoring_with_no_validated_epoch_is_an_error() {
        let cpu = Cpu::<f64>::new();
        let params = [param(&cpu, 0.0)];
        let sel: Selection<f64> = Selection::new(Some(1), SelectBy::Loss);
        assert!(matches!(sel.restore(&cpu, &params), Err(Error::Empty(_))));
    }
}
