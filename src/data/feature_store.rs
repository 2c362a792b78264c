//! [`FeatureStore`]: node features read a batch of rows at a time, from
//! memory (an [`Array2`]) or from disk ([`NpyMatrix`](super::npy::NpyMatrix)).

use ndarray::Array2;
use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::float::Float;

/// A `num_nodes x dim` feature matrix that sampled training reads by rows
/// ([`SampledNodeStep`](crate::train::SampledNodeStep)): the rows of a
/// batch's nodes are gathered into a fresh array of the model's element
/// type, so only the batch needs to be in memory.
pub trait FeatureStore: Sync {
    /// Number of rows (nodes).
    fn num_nodes(&self) -> usize;

    /// Number of columns (features per node).
    fn dim(&self) -> usize;

    /// Rows `nodes` (any order, repeats allowed), converted to `F`.
    ///
    /// # Errors
    /// [`Error::IndexOutOfRange`] for a node `>= num_nodes()`;
    /// [`Error::OverBudget`] when the gathered rows do not fit the memory
    /// budget.
    fn gather<F: Float>(&self, nodes: &[usize]) -> Result<Array2<F>>;
}

/// Checks a gather of `nodes` from `store` (`what` names it): every node
/// in range, the output within the memory budget.
pub(crate) fn check_gather<F, S: FeatureStore + ?Sized>(
    store: &S,
    nodes: &[usize],
    what: &str,
) -> Result<()> {
    let n = store.num_nodes();
    if let Some(&bad) = nodes.iter().find(|&&i| i >= n) {
        return Err(Error::IndexOutOfRange {
            what: "node of a feature gather",
            index: bad,
            len: n,
        });
    }
    crate::limits::check_tensor::<F>(
        &format!("features gathered from {what}"),
        nodes.len(),
        store.dim(),
    )
}

macro_rules! array_store {
    ($t:ty) => {
        impl FeatureStore for Array2<$t> {
            fn num_nodes(&self) -> usize {
                self.nrows()
            }

            fn dim(&self) -> usize {
                self.ncols()
            }

            fn gather<F: Float>(&self, nodes: &[usize]) -> Result<Array2<F>> {
                check_gather::<F, _>(self, nodes, "an in-memory matrix")?;
                let cols = self.ncols();
                let mut out = Array2::<F>::zeros((nodes.len(), cols));
                if cols > 0 {
                    out.as_slice_mut()
                        .expect("a fresh array is contiguous")
                        .par_chunks_mut(cols)
                        .zip(nodes.par_iter())
                        .for_each(|(row, &r)| {
                            for (o, &v) in row.iter_mut().zip(self.row(r).iter()) {
                                *o = F::from_f64_lossy(f64::from(v));
                            }
                        });
                }
                Ok(out)
            }
        }
    };
}

array_store!(f32);
array_store!(f64);
