//! Training loops with model selection on validation data only.

mod graph;
mod node;
mod selection;

pub use graph::{
    EpochRecord, GraphFeatures, GraphOptimizer, GraphSample, GraphTrainConfig, GraphTrainReport,
    evaluate_graphs, train_graph_classifier,
};
pub use node::{NodeTask, NodeTrainConfig, NodeTrainReport, evaluate_nodes, train_node_classifier};

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
