//! Training loops with model selection on validation data only.

mod graph;
mod node;

pub use graph::{
    EpochRecord, GraphFeatures, GraphOptimizer, GraphSample, GraphTrainConfig, GraphTrainReport,
    evaluate_graphs, train_graph_classifier,
};
pub use node::{NodeTask, NodeTrainConfig, NodeTrainReport, evaluate_nodes, train_node_classifier};

/// Validation accuracy and loss of an epoch, and host copies of every
/// parameter when the epoch is the best so far.
type Validated<E> = (f64, f64, Option<Vec<ndarray::Array2<E>>>);

/// Validates one epoch for model selection: runs `evaluate` (accuracy,
/// loss) on the averaged weights when `ema` is given, and copies the
/// parameters when the result beats `best` (higher accuracy, ties: lower
/// loss). With an average the optimiser's weights are swapped back before
/// anything, an evaluation error included, is returned.
fn validate_epoch<B: crate::backend::Backend>(
    params: &[crate::autograd::Param<B>],
    mut ema: Option<&mut crate::optim::ExponentialMovingAverage<B>>,
    best: Option<(f64, f64)>,
    evaluate: impl FnOnce() -> crate::Result<(f64, f64)>,
) -> crate::Result<Validated<B::Elem>> {
    if let Some(ema) = ema.as_deref_mut() {
        ema.swap(params)?;
    }
    let evaluated = evaluate().map(|(acc, loss)| {
        let better =
            best.is_none_or(|(b_acc, b_loss)| acc > b_acc || (acc == b_acc && loss < b_loss));
        let values = better.then(|| params.iter().map(|p| p.to_array()).collect());
        (acc, loss, values)
    });
    if let Some(ema) = ema {
        ema.swap(params)?;
    }
    evaluated
}

/// Index of the largest entry of each row (ties: the first).
pub fn argmax_rows<F: num_traits::Float>(a: &ndarray::Array2<F>) -> Vec<usize> {
    a.rows()
        .into_iter()
        .map(|r| {
            let mut best = 0;
            for (j, &v) in r.iter().enumerate() {
                if v > r[best] {
                    best = j;
                }
            }
            best
        })
        .collect()
}

/// A progress bar on a terminal, hidden when stderr is not a TTY or when
/// `quiet` is set.
pub fn progress_bar(len: u64, quiet: bool) -> indicatif::ProgressBar {
    use std::io::IsTerminal;
    if quiet || !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let pb = indicatif::ProgressBar::new(len);
    if let Ok(style) =
        indicatif::ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} {msg}")
    {
        pb.set_style(style.progress_chars("=> "));
    }
    pb
}
