//! Training: one generic loop ([`Trainer`]) over a small trait any model
//! implements ([`TrainStep`]), and its two uses in this crate, node
//! classification ([`train_node_classifier`]) and graph classification
//! ([`train_graph_classifier`]).
//!
//! The loop owns the optimiser, the learning-rate schedule and warm-up,
//! gradient clipping, label smoothing, the weight average (EMA), model
//! selection on validation data only, early stopping, a progress bar and a
//! per-epoch history ([`EpochRecord`]). Batches come from a [`Loader`];
//! anything else (an adversarial pass, gradient noise, logging) plugs in as
//! a [`Hook`].

mod graph;
mod hook;
mod loader;
mod node;
mod sampled;
mod selection;
mod step;
mod trainer;

pub use graph::{
    GraphBatch, GraphFeatures, GraphLoader, GraphSample, GraphTrainConfig, GraphTrainReport,
    evaluate_graphs, train_graph_classifier,
};
pub use hook::{Hook, StepContext};
pub use loader::Loader;
pub use node::{
    NodeBatch, NodeStep, NodeTask, NodeTrainConfig, NodeTrainReport, evaluate_nodes,
    train_node_classifier,
};
pub use sampled::SampledNodeStep;
pub use selection::SelectBy;
pub use step::{StepOutput, TrainStep};
pub use trainer::{EpochRecord, Evaluation, FitReport, TrainConfig, Trainer, evaluate};

/// Index of the largest entry of each row (ties: the first). A NaN counts
/// as larger than every number, as in `torch.argmax`, so a row holding one
/// predicts its first NaN rather than a class chosen by where the NaN
/// sits; a row of width 0 gives 0.
///
/// ```
/// use hdgcn::train::argmax_rows;
/// let a = ndarray::arr2(&[[0.1, 0.7, 0.7], [2.0, f64::NAN, 3.0], [1.0, -1.0, 0.0]]);
/// assert_eq!(argmax_rows(&a), [1, 1, 0]);
/// ```
pub fn argmax_rows<F: num_traits::Float>(a: &ndarray::Array2<F>) -> Vec<usize> {
    a.rows()
        .into_iter()
        .map(|r| {
            let mut best = 0;
            for (j, &v) in r.iter().enumerate() {
                let b = r[best];
                if !b.is_nan() && (v.is_nan() || v > b) {
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

#[cfg(test)]
mod tests {
    use super::argmax_rows;
    use proptest::prelude::*;

    proptest! {
        /// Against the definition: the first NaN of the row if it has one,
        /// else the first entry equal to the row's maximum.
        #[test]
        fn argmax_rows_is_the_first_nan_or_the_first_maximum(
            rows in prop::collection::vec(
                prop::collection::vec(
                    prop_oneof![8 => (-3i8..3).prop_map(f64::from), 1 => Just(f64::NAN)],
                    0..6,
                ),
                1..5,
            ),
            width in 0usize..6,
        ) {
            let a = ndarray::Array2::from_shape_fn((rows.len(), width), |(i, j)| {
                rows[i].get(j).copied().unwrap_or(-1.0)
            });
            let want: Vec<usize> = a
                .rows()
                .into_iter()
                .map(|r| {
                    let v = r.to_vec();
                    v.iter().position(|x| x.is_nan()).unwrap_or_else(|| {
                        let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                        v.iter().position(|&x| x == max).unwrap_or(0)
                    })
                })
                .collect();
            prop_assert_eq!(argmax_rows(&a), want);
        }
    }
}
